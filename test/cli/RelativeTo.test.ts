/**
 * Paths in the CLI's tables are shown relative to their root when they lie
 * under it, in the root's own separators: Windows roots use `\`.
 */
import { assert, describe, it } from "@effect/vitest"
import { relativeTo } from "../../src/cli/RunAudit.js"

describe("relativeTo", () => {
  it("strips a POSIX root, and only a whole directory of it", () => {
    assert.strictEqual(relativeTo("/home/u/sessions", "/home/u/sessions/p/a.jsonl"), "p/a.jsonl")
    assert.strictEqual(relativeTo("/home/u/sessions/", "/home/u/sessions/a.jsonl"), "a.jsonl")
    assert.strictEqual(relativeTo("/home/u/sessions", "/home/u/sessions-old/a.jsonl"), "/home/u/sessions-old/a.jsonl")
    assert.strictEqual(relativeTo("/home/u/sessions", "/home/u/sessions"), "/home/u/sessions")
  })

  it("strips a Windows root with its backslashes, drive or UNC", () => {
    assert.strictEqual(relativeTo("C:\\Users\\u\\sessions", "C:\\Users\\u\\sessions\\p\\a.jsonl"), "p\\a.jsonl")
    assert.strictEqual(relativeTo("\\\\server\\share\\s", "\\\\server\\share\\s\\a.jsonl"), "a.jsonl")
    assert.strictEqual(relativeTo("C:\\s", "C:\\s2\\a.jsonl"), "C:\\s2\\a.jsonl")
    assert.strictEqual(relativeTo("C:\\", "C:\\a.jsonl"), "a.jsonl")
  })
})
