/**
 * The Rarebit sidecar store as an Effect service.
 *
 * A Session's derived receipts live in an append-only sidecar; a head line
 * is the only thing that makes a receipt current. Workers reserve a job
 * (an exclusive claim with a lease), derive its receipt, and settle it under
 * the sidecar's commit lock: the lease is checked (a stale worker is
 * fenced), the receipt and a head are appended and fsynced, and only then is
 * the claim marked settled with a verified pointer to the receipt.
 *
 * What is durable when a call returns:
 * - `reserve` → `Acquired`: the active claim exists on disk, whole.
 * - `settle` → receipt: receipt and head are fsynced in the sidecar, and the
 *   settled claim has been renamed into place and its directory fsynced.
 * - `release`: the claim is gone (if this reservation still owned it).
 *
 * On a crash, the sidecar can end with an unterminated line (readers ignore
 * it) or with a receipt no settled claim points at yet; `reserve` completes
 * such a settlement when it takes the expired claim over, instead of running
 * the job twice.
 *
 * Files on disk are treated as hostile: every file is opened without
 * blocking and must be a regular file (`io/RegularFile`), and every
 * directory a job writes into is checked from the rarebit root down
 * (`PrivateDirectory`), so nothing found on disk makes an operation hang,
 * read without bound, or write outside the root.
 *
 * The store asks for `FileSystem`, `Path` and `SecureRandom`: lease and lock
 * tokens come from the `SecureRandom` it was built with, never from the
 * caller's `Random`, so a program that seeds `Random` cannot make two
 * workers share a token. Time comes from `Clock`. Tests swap all four.
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer, Option, Result, Stream } from "effect"
import { SecureRandom } from "effect/crypto/SecureRandom"
import { type File, FileSystem } from "effect/FileSystem"
import { Path } from "effect/Path"
import type { PlatformError } from "effect/PlatformError"
import { handleChmodOf } from "../io/NonBlockingOpen.js"
import { openRegular } from "../io/RegularFile.js"
import { sha256Hex, SHA256_HEX_PATTERN } from "../protocol/CanonicalJson.js"
import { fileIdentity } from "../protocol/internal/FileInfo.js"
import { isObjectRecord } from "../protocol/internal/JsonShape.js"
import { withVerifiedSummaries } from "../protocol/internal/VerifiedReceipts.js"
import { encodeHeadLine, headFor, makeHead, type ReceiptReference } from "../protocol/Head.js"
import {
  claimExpired,
  claimIsActiveFor,
  makeActiveClaim,
  makeSettledClaim,
  settledReceiptRef
} from "../protocol/JobClaim.js"
import { encodeJsonLine } from "../protocol/JsonLine.js"
import type { Receipt, ReceiptInput } from "../protocol/Receipt.js"
import { MAX_HEAD_BYTES, MAX_HISTORY_BYTES, MAX_HISTORY_RECORDS, MAX_RECEIPT_BYTES } from "../protocol/Limits.js"
import { explainSummaryReceipt, validateSummaryReceipt } from "../protocol/SummaryReceipt.js"
import { explainTitleReceipt, validateTitleReceipt } from "../protocol/TitleReceipt.js"
import { make as makeSessionCache } from "../session/SessionCache.js"
import { nativeObservation } from "../session/SessionReader.js"
import type { ArtifactState, NativeObservation, ProjectionInput } from "../state/ArtifactState.js"
import { projectArtifactStateResult, type ProjectionInputInvalid } from "../state/ArtifactState.js"
import { acquireCommitLock, fitsFileName, makeLockQueues } from "./CommitLock.js"
import * as CurrentWatch from "./CurrentWatch.js"
import {
  HeadInvalid,
  HeadTooLarge,
  HistoryBoundsInvalid,
  HistoryUnreadable,
  InvalidJobId,
  InvalidLease,
  LeaseFenced,
  type LockHeld,
  NotRegularFile,
  ReceiptInvalid,
  ReceiptTooLarge,
  ReceiptTypeUnsupported,
  ReservationNotAcquired,
  type SessionFileRequired,
  type SessionOutsideRoot,
  SettleHookFailed,
  StoreIo,
  storeIo,
  type UnsafeDirectory
} from "./Errors.js"
import { syncDirectory } from "./DurableFile.js"
import { type ClaimRead, createClaimExclusive, readClaim, removeClaim, replaceClaim } from "./JobClaims.js"
import { claimPath as claimPathOf, commitLockPath, materializationPath } from "./MirroredPath.js"
import { ensurePrivateDirectories } from "./PrivateDirectory.js"
import { randomToken } from "./RandomToken.js"
import type { Acquired, Duplicate, InFlight, Reservation, ReservationLocation, SettledReceipt } from "./Reservation.js"
import {
  type HistoryPage,
  historyBoundsValid,
  type HistoryRecord,
  readReceiptReference,
  readSidecarHistoryPage,
  type SidecarCurrent
} from "./SidecarReader.js"
import { makeSidecarCurrentCache } from "./SidecarCurrentCache.js"
import { locate, type LocationOverrides, makeStoreConfig, type StoreConfig, type StoreLocation } from "./StoreConfig.js"

const encoder = new TextEncoder()

/**
 * Options of `readCurrent`.
 *
 * **Details**
 *
 * The types say what a caller should pass; the store still checks every
 * value at run time, so a JavaScript caller's mistake is a typed failure
 * (`SessionFileRequired`, `ProjectionInputInvalid`, ...), not a defect.
 *
 * @category models
 * @since 0.1.0
 */
export interface ReadCurrentOptions extends LocationOverrides {
  /** The Session JSONL file whose sidecar is read. */
  readonly sessionFile: string
  /** The native observation, when the caller already has it; otherwise the Session is read. */
  readonly native?: NativeObservation | null | undefined
  readonly expectation?: ProjectionInput["expectation"]
  readonly deadlineExpired?: boolean | undefined
}

/**
 * A current read: the sidecar's answer plus the artifact-state projection.
 *
 * Discriminated by `availability`: only an `"available"` read has a
 * `receipt` (and a `head`), so narrow on it before reading the receipt.
 *
 * @category models
 * @since 0.1.0
 */
export type CurrentRead = SidecarCurrent & { readonly artifactState: ArtifactState }

/** Options of `readHistory` and `history`. @category models @since 0.1.0 */
export interface ReadHistoryOptions extends LocationOverrides {
  /** The Session JSONL file whose sidecar is read. */
  readonly sessionFile: string
  /** Absolute byte offset to start at; default 0. */
  readonly fromOffset?: number | undefined
  /** Records per page, 1–1000; default 100. */
  readonly limit?: number | undefined
}

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

/** Test hooks of `settle`, for reproducing races deterministically. @category models @since 0.1.0 */
export interface SettleHooks {
  /** Runs under the commit lock right after the lease was found still owned. */
  readonly afterLeaseValidated?: Effect.Effect<void, unknown> | undefined
}

/** Options of `settle`. @category models @since 0.1.0 */
export interface SettleOptions {
  readonly hooks?: SettleHooks | undefined
}

/** `withJob` derived and settled the job's receipt. @category models @since 0.1.0 */
export interface Settled {
  readonly _tag: "Settled"
  readonly receipt: SettledReceipt
}

/** The outcome of `withJob`. @category models @since 0.1.0 */
export type JobOutcome = Settled | Duplicate | InFlight

/** Failures of the path rule. @category errors @since 0.1.0 */
export type PathError = SessionFileRequired | SessionOutsideRoot

/** Failures of `reserve`. @category errors @since 0.1.0 */
export type ReserveError =
  | PathError
  | InvalidJobId
  | InvalidLease
  | HeadInvalid
  | NotRegularFile
  | LockHeld
  | StoreIo
  | UnsafeDirectory

/** Failures of `settle`. @category errors @since 0.1.0 */
export type SettleError =
  | PathError
  | ReservationNotAcquired
  | ReceiptTypeUnsupported
  | ReceiptInvalid
  | ReceiptTooLarge
  | HeadTooLarge
  | LeaseFenced
  | LockHeld
  | NotRegularFile
  | SettleHookFailed
  | StoreIo
  | UnsafeDirectory

/**
 * The sidecar store.
 *
 * @category services
 * @since 0.1.0
 */
export class RarebitStore extends Context.Service<RarebitStore, {
  readonly config: StoreConfig
  /** The sidecar path of a Session. */
  readonly materializationPath: (sessionFile: string, overrides?: LocationOverrides) => Effect.Effect<string, PathError>
  /** The bounded current read. */
  readonly readCurrent: (options: ReadCurrentOptions) => Effect.Effect<CurrentRead, PathError | ProjectionInputInvalid>
  /** One bounded history page. */
  readonly readHistory: (options: ReadHistoryOptions) => Effect.Effect<HistoryPage, PathError | HistoryBoundsInvalid>
  /**
   * The current read of one Session, live: emitted at start, then after
   * each change of what it reports (see `CurrentWatch` for the guarantees).
   * Ends only when its consumer stops; interrupting it closes its watches.
   */
  readonly watch: (
    options: CurrentWatch.WatchOptions
  ) => Stream.Stream<CurrentWatch.WatchedCurrent, PathError | ProjectionInputInvalid>
  /**
   * `watch` over many Sessions in one stream, with one watch per directory
   * however many Sessions it holds: each item is one Session's new state.
   */
  readonly watchSessions: (
    options: CurrentWatch.WatchSessionsOptions
  ) => Stream.Stream<CurrentWatch.WatchedCurrent, PathError | ProjectionInputInvalid>
  /** Every valid receipt of the sidecar, page by page, in constant memory. */
  readonly history: (
    options: ReadHistoryOptions
  ) => Stream.Stream<HistoryRecord, PathError | HistoryBoundsInvalid | HistoryUnreadable>
  /** Claims a job: `Acquired` (this worker holds the lease), `Duplicate` (already settled) or `InFlight`. */
  readonly reserve: (options: ReserveOptions) => Effect.Effect<Reservation, ReserveError>
  /**
   * Commits an acquired job's receipt. The reservation's `jobId` is written
   * over the receipt's, so the receipt may leave it out.
   */
  readonly settle: (
    reservation: Acquired,
    receipt: ReceiptInput,
    options?: SettleOptions
  ) => Effect.Effect<SettledReceipt, SettleError>
  /** Deletes the claim if this reservation still owns it; does nothing for other outcomes. */
  readonly release: (reservation: Reservation) => Effect.Effect<void, LockHeld | StoreIo | UnsafeDirectory>
  /**
   * Reserves, runs `derive` for an acquired job, settles its receipt, and
   * releases the claim if `derive` or the settlement fails or is interrupted.
   */
  readonly withJob: <E, R>(
    options: ReserveOptions,
    derive: (reservation: Acquired) => Effect.Effect<ReceiptInput, E, R>,
    settleOptions?: SettleOptions
  ) => Effect.Effect<JobOutcome, ReserveError | SettleError | E, R>
}>()("rarebit-store/store/RarebitStore") {
  /**
   * The store over whatever `FileSystem`, `Path` and `SecureRandom` the
   * environment has.
   *
   * @category layers
   * @since 0.1.0
   */
  static readonly layer = (
    config: Partial<StoreConfig> = {}
  ): Layer.Layer<RarebitStore, never, FileSystem | Path | SecureRandom> =>
    Layer.effect(RarebitStore, make(makeStoreConfig(config)))
}

/** Whether `jobId` is a job id `reserve` accepts: 64 lowercase hex digits. @internal */
export const jobIdValid = (jobId: unknown): jobId is string => typeof jobId === "string" && SHA256_HEX_PATTERN.test(jobId)

/** Whether `leaseMs` is a lease `reserve` accepts: a finite number of at least 1 ms. @internal */
export const leaseValid = (leaseMs: unknown): leaseMs is number =>
  typeof leaseMs === "number" && Number.isFinite(leaseMs) && leaseMs >= 1

/** A receipt as `settle` returns it: with the sidecar it was appended to. */
const settledAt = (receipt: Receipt, path: string): SettledReceipt => ({ ...receipt, path })

/** The `Duplicate` outcome for a job whose verified receipt is `record`. */
const duplicateOf = (location: ReservationLocation, record: Receipt): Duplicate => ({
  ...location,
  _tag: "Duplicate",
  record: { ...record, path: location.materializationPath }
})

/** Our claims' record of the sidecar size when they were taken, if present and sane. */
const sidecarOffsetOf = (claim: unknown): number | undefined => {
  const offset = isObjectRecord(claim) ? claim.sidecarOffset : undefined
  return typeof offset === "number" && Number.isSafeInteger(offset) && offset >= 0 ? offset : undefined
}

/**
 * Builds a store instance. Exposed for layers that wire dependencies
 * differently; most callers want `RarebitStore.layer`. The instance holds
 * the Sessions it reads open until the `Scope` it was built in ends.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function*(config: StoreConfig) {
  const fs = yield* FileSystem
  const path = yield* Path
  // Held from the build on, so the writers below never read the caller's context for it.
  const withTokens = Effect.provideService(SecureRandom, yield* SecureRandom)
  const lockQueues = makeLockQueues(fs)

  const sidecarPath = (sessionFile: unknown, location: StoreLocation) =>
    Result.match(materializationPath(path, sessionFile, location), {
      onFailure: Effect.fail,
      onSuccess: Effect.succeed
    })

  // Polling readers and settlers read the same growing Sessions again and
  // again; the cache parses only what was appended since the last read.
  const sessions = yield* makeSessionCache().pipe(
    Effect.provideService(FileSystem, fs),
    Effect.provideService(Path, path)
  )
  // Pollers re-read the same sidecar: each stays open, and unchanged verified bytes are compared, not re-parsed.
  const sidecars = yield* makeSidecarCurrentCache(fs)
  const observeNative = (sessionFile: string, location: StoreLocation): Effect.Effect<NativeObservation> =>
    config.cacheSessions
      ? sessions.observe(sessionFile, { sessionRoot: location.sessionRoot })
      : nativeObservation(sessionFile, { sessionRoot: location.sessionRoot }).pipe(
        Effect.provideService(FileSystem, fs),
        Effect.provideService(Path, path)
      )

  const project = (input: ProjectionInput) =>
    Result.match(projectArtifactStateResult(input), { onFailure: Effect.fail, onSuccess: Effect.succeed })

  // Every directory a job writes into (its claim's and its sidecar's, in the
  // reference's order), checked from the rarebit root down: one lstat each
  // when they are already there and private; refused when one is a symlink
  // or someone else's.
  const privateDirectoriesOf = (rarebitRoot: string, claimPath: string, sidecar: string) =>
    ensurePrivateDirectories(fs, path, rarebitRoot, [path.dirname(claimPath), path.dirname(sidecar)])

  // Where a reservation's directories are checked from. A plain caller's
  // reservation may lack the root (the claim's path says where it is) or be
  // hand-made with paths that are not strings: those are left to the steps
  // that use them, which fail as the reference's do.
  const rootOf = (reservation: Acquired): string | undefined =>
    typeof reservation.rarebitRoot === "string"
      ? reservation.rarebitRoot
      : typeof reservation.claimPath === "string"
      ? path.dirname(path.dirname(reservation.claimPath))
      : undefined

  // The lock is created through a temp file and a link, so a lock path the
  // file system refuses outright (a NUL byte, a name longer than NAME_MAX)
  // would fail naming the temp file or the link. The reference opens the lock
  // path itself; opening it first, only for such names, fails exactly as the
  // reference's open does.
  const lockPathAccepted = (lockPath: string) =>
    lockPath.includes("\0") || !fitsFileName(path.basename(lockPath))
      ? Effect.scoped(fs.open(lockPath, { flag: "r" })).pipe(
        Effect.catchReason("PlatformError", "NotFound", () => Effect.void),
        Effect.asVoid,
        Effect.mapError(storeIo("acquire commit lock", lockPath))
      )
      : Effect.void

  const withLock = <A, E, R>(sidecar: string, body: Effect.Effect<A, E, R>) =>
    Effect.scoped(
      Effect.andThen(
        Effect.andThen(
          lockPathAccepted(commitLockPath(sidecar)),
          acquireCommitLock(fs, lockQueues, commitLockPath(sidecar), config.lockRetry, config.breakDeadLocks)
        ),
        body
      )
    )

  /** The claim, if it is still active for this reservation's lease token. */
  const ownedClaim = (reservation: Acquired) =>
    readClaim(fs, reservation.claimPath).pipe(
      Effect.map((read) =>
        read._tag === "Parsed" && claimIsActiveFor(read.claim, reservation.leaseToken) ? read.claim : undefined
      ),
      Effect.mapError(storeIo("read job claim", reservation.claimPath))
    )

  const owns = (reservation: Acquired) => Effect.map(ownedClaim(reservation), (claim) => claim !== undefined)

  // ---- readers ------------------------------------------------------------

  // A pure computation that callers may run per Session in a loop: its span is
  // recorded like `readCurrent`'s, without a call site or a context change.
  const materializationPathOf = (sessionFile: unknown, overrides: LocationOverrides = {}) =>
    Effect.useSpan("RarebitStore.materializationPath", () => sidecarPath(sessionFile, locate(config, overrides)))

  // The polling path records its span with `useSpan`: timing and outcome,
  // under the caller's span, without making it the parent of the work inside
  // (which opens no spans of its own). `Effect.fn` or `withSpan` would also
  // capture a call site per call and move the fiber to a new context; together
  // that measured 30–45 µs of a ~0.45 ms growing-Session poll.
  const readCurrent = (options: ReadCurrentOptions) =>
    Effect.useSpan("RarebitStore.readCurrent", () => readCurrentUntraced(options))

  const readCurrentUntraced = Effect.fnUntraced(function*(options: ReadCurrentOptions) {
    const location = locate(config, options)
    const sidecar = yield* sidecarPath(options.sessionFile, location)
    const native = options.native ?? (yield* observeNative(options.sessionFile, location))
    const current = yield* sidecars.read(sidecar)
    // The sidecar reader's records are Summary receipts it verified for this answer.
    const artifactState = yield* withVerifiedSummaries(current.records, () =>
      project({
        native,
        materialization: { availability: current.availability, records: current.records },
        expectation: options.expectation,
        deadlineExpired: options.deadlineExpired
      }))
    return { ...current, artifactState } satisfies CurrentRead
  })

  const checkHistoryBounds = (fromOffset: number, limit: number) =>
    historyBoundsValid(fromOffset, limit) ? Effect.void : Effect.fail(new HistoryBoundsInvalid({ fromOffset, limit }))

  const readHistory = Effect.fn("RarebitStore.readHistory")(function*(options: ReadHistoryOptions) {
    const fromOffset = options.fromOffset ?? 0
    const limit = options.limit ?? 100
    yield* checkHistoryBounds(fromOffset, limit)
    const sidecar = yield* sidecarPath(options.sessionFile, locate(config, options))
    return yield* readSidecarHistoryPage(fs, sidecar, fromOffset, limit)
  })

  const history = (options: ReadHistoryOptions) =>
    Stream.unwrap(Effect.gen(function*() {
      const fromOffset = options.fromOffset ?? 0
      const limit = options.limit ?? MAX_HISTORY_RECORDS
      yield* checkHistoryBounds(fromOffset, limit)
      const sidecar = yield* sidecarPath(options.sessionFile, locate(config, options))
      return Stream.paginate(fromOffset, (offset: number) =>
        readSidecarHistoryPage(fs, sidecar, offset, limit).pipe(
          Effect.flatMap((page) =>
            page.availability === "unreadable"
              ? Effect.fail(new HistoryUnreadable({ path: sidecar, offset }))
              : Effect.succeed([page.records, Option.fromNullishOr(page.nextOffset)] as const)
          )
        ))
    }))

  // ---- reserve ------------------------------------------------------------

  const settledDuplicate = (read: ClaimRead, location: ReservationLocation, claimPath: string) =>
    Effect.gen(function*() {
      const ref = read._tag === "Parsed" ? settledReceiptRef(read.claim) : undefined
      if (ref === undefined) return undefined
      // A sidecar that is not a regular file is reported as such, as the
      // reference does; a sidecar that is gone means the pointer does not
      // verify; any other I/O failure is just that.
      const record = yield* readReceiptReference(fs, location.materializationPath, ref, false).pipe(
        Effect.catchReason("PlatformError", "NotFound", () => Effect.succeed(undefined)),
        Effect.catchTag("PlatformError", (error) =>
          Effect.fail(storeIo("verify settled receipt pointer", location.materializationPath)(error)))
      )
      if (record === undefined) {
        return yield* new HeadInvalid({ claimPath, materializationPath: location.materializationPath })
      }
      return duplicateOf(location, record)
    })

  const expired = (read: ClaimRead, now: number, leaseMs: number) =>
    read._tag === "Parsed"
      ? claimExpired(read.claim, now)
      : read._tag === "Torn" && now - read.modifiedAtMs > leaseMs

  const sidecarSize = (sidecar: string) =>
    fs.stat(sidecar).pipe(
      Effect.map((info) => Number(info.size)),
      Effect.catchReason("PlatformError", "NotFound", () => Effect.succeed(0)),
      Effect.mapError(storeIo("stat sidecar", sidecar))
    )

  // The offset a new claim records is only a hint for recovery (see
  // `recoverSettlement`), never a reason to refuse: the reference does not
  // look at the sidecar when it reserves, so a sidecar path that cannot even
  // be stat'ed (too long, a NUL byte) still gets a claim, one without
  // `sidecarOffset`, and settle then fails on that path as the reference's does.
  const claimedSidecarOffset = (sidecar: string): Effect.Effect<number | undefined> =>
    Effect.catch(sidecarSize(sidecar), () => Effect.succeed(undefined))

  const reserve = (options: ReserveOptions) => reserveWith(options, () => Effect.void)

  /**
   * `reserve`, running `onAcquired` in the same uninterruptible step that
   * writes the claim, so a caller can attach its release before any
   * interruption can separate the two.
   */
  const reserveWith = Effect.fn("RarebitStore.reserve")(function*<R>(
    options: ReserveOptions,
    onAcquired: (acquired: Acquired) => Effect.Effect<void, never, R>
  ) {
    const { jobId } = options
    if (!jobIdValid(jobId)) return yield* new InvalidJobId({ jobId })
    const leaseMs = options.leaseMs ?? config.leaseMs
    if (!leaseValid(leaseMs)) return yield* new InvalidLease({ leaseMs })
    const location = locate(config, options)
    const sidecar = yield* sidecarPath(options.sessionFile, location)
    const now = options.now ?? (yield* Clock.currentTimeMillis)
    const claimPath = claimPathOf(path, location.rarebitRoot, jobId)
    yield* privateDirectoriesOf(location.rarebitRoot, claimPath, sidecar)
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
      const created = yield* claimedSidecarOffset(sidecar).pipe(
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
    const duplicate = yield* settledDuplicate(first, reservationLocation, claimPath)
    if (duplicate !== undefined) return duplicate
    if (!expired(first, now, leaseMs)) return inFlight

    // Takeover: only under the lock, and only after reading the claim again,
    // since another worker may have taken it over or settled it meanwhile.
    return yield* withLock(
      sidecar,
      Effect.gen(function*() {
        const again = yield* readClaim(fs, claimPath).pipe(Effect.mapError(io))
        const settled = yield* settledDuplicate(again, reservationLocation, claimPath)
        if (settled !== undefined) return settled
        if (!expired(again, now, leaseMs)) return inFlight
        const recovered = yield* recoverSettlement(again, reservationLocation, claimPath)
        if (recovered !== undefined) return recovered
        const offset = yield* claimedSidecarOffset(sidecar)
        yield* replaceClaim(fs, path, claimPath, activeClaim(offset)).pipe(
          Effect.mapError(io),
          Effect.andThen(onAcquired(acquired)),
          Effect.uninterruptible
        )
        return acquired
      })
    )
  }, withTokens)

  /**
   * Completes a settlement whose worker crashed after appending its receipt
   * but before marking the claim settled.
   *
   * Such a receipt was written under the commit lock by the claim's lease
   * owner, after the claim was taken. Our claims record the sidecar size at
   * that moment (`sidecarOffset`), so the search starts there (and reads at
   * most the last `RECOVERY_WINDOW_BYTES`). A claim without it (the
   * reference's, or a torn one) cannot say which receipts came after it: a
   * receipt of the job found there may belong to an earlier lease, so no
   * recovery is attempted and the job runs again, as under the reference.
   */
  const recoverSettlement = (read: ClaimRead, location: ReservationLocation, claimPath: string) =>
    Effect.gen(function*() {
      const claim = read._tag === "Parsed" && isObjectRecord(read.claim) ? read.claim : undefined
      if (claim === undefined || typeof claim.leaseToken !== "string") return undefined
      const found = yield* receiptSinceClaim(location, claim)
      if (found === undefined) return undefined
      yield* completeSettlement(location, claimPath, claim.leaseToken, found)
      return duplicateOf(location, found.record)
    })

  /**
   * The last verified receipt of `jobId` appended at or after `fromOffset`,
   * looking back no further than `RECOVERY_WINDOW_BYTES` from `size`.
   *
   * Only a job's lease owner appends its receipts, under the commit lock,
   * so a receipt found after the claim's `sidecarOffset` was written for the
   * current lease. A sidecar that cannot be read fails the search: treating
   * it as "no receipt" could run the job a second time.
   */
  const findJobReceipt = (sidecar: string, jobId: string, fromOffset: number, size: number) =>
    Effect.gen(function*() {
      let offset: number | null = Math.max(fromOffset, size - RECOVERY_WINDOW_BYTES, 0)
      let found: HistoryRecord | undefined
      while (offset !== null && offset < size) {
        const page: HistoryPage = yield* readSidecarHistoryPage(fs, sidecar, offset, MAX_HISTORY_RECORDS)
        if (page.availability === "unreadable") {
          // The page says only that it could not read; reading the file
          // again says why (EACCES, EISDIR, ...), with the system's own error.
          const position = BigInt(offset)
          yield* Effect.scoped(
            Effect.flatMap(fs.open(sidecar, { flag: "r" }), (file) => file.readAlloc(1, { position }))
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
      const receiptRef = yield* receiptRefAt(sidecar, found.offset)
      if (receiptRef === undefined) return undefined
      const record = yield* readReceiptReference(fs, sidecar, receiptRef, false).pipe(
        Effect.mapError((cause) => new StoreIo({ operation: "verify a job's receipt", path: sidecar, cause }))
      )
      return record === undefined ? undefined : { record, receiptRef }
    })

  /**
   * Finishes a settlement whose receipt is already in the sidecar: a head if
   * it should be current and is not, then the settled claim.
   */
  const completeSettlement = (
    location: ReservationLocation,
    claimPath: string,
    leaseToken: string,
    found: { readonly record: Receipt; readonly receiptRef: ReceiptReference }
  ) =>
    Effect.gen(function*() {
      yield* appendHeadIfCurrent(location, found.record, found.receiptRef)
      yield* replaceClaim(fs, path, claimPath, makeSettledClaim(location.jobId, leaseToken, found.receiptRef)).pipe(
        Effect.mapError(storeIo("write job claim", claimPath))
      )
    })

  /**
   * The job's last receipt appended since `claim` was taken (an earlier,
   * failed attempt of the same lease), if the claim records where the
   * sidecar ended then and anything was appended since.
   */
  const receiptSinceClaim = (location: { readonly materializationPath: string; readonly jobId: string }, claim: unknown) =>
    Effect.gen(function*() {
      const from = sidecarOffsetOf(claim)
      if (from === undefined) return undefined
      const size = yield* sidecarSize(location.materializationPath)
      if (from >= size) return undefined
      return yield* findJobReceipt(location.materializationPath, location.jobId, from, size)
    })

  /** The exact byte range of the line starting at `offset`. */
  const receiptRefAt = (sidecar: string, offset: number) =>
    Effect.scoped(Effect.gen(function*() {
      const { file } = yield* openRegular(fs, sidecar, { flag: "r", followSymlinks: false })
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
   * Appends a head for an already-written receipt if it is the semantic
   * current summary and the current head does not point at it.
   */
  const appendHeadIfCurrent = (
    location: ReservationLocation,
    record: Receipt,
    receiptRef: ReceiptReference
  ) =>
    Effect.gen(function*() {
      const current = yield* sidecars.read(location.materializationPath)
      // Without having seen the current head, a new one could bury a newer receipt.
      if (current.diagnostics.reason === "sidecar_unreadable") return
      if (current.head?.receiptOffset === receiptRef.receiptOffset) return
      const native = yield* observeNative(location.sessionFile, location)
      if (!isSemanticCurrent(native, current, record)) return
      const head = headFor(record.sessionId, receiptRef)
      yield* appendToSidecar(location.materializationPath, () => Effect.succeed(encodeHeadLine(head)))
    })

  const isSemanticCurrent = (native: NativeObservation, current: SidecarCurrent, record: Receipt) => {
    if (native.availability !== "available" || record.type !== "rarebit_summary") return false
    const candidate = projectArtifactStateResult({
      native,
      materialization: { availability: "available", records: [current.receipt, record].filter(Boolean) }
    })
    return Result.isSuccess(candidate) && candidate.success.receiptRef?.jobId === record.jobId
  }

  /**
   * Appends, in one write, the bytes `build` makes for the offset they will
   * start at, fsyncs, sets the mode to 0600, and returns that offset. Under
   * the commit lock nobody else appends, so the size read through the open
   * handle is where the bytes land.
   *
   * The sidecar is opened without following a symlink and without blocking,
   * and must be a regular file: otherwise a `StoreIo` carrying
   * `FileNotRegular` (settle refuses a non-regular sidecar with
   * `NotRegularFile` just before, so only a swap in between gets here). Its
   * mode is set through that same handle, so a path swapped meanwhile for a
   * symlink never has its target's mode changed.
   */
  const appendToSidecar = <E>(sidecar: string, build: (offset: number) => Effect.Effect<Uint8Array, E>) => {
    const io = storeIo("append to sidecar", sidecar)
    return Effect.scoped(Effect.gen(function*() {
      const { file, info } = yield* Effect.mapError(
        openRegular(fs, sidecar, { flag: "a+", mode: 0o600, followSymlinks: false }),
        io
      )
      const size = Number(info.size)
      // A torn write can leave an unterminated line at the end. Appended
      // straight after it, our record would share its line: readers would
      // skip the record, and so would the recovery scan. Ending the fragment
      // first leaves it an unparsable line of its own, which readers skip.
      const last = size === 0 ? undefined : yield* Effect.mapError(file.readAlloc(1, { position: BigInt(size - 1) }), io)
      const torn = last !== undefined && Option.getOrUndefined(last)?.[0] !== 10
      const offset = torn ? size + 1 : size
      const record = yield* build(offset)
      const bytes = torn ? new Uint8Array(record.length + 1) : record
      if (torn) {
        bytes[0] = 10
        bytes.set(record, 1)
      }
      yield* Effect.mapError(file.writeAll(bytes), io)
      yield* Effect.mapError(file.sync, io)
      yield* Effect.mapError(setPrivateMode(file, info, sidecar), io)
      return offset
    }))
  }

  /**
   * Makes an open sidecar 0600, through its handle (`fchmod`). A file system
   * without a handle-level chmod leaves a file that is already 0600 alone,
   * and otherwise changes it by path only while the path still names the
   * file that is open (a swap in the instant between that check and the
   * chmod is the one window it cannot close).
   */
  const setPrivateMode = (file: File, info: File.Info, sidecar: string) => {
    const chmod = handleChmodOf(file)
    if (chmod !== undefined) return chmod(0o600)
    if ((info.mode & 0o7777) === 0o600) return Effect.void
    return Effect.flatMap(fs.lstat(sidecar), (now) =>
      now.type === "File" && fileIdentity(now) === fileIdentity(info) ? fs.chmod(sidecar, 0o600) : Effect.void)
  }

  // ---- settle -------------------------------------------------------------

  const validateForSettle = (reservation: Acquired, receipt: ReceiptInput) =>
    Effect.gen(function*() {
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

  const settle = Effect.fn("RarebitStore.settle")(function*(
    reservation: Acquired,
    receipt: ReceiptInput,
    options: SettleOptions = {}
  ) {
    // The type says Acquired, but plain callers and casts can pass any outcome.
    if (!isObjectRecord(reservation) || reservation._tag !== "Acquired") return yield* new ReservationNotAcquired()
    const sidecar = reservation.materializationPath
    // As the reference does first: the sidecar's directory is made (its
    // dirname fails on a path that is not a string, as the reference's does).
    // The claim's directory is only checked, before anything is written there:
    // the reference does not make it.
    const root = rootOf(reservation)
    const sidecarDirectory = path.dirname(sidecar)
    yield* ensurePrivateDirectories(fs, path, root, [sidecarDirectory])
    if (root !== undefined && typeof reservation.claimPath === "string") {
      yield* ensurePrivateDirectories(fs, path, root, [path.dirname(reservation.claimPath)], { create: false })
    }
    const { line, settled } = yield* validateForSettle(reservation, receipt)
    // Made only when needed: a hand-made reservation may carry a claim path
    // that is not a string, which the claim read reports first.
    const fenced = () => new LeaseFenced({ jobId: reservation.jobId, claimPath: reservation.claimPath })

    // Set just before the append: from then on the receipt may be in the
    // sidecar, and a failure must not give the job back unless it is not.
    let appendAttempted = false

    const locked = Effect.gen(function*() {
      const claim = yield* ownedClaim(reservation)
      if (claim === undefined) return yield* fenced()
      const hook = options.hooks?.afterLeaseValidated
      if (hook !== undefined) yield* Effect.mapError(hook, (cause) => new SettleHookFailed({ cause }))
      return yield* commit(claim)
    })

    // Past the hook nothing is interruptible: an interruption between the
    // append and the settled claim would otherwise strand a receipt.
    const commit = (claim: unknown) => Effect.uninterruptible(Effect.gen(function*() {
      const existing = yield* fs.lstat(sidecar).pipe(
        Effect.map(Option.some),
        Effect.catchReason("PlatformError", "NotFound", () => Effect.succeed(Option.none())),
        Effect.mapError(storeIo("stat sidecar", sidecar))
      )
      if (Option.isSome(existing) && existing.value.type !== "File") return yield* new NotRegularFile({ path: sidecar })
      // The reference re-derives the sidecar path from the Session file here,
      // so a reservation whose Session file is not a valid one fails the same way.
      yield* sidecarPath(reservation.sessionFile, reservation)
      // An earlier attempt of this lease may have appended its receipt and
      // then failed: finish that settlement instead of appending again.
      const earlier = yield* receiptSinceClaim(reservation, claim)
      if (earlier !== undefined) {
        yield* completeSettlement(reservation, reservation.claimPath, reservation.leaseToken, earlier)
        return settledAt(earlier.record, sidecar)
      }
      const native = yield* observeNative(reservation.sessionFile, reservation)
      const current = yield* sidecars.read(sidecar)
      const semanticCurrent = isSemanticCurrent(native, current, settled)
      appendAttempted = true
      const receiptOffset = yield* appendToSidecar(sidecar, (offset) => {
        const head = semanticCurrent ? makeHead(settled.sessionId, offset, line) : current.head
        // A repeated head is re-serialised as parsed (extra keys and all), as the reference does.
        const headLine = head === null ? new Uint8Array(0) : encodeJsonLine(head)
        if (headLine.length > MAX_HEAD_BYTES) return Effect.fail(new HeadTooLarge({ bytes: headLine.length }))
        const bytes = new Uint8Array(line.length + headLine.length)
        bytes.set(line, 0)
        bytes.set(headLine, line.length)
        return Effect.succeed(bytes)
      })
      const receiptRef = { receiptOffset, receiptLength: line.length, receiptHash: sha256Hex(line) }
      if (!(yield* owns(reservation))) return yield* fenced()
      yield* replaceClaim(
        fs,
        path,
        reservation.claimPath,
        makeSettledClaim(reservation.jobId, reservation.leaseToken, receiptRef),
        { syncDirectory: false }
      ).pipe(Effect.mapError(storeIo("write job claim", reservation.claimPath)))
      return settledAt(settled, sidecar)
    }))

    // On failure while still the owner, the claim is deleted so the job can
    // be retried at once instead of after the lease — unless the receipt may
    // already be in the sidecar: if it is there, the settlement is finished;
    // if the sidecar cannot even be searched, the claim stays for the next
    // attempt or a takeover to finish.
    const cleanup = Effect.suspend(() =>
      ownedClaim(reservation).pipe(
        Effect.flatMap((claim): Effect.Effect<void, PlatformError | StoreIo, SecureRandom> => {
          if (claim === undefined) return Effect.void
          if (!appendAttempted) return removeClaim(fs, reservation.claimPath)
          return Effect.flatMap(
            receiptSinceClaim(reservation, claim),
            (earlier): Effect.Effect<void, PlatformError | StoreIo, SecureRandom> =>
              earlier === undefined
                ? removeClaim(fs, reservation.claimPath)
                : completeSettlement(reservation, reservation.claimPath, reservation.leaseToken, earlier)
          )
        }),
        Effect.ignore
      )
    )
    const result = yield* withLock(sidecar, Effect.onError(locked, () => cleanup))
    // The settled claim is visible since its rename; making the rename
    // durable does not need the lock. (Were it lost to a power cut, the
    // claim would be the active one again, and the receipt after its
    // `sidecarOffset` settles it on the next attempt or takeover.) Its
    // failure is still reported: the caller learns the settlement may not
    // survive a power cut, and a retry answers `Duplicate` once it is there.
    yield* syncDirectory(fs, path.dirname(reservation.claimPath)).pipe(
      Effect.mapError(storeIo("sync claims directory", reservation.claimPath))
    )
    return result
  }, withTokens)

  // ---- release ------------------------------------------------------------

  const release = Effect.fn("RarebitStore.release")(function*(reservation: Reservation) {
    if (reservation._tag !== "Acquired") return
    // Checked before the claim is even read: a planted symlink is refused, not read through.
    // Paths that are not strings are left to the lock and the claim read, which fail as the reference's do.
    const root = rootOf(reservation)
    const directories = [reservation.claimPath, reservation.materializationPath]
      .filter((file): file is string => typeof file === "string")
      .map((file) => path.dirname(file))
    if (root !== undefined) yield* ensurePrivateDirectories(fs, path, root, directories, { create: false })
    // A claim this lease does not own now can never be owned by it again
    // (tokens are unique), so only an owned claim is worth taking the lock for.
    if (!(yield* owns(reservation))) return
    yield* withLock(
      reservation.materializationPath,
      Effect.gen(function*() {
        const claim = yield* ownedClaim(reservation)
        if (claim === undefined) return
        // A receipt this lease already appended settles the job rather than
        // giving it back to run again.
        const earlier = yield* receiptSinceClaim(reservation, claim)
        if (earlier !== undefined) {
          return yield* completeSettlement(reservation, reservation.claimPath, reservation.leaseToken, earlier)
        }
        yield* removeClaim(fs, reservation.claimPath).pipe(
          Effect.mapError(storeIo("remove job claim", reservation.claimPath))
        )
      })
    )
  }, withTokens)

  const withJob = <E, R>(
    options: ReserveOptions,
    derive: (reservation: Acquired) => Effect.Effect<ReceiptInput, E, R>,
    settleOptions: SettleOptions = {}
  ): Effect.Effect<JobOutcome, ReserveError | SettleError | E, R> =>
    Effect.scoped(Effect.gen(function*() {
      let settled = false
      // The release is attached when the claim is written, so whatever ends
      // this scope early — a failure, an interruption even during reserve —
      // gives the claim back instead of leaving it until its lease runs out.
      const reservation = yield* reserveWith(
        options,
        (acquired) =>
          Effect.addFinalizer(() => Effect.suspend(() => (settled ? Effect.void : Effect.ignore(release(acquired)))))
      )
      if (reservation._tag !== "Acquired") return reservation
      const derived = yield* derive(reservation)
      const receipt = yield* settle(reservation, derived, settleOptions)
      settled = true
      const outcome: Settled = { _tag: "Settled", receipt }
      return outcome
    })).pipe(Effect.withSpan("RarebitStore.withJob"))

  const watchDependencies = CurrentWatch.dependenciesOf({ materializationPath: materializationPathOf, readCurrent }, fs, path)

  return RarebitStore.of({
    config,
    materializationPath: materializationPathOf,
    readCurrent,
    watch: (options) => CurrentWatch.watch(watchDependencies, options),
    watchSessions: (options) => CurrentWatch.watchSessions(watchDependencies, options),
    readHistory,
    history,
    reserve,
    settle,
    release,
    withJob
  })
})

/** How far back `reserve` looks for a crashed settlement's receipt when the claim does not say. @category constants @since 0.1.0 */
export const RECOVERY_WINDOW_BYTES = 4 * MAX_HISTORY_BYTES
