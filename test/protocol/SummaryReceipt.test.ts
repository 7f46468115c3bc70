import { assert, describe, it } from "@effect/vitest"
import * as RefState from "@hypercarrier/rarebit/artifact-state"
import fc from "fast-check"
import { MAX_EXPLANATION_CHARS } from "../../src/protocol/ReceiptValidation.js"
import {
  explainSummaryReceipt,
  isSummaryReceipt,
  sessionStatusKey,
  SummaryReceipt,
  validateSummaryReceipt
} from "../../src/protocol/SummaryReceipt.js"
import { summaryStatuses, validSummaryReceipt } from "./ReceiptArbitraries.js"
import { describeReceiptDifferential } from "./ReceiptDifferential.js"

const referenceThrows = (record: unknown): boolean => {
  try {
    RefState.validateRarebitArtifactReceipt(record)
    return false
  } catch {
    return true
  }
}

const sample = (status: (typeof summaryStatuses)[number]): Record<string, unknown> =>
  fc.sample(validSummaryReceipt(status), { numRuns: 1, seed: 7 })[0]

const okV4 = (): Record<string, unknown> => {
  const { inputCoverage: _, ...rest } = sample("ok")
  return {
    ...rest,
    implementationVersion: "hc-rarebit-summary-v4",
    lifecycleBoundary: "agent_settled",
    sessionStatus: "finished",
    statusReason: "all_requests_accomplished"
  }
}

describe("SummaryReceipt", () => {
  const { agrees, referenceValid } = describeReceiptDifferential({
    reference: "validateRarebitArtifactReceipt",
    statuses: summaryStatuses,
    valid: validSummaryReceipt,
    referenceValidate: RefState.validateRarebitArtifactReceipt,
    schema: SummaryReceipt,
    guard: isSummaryReceipt,
    validate: validateSummaryReceipt,
    explain: explainSummaryReceipt
  })

  describe("JavaScript corner cases", () => {
    const cases: ReadonlyArray<readonly [string, () => unknown, boolean]> = [
      [
        "-0 is a non-negative integer",
        () => ({ ...okV4(), branch: { ...(okV4().branch as object), entryCount: -0 } }),
        true
      ],
      ["1e300 is an integer", () => ({ ...okV4(), branch: { ...(okV4().branch as object), entryCount: 1e300 } }), true],
      [
        "1.5 is not an integer",
        () => ({ ...okV4(), branch: { ...(okV4().branch as object), entryCount: 1.5 } }),
        false
      ],
      [
        "-0 is not a positive integer",
        () => ({ ...okV4(), inputCoveragePolicy: { strategy: "complete_or_explicit_overflow", maxPromptChars: -0 } }),
        false
      ],
      ["an ok v4 receipt may omit inputCoverage", okV4, true],
      [
        "an ok v5 receipt must carry inputCoverage",
        () => ({ ...okV4(), implementationVersion: "hc-rarebit-summary-v5" }),
        false
      ],
      [
        "inputCoverage is not allowed outside ok",
        () => ({ ...sample("ineligible"), inputCoverage: sample("ok").inputCoverage }),
        false
      ],
      ["a blank summary is rejected", () => ({ ...okV4(), summary: " \u00a0\n\ufeff" }), false],
      ["observedAt must be parsable", () => ({ ...okV4(), observedAt: "2026-13-45" }), false],
      ["observedAt need not be ISO", () => ({ ...okV4(), observedAt: "Jan 1 2026" }), true],
      ["a one-element array status is looked up by key", () => ({ ...okV4(), sessionStatus: ["finished"] }), true],
      ["a two-element array status is not", () => ({ ...okV4(), sessionStatus: ["finished", "x"] }), false],
      [
        "owner_request requires user_requested",
        () => ({
          ...okV4(),
          lifecycleBoundary: "owner_request",
          selection: { ...(okV4().selection as object), latestUserSourceEntryId: "u1" }
        }),
        false
      ],
      [
        "owner_request requires the latest user entry",
        () => ({
          ...okV4(),
          lifecycleBoundary: "owner_request",
          sessionStatus: "user_requested",
          statusReason: "owner_request_recorded",
          selection: { ...(okV4().selection as object), latestUserSourceEntryId: null }
        }),
        false
      ],
      [
        "user_requested outside owner_request is rejected",
        () => ({ ...okV4(), sessionStatus: "user_requested", statusReason: "owner_request_recorded" }),
        false
      ],
      [
        "an own __proto__ key from JSON.parse is excess",
        () => JSON.parse(`{"__proto__":1,${JSON.stringify(okV4()).slice(1)}`),
        false
      ],
      ["keys inherited from a prototype are not present", () => Object.create(okV4()), false],
      ["an array is not a record", () => Object.assign([], okV4()), false],
      ["a symbol key is never excess", () => ({ ...okV4(), [Symbol("x")]: 1 }), true],
      [
        "a non-enumerable own key is present",
        () => {
          const record = okV4()
          const summary = record.summary
          delete record.summary
          Object.defineProperty(record, "summary", { value: summary, enumerable: false })
          return record
        },
        true
      ],
      [
        "a non-enumerable inputCoverage is still validated on any variant",
        () => {
          const record = sample("failure")
          Object.defineProperty(record, "inputCoverage", { value: { complete: true }, enumerable: false })
          return record
        },
        false
      ]
    ]
    for (const [name, build, expected] of cases) {
      it(name, () => {
        const record = build()
        assert.strictEqual(referenceValid(record), expected, "the reference's verdict")
        assert.isTrue(agrees(record))
      })
    }

    it("returns malformed where the reference throws on an inherited status key", () => {
      const record = { ...okV4(), sessionStatus: "constructor" }
      assert.isTrue(referenceThrows(record))
      assert.deepStrictEqual(validateSummaryReceipt(record), { valid: false, reason: "malformed" })
    })

    it("reads session statuses as property keys", () => {
      assert.strictEqual(sessionStatusKey("finished"), "finished")
      assert.strictEqual(sessionStatusKey([["needs_attention"]]), "needs_attention")
      assert.strictEqual(sessionStatusKey("toString"), undefined)
      assert.strictEqual(sessionStatusKey([{ toString: 1 }]), undefined)
    })
  })

  describe("validateSummaryReceipt", () => {
    it("returns the very object it was given", () => {
      const record = okV4()
      const result = validateSummaryReceipt(record)
      assert.isTrue(result.valid)
      if (result.valid) assert.strictEqual(result.record, record)
    })
  })

  describe("explainSummaryReceipt", () => {
    it("names an unknown key", () => {
      const message = explainSummaryReceipt({ ...okV4(), extra: 1 })
      assert.isDefined(message)
      assert.include(message, "extra")
    })

    it("names a missing nested key", () => {
      const record = okV4()
      const { pathHash: _, ...branch } = record.branch as Record<string, unknown>
      const message = explainSummaryReceipt({ ...record, branch })
      assert.include(message, "Missing key")
      assert.include(message, "pathHash")
    })

    it("names a broken cross-field rule", () => {
      const message = explainSummaryReceipt({ ...okV4(), implementationVersion: "hc-rarebit-summary-v6" })
      assert.include(message, "inputCoverage")
    })

    it("says each problem once, on one line, with its path", () => {
      // The Schema reports an excess key once per union member, over two lines each.
      assert.strictEqual(explainSummaryReceipt({ ...okV4(), extra: 1 }), "Expected no excess property at [\"extra\"]")
      const { sessionId: _, ...record } = okV4()
      assert.strictEqual(explainSummaryReceipt(record), "Missing key at [\"sessionId\"]")
    })

    it("stays within MAX_EXPLANATION_CHARS whatever keys the record has", () => {
      const message = explainSummaryReceipt({ ...okV4(), ["k".repeat(100_000)]: 1 })!
      assert.isAtMost(message.length, MAX_EXPLANATION_CHARS)
      assert.match(message, /^Expected no excess property at \["k+…$/)
    })

    it("still explains records the Schema cannot see are invalid", () => {
      const message = explainSummaryReceipt(Object.create(okV4()))
      assert.include(message, "inherited")
    })
  })
})
