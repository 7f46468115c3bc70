/**
 * The sidecar head (`rarebit_head`, protocol 1) and receipt references.
 *
 * A head names the current receipt by byte range and hash: `receiptOffset`,
 * `receiptLength` and `receiptHash`, the SHA-256 hex of the receipt line's
 * exact bytes, newline included. A head is the only way a receipt becomes
 * current; readers never select the physical last line.
 *
 * Two levels of checking live here. `isValidHead` and
 * `isValidReceiptReference` reproduce the seed's lenient run-time checks
 * (no exact keys, the hash tested after string conversion), because which
 * head counts as valid decides what a reader returns. The `Head` and
 * `ReceiptReference` Schemas are the strict, exact-key shapes this project
 * writes, for tooling that verifies files.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { SHA256_HEX_PATTERN, sha256Hex } from "./CanonicalJson.js"
import { memberOf, stringCoercionOf } from "./internal/JsonShape.js"
import { MAX_RECEIPT_BYTES, SIDECAR_PROTOCOL_VERSION } from "./Limits.js"
import { NonEmptyString, Sha256Hex } from "./ReceiptParts.js"

const isSessionId = (u: unknown): u is string => typeof u === "string" && u.length > 0

const isReceiptOffset = (u: unknown): u is number => Number.isSafeInteger(u) && (u as number) >= 0

const isReceiptLength = (u: unknown): u is number =>
  Number.isSafeInteger(u) && (u as number) >= 1 && (u as number) <= MAX_RECEIPT_BYTES

// The seed tests the hash with `RegExp.prototype.test`, which converts its
// argument to a string first; a one-element array holding a hash passes.
const isCoercedHash = (u: unknown): boolean => {
  const text = stringCoercionOf(u)
  return text !== undefined && SHA256_HEX_PATTERN.test(text)
}

/**
 * A byte offset into a sidecar: a safe integer ≥ 0.
 *
 * @category schemas
 * @since 0.1.0
 */
export const ReceiptOffset = Schema.Number.check(
  Schema.makeFilter(isReceiptOffset, { expected: "a safe integer ≥ 0" })
)

/**
 * A receipt line length: a safe integer from 1 to `MAX_RECEIPT_BYTES`.
 *
 * @category schemas
 * @since 0.1.0
 */
export const ReceiptLength = Schema.Number.check(
  Schema.makeFilter(isReceiptLength, { expected: `a safe integer from 1 to ${MAX_RECEIPT_BYTES}` })
)

/**
 * Where a receipt line lives in a sidecar, and the SHA-256 hex of its exact
 * bytes. Key order is the protocol's.
 *
 * @category schemas
 * @since 0.1.0
 */
export const ReceiptReference = Schema.Struct({
  receiptOffset: ReceiptOffset,
  receiptLength: ReceiptLength,
  receiptHash: Sha256Hex
})

/**
 * @category models
 * @since 0.1.0
 */
export type ReceiptReference = typeof ReceiptReference.Type

/**
 * The sidecar head, fields in protocol order.
 *
 * @category schemas
 * @since 0.1.0
 */
export const Head = Schema.Struct({
  type: Schema.Literal("rarebit_head"),
  protocolVersion: Schema.Literal(SIDECAR_PROTOCOL_VERSION),
  sessionId: NonEmptyString,
  receiptOffset: ReceiptOffset,
  receiptLength: ReceiptLength,
  receiptHash: Sha256Hex
})

/**
 * @category models
 * @since 0.1.0
 */
export type Head = typeof Head.Type

/**
 * The seed's head check: right type and protocol version, a non-empty
 * `sessionId`, a receipt range within the protocol bounds and a hash.
 *
 * **Gotchas**
 *
 * Like the seed, this is not exact-key (extra keys are fine) and the hash is
 * tested after string conversion, so `receiptHash: ["<64 hex>"]` passes; such
 * a head never verifies, since the range check compares hashes strictly.
 * Where the seed's conversion would throw (an object whose `toString` is not
 * callable), this returns `false`.
 *
 * @category guards
 * @since 0.1.0
 */
export const isValidHead = (u: unknown): u is Head =>
  memberOf(u, "type") === "rarebit_head" &&
  memberOf(u, "protocolVersion") === SIDECAR_PROTOCOL_VERSION &&
  isSessionId(memberOf(u, "sessionId")) &&
  isReceiptOffset(memberOf(u, "receiptOffset")) &&
  isReceiptLength(memberOf(u, "receiptLength")) &&
  isCoercedHash(memberOf(u, "receiptHash"))

/**
 * The seed's pre-checks of a receipt reference (from a head or a settled
 * claim) before it touches the file.
 *
 * **Gotchas**
 *
 * As in {@link isValidHead}, the hash is tested after string conversion, so
 * compare `receiptHash` with the computed hash strictly afterwards.
 *
 * @category guards
 * @since 0.1.0
 */
export const isValidReceiptReference = (u: unknown): u is ReceiptReference =>
  isReceiptOffset(memberOf(u, "receiptOffset")) &&
  isReceiptLength(memberOf(u, "receiptLength")) &&
  isCoercedHash(memberOf(u, "receiptHash"))

/**
 * The head that makes `receiptLine` current.
 *
 * **Details**
 *
 * `receiptLine` is the exact line as written, newline included: its length
 * and hash are taken over those bytes.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeHead = (sessionId: string, receiptOffset: number, receiptLine: Uint8Array): Head =>
  headFor(sessionId, { receiptOffset, receiptLength: receiptLine.byteLength, receiptHash: sha256Hex(receiptLine) })

/**
 * The head that points at an already-written receipt by its reference.
 *
 * @category constructors
 * @since 0.1.0
 */
export const headFor = (sessionId: string, reference: ReceiptReference): Head => ({
  type: "rarebit_head",
  protocolVersion: SIDECAR_PROTOCOL_VERSION,
  sessionId,
  receiptOffset: reference.receiptOffset,
  receiptLength: reference.receiptLength,
  receiptHash: reference.receiptHash
})

const utf8 = new TextEncoder()

/**
 * One head line: compact JSON with the keys in protocol order, then `"\n"`.
 *
 * **Gotchas**
 *
 * Whether the line fits `MAX_HEAD_BYTES` is left to the writer. To repeat a
 * head read from disk byte for byte, re-serialise the parsed record itself
 * (as the seed does) rather than this canonical form.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeHeadLine = (head: Head): Uint8Array =>
  utf8.encode(
    `${
      JSON.stringify({
        type: head.type,
        protocolVersion: head.protocolVersion,
        sessionId: head.sessionId,
        receiptOffset: head.receiptOffset,
        receiptLength: head.receiptLength,
        receiptHash: head.receiptHash
      })
    }\n`
  )
