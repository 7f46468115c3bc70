/**
 * Settling an acquired job: committing its receipt under the sidecar's
 * commit lock, fenced by the lease.
 *
 * Under the lock: the claim must still hold this reservation's lease token
 * (else `LeaseFenced`), the `afterLeaseValidated` hook runs, the Session is
 * read again now, the receipt and then a head (`CurrentHead`) are appended
 * and fsynced in one write (`SidecarAppend`), the lease is checked again,
 * and only then is the claim replaced by the settled claim pointing at the
 * receipt by offset, length and hash. (The settled claim is written to its
 * private temp file while the append is being fsynced, so the lock waits
 * for the two fsyncs at once; it becomes the claim only by the rename that
 * follows the second lease check, and is removed if that check fails.)
 *
 * Guarantees:
 * - The claims directory is fsynced before the receipt is appended, so no
 *   power cut keeps the receipt and loses the active claim that lets a
 *   takeover find it. A sidecar the append created has its directory
 *   fsynced before the settled claim can point into it.
 * - When `settle` returns, receipt and head are fsynced in the sidecar, and
 *   the settled claim has been renamed into place and its directory fsynced
 *   (that fsync starts right after the rename and is awaited once the lock
 *   is given back, so the lock is not held across it and the release runs
 *   while it is in flight).
 * - Past the hook nothing is interruptible: an interruption between the
 *   append and the settled claim would strand a receipt.
 * - On a failure while still the owner, the claim is deleted so the job can
 *   be retried at once, unless the receipt may already be in the sidecar:
 *   then the settlement is finished if it is there, and the claim left for
 *   the next attempt or a takeover if the sidecar cannot even be searched.
 * - An earlier attempt of the same lease that appended its receipt and then
 *   failed is finished, never appended again (`SettlementRecovery`).
 * - The receipt is validated exactly (its schema, its `jobId` set to the
 *   reservation's, at most 48 KiB) before anything is locked or written.
 *
 * On a crash, the sidecar can end with an unterminated line (readers ignore
 * it) or with a receipt no settled claim points at yet; `reserve` completes
 * such a settlement when it takes the expired claim over.
 *
 * @since 0.1.0
 */
import { Effect, Fiber, Option } from "effect"
import type { SecureRandom } from "effect/crypto/SecureRandom"
import type { PlatformError } from "effect/PlatformError"
import { sha256Hex } from "../../protocol/CanonicalJson.js"
import { isObjectRecord } from "../../protocol/internal/JsonShape.js"
import { makeSettledClaim } from "../../protocol/JobClaim.js"
import { encodeJsonLine } from "../../protocol/JsonLine.js"
import { MAX_HEAD_BYTES, MAX_RECEIPT_BYTES } from "../../protocol/Limits.js"
import type { Receipt, ReceiptInput } from "../../protocol/Receipt.js"
import { explainSummaryReceipt, validateSummaryReceipt } from "../../protocol/SummaryReceipt.js"
import { explainTitleReceipt, validateTitleReceipt } from "../../protocol/TitleReceipt.js"
import {
  HeadTooLarge,
  LeaseFenced,
  NotRegularFile,
  ReceiptInvalid,
  ReceiptTooLarge,
  ReceiptTypeUnsupported,
  ReservationNotAcquired,
  SettleHookFailed,
  type StoreIo,
  storeIo
} from "../Errors.js"
import type { StoreContext } from "../StoreContext.js"
import { headAfter, isSemanticCurrent } from "./CurrentHead.js"
import { syncDirectory } from "./DurableFile.js"
import { discardClaim, installClaim, prepareClaim, type PreparedClaim, removeClaim } from "./JobClaims.js"
import { ensurePrivateDirectories } from "./PrivateDirectory.js"
import { type Acquired, ownedClaim, owns, rootOf, settledAt } from "./Reservation.js"
import { completeSettlement, receiptSinceClaim } from "./SettlementRecovery.js"
import { appendToSidecar } from "./SidecarAppend.js"

const encoder = new TextEncoder()

/** Test hooks of `settle`, for reproducing races deterministically. @category models @since 0.1.0 */
export interface SettleHooks {
  /** Runs under the commit lock right after the lease was found still owned. */
  readonly afterLeaseValidated?: Effect.Effect<void, unknown> | undefined
}

/** Options of `settle`. @category models @since 0.1.0 */
export interface SettleOptions {
  readonly hooks?: SettleHooks | undefined
}

/** The receipt as it will be settled, and its line; fails for anything the protocol would not write. */
const validateForSettle = Effect.fnUntraced(function*(reservation: Acquired, receipt: ReceiptInput) {
  // Typed for TypeScript callers, but a plain caller can pass anything: check it all.
  const candidate: Record<string, unknown> = { ...receipt, jobId: reservation.jobId }
  if (candidate.type !== "rarebit_summary" && candidate.type !== "rarebit_title") {
    return yield* new ReceiptTypeUnsupported({ type: candidate.type })
  }
  const summary = candidate.type === "rarebit_summary"
  const validation = summary ? validateSummaryReceipt(candidate) : validateTitleReceipt(candidate)
  if (!validation.valid) {
    return yield* new ReceiptInvalid({
      kind: summary ? "Summary" : "Title",
      status: candidate.status,
      keys: Object.keys(candidate).sort(),
      reason: (summary ? explainSummaryReceipt(candidate) : explainTitleReceipt(candidate)) ?? "invalid"
    })
  }
  const settled: Receipt = validation.record
  const line = encoder.encode(`${JSON.stringify(settled)}\n`)
  if (line.length > MAX_RECEIPT_BYTES) return yield* new ReceiptTooLarge({ bytes: line.length })
  return { settled, line }
})

/**
 * `settle`: commits an acquired job's receipt. The reservation's `jobId` is
 * written over the receipt's, so the receipt may leave it out.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeSettle = (ctx: StoreContext) =>
  Effect.fn("RarebitStore.settle")(function*(
    reservation: Acquired,
    receipt: ReceiptInput,
    options: SettleOptions = {}
  ) {
    const { fs, path } = ctx
    // The type says Acquired, but plain callers and casts can pass any outcome.
    if (!isObjectRecord(reservation) || reservation._tag !== "Acquired") return yield* new ReservationNotAcquired()
    const sidecar = reservation.materializationPath
    // As the reference does first: the sidecar's directory is made (its
    // dirname fails on a path that is not a string, as the reference's does).
    // The claim's directory is only checked, before anything is written there:
    // the reference does not make it.
    const root = rootOf(ctx, reservation)
    yield* ensurePrivateDirectories(fs, path, root, [path.dirname(sidecar)])
    if (root !== undefined && typeof reservation.claimPath === "string") {
      yield* ensurePrivateDirectories(fs, path, root, [path.dirname(reservation.claimPath)], { create: false })
    }
    const { line, settled } = yield* validateForSettle(reservation, receipt)
    // Hashed before the lock is taken: the receipt's bytes are fixed by now.
    const receiptHash = sha256Hex(line)
    // Made only when needed: a hand-made reservation may carry a claim path
    // that is not a string, which the claim read reports first.
    const fenced = () => new LeaseFenced({ jobId: reservation.jobId, claimPath: reservation.claimPath })

    // Set just before the append: from then on the receipt may be in the
    // sidecar, and a failure must not give the job back unless it is not.
    let appendAttempted = false
    // Lazy: a hand-made reservation's claim path may not be a string.
    const syncClaimsDirectory = Effect.suspend(() =>
      syncDirectory(fs, path.dirname(reservation.claimPath)).pipe(
        Effect.mapError(storeIo("sync claims directory", reservation.claimPath))
      )
    )
    // The fsync of the settled claim's rename, once started.
    let claimsSynced: Fiber.Fiber<void, StoreIo> | undefined
    // The active claim must be durable before the receipt can be: were its
    // name lost to a power cut with the receipt kept, a new reserve would run
    // the job again. Started now and awaited just before the append, so it
    // runs while the lock is being taken.
    const claimDurable = typeof reservation.claimPath === "string"
      ? yield* Effect.forkChild(syncClaimsDirectory)
      : undefined

    const locked = Effect.gen(function*() {
      const claim = yield* ownedClaim(ctx, reservation)
      if (claim === undefined) return yield* fenced()
      const hook = options.hooks?.afterLeaseValidated
      if (hook !== undefined) yield* Effect.mapError(hook, (cause) => new SettleHookFailed({ cause }))
      return yield* commit(claim)
    })

    // Past the hook nothing is interruptible: an interruption between the
    // append and the settled claim would otherwise strand a receipt.
    const commit = (claim: unknown) =>
      Effect.uninterruptible(Effect.gen(function*() {
        const existing = yield* fs.lstat(sidecar).pipe(
          Effect.map(Option.some),
          Effect.catchReason("PlatformError", "NotFound", () => Effect.succeed(Option.none())),
          Effect.mapError(storeIo("stat sidecar", sidecar))
        )
        if (Option.isSome(existing) && existing.value.type !== "File") {
          return yield* new NotRegularFile({ path: sidecar })
        }
        // The reference re-derives the sidecar path from the Session file here,
        // so a reservation whose Session file is not a valid one fails the same way
        // (by its canonical spelling, as at reserve).
        const canonical = yield* ctx.identify(reservation.sessionFile, reservation)
        yield* ctx.sidecarPath(canonical.sessionFile, canonical.location)
        // An earlier attempt of this lease may have appended its receipt and
        // then failed: finish that settlement instead of appending again.
        const earlier = yield* receiptSinceClaim(ctx, reservation, claim)
        if (earlier !== undefined) {
          yield* completeSettlement(ctx, reservation, reservation.claimPath, reservation.leaseToken, earlier)
          return settledAt(earlier.record, sidecar)
        }
        const native = yield* ctx.observeNative(canonical.sessionFile, canonical.location)
        const current = yield* ctx.readSidecar(sidecar)
        const becomesCurrent = isSemanticCurrent(native, current, settled)
        if (claimDurable !== undefined) yield* Fiber.join(claimDurable)
        appendAttempted = true
        const claimIo = storeIo("write job claim", reservation.claimPath)
        // The settled claim is written to its temp file while the append is
        // fsynced (it needs only the offset), and renamed into place only
        // after the fsync and the second lease check: one wait for both
        // fsyncs under the lock instead of one after the other.
        let prepared: PreparedClaim | undefined
        yield* appendToSidecar(fs, sidecar, (offset) => {
          const head = headAfter(becomesCurrent, current, settled.sessionId, offset, line)
          const headLine = head === null ? new Uint8Array(0) : encodeJsonLine(head)
          if (headLine.length > MAX_HEAD_BYTES) return Effect.fail(new HeadTooLarge({ bytes: headLine.length }))
          const bytes = new Uint8Array(line.length + headLine.length)
          bytes.set(line, 0)
          bytes.set(headLine, line.length)
          return Effect.succeed(bytes)
        }, (receiptOffset) => {
          const receiptRef = { receiptOffset, receiptLength: line.length, receiptHash }
          return prepareClaim(
            fs,
            reservation.claimPath,
            makeSettledClaim(reservation.jobId, reservation.leaseToken, receiptRef)
          ).pipe(
            Effect.tap((claim) => Effect.sync(() => (prepared = claim))),
            Effect.asVoid,
            Effect.mapError(claimIo)
          )
        }).pipe(Effect.onError(() => Effect.suspend(() => (prepared ? discardClaim(fs, prepared) : Effect.void))))
        const settledClaim = prepared!
        // A sidecar this append created is durable only once its directory
        // is fsynced, and must be before a settled claim can point into it.
        if (Option.isNone(existing)) {
          yield* syncDirectory(fs, path.dirname(sidecar)).pipe(
            Effect.mapError(storeIo("sync sidecar directory", sidecar)),
            Effect.onError(() => discardClaim(fs, settledClaim))
          )
        }
        if (!(yield* Effect.onError(owns(ctx, reservation), () => discardClaim(fs, settledClaim)))) {
          yield* discardClaim(fs, settledClaim)
          return yield* fenced()
        }
        yield* installClaim(fs, settledClaim).pipe(Effect.mapError(claimIo))
        // Started now, awaited after the lock is given back: the release
        // runs while this fsync is in flight, and the lock is not held for it.
        claimsSynced = yield* Effect.forkChild(syncClaimsDirectory)
        return settledAt(settled, sidecar)
      }))

    // On failure while still the owner, the claim is deleted so the job can
    // be retried at once instead of after the lease — unless the receipt may
    // already be in the sidecar: if it is there, the settlement is finished;
    // if the sidecar cannot even be searched, the claim stays for the next
    // attempt or a takeover to finish.
    const cleanup = Effect.suspend(() =>
      ownedClaim(ctx, reservation).pipe(
        Effect.flatMap((claim): Effect.Effect<void, PlatformError | StoreIo, SecureRandom> => {
          if (claim === undefined) return Effect.void
          if (!appendAttempted) return removeClaim(fs, reservation.claimPath)
          return Effect.flatMap(
            receiptSinceClaim(ctx, reservation, claim),
            (earlier): Effect.Effect<void, PlatformError | StoreIo, SecureRandom> =>
              earlier === undefined
                ? removeClaim(fs, reservation.claimPath)
                : completeSettlement(ctx, reservation, reservation.claimPath, reservation.leaseToken, earlier)
          )
        }),
        Effect.ignore
      )
    )
    const result = yield* ctx.withLock(sidecar, Effect.onError(locked, () => cleanup))
    // The settled claim is visible since its rename; making the rename
    // durable does not need the lock. (Were it lost to a power cut, the
    // claim would be the active one again, and the receipt after its
    // `sidecarOffset` settles it on the next attempt or takeover.) Its
    // failure is still reported: the caller learns the settlement may not
    // survive a power cut, and a retry answers `Duplicate` once it is there.
    // (An earlier attempt's receipt, finished by `completeSettlement`, was
    // made durable there.)
    if (claimsSynced !== undefined) yield* Fiber.join(claimsSynced)
    return result
  }, ctx.withTokens)

/**
 * Failures of `settle`, as its implementation can fail.
 *
 * @category errors
 * @since 0.1.0
 */
export type SettleError = Effect.Error<ReturnType<ReturnType<typeof makeSettle>>>
