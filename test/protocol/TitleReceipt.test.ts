import { assert, describe, it } from "@effect/vitest"
import * as RefState from "@hypercarrier/rarebit/artifact-state"
import fc from "fast-check"
import {
  explainTitleReceipt,
  isTitleReceipt,
  TitleReceipt,
  validateTitleReceipt
} from "../../src/protocol/TitleReceipt.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import { mutated, titleStatuses, validSummaryReceipt, validTitleReceipt } from "./ReceiptArbitraries.js"
import { describeReceiptDifferential } from "./ReceiptDifferential.js"

const sample = (status: (typeof titleStatuses)[number]): Record<string, unknown> =>
  fc.sample(validTitleReceipt(status), { numRuns: 1, seed: 11 })[0]

describe("TitleReceipt", () => {
  const { agrees, referenceValid } = describeReceiptDifferential({
    reference: "validateRarebitTitleReceipt",
    statuses: titleStatuses,
    valid: validTitleReceipt,
    referenceValidate: RefState.validateRarebitTitleReceipt,
    schema: TitleReceipt,
    guard: isTitleReceipt,
    validate: validateTitleReceipt,
    explain: explainTitleReceipt
  })

  describe("against Summary receipts", () => {
    it("rejects Summary receipts, mutated or not, as the reference does", () => {
      fc.assert(fc.property(mutated(validSummaryReceipt()), (record) => agrees(record)), { numRuns: fuzzRuns(1000) })
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
      [
        "the implementation version is fixed",
        () => ({ ...sample("proposal"), implementationVersion: "hc-rarebit-title-v5" }),
        false
      ],
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
