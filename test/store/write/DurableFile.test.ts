/**
 * The write path of claims and locks, on its own and on both worlds: a temp
 * file is written whole and synced before anyone links or renames it, it is
 * created exclusively (never through whatever is already at its path), and a
 * directory is synced only through a handle that is a directory.
 */
import { assert } from "@effect/vitest"
import { Effect, FileSystem } from "effect"
import { removeIfPresent, syncDirectory, writeDurableTemp } from "../../../src/store/write/DurableFile.js"
import type { MemoryFileSystemShape } from "../../../src/testing/MemoryFileSystem.js"
import { fileSystemSuite } from "../../support/FileSystemSuite.js"
import { makeSpecial } from "../../support/SpecialFiles.js"

const isMemory = (fs: FileSystem.FileSystem): fs is MemoryFileSystemShape =>
  typeof (fs as Partial<MemoryFileSystemShape>).crashImage === "function"

fileSystemSuite("DurableFile", (it) => {
  it.effect("a temp file holds its whole content, private, and synced before it is handed over", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const temp = `${root}/claim.json.0a1b.tmp`
      yield* writeDurableTemp(fs, temp, "{\"state\":\"active\"}\n")
      assert.strictEqual(yield* fs.readFileString(temp), "{\"state\":\"active\"}\n")
      assert.strictEqual((yield* fs.stat(temp)).mode & 0o777, 0o600)
      if (isMemory(fs)) {
        // What a power cut leaves: only synced bytes. The content is all there.
        assert.strictEqual(yield* fs.crashImage("power").readFileString(temp), "{\"state\":\"active\"}\n")
      }
    }))

  it.effect("a temp file is never written through what is already at its path", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const target = `${root}/target`
      yield* fs.writeFileString(target, "target")
      yield* fs.writeFileString(`${root}/file.tmp`, "before")
      yield* fs.symlink(target, `${root}/link.tmp`)
      yield* makeSpecial(`${root}/fifo.tmp`, "fifo")
      for (const name of ["file.tmp", "link.tmp", "fifo.tmp"]) {
        const error = yield* Effect.flip(writeDurableTemp(fs, `${root}/${name}`, "claim"))
        assert.strictEqual(error.reason._tag, "AlreadyExists", name)
      }
      assert.strictEqual(yield* fs.readFileString(`${root}/file.tmp`), "before")
      assert.strictEqual(yield* fs.readFileString(target), "target")
      assert.strictEqual((yield* fs.lstat(`${root}/link.tmp`)).type, "SymbolicLink")
      assert.strictEqual((yield* fs.lstat(`${root}/fifo.tmp`)).type, "FIFO", "what was there is left there")
    }))

  it.effect("removeIfPresent removes a file; one already gone is not an error, any other failure is", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(`${root}/claim.json`, "{}")
      yield* removeIfPresent(fs, `${root}/claim.json`)
      assert.isFalse(yield* fs.exists(`${root}/claim.json`))
      yield* removeIfPresent(fs, `${root}/claim.json`)
      yield* fs.makeDirectory(`${root}/jobs-v4`)
      yield* fs.writeFileString(`${root}/jobs-v4/claim.json`, "{}")
      const error = yield* Effect.flip(removeIfPresent(fs, `${root}/jobs-v4`))
      assert.notStrictEqual(error.reason._tag, "NotFound")
      assert.isTrue(yield* fs.exists(`${root}/jobs-v4/claim.json`))
    }))

  it.effect("a directory is synced through a directory handle; a symlink to one or a file is refused", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.makeDirectory(`${root}/jobs-v4`)
      yield* syncDirectory(fs, `${root}/jobs-v4`)
      yield* fs.symlink(`${root}/jobs-v4`, `${root}/linked`)
      yield* fs.writeFileString(`${root}/file`, "")
      const linked = yield* Effect.flip(syncDirectory(fs, `${root}/linked`))
      assert.strictEqual(linked._tag, "NotDirectory")
      assert.strictEqual(linked._tag === "NotDirectory" ? linked.type : undefined, "SymbolicLink")
      const file = yield* Effect.flip(syncDirectory(fs, `${root}/file`))
      assert.strictEqual(file._tag === "NotDirectory" ? file.type : file._tag, "File")
      if (isMemory(fs)) assert.isAtLeast(fs.syncCount(`${root}/jobs-v4`), 1)
    }))
})
