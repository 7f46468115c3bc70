/**
 * The result shape of the receipt validators, identical to the reference's.
 *
 * A valid result carries the very object that was validated (not a decoded
 * copy), so callers can keep using it by identity, as the reference allows.
 *
 * @since 0.1.0
 */

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
