import { assert, describe, it } from "@effect/vitest"
import { parseJsonOrNull } from "../../src/protocol/internal/JsonParse.js"

describe("parseJsonOrNull", () => {
  it("is JSON.parse for text that parses", () => {
    assert.deepStrictEqual(parseJsonOrNull(`{"type":"rarebit_head","n":[1,2]}`), { type: "rarebit_head", n: [1, 2] })
    assert.strictEqual(parseJsonOrNull(" 42 "), 42)
    assert.strictEqual(parseJsonOrNull(`"text"`), "text")
  })

  it("is null for text JSON.parse throws on: torn lines, empty text, a BOM in front", () => {
    for (const text of [`{"type":"rarebit_head"`, "", "   ", "\uFEFF{}", "undefined"]) {
      assert.isNull(parseJsonOrNull(text), JSON.stringify(text))
    }
  })
})
