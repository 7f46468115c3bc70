/**
 * The memory file system's name rules: byte-for-byte names by default (as
 * Linux), and a Darwin-like profile where lookups ignore case and
 * normalization, names are stored decomposed, and `realPath` answers with the
 * stored spelling.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { makeMemoryFileSystem } from "../../src/testing/MemoryFileSystem.js"

const composed = "/w/Café".normalize("NFC")

describe("MemoryFileSystem names", () => {
  it.effect("by default, names are bytes: another case or normalization is another name", () =>
    Effect.gen(function*() {
      const fs = makeMemoryFileSystem()
      yield* fs.makeDirectory(composed, { recursive: true })
      yield* fs.writeFileString(`${composed}/Trace.jsonl`, "x")
      assert.isFalse(yield* fs.exists(`${composed}/trace.jsonl`))
      assert.isFalse(yield* fs.exists(composed.normalize("NFD")))
      yield* fs.writeFileString(`${composed}/trace.jsonl`, "y")
      assert.deepStrictEqual(yield* fs.readDirectory(composed), ["Trace.jsonl", "trace.jsonl"])
      assert.deepStrictEqual(yield* fs.readDirectory("/w"), [composed.slice(3)])
    }))

  it.effect("case-insensitive with NFD storage: one entry per name, found by any spelling", () =>
    Effect.gen(function*() {
      const fs = makeMemoryFileSystem({ caseInsensitive: true, normalization: "NFD" })
      yield* fs.makeDirectory(composed, { recursive: true })
      yield* fs.writeFileString(`${composed}/Trace.jsonl`, "x")
      const stored = `${composed.normalize("NFD")}/Trace.jsonl`
      for (const spelling of [`${composed}/trace.JSONL`, `/W/CAFÉ/TRACE.jsonl`, stored]) {
        assert.strictEqual(yield* fs.readFileString(spelling), "x", spelling)
        assert.strictEqual(yield* fs.realPath(spelling), stored, spelling)
      }
      const ino = (yield* fs.stat(stored)).ino
      assert.deepStrictEqual((yield* fs.stat("/w/café/trace.jsonl")).ino, ino)
      // Writing by another spelling writes the same file, under its first spelling.
      yield* fs.writeFileString(`${composed}/TRACE.jsonl`, "y")
      assert.deepStrictEqual(yield* fs.readDirectory(composed), ["Trace.jsonl"])
      assert.strictEqual(yield* fs.readFileString(stored), "y")
      const exclusive = yield* Effect.flip(fs.writeFileString(`${composed}/trace.jsonl`, "z", { flag: "wx" }))
      assert.strictEqual(exclusive.reason._tag, "AlreadyExists")
      // A new name is stored decomposed.
      assert.deepStrictEqual(yield* fs.readDirectory("/w"), [composed.normalize("NFD").slice(3)])
      yield* fs.rename(`${composed}/trace.jsonl`, "/w/moved.jsonl")
      assert.deepStrictEqual(yield* fs.readDirectory(composed), [])
    }))

  it.effect("NFD storage alone keeps case apart", () =>
    Effect.gen(function*() {
      const fs = makeMemoryFileSystem({ normalization: "NFD" })
      yield* fs.makeDirectory(composed, { recursive: true })
      assert.strictEqual(yield* fs.realPath(composed), composed.normalize("NFD"))
      assert.isFalse(yield* fs.exists(composed.toLowerCase()))
    }))
})
