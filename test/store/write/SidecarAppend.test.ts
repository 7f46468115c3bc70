/**
 * The one way the store writes a sidecar, on its own and on both worlds:
 * where the bytes land, what a torn fragment before them becomes, what is
 * refused, and that what returns is synced.
 */
import { assert } from "@effect/vitest"
import { Effect, FileSystem } from "effect"
import { appendToSidecar } from "../../../src/store/write/SidecarAppend.js"
import type { MemoryFileSystemShape } from "../../../src/testing/MemoryFileSystem.js"
import { fileSystemSuite } from "../../support/FileSystemSuite.js"
import { makeSpecial } from "../../support/SpecialFiles.js"

const encoder = new TextEncoder()
const bytes = (text: string) => Effect.succeed(encoder.encode(text))

const isMemory = (fs: FileSystem.FileSystem): fs is MemoryFileSystemShape =>
  typeof (fs as Partial<MemoryFileSystemShape>).crashImage === "function"

fileSystemSuite("SidecarAppend", (it) => {
  it.effect("bytes land at the end, at the offset build was given, in a private file", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const sidecar = `${root}/trace.jsonl`
      const offsets: Array<number> = []
      const first = yield* appendToSidecar(fs, sidecar, (offset) => (offsets.push(offset), bytes("receipt\nhead\n")))
      const second = yield* appendToSidecar(fs, sidecar, (offset) => (offsets.push(offset), bytes("title\n")))
      assert.deepStrictEqual([first, second, ...offsets], [0, 13, 0, 13])
      assert.strictEqual(yield* fs.readFileString(sidecar), "receipt\nhead\ntitle\n")
      assert.strictEqual((yield* fs.stat(sidecar)).mode & 0o777, 0o600)
      if (isMemory(fs)) {
        assert.strictEqual(yield* fs.crashImage("power").readFileString(sidecar), "receipt\nhead\ntitle\n", "synced")
      }
    }))

  it.effect("a torn fragment at the end becomes a line of its own before the new record", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const sidecar = `${root}/trace.jsonl`
      yield* fs.writeFileString(sidecar, "ok\n{\"type\":\"rarebit_")
      const offset = yield* appendToSidecar(fs, sidecar, () => bytes("record\n"))
      assert.strictEqual(offset, 21)
      assert.strictEqual(yield* fs.readFileString(sidecar), "ok\n{\"type\":\"rarebit_\nrecord\n")
    }))

  it.effect("an existing sidecar is made private", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const sidecar = `${root}/trace.jsonl`
      yield* fs.writeFileString(sidecar, "")
      yield* fs.chmod(sidecar, 0o644)
      yield* appendToSidecar(fs, sidecar, () => bytes("record\n"))
      assert.strictEqual((yield* fs.stat(sidecar)).mode & 0o777, 0o600)
    }))

  it.effect("a symlink or a FIFO at the path is refused, and nothing is written through it", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(`${root}/target`, "target\n")
      yield* fs.chmod(`${root}/target`, 0o644)
      yield* fs.symlink(`${root}/target`, `${root}/linked.jsonl`)
      yield* makeSpecial(`${root}/fifo.jsonl`, "fifo")
      for (const [name, type] of [["linked.jsonl", "SymbolicLink"], ["fifo.jsonl", "FIFO"]] as const) {
        let built = false
        const error = yield* Effect.flip(appendToSidecar(fs, `${root}/${name}`, () => ((built = true), bytes("x\n"))))
        assert.strictEqual(error._tag, "StoreIo", name)
        assert.strictEqual(
          (error.cause as { readonly _tag?: unknown; readonly type?: unknown })._tag,
          "FileNotRegular",
          name
        )
        assert.strictEqual((error.cause as { readonly type?: unknown }).type, type, name)
        assert.isFalse(built, `${name}: nothing built`)
      }
      assert.strictEqual(yield* fs.readFileString(`${root}/target`), "target\n")
      assert.strictEqual((yield* fs.stat(`${root}/target`)).mode & 0o777, 0o644, "the target's mode is untouched")
    }))

  it.effect("a build that fails appends nothing", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const sidecar = `${root}/trace.jsonl`
      yield* fs.writeFileString(sidecar, "ok\n")
      const error = yield* Effect.flip(appendToSidecar(fs, sidecar, () => Effect.fail("too large" as const)))
      assert.strictEqual(error, "too large")
      assert.strictEqual(yield* fs.readFileString(sidecar), "ok\n")
    }))
})
