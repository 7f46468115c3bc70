/**
 * Reserving a job, and giving a reservation back.
 *
 * `reserve` claims a job with an exclusive claim file and a lease: the
 * outcome is `Acquired` (this worker holds the lease, and carries what
 * settle and release need: the claim it owns by lease token, and where the
 * receipt goes), `Duplicate` (the job was already settled; its verified
 * receipt is returned) or `InFlight` (another worker holds a live lease).
 * `release` deletes the claim if this reservation still owns it.
 *
 * Guarantees:
 * - `Acquired`: the active claim exists on disk, whole (`JobClaims`), and
 *   holds a fresh lease token from the store's `SecureRandom`. The caller's
 *   `onAcquired` runs in the same uninterruptible step that writes it, so a
 *   release attached there cannot be separated from the claim.
 * - A `Duplicate` is answered only after its receipt pointer verifies
 *   against the sidecar; a pointer that does not is `HeadInvalid`, never a
 *   duplicate, and never a reason to run the job again.
 * - An expired claim is taken over only under the commit lock, after
 *   reading it again (another worker may have taken it over or settled it
 *   meanwhile), and a crashed settlement found in the sidecar is completed
 *   instead (`SettlementRecovery`).
 * - Every directory a job writes into is checked from the rarebit root down
 *   before anything is written there (`PrivateDirectory`).
 * - `release` of a reservation that owns its claim takes the lock, and
 *   settles the job if its lease already appended a receipt rather than
 *   giving it back to run again. A claim this lease no longer owns is never
 *   touched.
 *
 * @since 0.1.0
 */
import { Clock, Effect } from "effect"
import { SHA256_HEX_PATTERN } from "../../protocol/CanonicalJson.js"
import { claimExpired, claimIsActiveFor, makeActiveClaim, settledReceiptRef } from "../../protocol/JobClaim.js"
import type { Receipt } from "../../protocol/Receipt.js"
import type { NativeObservation } from "../../state/ArtifactState.js"
import { HeadInvalid, InvalidJobId, InvalidLease, storeIo } from "../Errors.js"
import { claimPath as claimPathOf } from "../MirroredPath.js"
import { randomToken } from "../RandomToken.js"
import { readReceiptReference } from "../read/SidecarReader.js"
import { locate, type LocationOverrides } from "../StoreConfig.js"
import type { StoreContext } from "../StoreContext.js"
import { type ClaimRead, createClaimExclusive, readClaim, removeClaim, replaceClaim } from "./JobClaims.js"
import { ensurePrivateDirectories } from "./PrivateDirectory.js"
import {
  claimedSidecarOffset,
  completeSettlement,
  receiptSinceClaim,
  recoverSettlement,
  type ReservationLocation
} from "./SettlementRecovery.js"

export type { ReservationLocation }

/** This worker now holds the job's lease. @category models @since 0.1.0 */
export interface Acquired extends ReservationLocation {
  readonly _tag: "Acquired"
  readonly claimPath: string
  readonly leaseToken: string
  readonly native: NativeObservation | null
}

/** The job is settled; `record` is its verified receipt plus the sidecar `path`. @category models @since 0.1.0 */
export interface Duplicate extends ReservationLocation {
  readonly _tag: "Duplicate"
  readonly record: SettledReceipt
}

/** Another worker holds a live lease on the job. @category models @since 0.1.0 */
export interface InFlight extends ReservationLocation {
  readonly _tag: "InFlight"
}

/** The tagged result of `reserve`. @category models @since 0.1.0 */
export type Reservation = Acquired | Duplicate | InFlight

/**
 * A settled receipt as returned to callers: the receipt plus its sidecar
 * `path`. `R` narrows it to the receipt kind that was settled.
 *
 * @category models
 * @since 0.1.0
 */
export type SettledReceipt<R extends Receipt = Receipt> = R extends unknown ? R & { readonly path: string } : never

/** Options of `reserve` and `withJob`. @category models @since 0.1.0 */
export interface ReserveOptions extends LocationOverrides {
  /** The job's id: 64 lowercase hex digits (a SHA-256), e.g. from `rarebitJobIdentity`. */
  readonly jobId: string
  /** The Session JSONL file the job derives a receipt for. */
  readonly sessionFile: string
  readonly native?: NativeObservation | null | undefined
  /** Lease length; defaults to the layer's `leaseMs`. */
  readonly leaseMs?: number | undefined
  /** The reservation time in epoch milliseconds; defaults to `Clock`. */
  readonly now?: number | undefined
}

/** Whether `jobId` is a job id `reserve` accepts: 64 lowercase hex digits. @internal */
export const jobIdValid = (jobId: unknown): jobId is string =>
  typeof jobId === "string" && SHA256_HEX_PATTERN.test(jobId)

/** Whether `leaseMs` is a lease `reserve` accepts: a finite number of at least 1 ms. @internal */
export const leaseValid = (leaseMs: unknown): leaseMs is number =>
  typeof leaseMs === "number" && Number.isFinite(leaseMs) && leaseMs >= 1

/** A receipt as `settle` returns it: with the sidecar it was appended to. @internal */
export const settledAt = (receipt: Receipt, path: string): SettledReceipt => ({ ...receipt, path })

/** The `Duplicate` outcome for a job whose verified receipt is `record`. */
const duplicateOf = (location: ReservationLocation, record: Receipt): Duplicate => ({
  ...location,
  _tag: "Duplicate",
  record: settledAt(record, location.materializationPath)
})

/**
 * Where a reservation's directories are checked from. A plain caller's
 * reservation may lack the root (the claim's path says where it is) or be
 * hand-made with paths that are not strings: those are left to the steps
 * that use them, which fail as the reference's do.
 *
 * @internal
 */
export const rootOf = (ctx: StoreContext, reservation: Acquired): string | undefined =>
  typeof reservation.rarebitRoot === "string"
    ? reservation.rarebitRoot
    : typeof reservation.claimPath === "string"
    ? ctx.path.dirname(ctx.path.dirname(reservation.claimPath))
    : undefined

/**
 * The claim, if it is still active for this reservation's lease token.
 *
 * @internal
 */
export const ownedClaim = (ctx: StoreContext, reservation: Acquired) =>
  readClaim(ctx.fs, reservation.claimPath).pipe(
    Effect.map((read) =>
      read._tag === "Parsed" && claimIsActiveFor(read.claim, reservation.leaseToken) ? read.claim : undefined
    ),
    Effect.mapError(storeIo("read job claim", reservation.claimPath))
  )

/** Whether this reservation still owns its claim. @internal */
export const owns = (ctx: StoreContext, reservation: Acquired) =>
  Effect.map(ownedClaim(ctx, reservation), (claim) => claim !== undefined)

/** A settled claim's job as a `Duplicate`, once its receipt pointer verifies; `undefined` for any other claim. */
const settledDuplicate = Effect.fnUntraced(
  function*(ctx: StoreContext, read: ClaimRead, location: ReservationLocation, claimPath: string) {
    const ref = read._tag === "Parsed" ? settledReceiptRef(read.claim) : undefined
    if (ref === undefined) return undefined
    // A sidecar that is not a regular file is reported as such, as the
    // reference does; a sidecar that is gone means the pointer does not
    // verify; any other I/O failure is just that.
    const record = yield* readReceiptReference(ctx.fs, location.materializationPath, ref, false).pipe(
      Effect.catchReason("PlatformError", "NotFound", () => Effect.succeed(undefined)),
      Effect.catchTag(
        "PlatformError",
        (error) => Effect.fail(storeIo("verify settled receipt pointer", location.materializationPath)(error))
      )
    )
    if (record === undefined) {
      return yield* new HeadInvalid({ claimPath, materializationPath: location.materializationPath })
    }
    return duplicateOf(location, record)
  }
)

/** Whether a claim's lease ran out; a torn one is dated by its file. */
const expired = (read: ClaimRead, now: number, leaseMs: number) =>
  read._tag === "Parsed"
    ? claimExpired(read.claim, now)
    : read._tag === "Torn" && now - read.modifiedAtMs > leaseMs

/**
 * `reserve`, running `onAcquired` in the same uninterruptible step that
 * writes the claim, so a caller can attach its release before any
 * interruption can separate the two.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeReserve = (ctx: StoreContext) =>
  Effect.fn("RarebitStore.reserve")(function*<R>(
    options: ReserveOptions,
    onAcquired: (acquired: Acquired) => Effect.Effect<void, never, R>
  ) {
    const { fs, path } = ctx
    const { jobId } = options
    if (!jobIdValid(jobId)) return yield* new InvalidJobId({ jobId })
    const leaseMs = options.leaseMs ?? ctx.config.leaseMs
    if (!leaseValid(leaseMs)) return yield* new InvalidLease({ leaseMs })
    const location = locate(ctx.config, options)
    // The sidecar, hence its lock queue, of the canonical spelling; the reservation keeps the caller's.
    const canonical = yield* ctx.identify(options.sessionFile, location)
    const sidecar = yield* ctx.sidecarPath(canonical.sessionFile, canonical.location)
    const now = options.now ?? (yield* Clock.currentTimeMillis)
    const claimPath = claimPathOf(path, location.rarebitRoot, jobId)
    // Every directory the job writes into (its claim's and its sidecar's, in
    // the reference's order), checked from the rarebit root down: one lstat
    // each when they are already there and private; refused when one is a
    // symlink or someone else's.
    yield* ensurePrivateDirectories(fs, path, location.rarebitRoot, [path.dirname(claimPath), path.dirname(sidecar)])
    const reservationLocation: ReservationLocation = {
      jobId,
      materializationPath: sidecar,
      sessionFile: options.sessionFile,
      rarebitRoot: location.rarebitRoot,
      sessionRoot: location.sessionRoot,
      allowExternalSession: location.allowExternalSession
    }
    const acquired: Acquired = {
      _tag: "Acquired",
      ...reservationLocation,
      claimPath,
      leaseToken: yield* randomToken(24),
      native: options.native ?? null
    }
    const inFlight: InFlight = { _tag: "InFlight", ...reservationLocation }
    const activeClaim = (sidecarOffset: number | undefined) =>
      makeActiveClaim(jobId, acquired.leaseToken, now, leaseMs, sidecarOffset)
    const io = storeIo("write job claim", claimPath)

    // Under contention most reserves find a claim already there. Reading it
    // first answers a duplicate or an in-flight job with one read, where
    // trying the exclusive create first costs a temp file, its fsync and a
    // failed link. A claim that appears after this read still makes the
    // create fail, and is read below.
    let first = yield* readClaim(fs, claimPath).pipe(Effect.mapError(io))
    if (first._tag === "Absent") {
      const created = yield* claimedSidecarOffset(ctx, sidecar).pipe(
        Effect.flatMap((offset) =>
          createClaimExclusive(fs, claimPath, activeClaim(offset)).pipe(
            Effect.mapError(io),
            Effect.tap((claimed) => (claimed ? onAcquired(acquired) : Effect.void)),
            Effect.uninterruptible
          )
        )
      )
      if (created) return acquired
      first = yield* readClaim(fs, claimPath).pipe(Effect.mapError(io))
    }
    const duplicate = yield* settledDuplicate(ctx, first, reservationLocation, claimPath)
    if (duplicate !== undefined) return duplicate
    if (!expired(first, now, leaseMs)) return inFlight

    // Takeover: only under the lock, and only after reading the claim again,
    // since another worker may have taken it over or settled it meanwhile.
    return yield* ctx.withLock(
      sidecar,
      Effect.gen(function*() {
        const again = yield* readClaim(fs, claimPath).pipe(Effect.mapError(io))
        const settled = yield* settledDuplicate(ctx, again, reservationLocation, claimPath)
        if (settled !== undefined) return settled
        if (!expired(again, now, leaseMs)) return inFlight
        const recovered = yield* recoverSettlement(ctx, again, reservationLocation, claimPath)
        if (recovered !== undefined) return duplicateOf(reservationLocation, recovered)
        const offset = yield* claimedSidecarOffset(ctx, sidecar)
        // No directory fsync: a takeover a power cut loses brings back the
        // expired claim, which frees the job again; settle makes the claim
        // durable before it appends a receipt.
        yield* replaceClaim(fs, path, claimPath, activeClaim(offset), { syncDirectory: false }).pipe(
          Effect.mapError(io),
          Effect.andThen(onAcquired(acquired)),
          Effect.uninterruptible
        )
        return acquired
      })
    )
  }, ctx.withTokens)

/**
 * `release`: deletes the claim if this reservation still owns it (after
 * settling the job if its lease already appended a receipt); does nothing
 * for other outcomes.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeRelease = (ctx: StoreContext) =>
  Effect.fn("RarebitStore.release")(function*(reservation: Reservation) {
    if (reservation._tag !== "Acquired") return
    const { fs, path } = ctx
    // Checked before the claim is even read: a planted symlink is refused, not read through.
    // Paths that are not strings are left to the lock and the claim read, which fail as the reference's do.
    const root = rootOf(ctx, reservation)
    const directories = [reservation.claimPath, reservation.materializationPath]
      .filter((file): file is string => typeof file === "string")
      .map((file) => path.dirname(file))
    if (root !== undefined) yield* ensurePrivateDirectories(fs, path, root, directories, { create: false })
    // A claim this lease does not own now can never be owned by it again
    // (tokens are unique), so only an owned claim is worth taking the lock for.
    if (!(yield* owns(ctx, reservation))) return
    yield* ctx.withLock(
      reservation.materializationPath,
      Effect.gen(function*() {
        const claim = yield* ownedClaim(ctx, reservation)
        if (claim === undefined) return
        // A receipt this lease already appended settles the job rather than
        // giving it back to run again.
        const earlier = yield* receiptSinceClaim(ctx, reservation, claim)
        if (earlier !== undefined) {
          return yield* completeSettlement(ctx, reservation, reservation.claimPath, reservation.leaseToken, earlier)
        }
        yield* removeClaim(fs, reservation.claimPath).pipe(
          Effect.mapError(storeIo("remove job claim", reservation.claimPath))
        )
      })
    )
  }, ctx.withTokens)

/**
 * Failures of `reserve`, as its implementation can fail.
 *
 * @category errors
 * @since 0.1.0
 */
export type ReserveError = Effect.Error<ReturnType<ReturnType<typeof makeReserve>>>

/**
 * Failures of `release`, as its implementation can fail.
 *
 * @category errors
 * @since 0.1.0
 */
export type ReleaseError = Effect.Error<ReturnType<ReturnType<typeof makeRelease>>>
