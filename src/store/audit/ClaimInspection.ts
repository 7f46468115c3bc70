/**
 * The audit's inspection of job claims: what each claim under `jobs-v4`
 * says, what is wrong with it, and whether a settled claim's receipt
 * pointer verifies against the sidecars that hold receipts of its job.
 *
 * A claim is read as the store reads it (`JobClaims.readClaim`: never
 * blocking, never more than its bound, decoded exactly as the reference
 * decodes it, so a BOM makes it torn; on a file system that has it, in one
 * synchronous call with the same refusals, `readClaim` reading again only
 * what does not parse). What is wrong is a finding, never a
 * failure. A report never carries a lease token, and strings copied from a
 * claim are cut to `MAX_FIELD_CHARS` (`ReportFields`).
 *
 * A pointer that names exactly the line of a receipt of its job that the
 * audit's scan already validated and hashed (`KnownReceipt`) verifies
 * without reading the sidecar again; any other pointer is read back and
 * checked as `reserve` checks a settled claim.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import type { FileSystem } from "effect/FileSystem"
import { smallRegularReadOf } from "../../io/NonBlockingOpen.js"
import { isValidReceiptReference, type ReceiptReference } from "../../protocol/Head.js"
import { isoTimestampOf } from "../../protocol/internal/IsoTimestamp.js"
import { isObjectRecord, memberOf, stringCoercionOf } from "../../protocol/internal/JsonShape.js"
import { decodeUtf8 } from "../../protocol/internal/Utf8.js"
import { claimExpired, parseClaim, settledReceiptRef } from "../../protocol/JobClaim.js"
import { MAX_CLAIM_BYTES } from "../../protocol/Limits.js"
import { readReceiptReference } from "../read/SidecarReader.js"
import { type ClaimRead, readClaim } from "../write/JobClaims.js"
import { type AuditFinding, finding } from "./AuditFinding.js"
import { clipNullableField, describeError, describeJson } from "./ReportFields.js"

/** A well-formed receipt pointer, as reported. @category models @since 0.1.0 */
export interface ReportedReceiptRef {
  readonly receiptOffset: number
  readonly receiptLength: number
  readonly receiptHash: string
}

/** How a settled claim's receipt pointer checked out. @category models @since 0.1.0 */
export type PointerStatus = "verified" | "invalid" | "orphan"

/**
 * One job claim as the audit read it.
 *
 * **Details**
 *
 * `jobId` comes from the file name. `expired` and `expiresAt` are set for
 * active claims, `receiptRef`, `pointer` and `sidecar` (where its receipt
 * was found) for settled ones. `receiptRef` is the claim's pointer when it is
 * well formed (offset, length, hash), else `null`; strings copied from the
 * file are cut to `MAX_FIELD_CHARS`. Lease tokens are never reported.
 *
 * @category models
 * @since 0.1.0
 */
export interface ClaimReport {
  readonly path: string
  readonly jobId: string
  readonly state: "active" | "settled" | "invalid" | "unreadable"
  readonly claimedAt: string | null
  readonly leaseMs: number | null
  readonly expiresAt: string | null
  readonly expired: boolean | null
  readonly receiptRef: ReportedReceiptRef | null
  readonly pointer: PointerStatus | null
  readonly sidecar: string | null
  readonly detail: string | null
}

/** One claim as inspected: its report, what is wrong with it, and a settled claim's pointer. @category models @since 0.1.0 */
export interface InspectedClaim {
  readonly report: ClaimReport
  readonly findings: ReadonlyArray<AuditFinding>
  /** A settled claim's `receiptRef` as found, for the pointer check. */
  readonly receiptRef?: unknown
}

/** No findings: one array shared by the tens of thousands of claims an audit holds that have none. */
const NO_FINDINGS: ReadonlyArray<AuditFinding> = Object.freeze([])

/** The pointer to report: only a well-formed one, and only its three fields. */
const reportedReceiptRef = (ref: unknown): ReportedReceiptRef | null => {
  if (!isValidReceiptReference(ref)) return null
  // The hash passed validation after string conversion, as the seed tests it.
  const receiptHash = stringCoercionOf(memberOf(ref, "receiptHash"))
  return receiptHash === undefined
    ? null
    : { receiptOffset: ref.receiptOffset, receiptLength: ref.receiptLength, receiptHash }
}

const emptyClaim = (path: string, jobId: string): ClaimReport => ({
  path,
  jobId,
  state: "invalid",
  claimedAt: null,
  leaseMs: null,
  expiresAt: null,
  expired: null,
  receiptRef: null,
  pointer: null,
  sidecar: null,
  detail: null
})

const invalidClaim = (path: string, jobId: string, detail: string): InspectedClaim => ({
  report: { ...emptyClaim(path, jobId), detail },
  findings: [finding("claim_invalid", "damage", path, detail, { jobId })]
})

/** Reads one claim file; `undefined` when it was released while the audit ran. */
const inspectClaim = (
  fs: FileSystem,
  path: string,
  jobId: string,
  now: number
): Effect.Effect<InspectedClaim | undefined> => {
  const judged = (read: ClaimRead): InspectedClaim | undefined => {
    if (read._tag === "Absent") return undefined
    if (read._tag === "Torn") {
      if (read.unreadable !== undefined) {
        const detail = `is ${read.unreadable}; it counts as in flight until its lease has passed`
        return {
          report: { ...emptyClaim(path, jobId), state: "unreadable", detail },
          findings: [finding("claim_unreadable", "damage", path, detail, { jobId })]
        }
      }
      return invalidClaim(path, jobId, "empty or unparsable (a writer crashed while writing it)")
    }
    const claim = read.claim
    if (!isObjectRecord(claim)) return invalidClaim(path, jobId, "not a JSON object")
    if (claim.jobId !== jobId) return invalidClaim(path, jobId, "its jobId does not match its file name")
    if (claim.state === "active") {
      const claimedAt = typeof claim.claimedAt === "string" ? claim.claimedAt : null
      const leaseMs = typeof claim.leaseMs === "number" ? claim.leaseMs : null
      const start = claimedAt === null ? Number.NaN : Date.parse(claimedAt)
      if (!Number.isFinite(start) || leaseMs === null || !Number.isFinite(leaseMs)) {
        return invalidClaim(path, jobId, "an active claim without a usable claimedAt and leaseMs never expires")
      }
      const expired = claimExpired(claim, now)
      const expiresAt = Number.isFinite(start + leaseMs) && Math.abs(start + leaseMs) <= 8.64e15
        ? isoTimestampOf(start + leaseMs)
        : null
      const report: ClaimReport = {
        ...emptyClaim(path, jobId),
        state: "active",
        claimedAt: clipNullableField(claimedAt),
        leaseMs,
        expiresAt,
        expired
      }
      return {
        report,
        findings: expired
          ? [finding(
            "claim_expired",
            "notice",
            path,
            `lease ran out at ${expiresAt ?? "an unrepresentable time"}; the next reserve takes the job over`,
            { jobId }
          )]
          : []
      }
    }
    if (claim.state === "settled") {
      const receiptRef = settledReceiptRef(claim)
      if (receiptRef === undefined) {
        return invalidClaim(path, jobId, "a settled claim without a receiptRef keeps its job in flight forever")
      }
      return {
        report: { ...emptyClaim(path, jobId), state: "settled", receiptRef: reportedReceiptRef(receiptRef) },
        findings: NO_FINDINGS,
        receiptRef
      }
    }
    return invalidClaim(path, jobId, `its state is ${describeJson(claim.state)}, not "active" or "settled"`)
  }
  // Made only when needed: in an audit of tens of thousands of claims,
  // building this pipeline for each was most of what the claims allocated.
  const throughEffects = () =>
    readClaim(fs, path).pipe(
      Effect.map(judged),
      Effect.catch((error) =>
        Effect.succeed<InspectedClaim>({
          report: { ...emptyClaim(path, jobId), state: "unreadable", detail: describeError(error) },
          findings: [finding("claim_unreadable", "damage", path, describeError(error), { jobId })]
        })
      )
    )
  const readSmall = smallRegularReadOf(fs)
  if (readSmall === undefined) return throughEffects()
  // The common case in one synchronous read, with the refusals `readClaim`
  // makes; a claim that does not parse is read again by `readClaim`, which
  // dates it by its file and says why.
  return Effect.suspend(() => {
    const read = readSmall(path, { limit: MAX_CLAIM_BYTES, noFollow: true })
    if (read === undefined || read.bytes.length !== read.size) return throughEffects()
    const parsed = parseClaim(decodeUtf8(read.bytes))
    return parsed._tag === "Parsed" ? Effect.succeed(judged(parsed)) : throughEffects()
  })
}

/**
 * Inspects one entry of `jobs-v4` named like a claim: a file (or a symlink,
 * which the claim read refuses to follow) is read; anything else is
 * reported unreadable. `undefined` when the claim was released while the
 * audit ran.
 *
 * @category audit
 * @since 0.1.0
 */
export const inspectClaimEntry = (
  fs: FileSystem,
  path: string,
  jobId: string,
  entryType: string,
  now: number
): Effect.Effect<InspectedClaim | undefined> =>
  entryType === "File" || entryType === "SymbolicLink"
    ? inspectClaim(fs, path, jobId, now)
    : Effect.succeed({
      report: { ...emptyClaim(path, jobId), state: "unreadable", detail: "not a regular file" },
      findings: [finding("claim_unreadable", "damage", path, `is a ${entryType.toLowerCase()}, not a file`, { jobId })]
    })

/**
 * A valid receipt of a claim's job, as the audit's scan found it: the
 * sidecar, where the receipt's line lies, its length (newline included) and
 * the SHA-256 of its bytes.
 *
 * @category models
 * @since 0.1.0
 */
export interface KnownReceipt {
  readonly sidecar: string
  readonly offset: number
  readonly length: number
  readonly hash: string
}

/** A claim's report after its pointer check, and what the check found. @category models @since 0.1.0 */
export interface CheckedClaim {
  readonly report: ClaimReport
  readonly findings: ReadonlyArray<AuditFinding>
}

/** The pointer names exactly this line, and its hash: reading it back would verify. */
const namesLine = (ref: ReceiptReference, known: KnownReceipt): boolean =>
  ref.receiptOffset === known.offset && ref.receiptLength === known.length && ref.receiptHash === known.hash

/**
 * Checks a settled claim's receipt pointer against `candidates`, the
 * sidecars that hold a receipt of its job: `verified` in the first one it
 * verifies in, `invalid` when it verifies in none, `orphan` when there is
 * none. A claim that is not settled is reported as inspected.
 *
 * **Details**
 *
 * `known` are receipts of the claim's job the caller has validated and
 * hashed (the audit's scan); a pointer that names one of them exactly is
 * verified in its sidecar without reading it. Every other candidate is
 * read: a range that is not one whole line can verify too.
 *
 * @category audit
 * @since 0.1.0
 */
export const checkClaimPointer = (
  fs: FileSystem,
  inspected: InspectedClaim,
  candidates: ReadonlyArray<string>,
  known: ReadonlyArray<KnownReceipt> = []
): Effect.Effect<CheckedClaim> => {
  const { report } = inspected
  if (report.state !== "settled") return Effect.succeed({ report, findings: NO_FINDINGS })
  if (candidates.length === 0) {
    return Effect.succeed({
      report: { ...report, pointer: "orphan" },
      findings: [finding(
        "claim_orphan",
        "damage",
        report.path,
        "settled, but no sidecar under the root holds a receipt of this job; reserving it fails",
        { jobId: report.jobId }
      )]
    })
  }
  const ref = inspected.receiptRef
  const valid = isValidReceiptReference(ref)
  const scanned = (sidecar: string) =>
    valid && known.some((receipt) => receipt.sidecar === sidecar && namesLine(ref, receipt))
  const verified = (sidecar: string): CheckedClaim => ({
    report: { ...report, pointer: "verified", sidecar },
    findings: NO_FINDINGS
  })
  // The common case, answered without a generator: tens of thousands of
  // claims each pointing at a line of the first sidecar of its job.
  if (scanned(candidates[0])) return Effect.succeed(verified(candidates[0]))
  return Effect.gen(function*() {
    for (const sidecar of candidates) {
      if (scanned(sidecar)) return verified(sidecar)
      const record = yield* readReceiptReference(fs, sidecar, ref, false).pipe(
        Effect.catch(() => Effect.succeed(undefined))
      )
      if (record !== undefined && record.jobId === report.jobId) return verified(sidecar)
    }
    return {
      report: { ...report, pointer: "invalid", sidecar: candidates[0] },
      findings: [finding(
        "claim_pointer_invalid",
        "damage",
        report.path,
        `receiptRef does not verify against ${candidates.join(", ")}; reserving this job fails`,
        { jobId: report.jobId }
      )]
    } satisfies CheckedClaim
  })
}
