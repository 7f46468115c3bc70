import { assert, describe, it, vi } from "@effect/vitest"
import { Result } from "effect"
import fc from "fast-check"
import {
  claimExpired,
  claimIsActiveFor,
  decodeJobClaim,
  encodeClaimLine,
  makeActiveClaim,
  makeSettledClaim,
  parseClaim,
  settledReceiptRef
} from "../../src/protocol/JobClaim.js"
import { fuzzRuns } from "../support/FuzzRuns.js"

const jobId = "0f".repeat(32)
const hash = "ab".repeat(32)
const token = "c3".repeat(24)
const claimedAt = "2026-01-01T00:00:00.000Z"
const claimedAtMs = Date.parse(claimedAt)

const active = makeActiveClaim(jobId, token, claimedAtMs, 600_000)
const settled = makeSettledClaim(jobId, token, { receiptHash: hash, receiptLength: 120, receiptOffset: 3 })

describe("JobClaim", () => {
  describe("encoding", () => {
    it("writes an active claim as the seed does", () => {
      assert.strictEqual(
        encodeClaimLine(active),
        `{"jobId":"${jobId}","state":"active","leaseToken":"${token}","claimedAt":"${claimedAt}","leaseMs":600000}\n`
      )
    })

    it("writes a settled claim as the seed does, whatever the input key order", () => {
      const shuffled = {
        receiptRef: { receiptHash: hash, receiptLength: 120, receiptOffset: 3 },
        leaseToken: token,
        state: "settled",
        jobId
      } as const
      assert.strictEqual(
        encodeClaimLine(shuffled),
        `{"jobId":"${jobId}","state":"settled","leaseToken":"${token}","receiptRef":{"receiptOffset":3,"receiptLength":120,"receiptHash":"${hash}"}}\n`
      )
      assert.strictEqual(encodeClaimLine(settled), encodeClaimLine(shuffled))
    })

    it("round-trips through parseClaim and the strict Schema", () => {
      for (const claim of [active, settled]) {
        const parsed = parseClaim(encodeClaimLine(claim))
        assert.strictEqual(parsed._tag, "Parsed")
        if (parsed._tag === "Parsed") {
          assert.deepStrictEqual(parsed.claim, claim)
          assert.isTrue(Result.isSuccess(decodeJobClaim(parsed.claim)))
        }
      }
    })

    it("decodes strictly: unknown keys and malformed fields are rejected", () => {
      assert.isTrue(Result.isFailure(decodeJobClaim({ ...active, extra: 1 })))
      assert.isTrue(Result.isFailure(decodeJobClaim({ ...active, claimedAt: "2026-01-01" })))
      assert.isTrue(Result.isFailure(decodeJobClaim({ ...active, leaseMs: 0 })))
      assert.isTrue(
        Result.isFailure(decodeJobClaim({ ...settled, receiptRef: { ...settled.receiptRef, receiptLength: 0 } }))
      )
      assert.isTrue(Result.isFailure(decodeJobClaim({ ...settled, state: "active" })))
    })

    it("checks and writes claim times without Date's formatting methods", () => {
      // Their first call loads ICU's time zone names into the process for good (~1 MiB).
      const formatting = vi.spyOn(Date.prototype, "toISOString")
      try {
        assert.isTrue(Result.isSuccess(decodeJobClaim(active)))
        assert.isTrue(Result.isFailure(decodeJobClaim({ ...active, claimedAt: "2026-01-01T00:00:00Z" })))
        assert.strictEqual(makeActiveClaim(jobId, token, claimedAtMs + 1, 1).claimedAt, "2026-01-01T00:00:00.001Z")
        assert.strictEqual(formatting.mock.calls.length, 0)
      } finally {
        formatting.mockRestore()
      }
    })
  })

  describe("parseClaim", () => {
    it("calls empty, blank and unparsable text torn", () => {
      for (const text of ["", " \n\t", "{", "{\"jobId\":\"", "nul", "{\"a\":1}\n{\"a\":1}\n"]) {
        assert.deepStrictEqual(parseClaim(text), { _tag: "Torn" })
      }
    })

    it("returns any JSON value as parsed", () => {
      assert.deepStrictEqual(parseClaim("null\n"), { _tag: "Parsed", claim: null })
      assert.deepStrictEqual(parseClaim(" [1] "), { _tag: "Parsed", claim: [1] })
      fc.assert(
        fc.property(fc.jsonValue(), (value) => {
          const parsed = parseClaim(JSON.stringify(value))
          assert.strictEqual(parsed._tag, "Parsed")
        }),
        { numRuns: fuzzRuns(1000) }
      )
    })
  })

  describe("claimIsActiveFor", () => {
    it("needs an active state and the same token", () => {
      assert.isTrue(claimIsActiveFor(active, token))
      assert.isFalse(claimIsActiveFor(active, `${token}0`))
      assert.isFalse(claimIsActiveFor(settled, token))
      assert.isFalse(claimIsActiveFor(null, token))
      assert.isFalse(claimIsActiveFor("active", token))
    })
  })

  describe("claimExpired", () => {
    it("is not expired at exactly claimedAt + leaseMs, and is one millisecond later", () => {
      assert.isFalse(claimExpired(active, claimedAtMs + 600_000))
      assert.isTrue(claimExpired(active, claimedAtMs + 600_001))
      assert.isFalse(claimExpired(active, claimedAtMs))
    })

    it("never expires a settled, unparsable or lease-less claim", () => {
      assert.isFalse(claimExpired(settled, Number.MAX_SAFE_INTEGER))
      assert.isFalse(claimExpired({ ...active, claimedAt: "soon" }, Number.MAX_SAFE_INTEGER))
      assert.isFalse(claimExpired({ ...active, leaseMs: NaN }, Number.MAX_SAFE_INTEGER))
      assert.isFalse(claimExpired({ ...active, leaseMs: "1" }, Number.MAX_SAFE_INTEGER))
      assert.isFalse(claimExpired({ ...active, claimedAt: [{ toString: 1 }] }, Number.MAX_SAFE_INTEGER))
      assert.isFalse(claimExpired(null, Number.MAX_SAFE_INTEGER))
    })

    it("converts claimedAt to a string first, as Date.parse does", () => {
      assert.isTrue(claimExpired({ ...active, claimedAt: [claimedAt] }, claimedAtMs + 600_001))
      assert.isTrue(claimExpired({ ...active, claimedAt: 0 }, Date.parse("0") + 600_001))
    })

    it("uses fractional and negative leases as numbers", () => {
      assert.isTrue(claimExpired({ ...active, leaseMs: 0.5 }, claimedAtMs + 1))
      assert.isTrue(claimExpired({ ...active, leaseMs: -1 }, claimedAtMs))
    })

    it("agrees with the lease arithmetic for any time and lease", () => {
      fc.assert(
        fc.property(
          fc.integer({ min: 0, max: 4e12 }),
          fc.integer({ min: 1, max: 1e9 }),
          fc.integer({ min: -2e9, max: 2e9 }),
          (at, lease, offset) => {
            const claim = makeActiveClaim(jobId, token, at, lease)
            assert.strictEqual(claimExpired(claim, at + offset), offset > lease)
          }
        ),
        { numRuns: fuzzRuns(1000) }
      )
    })
  })

  describe("settledReceiptRef", () => {
    it("returns the pointer of a settled claim as found", () => {
      assert.strictEqual(settledReceiptRef(settled), settled.receiptRef)
      const odd = { state: "settled", receiptRef: "x" }
      assert.strictEqual(settledReceiptRef(odd), "x")
    })

    it("returns undefined without a settled state or a truthy pointer", () => {
      assert.isUndefined(settledReceiptRef(active))
      assert.isUndefined(settledReceiptRef({ state: "settled" }))
      assert.isUndefined(settledReceiptRef({ state: "settled", receiptRef: 0 }))
      assert.isUndefined(settledReceiptRef(undefined))
    })
  })
})
