/**
 * Paths in the CLI's tables are shown relative to their root when they lie
 * under it (the store's own containment rule), in the platform's separators:
 * Windows roots use `\`, and another drive or share stays absolute.
 */
import * as NodePath from "@effect/platform-node/NodePath"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Path } from "effect/Path"
import { relativeTo } from "../../src/cli/RunAudit.js"

describe("relativeTo", () => {
  it.effect("strips a POSIX root, and only a whole directory of it", () =>
    Effect.gen(function*() {
      const path = yield* Path
      assert.strictEqual(relativeTo(path, "/home/u/sessions", "/home/u/sessions/p/a.jsonl"), "p/a.jsonl")
      assert.strictEqual(relativeTo(path, "/home/u/sessions/", "/home/u/sessions/a.jsonl"), "a.jsonl")
      assert.strictEqual(
        relativeTo(path, "/home/u/sessions", "/home/u/sessions-old/a.jsonl"),
        "/home/u/sessions-old/a.jsonl"
      )
      assert.strictEqual(relativeTo(path, "/home/u/sessions", "/home/u/sessions"), "/home/u/sessions")
    }).pipe(Effect.provide(NodePath.layerPosix)))

  it.effect("strips a Windows root with its backslashes, drive or UNC; another drive stays absolute", () =>
    Effect.gen(function*() {
      const path = yield* Path
      assert.strictEqual(relativeTo(path, "C:\\Users\\u\\sessions", "C:\\Users\\u\\sessions\\p\\a.jsonl"), "p\\a.jsonl")
      assert.strictEqual(relativeTo(path, "\\\\server\\share\\s", "\\\\server\\share\\s\\a.jsonl"), "a.jsonl")
      assert.strictEqual(relativeTo(path, "C:\\s", "C:\\s2\\a.jsonl"), "C:\\s2\\a.jsonl")
      assert.strictEqual(relativeTo(path, "C:\\s", "D:\\s\\a.jsonl"), "D:\\s\\a.jsonl")
      assert.strictEqual(relativeTo(path, "C:\\", "C:\\a.jsonl"), "a.jsonl")
    }).pipe(Effect.provide(NodePath.layerWin32)))
})
