import { assert, describe, it } from "@effect/vitest"
import * as RefState from "@hypercarrier/rarebit/artifact-state"
import { Result, Schema } from "effect"
import fc from "fast-check"
import { explainTitleReceipt, isTitleReceipt, TitleReceipt, validateTitleReceipt } from "../../src/protocol/TitleReceipt.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import { mutated, singleEdits, titleStatuses, validSummaryReceipt, validTitleReceipt } from "./ReceiptArbitraries.js"

const referenceValid = (record: unknown): boolean => {
  try {
    return RefState.validateRarebitTitleReceipt(record).valid
  } catch {
    return false
  }
}

const decode = Schema.decodeUnknownResult(TitleReceipt, { onExcessProperty: "error" })
const schemaValid = (record: unknown): boolean => Result.isSuccess(decode(record))

const agrees = (record: unknown): boolean => {
  const expected = referenceValid(record)
  const result = validateTitleReceipt(record)
  return result.valid === expected &&
    isTitleReceipt(record) === expected &&
    (explainTitleReceipt(record) === undefined) === expected &&
    (!result.valid || result.record === record)
}

const sample = (status: (typeof titleStatuses)[number]): Record<string, unknown> =>
  fc.sample(validTitleReceipt(status), { numRuns: 1, seed: 11 })[0]

describe("TitleReceipt", () => {
  describe("differential against validateRarebitTitleReceipt", () => {
    for (const status of titleStatuses) {
      it(`accepts generated valid ${status} receipts`, () => {
        fc.assert(
          fc.property(validTitleReceipt(status), (record) => {
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
        fc.property(mutated(validTitleReceipt()), (record) => {
          if (referenceValid(record)) valid++
          else invalid++
          assert.isTrue(agrees(record))
          assert.strictEqual(schemaValid(record), isTitleReceipt(record))
        }),
        { numRuns: fuzzRuns(1000) }
      )
      const runs = valid + invalid
      assert.isAbove(valid, runs * 0.1, `only ${valid} of ${runs} mutated receipts were valid`)
      assert.isAbove(invalid, runs * 0.1, `only ${invalid} of ${runs} mutated receipts were invalid`)
    })

    it("rejects Summary receipts, mutated or not, as the reference does", () => {
      fc.assert(fc.property(mutated(validSummaryReceipt()), (record) => agrees(record)), { numRuns: fuzzRuns(1000) })
    })

    it("agrees on every single edit of valid receipts of each variant", () => {
      let valid = 0
      let edits = 0
      for (const status of titleStatuses) {
        for (const record of fc.sample(validTitleReceipt(status), { numRuns: 2, seed: 3 })) {
          for (const edit of singleEdits(record)) {
            edits++
            const expected = referenceValid(edit)
            if (expected) valid++
            // explain is left to the properties above: formatting every issue here would dominate the run time
            if (validateTitleReceipt(edit).valid !== expected || schemaValid(edit) !== expected) {
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
          assert.strictEqual(schemaValid(value), isTitleReceipt(value))
        }),
        { numRuns: fuzzRuns(1000) }
      )
    })

    it("agrees on arbitrary JavaScript values, exotic objects included", () => {
      const exotic = fc.anything({ withNullPrototype: true, withBoxedValues: true, withDate: true, withSparseArray: true })
      fc.assert(fc.property(fc.oneof(fc.anything(), exotic), (value) => agrees(value)), { numRuns: fuzzRuns(1000) })
    })
  })

  describe("variant rules", () => {
    const cases: ReadonlyArray<readonly [string, () => unknown, boolean]> = [
      ["a proposal needs a non-empty title", () => ({ ...sample("proposal"), title: "" }), false],
      ["an applied title may be whitespace", () => ({ ...sample("applied"), title: " " }), true],
      ["a skipped receipt has a null title", () => ({ ...sample("skipped_title_changed"), title: "t" }), false],
      ["a failure has a null title", () => ({ ...sample("failure"), title: "t" }), false],
      [
        "a failure carries no synthesis",
        () => ({ ...sample("failure"), synthesis: sample("proposal").synthesis }),
        false
      ],
      ["a skipped receipt needs its synthesis", () => {
        const { synthesis: _, ...rest } = sample("skipped_existing_title")
        return rest
      }, false],
      ["priorTitle may be empty", () => ({ ...sample("proposal"), priorTitle: "" }), true],
      ["the implementation version is fixed", () => ({ ...sample("proposal"), implementationVersion: "hc-rarebit-title-v5" }), false],
      ["keys inherited from a prototype are not present", () => Object.create(sample("applied")), false]
    ]
    for (const [name, build, expected] of cases) {
      it(name, () => {
        const record = build()
        assert.strictEqual(referenceValid(record), expected, "the reference's verdict")
        assert.isTrue(agrees(record))
      })
    }
  })

  describe("explainTitleReceipt", () => {
    it("names the offending field", () => {
      const message = explainTitleReceipt({ ...sample("proposal"), applicationMode: "auto" })
      assert.isDefined(message)
      assert.include(message, "applicationMode")
    })

    it("is undefined for a valid receipt", () => {
      assert.isUndefined(explainTitleReceipt(sample("failure")))
    })
  })
})
