import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import fc from "fast-check"
import { createHash } from "node:crypto"
import { encodeHeadLine, Head, isValidHead, isValidReceiptReference, makeHead } from "../../src/protocol/Head.js"
import { encodeJsonLine } from "../../src/protocol/JsonLine.js"
import { MAX_RECEIPT_BYTES } from "../../src/protocol/Limits.js"
import { fuzzRuns } from "../support/FuzzRuns.js"

const hash = "ab".repeat(32)
const head = {
  type: "rarebit_head",
  protocolVersion: 1,
  sessionId: "s-1",
  receiptOffset: 0,
  receiptLength: 10,
  receiptHash: hash
}

const decodeHead = Schema.decodeUnknownResult(Head, { onExcessProperty: "error" })

describe("Head", () => {
  describe("isValidHead", () => {
    it("accepts a well-formed head", () => {
      assert.isTrue(isValidHead(head))
    })

    it("accepts extra keys, as the seed does", () => {
      assert.isTrue(isValidHead({ ...head, note: "x" }))
    })

    const invalid: ReadonlyArray<readonly [string, unknown]> = [
      ["null", null],
      ["a string", "rarebit_head"],
      ["an array", [head]],
      ["another type", { ...head, type: "rarebit_summary" }],
      ["protocol 2", { ...head, protocolVersion: 2 }],
      ["protocol '1'", { ...head, protocolVersion: "1" }],
      ["an empty sessionId", { ...head, sessionId: "" }],
      ["a numeric sessionId", { ...head, sessionId: 1 }],
      ["a negative offset", { ...head, receiptOffset: -1 }],
      ["a fractional offset", { ...head, receiptOffset: 0.5 }],
      ["an unsafe offset", { ...head, receiptOffset: 2 ** 53 }],
      ["a zero length", { ...head, receiptLength: 0 }],
      ["a length over the receipt limit", { ...head, receiptLength: MAX_RECEIPT_BYTES + 1 }],
      ["an upper-case hash", { ...head, receiptHash: hash.toUpperCase() }],
      ["a short hash", { ...head, receiptHash: hash.slice(1) }],
      ["a missing hash", { ...head, receiptHash: undefined }],
      ["a hash whose string form cannot be computed", { ...head, receiptHash: [{ toString: 1 }] }]
    ]
    for (const [name, value] of invalid) {
      it(`rejects ${name}`, () => {
        assert.isFalse(isValidHead(value))
      })
    }

    it("accepts the edges of the ranges", () => {
      assert.isTrue(isValidHead({ ...head, receiptOffset: -0 }))
      assert.isTrue(isValidHead({ ...head, receiptOffset: Number.MAX_SAFE_INTEGER }))
      assert.isTrue(isValidHead({ ...head, receiptLength: 1 }))
      assert.isTrue(isValidHead({ ...head, receiptLength: MAX_RECEIPT_BYTES }))
    })

    it("tests the hash after string conversion, as the seed's RegExp test does", () => {
      assert.isTrue(isValidHead({ ...head, receiptHash: [hash] }))
      assert.isFalse(isValidHead({ ...head, receiptHash: [hash, hash] }))
      assert.isTrue(Result.isFailure(decodeHead({ ...head, receiptHash: [hash] })))
    })
  })

  describe("isValidReceiptReference", () => {
    it("applies the head's range and hash rules", () => {
      const ref = { receiptOffset: 5, receiptLength: 1, receiptHash: hash }
      assert.isTrue(isValidReceiptReference(ref))
      assert.isTrue(isValidReceiptReference({ ...ref, extra: 1 }))
      assert.isFalse(isValidReceiptReference({ ...ref, receiptLength: MAX_RECEIPT_BYTES + 1 }))
      assert.isFalse(isValidReceiptReference({ ...ref, receiptOffset: "5" }))
      assert.isFalse(isValidReceiptReference({ ...ref, receiptHash: null }))
      assert.isFalse(isValidReceiptReference(undefined))
    })
  })

  describe("makeHead and encodeHeadLine", () => {
    it("hashes and measures the exact line bytes, newline included", () => {
      const line = encodeJsonLine({ summary: "café ☕" })
      const made = makeHead("s-1", 42, line)
      assert.strictEqual(made.receiptLength, line.byteLength)
      assert.notStrictEqual(made.receiptLength, "{\"summary\":\"café ☕\"}\n".length)
      assert.strictEqual(made.receiptHash, createHash("sha256").update(line).digest("hex"))
      assert.notStrictEqual(made.receiptHash, createHash("sha256").update(line.subarray(0, -1)).digest("hex"))
    })

    it("writes the keys in protocol order whatever the input order", () => {
      const shuffled = {
        receiptHash: hash,
        receiptLength: 10,
        receiptOffset: 7,
        sessionId: "s-1",
        protocolVersion: 1,
        type: "rarebit_head"
      } as const
      assert.strictEqual(
        new TextDecoder().decode(encodeHeadLine(shuffled)),
        `{"type":"rarebit_head","protocolVersion":1,"sessionId":"s-1","receiptOffset":7,"receiptLength":10,"receiptHash":"${hash}"}\n`
      )
    })

    it("produces heads that both checks accept and that round-trip through JSON", () => {
      const input = fc.record({
        sessionId: fc.string({ minLength: 1, unit: "grapheme" }),
        receiptOffset: fc.nat(),
        line: fc.uint8Array({ minLength: 1, maxLength: 512 })
      })
      fc.assert(
        fc.property(input, ({ line, receiptOffset, sessionId }) => {
          const made = makeHead(sessionId, receiptOffset, line)
          const bytes = encodeHeadLine(made)
          assert.strictEqual(bytes[bytes.length - 1], 10)
          const parsed: unknown = JSON.parse(new TextDecoder().decode(bytes))
          assert.deepStrictEqual(parsed, made)
          assert.isTrue(isValidHead(parsed))
          assert.isTrue(Result.isSuccess(decodeHead(parsed)))
        }),
        { numRuns: fuzzRuns(1000) }
      )
    })
  })
})
