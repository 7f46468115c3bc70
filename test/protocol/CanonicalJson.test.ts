import { assert, describe, it } from "@effect/vitest"
import * as RefCoreModule from "@hypercarrier/rarebit/core"
import fc from "fast-check"
import { createHash } from "node:crypto"
import {
  sha256,
  sha256Hex,
  stableJson,
  stableJsonPieces,
  streamedStableJsonSha256
} from "../../src/protocol/CanonicalJson.js"
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

/** Any JavaScript value, including the odd ones JSON renders (holes, boxed values, null prototypes). */
const anything = fc.anything({
  withNullPrototype: true,
  withBoxedValues: true,
  withDate: true,
  withSparseArray: true,
  withUnicodeString: true,
  withObjectString: true
})

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

  it("stableJsonPieces joins to stableJson and the streamed hash is sha256's, on arbitrary values", () => {
    fc.assert(
      fc.property(fc.oneof(anything, value), fc.integer({ min: 1, max: 64 }), (v, pieceUnits) => {
        const pieces: Array<string> = []
        stableJsonPieces(v, (piece) => pieces.push(piece), pieceUnits)
        assert.strictEqual(pieces.join(""), stableJson(v))
        assert.strictEqual(streamedStableJsonSha256(v), sha256Hex(stableJson(v)))
        if (typeof v !== "string") assert.strictEqual(streamedStableJsonSha256(v), RefCore.sha256(v))
      }),
      { numRuns: fuzzRuns(1000) }
    )
  })

  it("a streamed manifest hash never holds more than a piece of the manifest's text", () => {
    // A manifest the shape of a long Session's: 20,000 occurrences, ~6 MB of text.
    const occurrences = Array.from({ length: 20_000 }, (_, order) => ({
      occurrenceId: `entry-${order}:${order}`,
      sourceEntryId: `entry-${order}`,
      order,
      role: order % 2 === 0 ? "user" : "assistant",
      outcome: order % 2 === 0 ? "user" : "stop",
      timestamp: "2026-01-01T00:00:00.000Z",
      contentHash: sha256Hex(String(order))
    }))
    const manifest = {
      selectorVersion: "rarebit-selector-v1",
      occurrences,
      payloads: occurrences.map(({ contentHash, occurrenceId }) => ({ contentHash, occurrenceIds: [occurrenceId] }))
    }
    const text = stableJson(manifest)
    const longestToken = 100
    let pieces = 0
    let longest = 0
    stableJsonPieces(manifest, (piece) => {
      pieces++
      longest = Math.max(longest, piece.length)
    })
    assert.isAbove(text.length, 5_000_000)
    assert.isBelow(longest, 16 * 1024 + longestToken)
    assert.isAtLeast(pieces, Math.floor(text.length / (16 * 1024 + longestToken)))
    assert.strictEqual(streamedStableJsonSha256(manifest), sha256(manifest))
  })
})
