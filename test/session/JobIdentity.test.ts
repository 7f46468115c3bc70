import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import {
  DEFAULT_RAREBIT_SUMMARY_POLICY,
  normalizeRarebitSummaryPolicy,
  RAREBIT_JOB_IDENTITY_VERSION,
  rarebitJobIdentity,
  type RarebitJobIdentityInput
} from "../../src/session/index.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import { Core } from "../support/Reference.js"
import { assertSameOutcome, capture, type Outcome } from "./Outcome.js"
import { jobIdentityInputArb, policyArb } from "./SessionArbitrary.js"

const assertSame = (ours: Outcome<unknown>, reference: Outcome<unknown>) => {
  assertSameOutcome(ours, reference, "job identity")
  if (ours.ok) assert.strictEqual(JSON.stringify(ours.value), JSON.stringify((reference as { value: unknown }).value))
}

describe("JobIdentity against the reference", () => {
  it("exports the reference's version and default policy", () => {
    assert.strictEqual(RAREBIT_JOB_IDENTITY_VERSION, Core.RAREBIT_JOB_IDENTITY_VERSION)
    assert.deepStrictEqual({ ...DEFAULT_RAREBIT_SUMMARY_POLICY }, { ...Core.DEFAULT_RAREBIT_SUMMARY_POLICY })
    assert.strictEqual(
      JSON.stringify(DEFAULT_RAREBIT_SUMMARY_POLICY),
      JSON.stringify(Core.DEFAULT_RAREBIT_SUMMARY_POLICY)
    )
    assert.isTrue(Object.isFrozen(DEFAULT_RAREBIT_SUMMARY_POLICY))
  })

  it("rarebitJobIdentity gives the same hash or the same error", () => {
    fc.assert(
      fc.property(jobIdentityInputArb, (input) => {
        assertSame(
          capture(() => rarebitJobIdentity(input as RarebitJobIdentityInput)),
          capture(() => Core.rarebitJobIdentity(input))
        )
      }),
      { numRuns: fuzzRuns(1000) }
    )
  })

  it("normalizeRarebitSummaryPolicy gives the same policy (key order included) or the same error", () => {
    fc.assert(
      fc.property(policyArb, (policy) => {
        assertSame(
          capture(() => normalizeRarebitSummaryPolicy(policy as object)),
          capture(() => Core.normalizeRarebitSummaryPolicy(policy))
        )
      }),
      { numRuns: fuzzRuns(1000) }
    )
  })
})

describe("JobIdentity", () => {
  const selection = { manifestHash: "a".repeat(64) }

  it("is 64 lower-case hex digits and changes with every hashed input", () => {
    const base: RarebitJobIdentityInput = { operation: "summary", sessionId: "sess-a", selection }
    const id = rarebitJobIdentity(base)
    assert.match(id, /^[a-f0-9]{64}$/)
    const variants: ReadonlyArray<RarebitJobIdentityInput> = [
      { ...base, operation: "title" },
      { ...base, sessionId: "sess-b" },
      { ...base, selection: { manifestHash: "b".repeat(64) } },
      { ...base, mode: "automatic" },
      { ...base, branch: "leaf" },
      { ...base, policy: {} },
      { ...base, promptVersion: "rarebit-summary-v6" },
      { ...base, model: { provider: "p", id: "m" } }
    ]
    for (const variant of variants) assert.notStrictEqual(rarebitJobIdentity(variant), id)
  })

  it("an absent optional field hashes like an explicit null", () => {
    const base: RarebitJobIdentityInput = { operation: "summary", sessionId: "sess-a", selection }
    assert.strictEqual(
      rarebitJobIdentity(base),
      rarebitJobIdentity({ ...base, mode: null, branch: null, policy: null, promptVersion: null, model: null })
    )
  })

  it("rejects with the reference's error classes", () => {
    assert.throws(() => rarebitJobIdentity({ operation: "other" as "summary", sessionId: "s", selection }), TypeError)
    assert.throws(() => normalizeRarebitSummaryPolicy({ maxRarebitRatio: 2 }), RangeError, "must not exceed 1")
    assert.throws(() => normalizeRarebitSummaryPolicy({ measurementVersion: "x" }), Error, "measurement version: x")
  })
})
