/**
 * Job claims: the one-line JSON file `jobs-v4/<jobId>.json` that reserves a
 * job (`active`, with a lease) and later records its outcome (`settled`, with
 * a pointer to the receipt).
 *
 * The seed reads claims leniently (`JSON.parse`, then field tests on whatever
 * came back) and so do the helpers here: `parseClaim` only separates parsable
 * text from torn text, and `claimIsActiveFor`, `claimExpired` and
 * `settledReceiptRef` take any JSON value. The `ActiveClaim`, `SettledClaim`
 * and `JobClaim` Schemas are the strict shapes written by the seed and by this
 * project, for tooling that verifies files.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { ReceiptReference } from "./Head.js"
import { isoTimestampOf } from "./internal/IsoTimestamp.js"
import { isIsoTimestamp, memberOf, stringCoercionOf } from "./internal/JsonShape.js"
import { NonEmptyString, NonNegativeInteger, Sha256Hex } from "./ReceiptParts.js"

/**
 * A time exactly as `Date.prototype.toISOString` writes it, e.g.
 * `2026-01-01T00:00:00.000Z`.
 *
 * @category schemas
 * @since 0.1.0
 */
export const IsoTimestamp = Schema.String.check(
  Schema.makeFilter(isIsoTimestamp, { expected: "a timestamp as Date.prototype.toISOString writes it" })
)

/**
 * A lease length in milliseconds: finite and at least 1, as reservations
 * require.
 *
 * @category schemas
 * @since 0.1.0
 */
export const LeaseMs = Schema.Number.check(
  Schema.makeFilter((n: number) => Number.isFinite(n) && n >= 1, { expected: "a finite number ≥ 1" })
)

/**
 * A claim held by a worker until `claimedAt + leaseMs`. Keys in the order the
 * seed writes them.
 *
 * @category schemas
 * @since 0.1.0
 */
export const ActiveClaim = Schema.Struct({
  jobId: Sha256Hex,
  state: Schema.Literal("active"),
  leaseToken: NonEmptyString,
  claimedAt: IsoTimestamp,
  leaseMs: LeaseMs,
  /**
   * Our extension: the sidecar's size when the claim was taken, which bounds
   * the search for a crashed settlement's receipt. The reference ignores it.
   */
  sidecarOffset: Schema.optionalKey(NonNegativeInteger)
})

/**
 * @category models
 * @since 0.1.0
 */
export type ActiveClaim = typeof ActiveClaim.Type

/**
 * A claim whose job committed: the lease token of the worker that settled it
 * and the byte range of its receipt. Keys in the order the seed writes them.
 *
 * @category schemas
 * @since 0.1.0
 */
export const SettledClaim = Schema.Struct({
  jobId: Sha256Hex,
  state: Schema.Literal("settled"),
  leaseToken: NonEmptyString,
  receiptRef: ReceiptReference
})

/**
 * @category models
 * @since 0.1.0
 */
export type SettledClaim = typeof SettledClaim.Type

/**
 * Either claim state.
 *
 * **Gotchas**
 *
 * Decode with `onExcessProperty: "error"` (as {@link decodeJobClaim} does);
 * the default silently drops unknown keys.
 *
 * @category schemas
 * @since 0.1.0
 */
export const JobClaim = Schema.Union([ActiveClaim, SettledClaim])

/**
 * @category models
 * @since 0.1.0
 */
export type JobClaim = typeof JobClaim.Type

/**
 * Strict decoding of a parsed claim, rejecting unknown keys.
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeJobClaim = Schema.decodeUnknownResult(JobClaim, { onExcessProperty: "error" })

/**
 * The active claim the seed writes for a reservation made at `claimedAtMs`.
 *
 * **Gotchas**
 *
 * Throws a `RangeError` when `claimedAtMs` is not a representable time, as
 * `Date.prototype.toISOString` does.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeActiveClaim = (
  jobId: string,
  leaseToken: string,
  claimedAtMs: number,
  leaseMs: number,
  sidecarOffset?: number
): ActiveClaim => ({
  jobId,
  state: "active",
  leaseToken,
  claimedAt: isoTimestampOf(claimedAtMs),
  leaseMs,
  ...(sidecarOffset === undefined ? {} : { sidecarOffset })
})

/**
 * The settled claim the seed writes once a receipt is durable.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeSettledClaim = (jobId: string, leaseToken: string, receiptRef: ReceiptReference): SettledClaim => ({
  jobId,
  state: "settled",
  leaseToken,
  receiptRef: {
    receiptOffset: receiptRef.receiptOffset,
    receiptLength: receiptRef.receiptLength,
    receiptHash: receiptRef.receiptHash
  }
})

// Rebuilt rather than passed through so key order never depends on the caller.
const makeActiveClaimRecord = (claim: ActiveClaim): ActiveClaim => ({
  jobId: claim.jobId,
  state: claim.state,
  leaseToken: claim.leaseToken,
  claimedAt: claim.claimedAt,
  leaseMs: claim.leaseMs,
  ...(claim.sidecarOffset === undefined ? {} : { sidecarOffset: claim.sidecarOffset })
})

/**
 * One claim line: compact JSON with the keys in the seed's order, then `"\n"`.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeClaimLine = (claim: JobClaim): string =>
  `${
    JSON.stringify(
      claim.state === "active"
        ? makeActiveClaimRecord(claim)
        : makeSettledClaim(claim.jobId, claim.leaseToken, claim.receiptRef)
    )
  }\n`

/**
 * What reading a claim file gave: any JSON value, or torn text.
 *
 * @category models
 * @since 0.1.0
 */
export type ClaimParse =
  | { readonly _tag: "Parsed"; readonly claim: unknown }
  | { readonly _tag: "Torn" }

/**
 * Parses claim text leniently, as the seed's `JSON.parse` does.
 *
 * **Details**
 *
 * Any JSON value is `Parsed` (the helpers below decide what it means).
 * Empty, whitespace-only or unparsable text is `Torn`: the trace of a writer
 * that crashed between creating the file and finishing its line, where the
 * seed itself would throw.
 *
 * @category decoding
 * @since 0.1.0
 */
export const parseClaim = (text: string): ClaimParse => {
  try {
    return { _tag: "Parsed", claim: JSON.parse(text) }
  } catch {
    return { _tag: "Torn" }
  }
}

/**
 * Whether a claim is active and holds this lease token: the seed's ownership
 * test before every commit step.
 *
 * @category predicates
 * @since 0.1.0
 */
export const claimIsActiveFor = (claim: unknown, leaseToken: string): boolean =>
  memberOf(claim, "state") === "active" && memberOf(claim, "leaseToken") === leaseToken

/**
 * Whether an active claim's lease ran out at `nowMs`, exactly as the seed
 * decides it.
 *
 * **Details**
 *
 * Expired means `nowMs - Date.parse(claimedAt) > leaseMs`: a claim is still
 * live at exactly `claimedAt + leaseMs`. A claim without a parsable
 * `claimedAt` or a finite `leaseMs` never expires, so only explicit repair
 * removes it.
 *
 * **Gotchas**
 *
 * `claimedAt` goes through `Date.parse`'s string conversion, as in the seed
 * (`["2026-01-01T00:00:00.000Z"]` parses). Where that conversion would throw
 * in the seed, this returns `false`.
 *
 * @category predicates
 * @since 0.1.0
 */
export const claimExpired = (claim: unknown, nowMs: number): boolean => {
  if (memberOf(claim, "state") !== "active") return false
  const text = stringCoercionOf(memberOf(claim, "claimedAt"))
  if (text === undefined) return false
  const claimedAt = Date.parse(text)
  const leaseMs = memberOf(claim, "leaseMs")
  return Number.isFinite(claimedAt) && Number.isFinite(leaseMs) && nowMs - claimedAt > (leaseMs as number)
}

/**
 * The receipt pointer of a settled claim, or `undefined` when the claim is
 * not settled or has no (truthy) pointer.
 *
 * **Details**
 *
 * The pointer is returned as found; check it with `isValidReceiptReference`
 * and against the sidecar before trusting it.
 *
 * @category accessors
 * @since 0.1.0
 */
export const settledReceiptRef = (claim: unknown): unknown => {
  if (memberOf(claim, "state") !== "settled") return undefined
  const ref = memberOf(claim, "receiptRef")
  return ref ? ref : undefined
}
