/**
 * The differential properties every receipt kind must pass against the
 * reference's validator: generated valid receipts of each variant, mutated
 * ones (with both verdicts well represented), every single edit of valid
 * ones, arbitrary JSON and arbitrary JavaScript values.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import fc from "fast-check"
import type { ReceiptValidation } from "../../src/protocol/ReceiptValidation.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import { mutated, singleEdits } from "./ReceiptArbitraries.js"

export interface ReceiptKind<S extends string> {
  /** Shown in the suite's name: the reference function compared with. */
  readonly reference: string
  readonly statuses: ReadonlyArray<S>
  /** Valid receipts of one variant, or of any. */
  readonly valid: (status?: S) => fc.Arbitrary<Record<string, unknown>>
  /** The reference's verdict (its validator may throw). */
  readonly referenceValidate: (record: unknown) => { readonly valid: boolean }
  readonly schema: Schema.ConstraintDecoder<unknown>
  readonly guard: (record: unknown) => boolean
  readonly validate: (record: unknown) => ReceiptValidation<unknown>
  readonly explain: (record: unknown) => string | undefined
}

/** The reference's verdict; a throw (it has a few) counts as "not valid". */
export const referenceVerdict = (validate: (record: unknown) => { readonly valid: boolean }) => (record: unknown) => {
  try {
    return validate(record).valid
  } catch {
    return false
  }
}

export const describeReceiptDifferential = <S extends string>(kind: ReceiptKind<S>) => {
  const referenceValid = referenceVerdict(kind.referenceValidate)
  const decode = Schema.decodeUnknownResult(kind.schema, { onExcessProperty: "error" })
  const schemaValid = (record: unknown): boolean => Result.isSuccess(decode(record))

  /** Every way we judge a record must agree with the reference. */
  const agrees = (record: unknown): boolean => {
    const expected = referenceValid(record)
    const result = kind.validate(record)
    return result.valid === expected &&
      kind.guard(record) === expected &&
      (kind.explain(record) === undefined) === expected &&
      (!result.valid || result.record === record)
  }

  describe(`differential against ${kind.reference}`, () => {
    for (const status of kind.statuses) {
      it(`accepts generated valid ${status} receipts`, () => {
        fc.assert(
          fc.property(kind.valid(status), (record) => {
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
        fc.property(mutated(kind.valid()), (record) => {
          if (referenceValid(record)) valid++
          else invalid++
          assert.isTrue(agrees(record))
          assert.strictEqual(schemaValid(record), kind.guard(record))
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
      for (const status of kind.statuses) {
        for (const record of fc.sample(kind.valid(status), { numRuns: 2, seed: 3 })) {
          for (const edit of singleEdits(record)) {
            edits++
            const expected = referenceValid(edit)
            if (expected) valid++
            // explain is left to the properties above: formatting every issue here would dominate the run time
            if (kind.validate(edit).valid !== expected || schemaValid(edit) !== expected) {
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
          assert.strictEqual(schemaValid(value), kind.guard(value))
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

  return { referenceValid, schemaValid, agrees }
}
