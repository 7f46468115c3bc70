/**
 * The CLI's JSON writer must give exactly `JSON.stringify`'s text, and keep
 * giving valid JSON where `JSON.stringify` overflows the stack. Printed a
 * few lines at a time (`jsonLineGroups`), the text is the same.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { jsonLineGroups, jsonText } from "../../src/cli/JsonText.js"
import { fuzzRuns } from "../support/FuzzRuns.js"

const DEPTH = 100_000

const plainValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    fc.jsonValue(),
    fc.constantFrom(undefined, Number.NaN, Infinity, -Infinity, -0),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(fc.oneof(fc.string(), fc.constantFrom("__proto__", "toJSON", "")), tie("value"), { maxKeys: 4 }),
    fc.date({ noInvalidDate: true })
  )
})).value

describe("jsonText", () => {
  it("writes what JSON.stringify writes, compact and indented", () => {
    fc.assert(
      fc.property(plainValue, fc.constantFrom(0, 2, 4), (value, indent) => {
        assert.strictEqual(jsonText(value, indent), JSON.stringify(value, null, indent))
      }),
      { numRuns: fuzzRuns(1000) }
    )
  })

  it("matches JSON.stringify on the corner cases of empty containers and skipped members", () => {
    for (
      const value of [[], {}, [[]], { a: {} }, { a: undefined }, [undefined], { a: undefined, b: 1 }, { a: () => 1 }]
    ) {
      for (const indent of [0, 2]) assert.strictEqual(jsonText(value, indent), JSON.stringify(value, null, indent))
    }
    assert.isUndefined(jsonText(undefined))
  })

  it("writes values nested 100,000 levels deep as valid JSON", () => {
    for (const text of ["[".repeat(DEPTH) + "]".repeat(DEPTH), "{\"a\":".repeat(DEPTH) + "1" + "}".repeat(DEPTH)]) {
      const value = JSON.parse(text)
      assert.throws(() => JSON.stringify(value), RangeError)
      assert.strictEqual(jsonText(value), text)
      const indented = jsonText(value, 2)!
      assert.strictEqual(jsonText(JSON.parse(indented)), text)
      // Indentation stops deepening, so the text stays linear in the depth.
      assert.isBelow(indented.length, 2 * text.length + 10_000)
    }
  })

  it("throws a TypeError on a cycle, as JSON.stringify does", () => {
    const cycle: Record<string, unknown> = {}
    cycle.self = [cycle]
    assert.throws(() => jsonText(cycle), TypeError)
  })
})

describe("jsonLineGroups", () => {
  it("are jsonText's lines, in groups of about the size asked, joined by the newlines between them", () => {
    fc.assert(
      fc.property(plainValue, fc.constantFrom(0, 2), fc.integer({ min: 1, max: 64 }), (value, indent, groupChars) => {
        const groups = [...jsonLineGroups(value, indent, groupChars)]
        assert.strictEqual(groups.join("\n"), jsonText(value, indent) ?? "null")
      }),
      { numRuns: fuzzRuns(1000) }
    )
  })

  it("print a large report a group at a time, none much larger than the size asked", () => {
    const report = {
      sidecars: Array.from(
        { length: 5000 },
        (_, index) => ({ path: `/store/${index}.jsonl`, bytes: index, current: null })
      ),
      findings: [],
      nested: { empty: [], deep: [[[{}]]] }
    }
    const groups = [...jsonLineGroups(report, 2, 4096)]
    assert.strictEqual(groups.join("\n"), JSON.stringify(report, null, 2))
    assert.isAbove(groups.length, 50)
    // A group ends at the first newline past the size: at most one piece and one line more.
    for (const group of groups) assert.isBelow(group.length, 2 * 4096)
  })
})
