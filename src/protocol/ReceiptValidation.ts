/**
 * The result shape of the receipt validators, identical to the reference's.
 *
 * A valid result carries the very object that was validated (not a decoded
 * copy), so callers can keep using it by identity, as the reference allows.
 *
 * @since 0.1.0
 */
import { Result, Schema } from "effect"
import { clipText } from "./internal/Text.js"

/**
 * The most characters an explanation holds: it quotes keys, which a record
 * may make as long as it likes.
 *
 * @category constants
 * @since 0.1.0
 */
export const MAX_EXPLANATION_CHARS = 1000

/**
 * The Schema formatter's multi-line issue list as one line: each issue with
 * its path (`Missing key at ["sessionId"]`), repeats dropped (a union
 * reports the same issue once per member), joined by `; `.
 */
const oneLineIssues = (message: string): string => {
  const issues: Array<string> = []
  for (const line of message.split("\n")) {
    const text = line.trim()
    if (text === "") continue
    if (text.startsWith("at ") && issues.length > 0) issues[issues.length - 1] += ` ${text}`
    else issues.push(text)
  }
  return clipText([...new Set(issues)].join("; "), MAX_EXPLANATION_CHARS)
}

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
 * Builds a receipt's validator from its exact guard: a valid result holds
 * the very object passed in, not a copy.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeValidator = <A>(guard: (record: unknown) => record is A) => (record: unknown): ReceiptValidation<A> =>
  guard(record) ? validReceipt(record) : malformedReceipt()

/**
 * Builds a receipt's `explain` function: `undefined` when the hand-written
 * guard accepts the record, otherwise the Schema decoder's wording of the
 * problems on one line (each with its path, at most
 * `MAX_EXPLANATION_CHARS`), or `notPlainData` when only the guard objects (it
 * follows the reference on inherited keys and custom `toString`s, which the
 * Schema does not see).
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
    return Result.isFailure(decoded) ? oneLineIssues(decoded.failure.message) : notPlainData
  }
}
