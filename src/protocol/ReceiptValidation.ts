/**
 * The result shape of the receipt validators, identical to the reference's.
 *
 * A valid result carries the very object that was validated (not a decoded
 * copy), so callers can keep using it by identity, as the reference allows.
 *
 * @since 0.1.0
 */
import { Result, Schema } from "effect"

/**
 * `{ valid: true, record }` with the input object itself, or
 * `{ valid: false, reason: "malformed" }`.
 *
 * @category models
 * @since 0.1.0
 */
export type ReceiptValidation<A> =
  | { readonly valid: true; readonly record: A }
  | { readonly valid: false; readonly reason: "malformed" }

/**
 * Wraps a record that passed validation.
 *
 * @category constructors
 * @since 0.1.0
 */
export const validReceipt = <A>(record: A): ReceiptValidation<A> => ({ valid: true, record })

/**
 * The result for a record that failed validation. A fresh object per call, so
 * a caller that mutates or spreads it cannot affect another caller.
 *
 * @category constructors
 * @since 0.1.0
 */
export const malformedReceipt = <A>(): ReceiptValidation<A> => ({ valid: false, reason: "malformed" })

/**
 * Builds a receipt's `explain` function: `undefined` when the hand-written
 * guard accepts the record, otherwise the Schema decoder's wording of the
 * first problem, or `notPlainData` when only the guard objects (it follows
 * the reference on inherited keys and custom `toString`s, which the Schema
 * does not see).
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeExplainer = (
  guard: (record: unknown) => boolean,
  schema: Schema.Decoder<unknown>,
  notPlainData: string
): (record: unknown) => string | undefined => {
  const decode = Schema.decodeUnknownResult(schema, { onExcessProperty: "error" })
  return (record) => {
    if (guard(record)) return undefined
    const decoded = decode(record)
    return Result.isFailure(decoded) ? decoded.failure.message : notPlainData
  }
}
