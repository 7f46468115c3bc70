import { assert, describe, it } from "@effect/vitest"
import * as RefState from "@hypercarrier/rarebit/artifact-state"
import { Result, Schema } from "effect"
import fc from "fast-check"
import {
  explainSummaryReceipt,
  isSummaryReceipt,
  sessionStatusKey,
  SummaryReceipt,
  validateSummaryReceipt
} from "../../src/protocol/SummaryReceipt.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import { mutated, singleEdits, summaryStatuses, validSummaryReceipt } from "./ReceiptArbitraries.js"

/** The reference's verdict; a throw (it has a few) counts as "not valid". */
const referenceValid = (record: unknown): boolean => {
  try {
    return RefState.validateRarebitArtifactReceipt(record).valid
  } catch {
    return false
  }
}

const referenceThrows = (record: unknown): boolean => {
  try {
    RefState.validateRarebitArtifactReceipt(record)
    return false
  } catch {
    return true
  }
}

const decode = Schema.decodeUnknownResult(SummaryReceipt, { onExcessProperty: "error" })
const schemaValid = (record: unknown): boolean => Result.isSuccess(decode(record))

/** Every way we judge a record must agree with the reference. */
const agrees = (record: unknown): boolean => {
  const expected = referenceValid(record)
  const result = validateSummaryReceipt(record)
  return result.valid === expected &&
    isSummaryReceipt(record) === expected &&
    (explainSummaryReceipt(record) === undefined) === expected &&
    (!result.valid || result.record === record)
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
  describe("differential against validateRarebitArtifactReceipt", () => {
    for (const status of summaryStatuses) {
      it(`accepts generated valid ${status} receipts`, () => {
        fc.assert(
          fc.property(validSummaryReceipt(status), (record) => {
            assert.isTrue(referenceValid(record), "the generator must build valid receipts")
            assert.isTrue(agrees(record))
            assert.isTrue(schemaValid(record))
          }),
          { numRuns: fuzzRuns(1000) }
        )
      })
    }

    it("agrees on mutated receipts, with both verdicts well represented", () => {
      let valid = 0
      let invalid = 0
      fc.assert(
        fc.property(mutated(validSummaryReceipt()), (record) => {
          if (referenceValid(record)) valid++
          else invalid++
          assert.isTrue(agrees(record))
          assert.strictEqual(schemaValid(record), isSummaryReceipt(record))
        }),
        { numRuns: fuzzRuns(1000) }
      )
      const runs = valid + invalid
      assert.isAbove(valid, runs * 0.1, `only ${valid} of ${runs} mutated receipts were valid`)
      assert.isAbove(invalid, runs * 0.1, `only ${invalid} of ${runs} mutated receipts were invalid`)
    })

    it("agrees on every single edit of valid receipts of each variant", () => {
      let valid = 0
      let edits = 0
      for (const status of summaryStatuses) {
        for (const record of fc.sample(validSummaryReceipt(status), { numRuns: 2, seed: 3 })) {
          for (const edit of singleEdits(record)) {
            edits++
            const expected = referenceValid(edit)
            if (expected) valid++
            // explain is left to the properties above: formatting every issue here would dominate the run time
            if (validateSummaryReceipt(edit).valid !== expected || schemaValid(edit) !== expected) {
              assert.fail(`disagreement on ${JSON.stringify(edit)}`)
            }
          }
        }
      }
      assert.isAbove(valid, edits * 0.05)
      assert.isAbove(edits - valid, edits * 0.5)
    })

    it("agrees on arbitrary JSON values", () => {
      fc.assert(
        fc.property(fc.jsonValue(), (value) => {
          assert.isTrue(agrees(value))
          assert.strictEqual(schemaValid(value), isSummaryReceipt(value))
        }),
        { numRuns: fuzzRuns(1000) }
      )
    })

    it("agrees on arbitrary JavaScript values, exotic objects included", () => {
      const exotic = fc.anything({
        withNullPrototype: true,
        withBoxedValues: true,
        withDate: true,
        withMap: true,
        withSet: true,
        withSparseArray: true,
        withTypedArray: true,
        withBigInt: true
      })
      fc.assert(fc.property(fc.oneof(fc.anything(), exotic), (value) => agrees(value)), { numRuns: fuzzRuns(1000) })
    })
  })

  describe("JavaScript corner cases", () => {
    const cases: ReadonlyArray<readonly [string, () => unknown, boolean]> = [
      ["-0 is a non-negative integer", () => ({ ...okV4(), branch: { ...(okV4().branch as object), entryCount: -0 } }), true],
      ["1e300 is an integer", () => ({ ...okV4(), branch: { ...(okV4().branch as object), entryCount: 1e300 } }), true],
      ["1.5 is not an integer", () => ({ ...okV4(), branch: { ...(okV4().branch as object), entryCount: 1.5 } }), false],
      [
        "-0 is not a positive integer",
        () => ({ ...okV4(), inputCoveragePolicy: { strategy: "complete_or_explicit_overflow", maxPromptChars: -0 } }),
        false
      ],
      ["an ok v4 receipt may omit inputCoverage", okV4, true],
      ["an ok v5 receipt must carry inputCoverage", () => ({ ...okV4(), implementationVersion: "hc-rarebit-summary-v5" }), false],
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
      ["an own __proto__ key from JSON.parse is excess", () => JSON.parse(`{"__proto__":1,${JSON.stringify(okV4()).slice(1)}`), false],
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

    it("still explains records the Schema cannot see are invalid", () => {
      const message = explainSummaryReceipt(Object.create(okV4()))
      assert.include(message, "inherited")
    })
  })
})
