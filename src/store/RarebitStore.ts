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
 * This module is the service: its shape, `make` (which builds one
 * instance's caches, locks and tokens and wires the operations) and its
 * layer. Each operation is its own module: the reads (`StoreReads`),
 * reserve and release (`Reservation`), settle (`Settlement`), finishing a
 * crashed settlement (`SettlementRecovery`), the sidecar append
 * (`SidecarAppend`) and the commit lock (`CommitLock`).
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, type Stream } from "effect"
import { SecureRandom } from "effect/crypto/SecureRandom"
import { FileSystem } from "effect/FileSystem"
import { Path } from "effect/Path"
import { ByteCache } from "../io/ByteCache.js"
import type { ReceiptInput } from "../protocol/Receipt.js"
import { make as makeSessionCache } from "../session/SessionCache.js"
import { nativeObservation } from "../session/SessionReader.js"
import type { NativeObservation, ProjectionInputInvalid } from "../state/ArtifactState.js"
import type { HistoryBoundsInvalid, HistoryUnreadable } from "./Errors.js"
import { makeLockQueues, withCommitLock } from "./lock/CommitLock.js"
import { commitLockPath, makeSessionIdentity, materializationPath, type PathError } from "./MirroredPath.js"
import * as SessionOverview from "./read/SessionOverview.js"
import { makeSidecarCurrentCache } from "./read/SidecarCurrentCache.js"
import type { HistoryPage, HistoryRecord } from "./read/SidecarReader.js"
import { type CurrentRead, makeReads, type ReadCurrentOptions, type ReadHistoryOptions } from "./read/StoreReads.js"
import { type LocationOverrides, makeStoreConfig, type StoreConfig, type StoreLocation } from "./StoreConfig.js"
import type { StoreContext } from "./StoreContext.js"
import * as CurrentWatch from "./watch/CurrentWatch.js"
import {
  type Acquired,
  type Duplicate,
  type InFlight,
  makeRelease,
  makeReserve,
  type ReleaseError,
  type Reservation,
  type ReserveError,
  type ReserveOptions,
  type SettledReceipt
} from "./write/Reservation.js"
import { makeSettle, type SettleError, type SettleOptions } from "./write/Settlement.js"

export type { PathError } from "./MirroredPath.js"
export type { CurrentRead, ReadCurrentOptions, ReadHistoryOptions } from "./read/StoreReads.js"
export type { ReleaseError, ReserveError, ReserveOptions } from "./write/Reservation.js"
export type { SettleError, SettleHooks, SettleOptions } from "./write/Settlement.js"
export { RECOVERY_WINDOW_BYTES } from "./write/SettlementRecovery.js"

/** `withJob` derived and settled the job's receipt. @category models @since 0.1.0 */
export interface Settled {
  readonly _tag: "Settled"
  readonly receipt: SettledReceipt
}

/** The outcome of `withJob`. @category models @since 0.1.0 */
export type JobOutcome = Settled | Duplicate | InFlight

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
  /**
   * Every Session under the Session root with its current state, as a
   * stream in constant memory (see `SessionOverview`); fails only when the
   * Session root is not a directory.
   */
  readonly sessions: (
    options?: SessionOverview.SessionOverviewOptions
  ) => Stream.Stream<SessionOverview.SessionOverviewEntry, SessionOverview.SessionRootNotFound>
  /** `sessions`, then an entry again each time a Session's state changes (through `watchSessions`). */
  readonly followSessions: (
    options?: SessionOverview.SessionOverviewOptions
  ) => Stream.Stream<SessionOverview.SessionOverviewEntry, SessionOverview.SessionRootNotFound>
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
  readonly release: (reservation: Reservation) => Effect.Effect<void, ReleaseError>
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

/** The failure of an operation of the store, whatever it returns. */
type OperationError<Operation> = Operation extends (...args: ReadonlyArray<never>) => infer Out
  ? Out extends Effect.Effect<unknown, infer E, unknown> ? E
  : Out extends Stream.Stream<unknown, infer E, unknown> ? E
  : never
  : never

/**
 * Every failure a store operation can report, derived from the operations
 * (`withJob` adds only its `derive`'s own).
 *
 * @category errors
 * @since 0.1.0
 */
export type StoreError = {
  readonly [K in Exclude<keyof RarebitStore["Service"], "withJob">]: OperationError<RarebitStore["Service"][K]>
}[Exclude<keyof RarebitStore["Service"], "withJob">]

/**
 * Builds what one store instance's operations share: its caches (the
 * Sessions and sidecars it holds open until the `Scope` it was built in
 * ends), its commit-lock queues and the `SecureRandom` of its tokens.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeContext = Effect.fnUntraced(function*(config: StoreConfig) {
  const fs = yield* FileSystem
  const path = yield* Path
  // Held from the build on, so the writers never read the caller's context for it.
  const tokens = yield* SecureRandom
  const lockQueues = makeLockQueues(fs)
  // Polling readers and settlers read the same growing Sessions again and
  // again; the cache parses only what was appended since the last read.
  // One bound for both read caches: a poller of many Sessions reads each Session and its sidecar in turn.
  const cache = new ByteCache(config.cacheBudget.maxBytes)
  const sessions = yield* makeSessionCache({ cache }).pipe(
    Effect.provideService(FileSystem, fs),
    Effect.provideService(Path, path)
  )
  // Pollers re-read the same sidecar: unchanged verified bytes are compared, not re-parsed.
  const sidecars = yield* makeSidecarCurrentCache(fs, { cache })

  const ctx: StoreContext = {
    config,
    fs,
    path,
    identify: makeSessionIdentity(fs, path).canonical,
    sidecarPath: (sessionFile, location) => Effect.fromResult(materializationPath(path, sessionFile, location)),
    readSidecar: sidecars.read,
    observeNative: (sessionFile: string, location: StoreLocation): Effect.Effect<NativeObservation> =>
      config.cacheSessions
        ? sessions.observeEvidence(sessionFile, { sessionRoot: location.sessionRoot })
        : nativeObservation(sessionFile, { sessionRoot: location.sessionRoot }).pipe(
          Effect.provideService(FileSystem, fs),
          Effect.provideService(Path, path)
        ),
    withTokens: Effect.provideService(SecureRandom, tokens),
    withLock: (sidecar, body) =>
      withCommitLock(fs, lockQueues, commitLockPath(sidecar), config.lockRetry, config.breakDeadLocks, body)
  }
  return ctx
})

/**
 * Builds a store instance. Exposed for layers that wire dependencies
 * differently; most callers want `RarebitStore.layer`. The instance holds
 * the Sessions it reads open until the `Scope` it was built in ends.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function*(config: StoreConfig) {
  const ctx = yield* makeContext(config)
  const reads = makeReads(ctx)
  const reserveWith = makeReserve(ctx)
  const settle = makeSettle(ctx)
  const release = makeRelease(ctx)

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

  const watchDependencies = CurrentWatch.dependenciesOf(reads, ctx.fs, ctx.path)
  const watchSessions = (options: CurrentWatch.WatchSessionsOptions) =>
    CurrentWatch.watchSessions(watchDependencies, options)
  const overview: SessionOverview.OverviewDependencies = {
    location: ctx.config,
    fs: ctx.fs,
    path: ctx.path,
    readCurrent: reads.readCurrent,
    readHistory: reads.readHistory,
    watchSessions
  }

  return RarebitStore.of({
    config: ctx.config,
    ...reads,
    watch: (options) => CurrentWatch.watch(watchDependencies, options),
    watchSessions,
    sessions: (options) => SessionOverview.sessions(overview, options),
    followSessions: (options) => SessionOverview.followSessions(overview, options),
    reserve: (options) => reserveWith(options, () => Effect.void),
    settle,
    release,
    withJob
  })
})
