/**
 * `copyJson` stands in for parsing a cached record's text again, so it must
 * give exactly what `JSON.parse` gives: same values, same key order, and no
 * shared objects, at any depth `JSON.parse` accepts.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { copyJson } from "../../src/protocol/internal/JsonCopy.js"
import { fuzzRuns } from "../support/FuzzRuns.js"

/** Every object and array reachable from `value`. */
const containers = (value: unknown, into: Set<object> = new Set()): Set<object> => {
  if (typeof value === "object" && value !== null) {
    into.add(value)
    for (const item of Object.values(value)) containers(item, into)
  }
  return into
}

const DEPTH = 100_000

describe("copyJson", () => {
  it("equals a fresh parse of the same text and shares no object with the original", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const text = JSON.stringify(value)
        const original = JSON.parse(text)
        const copy = copyJson(original)
        assert.deepStrictEqual(copy, JSON.parse(text))
        assert.strictEqual(JSON.stringify(copy), text)
        const shared = [...containers(copy)].filter((item) => containers(original).has(item))
        assert.deepStrictEqual(shared, [])
      }),
      { numRuns: fuzzRuns(500) }
    )
  })

  it("keeps an own __proto__ key as a property, as JSON.parse does", () => {
    const original = JSON.parse("{\"__proto__\":{\"polluted\":true},\"b\":[1,{\"__proto__\":2}]}")
    const copy = copyJson(original)
    assert.strictEqual(Object.getPrototypeOf(copy), Object.prototype)
    assert.deepStrictEqual(Object.keys(copy), ["__proto__", "b"])
    assert.strictEqual(JSON.stringify(copy), JSON.stringify(original))
    assert.isUndefined((copy as { polluted?: unknown }).polluted)
  })

  it("copies values nested 100,000 levels deep without overflowing the stack", () => {
    for (const text of ["[".repeat(DEPTH) + "]".repeat(DEPTH), "{\"a\":".repeat(DEPTH) + "1" + "}".repeat(DEPTH)]) {
      const original = JSON.parse(text)
      const copy = copyJson(original)
      let depth = 0
      let a: any = original
      let b: any = copy
      while (typeof a === "object" && (Array.isArray(a) ? a.length > 0 : "a" in a)) {
        assert.notStrictEqual(a, b)
        a = Array.isArray(a) ? a[0] : a.a
        b = Array.isArray(b) ? b[0] : b.a
        depth++
      }
      assert.strictEqual(depth, DEPTH - 1 + (text.startsWith("{") ? 1 : 0))
      assert.deepStrictEqual(b, a)
    }
  })
})
