import { assert, describe, it } from "@effect/vitest"
import * as RefCoreModule from "@hypercarrier/rarebit/core"
import fc from "fast-check"
import { createHash } from "node:crypto"
import { sha256, sha256Hex, stableJson } from "../../src/protocol/CanonicalJson.js"
import { fuzzRuns } from "../support/FuzzRuns.js"

// The shipped types.d.ts does not declare these two exports.
const RefCore = RefCoreModule as unknown as {
  readonly stableJson: (value: unknown) => string
  readonly sha256: (value: unknown) => string
}

const edgeNumber = fc.constantFrom(
  -0,
  0,
  1e21,
  1e-7,
  5e-7,
  1e-6,
  2 ** 53,
  -(2 ** 53),
  Number.MAX_VALUE,
  5e-324,
  NaN,
  Infinity
)

const leaf = fc.oneof(
  fc.string({ unit: "grapheme" }),
  fc.string({ unit: "binary" }),
  fc.string(),
  fc.double(),
  edgeNumber,
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined)
)

/** Nested arrays and objects with `undefined` members, unicode keys and edge numbers. */
const value = fc.letrec((tie) => ({
  node: fc.oneof({ depthSize: "small" }, leaf, tie("array"), tie("object")),
  array: fc.array(tie("node"), { maxLength: 5 }),
  object: fc.dictionary(fc.oneof(fc.string(), fc.string({ unit: "binary" })), tie("node"), { maxKeys: 5 })
})).node

describe("CanonicalJson", () => {
  it("stableJson and sha256 match the reference on nested values", () => {
    fc.assert(
      fc.property(value, (v) => {
        assert.strictEqual(stableJson(v), RefCore.stableJson(v))
        assert.strictEqual(sha256(v), RefCore.sha256(v))
      }),
      { numRuns: fuzzRuns(1000) }
    )
  })

  it("stableJson and sha256 match the reference on arbitrary values", () => {
    const anything = fc.anything({
      withNullPrototype: true,
      withBoxedValues: true,
      withDate: true,
      withSparseArray: true,
      withUnicodeString: true,
      withObjectString: true
    })
    fc.assert(
      fc.property(anything, (v) => {
        assert.strictEqual(stableJson(v), RefCore.stableJson(v))
        assert.strictEqual(sha256(v), RefCore.sha256(v))
      }),
      { numRuns: fuzzRuns(1000) }
    )
  })

  it("writes undefined as null and sorts keys by code unit", () => {
    assert.strictEqual(
      stableJson({ b: undefined, a: [undefined, -0, 1e21, 5e-7], "\u00e9": 1, Z: 2 }),
      "{\"Z\":2,\"a\":[null,0,1e+21,5e-7],\"b\":null,\"é\":1}"
    )
    assert.strictEqual(stableJson(undefined), "null")
  })

  it("hashes strings as they are and raw bytes as given", () => {
    const expected = createHash("sha256").update("é\n").digest("hex")
    assert.strictEqual(sha256("é\n"), expected)
    assert.strictEqual(sha256Hex(new TextEncoder().encode("é\n")), expected)
    assert.notStrictEqual(sha256({ a: 1 }), sha256("{\"a\":1} "))
    assert.strictEqual(sha256({ a: 1 }), createHash("sha256").update("{\"a\":1}").digest("hex"))
  })
})
