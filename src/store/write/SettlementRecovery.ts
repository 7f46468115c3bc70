/**
 * Finishing a settlement whose receipt is already in the sidecar, so a job
 * whose worker crashed (or failed) after appending its receipt is settled
 * once, not run twice.
 *
 * A worker appends its receipt (and a head) under the commit lock, then
 * marks its claim settled. A crash in between leaves the receipt in the
 * sidecar and the claim active. Our claims record the sidecar's size when
 * they were taken (`sidecarOffset`); only the claim's lease owner appends
 * its job's receipts, under the lock, so a receipt of the job found after
 * that offset was written for the current lease. Completing it appends a
 * head if the receipt should be current and is not (`CurrentHead`), then
 * writes the settled claim pointing at it.
 *
 * Guarantees:
 * - A claim without `sidecarOffset` (the reference's, or a torn one) cannot
 *   say which receipts came after it: a receipt of the job found there may
 *   belong to an earlier lease, so nothing is recovered and the job runs
 *   again, as under the reference.
 * - The search reads at most the last `RECOVERY_WINDOW_BYTES` of the
 *   sidecar, and verifies the receipt's bytes before pointing a claim at it.
 * - A sidecar that cannot be read fails the search (with the file system's
 *   own error): treating it as "no receipt" could run the job a second time.
 * - A head is appended only after the current head was seen: without it, a
 *   new head could bury a newer receipt.
 * - Every caller holds the sidecar's commit lock. The settled claim is
 *   renamed into place and its directory fsynced before the call returns.
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import { openRegular } from "../../io/RegularFile.js"
import { sha256Hex } from "../../protocol/CanonicalJson.js"
import { encodeHeadLine, headFor, type ReceiptReference } from "../../protocol/Head.js"
import { isObjectRecord } from "../../protocol/internal/JsonShape.js"
import { makeSettledClaim } from "../../protocol/JobClaim.js"
import { MAX_HISTORY_BYTES, MAX_HISTORY_RECORDS, MAX_RECEIPT_BYTES } from "../../protocol/Limits.js"
import type { Receipt } from "../../protocol/Receipt.js"
import { HistoryUnreadable, StoreIo, storeIo } from "../Errors.js"
import {
  type HistoryPage,
  type HistoryRecord,
  readReceiptReference,
  readSidecarHistoryPage
} from "../read/SidecarReader.js"
import type { StoreContext } from "../StoreContext.js"
import { isSemanticCurrent } from "./CurrentHead.js"
import { type ClaimRead, replaceClaim } from "./JobClaims.js"
import { appendToSidecar } from "./SidecarAppend.js"

/**
 * How far back `reserve` looks for a crashed settlement's receipt when the
 * claim does not say.
 *
 * @category constants
 * @since 0.1.0
 */
export const RECOVERY_WINDOW_BYTES = 4 * MAX_HISTORY_BYTES

/**
 * Where a reservation's files are. Defined here, where recovery needs it,
 * and re-exported by `Reservation`, so the two modules do not import each
 * other.
 *
 * @category models
 * @since 0.1.0
 */
export interface ReservationLocation {
  readonly jobId: string
  readonly materializationPath: string
  readonly sessionFile: string
  readonly rarebitRoot: string
  readonly sessionRoot: string
  readonly allowExternalSession: boolean
}

/** A job's receipt found in its sidecar, with the exact range it occupies. @category models @since 0.1.0 */
export interface FoundReceipt {
  readonly record: Receipt
  readonly receiptRef: ReceiptReference
}

/** Where a job's receipt is looked for: its sidecar, and the job. */
type JobLocation = Pick<ReservationLocation, "materializationPath" | "jobId">

/** Our claims' record of the sidecar size when they were taken, if present and sane. */
const sidecarOffsetOf = (claim: unknown): number | undefined => {
  const offset = isObjectRecord(claim) ? claim.sidecarOffset : undefined
  return typeof offset === "number" && Number.isSafeInteger(offset) && offset >= 0 ? offset : undefined
}

const sidecarSize = (ctx: StoreContext, sidecar: string) =>
  ctx.fs.stat(sidecar).pipe(
    Effect.map((info) => Number(info.size)),
    Effect.catchReason("PlatformError", "NotFound", () => Effect.succeed(0)),
    Effect.mapError(storeIo("stat sidecar", sidecar))
  )

/**
 * The offset a new claim records (`sidecarOffset`). It is only a hint for
 * recovery, never a reason to refuse: the reference does not look at the
 * sidecar when it reserves, so a sidecar path that cannot even be stat'ed
 * (too long, a NUL byte) still gets a claim, one without `sidecarOffset`,
 * and settle then fails on that path as the reference's does.
 *
 * @category readers
 * @since 0.1.0
 */
export const claimedSidecarOffset = (ctx: StoreContext, sidecar: string): Effect.Effect<number | undefined> =>
  Effect.catch(sidecarSize(ctx, sidecar), () => Effect.succeed(undefined))

/** The exact byte range of the line starting at `offset`. */
const receiptRefAt = (ctx: StoreContext, sidecar: string, offset: number) =>
  Effect.scoped(Effect.gen(function*() {
    const { file } = yield* openRegular(ctx.fs, sidecar, { flag: "r", followSymlinks: false })
    const bytes = Option.getOrElse(
      yield* file.readAlloc(MAX_RECEIPT_BYTES, { position: BigInt(offset) }),
      () => new Uint8Array(0)
    )
    const newline = bytes.indexOf(10)
    if (newline < 0) return undefined
    const line = bytes.subarray(0, newline + 1)
    return { receiptOffset: offset, receiptLength: line.length, receiptHash: sha256Hex(line) }
  })).pipe(Effect.mapError(storeIo("read sidecar", sidecar)))

/**
 * The last verified receipt of `jobId` appended at or after `fromOffset`,
 * looking back no further than `RECOVERY_WINDOW_BYTES` from `size`.
 */
const findJobReceipt = Effect.fnUntraced(
  function*(ctx: StoreContext, sidecar: string, jobId: string, fromOffset: number, size: number) {
    let offset: number | null = Math.max(fromOffset, size - RECOVERY_WINDOW_BYTES, 0)
    let found: HistoryRecord | undefined
    while (offset !== null && offset < size) {
      const page: HistoryPage = yield* readSidecarHistoryPage(ctx.fs, sidecar, offset, MAX_HISTORY_RECORDS)
      if (page.availability === "unreadable") {
        // The page says only that it could not read; reading the file
        // again says why (EACCES, EISDIR, ...), with the system's own error.
        const position = BigInt(offset)
        yield* Effect.scoped(
          Effect.flatMap(ctx.fs.open(sidecar, { flag: "r" }), (file) => file.readAlloc(1, { position }))
        ).pipe(Effect.mapError(storeIo("scan sidecar for a job's receipt", sidecar)))
        return yield* new StoreIo({
          operation: "scan sidecar for a job's receipt",
          path: sidecar,
          cause: new HistoryUnreadable({ path: sidecar, offset })
        })
      }
      if (page.availability !== "available") return undefined
      for (const entry of page.records) {
        if (entry.record.jobId === jobId) found = entry
      }
      offset = page.nextOffset
    }
    if (found === undefined) return undefined
    const receiptRef = yield* receiptRefAt(ctx, sidecar, found.offset)
    if (receiptRef === undefined) return undefined
    const record = yield* readReceiptReference(ctx.fs, sidecar, receiptRef, false).pipe(
      Effect.mapError((cause) => new StoreIo({ operation: "verify a job's receipt", path: sidecar, cause }))
    )
    return record === undefined ? undefined : ({ record, receiptRef } satisfies FoundReceipt)
  }
)

/**
 * The job's last receipt appended since `claim` was taken (an earlier,
 * failed attempt of the same lease, or a crashed worker's), if the claim
 * records where the sidecar ended then and anything was appended since.
 *
 * @category readers
 * @since 0.1.0
 */
export const receiptSinceClaim: (
  ctx: StoreContext,
  location: JobLocation,
  claim: unknown
) => Effect.Effect<FoundReceipt | undefined, StoreIo> = Effect.fnUntraced(function*(
  ctx: StoreContext,
  location: JobLocation,
  claim: unknown
) {
  const from = sidecarOffsetOf(claim)
  if (from === undefined) return undefined
  const size = yield* sidecarSize(ctx, location.materializationPath)
  if (from >= size) return undefined
  return yield* findJobReceipt(ctx, location.materializationPath, location.jobId, from, size)
})

/**
 * Appends a head for an already-written receipt if it is the semantic
 * current summary and the current head does not point at it.
 */
const appendHeadIfCurrent = Effect.fnUntraced(
  function*(ctx: StoreContext, location: ReservationLocation, found: FoundReceipt) {
    const current = yield* ctx.readSidecar(location.materializationPath)
    // Without having seen the current head, a new one could bury a newer receipt.
    if (current.diagnostics.reason === "sidecar_unreadable") return
    if (current.head?.receiptOffset === found.receiptRef.receiptOffset) return
    const native = yield* ctx.observeNative(location.sessionFile, location)
    if (!isSemanticCurrent(native, current, found.record)) return
    const head = headFor(found.record.sessionId, found.receiptRef)
    yield* appendToSidecar(ctx.fs, location.materializationPath, () => Effect.succeed(encodeHeadLine(head)))
  }
)

/**
 * Finishes a settlement whose receipt is already in the sidecar: a head if
 * it should be current and is not, then the settled claim of `leaseToken`.
 *
 * @category writers
 * @since 0.1.0
 */
export const completeSettlement = Effect.fnUntraced(function*(
  ctx: StoreContext,
  location: ReservationLocation,
  claimPath: string,
  leaseToken: string,
  found: FoundReceipt
) {
  yield* appendHeadIfCurrent(ctx, location, found)
  yield* replaceClaim(ctx.fs, ctx.path, claimPath, makeSettledClaim(location.jobId, leaseToken, found.receiptRef))
    .pipe(
      Effect.mapError(storeIo("write job claim", claimPath))
    )
})

/**
 * Completes the settlement of an expired claim being taken over, when its
 * receipt is already in the sidecar; the receipt it settled the job with,
 * or `undefined` when there is none to find (then the job runs again).
 *
 * @category writers
 * @since 0.1.0
 */
export const recoverSettlement = Effect.fnUntraced(function*(
  ctx: StoreContext,
  read: ClaimRead,
  location: ReservationLocation,
  claimPath: string
) {
  const claim = read._tag === "Parsed" && isObjectRecord(read.claim) ? read.claim : undefined
  if (claim === undefined || typeof claim.leaseToken !== "string") return undefined
  const found = yield* receiptSinceClaim(ctx, location, claim)
  if (found === undefined) return undefined
  yield* completeSettlement(ctx, location, claimPath, claim.leaseToken, found)
  return found.record
})
