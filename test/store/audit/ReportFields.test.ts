/**
 * How reports quote files: bounded, and without recursion however deep a
 * parsed value nests.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  ageText,
  clipDetail,
  clipNullableField,
  describeJson,
  MAX_DETAIL_CHARS,
  MAX_FIELD_CHARS,
  stringMember
} from "../../../src/store/audit/ReportFields.js"

describe("ReportFields", () => {
  it("describes any parsed value in a few words, however deep it nests", () => {
    let deep: unknown = []
    for (let level = 0; level < 100_000; level++) deep = [deep]
    assert.strictEqual(describeJson(deep), "an array of 1 item")
    assert.strictEqual(describeJson({ a: 1, b: 2 }), "an object with 2 keys")
    assert.strictEqual(describeJson("x".repeat(1000)), JSON.stringify(`${"x".repeat(39)}…`))
    assert.strictEqual(describeJson(undefined), "missing")
    assert.strictEqual(describeJson(null), "null")
  })

  it("cuts details and fields to their bounds", () => {
    assert.strictEqual(clipDetail("d".repeat(10_000)).length, MAX_DETAIL_CHARS)
    assert.strictEqual(clipNullableField("f".repeat(10_000))?.length, MAX_FIELD_CHARS)
    assert.isNull(clipNullableField(null))
    assert.strictEqual(clipDetail("short"), "short")
  })

  it("reads a string field of whatever a file parsed to", () => {
    assert.strictEqual(stringMember({ token: "abc" }, "token"), "abc")
    assert.isNull(stringMember({ token: 42 }, "token"))
    assert.isNull(stringMember(null, "token"))
    assert.isNull(stringMember("text", "token"))
    assert.isNull(stringMember(["abc"], "token"))
  })

  it("says an age in the unit that keeps it readable", () => {
    assert.strictEqual(ageText(null), "of unknown age")
    assert.strictEqual(ageText(-5_000), "0 s old")
    assert.strictEqual(ageText(119_000), "119 s old")
    assert.strictEqual(ageText(120_000), "2 min old")
    assert.strictEqual(ageText(7_200_000), "2 h old")
    assert.strictEqual(ageText(172_800_000), "2 days old")
  })
})
