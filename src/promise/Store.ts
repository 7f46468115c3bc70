/**
 * The reference's store functions as Promises, run by the Effect store.
 *
 * Same names, parameters, result shapes, error classes and message phrases
 * as `@hypercarrier/rarebit`'s store, so a caller switches by changing an
 * import. Nothing here decides protocol behaviour: each function translates
 * its arguments, runs one `RarebitStore` operation on a runtime built once
 * over the live Node layer, and translates the result or the failure back.
 *
 * Two additions the reference does not have: `watchRarebitCurrent`, the
 * current read as an async iterator that yields again after each change
 * (`RarebitStore.watch`), in the same shapes; and `listRarebitSessions`,
 * every Session's state at once (`RarebitStore.sessions`).
 *
 * @since 0.1.0
 */
import { Effect, Stream } from "effect"
import { dirname, join, resolve } from "node:path"
import { DEFAULT_LEASE_MS, SIDECAR_PROTOCOL_VERSION } from "../protocol/Limits.js"
import type { ReceiptInput } from "../protocol/Receipt.js"
import type { ArtifactExpectation, NativeObservation } from "../state/ArtifactState.js"
import {
  type CurrentRead,
  RarebitStore,
  type ReadCurrentOptions,
  type ReadHistoryOptions
} from "../store/RarebitStore.js"
import type { SessionOverviewEntry } from "../store/read/SessionOverview.js"
import { historyBoundsValid, type HistoryPage } from "../store/read/SidecarReader.js"
import { DEFAULT_RAREBIT_ROOT, DEFAULT_RAREBIT_SESSION_ROOT, type LocationOverrides } from "../store/StoreConfig.js"
import type { WatchOptions } from "../store/watch/CurrentWatch.js"
import {
  type Acquired,
  jobIdValid,
  leaseValid,
  type Reservation,
  type ReservationLocation,
  type ReserveOptions,
  type SettledReceipt
} from "../store/write/Reservation.js"
import { iterate, runStore as run, runStoreSync as runSync } from "./Runtime.js"

export { DEFAULT_RAREBIT_ROOT, DEFAULT_RAREBIT_SESSION_ROOT }

/** Ten minutes. @category constants @since 0.1.0 */
export const DEFAULT_RAREBIT_LEASE_MS = DEFAULT_LEASE_MS

/** The head protocol version. @category constants @since 0.1.0 */
export const RAREBIT_SIDECAR_PROTOCOL_VERSION = SIDECAR_PROTOCOL_VERSION

/**
 * Where a Session's files are: each root defaults as in the reference
 * (`~/.pi/agent/sessions`, `~/.pi/agent/rarebit`), and a Session outside
 * the Session root is refused unless `allowExternalSession`.
 *
 * @category models
 * @since 0.1.0
 */
export interface RarebitLocationOptions {
  readonly sessionRoot?: string | undefined
  readonly rarebitRoot?: string | undefined
  readonly allowExternalSession?: boolean | undefined
}

/**
 * The argument of `readRarebitCurrent`.
 *
 * @category models
 * @since 0.1.0
 */
export interface ReadRarebitCurrentInput extends RarebitLocationOptions {
  readonly sessionFile: string
  /** The native observation, when the caller already has it; otherwise the Session is read. */
  readonly native?: NativeObservation | null | undefined
  readonly expectation?: ArtifactExpectation | undefined
  readonly deadlineExpired?: boolean | undefined
}

/**
 * What `readRarebitCurrent` resolves to: the store's `CurrentRead`,
 * discriminated by `availability`.
 *
 * @category models
 * @since 0.1.0
 */
export type RarebitSidecarCurrent = CurrentRead

/**
 * The argument of `readRarebitHistory`.
 *
 * @category models
 * @since 0.1.0
 */
export interface ReadRarebitHistoryInput extends RarebitLocationOptions {
  readonly sessionFile: string
  /** Absolute byte offset to start at; default 0. */
  readonly fromOffset?: number | undefined
  /** Receipts per page, 1–1000; default 100. */
  readonly limit?: number | undefined
}

/**
 * What `readRarebitHistory` resolves to: one page of receipts.
 *
 * @category models
 * @since 0.1.0
 */
export type RarebitHistoryPage = HistoryPage

/**
 * Test hooks of a reservation, run by `settleRarebitJob`.
 *
 * @category models
 * @since 0.1.0
 */
export interface RarebitJobHooks {
  /** Called (as a method, and awaited) under the commit lock right after the lease was found still owned. */
  readonly afterLeaseValidated?: (() => unknown) | undefined
}

/**
 * The argument of `reserveRarebitJob`.
 *
 * @category models
 * @since 0.1.0
 */
export interface ReserveRarebitJobInput extends RarebitLocationOptions {
  /** 64 lowercase hex digits, e.g. from `rarebitJobIdentity`. */
  readonly jobId: string
  readonly sessionFile: string
  readonly native?: NativeObservation | null | undefined
  /** Lease length in milliseconds; default ten minutes. */
  readonly leaseMs?: number | undefined
  /** The reservation time in epoch milliseconds; default `Date.now()`. */
  readonly now?: number | null | undefined
  readonly hooks?: RarebitJobHooks | null | undefined
}

/**
 * Where a reservation's files are, echoed by every outcome.
 *
 * @category models
 * @since 0.1.0
 */
export type RarebitReservationLocation = ReservationLocation

/**
 * This worker holds the job's lease: settle it or release it.
 *
 * @category models
 * @since 0.1.0
 */
export interface RarebitAcquiredReservation extends RarebitReservationLocation {
  readonly acquired: true
  readonly duplicate?: undefined
  readonly inFlight?: undefined
  readonly claimPath: string
  readonly leaseToken: string
  readonly native: NativeObservation | null
  readonly hooks: RarebitJobHooks | null
}

/**
 * The job is already settled; `record` is its verified receipt and sidecar path.
 *
 * @category models
 * @since 0.1.0
 */
export interface RarebitDuplicateReservation extends RarebitReservationLocation {
  readonly acquired: false
  readonly duplicate: true
  readonly inFlight?: undefined
  readonly record: SettledReceipt
}

/**
 * Another worker holds a live lease on the job.
 *
 * @category models
 * @since 0.1.0
 */
export interface RarebitInFlightReservation extends RarebitReservationLocation {
  readonly acquired: false
  readonly duplicate?: undefined
  readonly inFlight: true
}

/**
 * What `reserveRarebitJob` resolves to: narrow on `acquired`, then on
 * `duplicate` or `inFlight`.
 *
 * @category models
 * @since 0.1.0
 */
export type RarebitReservation = RarebitAcquiredReservation | RarebitDuplicateReservation | RarebitInFlightReservation

/** A plain caller's argument as the implementation sees it: anything, until the store has checked it. */
type Unchecked<A> = { readonly [K in keyof A]?: unknown }

const locationOf = (options: Unchecked<RarebitLocationOptions>): LocationOverrides => ({
  // The store checks the roots at run time, whatever a plain caller passed.
  rarebitRoot: options.rarebitRoot as string | undefined,
  sessionRoot: options.sessionRoot as string | undefined,
  allowExternalSession: options.allowExternalSession as boolean | undefined
})

/**
 * Rejects roots that are neither absent nor strings, as the reference does.
 *
 * The reference defaults a root only when it is `undefined` and hands
 * anything else to `node:path`, which throws its own `TypeError`
 * (`ERR_INVALID_ARG_TYPE`); the store treats `null` as absent, which would
 * silently move the files to the default roots under the home directory.
 * The same `node:path` calls are made here, in the reference's order: the
 * Rarebit root first, the Session root only once the Session file is known.
 */
const checkRoots = (sessionFile: unknown, options: Unchecked<RarebitLocationOptions>): void => {
  if (options.rarebitRoot !== undefined && typeof options.rarebitRoot !== "string") {
    join(options.rarebitRoot as unknown as string, "materializations-v4")
  }
  if (
    options.sessionRoot !== undefined && typeof options.sessionRoot !== "string" &&
    typeof sessionFile === "string" && sessionFile.trim() !== ""
  ) {
    resolve(options.sessionRoot as unknown as string)
  }
}

/** Only `undefined` takes a default in the reference; `null` is a value its checks reject. */
const nullAsInvalid = (value: unknown): unknown => (value === null ? Number.NaN : value)

/**
 * The sidecar path of a Session.
 *
 * @category store
 * @since 0.1.0
 */
export function rarebitMaterializationPath(sessionFile: string, options?: RarebitLocationOptions): string
export function rarebitMaterializationPath(
  sessionFile: unknown,
  options: Unchecked<RarebitLocationOptions> = {}
): string {
  // Read in the reference's order, so a `null` options object fails with its message.
  const location = {
    sessionRoot: options.sessionRoot,
    rarebitRoot: options.rarebitRoot,
    allowExternalSession: options.allowExternalSession
  }
  checkRoots(sessionFile, location)
  // The store checks the Session file at run time, whatever a plain caller passed.
  return runSync((store) => store.materializationPath(sessionFile as string, locationOf(location)))
}

/**
 * The bounded current read, with artifact state.
 *
 * @category store
 * @since 0.1.0
 */
export function readRarebitCurrent(input: ReadRarebitCurrentInput): Promise<RarebitSidecarCurrent>
export function readRarebitCurrent(
  // Parameters are destructured in the reference's order, which decides the TypeError for `null`.
  { sessionFile, native = null, expectation, deadlineExpired, ...options }: Unchecked<ReadRarebitCurrentInput> = {}
): Promise<RarebitSidecarCurrent> {
  try {
    checkRoots(sessionFile, options)
  } catch (error) {
    return Promise.reject(error)
  }
  // The store checks every value at run time, whatever a plain caller passed.
  const checkedByStore = { sessionFile, native, expectation, deadlineExpired, ...locationOf(options) }
  return run((store) => store.readCurrent(checkedByStore as ReadCurrentOptions))
}

/**
 * The store's options for a plain caller's `readRarebitCurrent` input, after
 * the checks `readRarebitCurrent` makes first (which throw as the
 * reference's do); for the functions that take the same input.
 */
const checkedCurrentInput = (input: Unchecked<ReadRarebitCurrentInput> = {}): ReadCurrentOptions => {
  const { sessionFile, native = null, expectation, deadlineExpired, ...options } = input
  checkRoots(sessionFile, options)
  // The store checks every value at run time, whatever a plain caller passed.
  return { sessionFile, native, expectation, deadlineExpired, ...locationOf(options) } as ReadCurrentOptions
}

/**
 * One bounded page of history.
 *
 * @category store
 * @since 0.1.0
 */
export function readRarebitHistory(input: ReadRarebitHistoryInput): Promise<RarebitHistoryPage>
export function readRarebitHistory(
  { sessionFile, fromOffset = 0, limit = 100, ...options }: Unchecked<ReadRarebitHistoryInput> = {}
): Promise<RarebitHistoryPage> {
  // The reference checks the bounds before it computes the path.
  try {
    if (historyBoundsValid(fromOffset, limit)) checkRoots(sessionFile, options)
  } catch (error) {
    return Promise.reject(error)
  }
  // The store checks every value at run time, whatever a plain caller passed.
  const checkedByStore = {
    sessionFile,
    fromOffset: nullAsInvalid(fromOffset),
    limit: nullAsInvalid(limit),
    ...locationOf(options)
  }
  return run((store) => store.readHistory(checkedByStore as ReadHistoryOptions))
}

/**
 * The reference's reservation object for an Effect reservation.
 *
 * `allowExternalSession` is echoed as the caller passed it, as the
 * reference does (the store has already normalized it to a boolean).
 */
const plainReservation = (
  reservation: Reservation,
  hooks: RarebitJobHooks | null,
  allowExternalSession: boolean
): RarebitReservation => {
  const shared = {
    jobId: reservation.jobId,
    materializationPath: reservation.materializationPath
  }
  const location = {
    sessionFile: reservation.sessionFile,
    rarebitRoot: reservation.rarebitRoot,
    sessionRoot: reservation.sessionRoot,
    allowExternalSession
  }
  switch (reservation._tag) {
    case "Acquired":
      return {
        acquired: true,
        jobId: reservation.jobId,
        claimPath: reservation.claimPath,
        leaseToken: reservation.leaseToken,
        materializationPath: reservation.materializationPath,
        sessionFile: reservation.sessionFile,
        native: reservation.native,
        rarebitRoot: reservation.rarebitRoot,
        sessionRoot: reservation.sessionRoot,
        allowExternalSession,
        hooks
      }
    case "Duplicate":
      return { acquired: false, duplicate: true, ...shared, record: reservation.record, ...location }
    case "InFlight":
      return { acquired: false, inFlight: true, ...shared, ...location }
  }
}

/** The Effect reservation a reference-shaped reservation object stands for. */
const acquiredFrom = (reservation: RarebitAcquiredReservation): Acquired => ({
  _tag: "Acquired",
  jobId: reservation.jobId,
  claimPath: reservation.claimPath,
  leaseToken: reservation.leaseToken,
  materializationPath: reservation.materializationPath,
  sessionFile: reservation.sessionFile,
  // The reference reads the Session and sidecar with the reservation's roots
  // through its own option defaults, which apply to `undefined` only.
  rarebitRoot: reservation.rarebitRoot === undefined ? DEFAULT_RAREBIT_ROOT : reservation.rarebitRoot,
  sessionRoot: reservation.sessionRoot === undefined ? DEFAULT_RAREBIT_SESSION_ROOT : reservation.sessionRoot,
  allowExternalSession: reservation.allowExternalSession ?? false,
  native: reservation.native ?? null
})

/**
 * Reserves a job: acquired, duplicate or in flight.
 *
 * @category store
 * @since 0.1.0
 */
export async function reserveRarebitJob(input: ReserveRarebitJobInput): Promise<RarebitReservation>
export async function reserveRarebitJob(
  {
    jobId,
    sessionFile,
    native = null,
    rarebitRoot = DEFAULT_RAREBIT_ROOT,
    sessionRoot = DEFAULT_RAREBIT_SESSION_ROOT,
    leaseMs = DEFAULT_RAREBIT_LEASE_MS,
    allowExternalSession = false,
    now,
    hooks = null
  }: Unchecked<ReserveRarebitJobInput> = {}
): Promise<RarebitReservation> {
  // The reference checks the job id and the lease before it computes the path.
  if (jobIdValid(jobId) && leaseValid(leaseMs)) checkRoots(sessionFile, { rarebitRoot, sessionRoot })
  // The store checks every value at run time, whatever a plain caller passed.
  const checkedByStore = {
    jobId,
    sessionFile,
    native,
    leaseMs: nullAsInvalid(leaseMs),
    // The reference stamps `new Date(now)` and computes `now - claimedAt`; both read `null` as 0.
    now: now === undefined ? Date.now() : now === null ? 0 : now,
    rarebitRoot,
    sessionRoot,
    allowExternalSession
  }
  const reservation = await run((store) => store.reserve(checkedByStore as ReserveOptions))
  // Echoed as passed, as the reference does: typed by what a TypeScript caller passes.
  return plainReservation(reservation, hooks as RarebitJobHooks | null, allowExternalSession as boolean)
}

/**
 * Settles an acquired reservation with its receipt.
 *
 * @category store
 * @since 0.1.0
 */
export async function settleRarebitJob(
  reservation: RarebitAcquiredReservation,
  record: ReceiptInput
): Promise<SettledReceipt>
export async function settleRarebitJob(
  reservation: RarebitAcquiredReservation | null | undefined,
  record: ReceiptInput
): Promise<SettledReceipt> {
  if (!reservation?.acquired) {
    throw new Error("An acquired Rarebit reservation is required")
  }
  // The reference's first step; a reservation without a path fails here with Node's TypeError.
  if (typeof reservation.materializationPath !== "string") dirname(reservation.materializationPath)
  // Called as the reference calls it: as a method of `hooks`, looked up when it runs, and
  // failing with a TypeError when it is present but not a function.
  const afterLeaseValidated = reservation.hooks?.afterLeaseValidated == null
    ? undefined
    : Effect.tryPromise({ try: async () => await reservation.hooks?.afterLeaseValidated?.(), catch: (error) => error })
  return run((store) =>
    store.settle(acquiredFrom(reservation), record, afterLeaseValidated ? { hooks: { afterLeaseValidated } } : {})
  )
}

/**
 * Releases a reservation's claim if it still owns it.
 *
 * @category store
 * @since 0.1.0
 */
export async function releaseRarebitJob(reservation: RarebitReservation): Promise<void>
export async function releaseRarebitJob(
  reservation: Partial<RarebitAcquiredReservation> | RarebitReservation | null | undefined
): Promise<void> {
  // The reference's test: whatever names a claim and a sidecar (only an acquired reservation, for
  // TypeScript callers) is released, by lease token.
  const claimed = reservation as Partial<RarebitAcquiredReservation> | null | undefined
  if (!claimed?.claimPath || !claimed.materializationPath) return
  await run((store) => store.release(acquiredFrom(claimed as RarebitAcquiredReservation)))
}

// ---- watchRarebitCurrent ----------------------------------------------------

/**
 * Options of `watchRarebitCurrent`.
 *
 * @category models
 * @since 0.1.0
 */
export interface WatchRarebitCurrentOptions {
  /** Ends the iteration: a pending or later `next()` rejects with an `AbortError`. */
  readonly signal?: AbortSignal | undefined
  /** The wait after a change before reading, in milliseconds; default 5. */
  readonly debounceMs?: number | undefined
  /** `"poll"` polls from the start (network file systems); default `"auto"`: events, else polling. */
  readonly mode?: "auto" | "poll" | undefined
  /** The polling interval after a change, in milliseconds; default 100. */
  readonly pollIntervalMs?: number | undefined
  /** The longest polling interval while nothing changes, in milliseconds; default 2000. */
  readonly maxPollIntervalMs?: number | undefined
}

const millis = (value: number | undefined) => (value === undefined ? undefined : `${value} millis` as const)

/**
 * The current read of a Session, once now and again after each change, as
 * an async iterator.
 *
 * **Details**
 *
 * Each value is what `readRarebitCurrent(input)` resolves to at that moment.
 * A change is a new head in the sidecar, the sidecar appearing or being
 * replaced, or (unless `input.native` is passed) the Session growing; a
 * change that leaves the read as it was (a torn tail) yields nothing, and
 * a burst of writes yields its last state. A loop that takes its time is
 * handed the latest state, never a backlog.
 *
 * `break` (the iterator's `return()`) and `signal` both stop it and close
 * every file-system watch it opened; after `signal` aborts, `next()` rejects
 * with an `AbortError`, as `fs.promises.watch` does.
 *
 * @example
 * const controller = new AbortController()
 * try {
 *   for await (const current of watchRarebitCurrent({ sessionFile }, { signal: controller.signal })) {
 *     console.log(current.availability, current.artifactState.syncState)
 *   }
 * } catch (error) {
 *   if ((error as Error).name !== "AbortError") throw error
 * }
 *
 * @category store
 * @since 0.1.0
 */
export function watchRarebitCurrent(
  input: ReadRarebitCurrentInput,
  options: WatchRarebitCurrentOptions = {}
): AsyncIterableIterator<RarebitSidecarCurrent> {
  const tuning = {
    debounce: millis(options.debounceMs),
    mode: options.mode,
    pollInterval: millis(options.pollIntervalMs),
    maxPollInterval: millis(options.maxPollIntervalMs)
  }
  const stream = Stream.unwrap(Effect.gen(function*() {
    // Checked as readRarebitCurrent checks it: the same input fails the same way.
    const read = yield* Effect.try({ try: () => checkedCurrentInput(input), catch: (error) => error })
    const store = yield* RarebitStore
    const watchOptions: WatchOptions = { ...read, ...tuning }
    return Stream.map(store.watch(watchOptions), (state) => state.current)
  }))
  return iterate(stream, options.signal)
}

// ---- listRarebitSessions ----------------------------------------------------

/**
 * Options of `listRarebitSessions`: the roots (defaults as everywhere), and
 * for the following form `follow: true` with the watch's options.
 *
 * @category models
 * @since 0.1.0
 */
export interface ListRarebitSessionsOptions
  extends Pick<RarebitLocationOptions, "sessionRoot" | "rarebitRoot">, WatchRarebitCurrentOptions
{
  readonly follow?: boolean | undefined
}

/**
 * Lists every Session under the Session root with its state.
 *
 * **Details**
 *
 * Each entry's `availability` and `syncState` are what `readRarebitCurrent`
 * reports for that Session; an unreadable Session or a damaged sidecar is an
 * entry, never a rejection. A Session root that is not a directory rejects
 * (`rarebitTag` `"SessionRootNotFound"`).
 *
 * With `follow: true` it returns an async iterator instead: every Session's
 * entry, then an entry each time one changes, until `break` or `signal`
 * (as `watchRarebitCurrent`).
 *
 * @example
 * for (const entry of await listRarebitSessions({ sessionRoot })) {
 *   if (entry.syncState === "awaiting_artifacts") queue.push(entry.sessionFile)
 * }
 *
 * @category store
 * @since 0.1.0
 */
export function listRarebitSessions(
  options?: ListRarebitSessionsOptions & { readonly follow?: false | undefined }
): Promise<Array<SessionOverviewEntry>>
export function listRarebitSessions(
  options: ListRarebitSessionsOptions & { readonly follow: true }
): AsyncIterableIterator<SessionOverviewEntry>
export function listRarebitSessions(
  options: Unchecked<ListRarebitSessionsOptions> = {}
): Promise<Array<SessionOverviewEntry>> | AsyncIterableIterator<SessionOverviewEntry> {
  const location = { rarebitRoot: options.rarebitRoot, sessionRoot: options.sessionRoot }
  if (options.follow === true) {
    const tuning = {
      debounce: millis(options.debounceMs as number | undefined),
      mode: options.mode as "auto" | "poll" | undefined,
      pollInterval: millis(options.pollIntervalMs as number | undefined),
      maxPollInterval: millis(options.maxPollIntervalMs as number | undefined)
    }
    const stream = Stream.unwrap(Effect.gen(function*() {
      yield* Effect.try({ try: () => checkRoots("-", location), catch: (error) => error })
      const store = yield* RarebitStore
      return store.followSessions({ ...locationOf(location), ...tuning })
    }))
    return iterate(stream, options.signal as AbortSignal | undefined)
  }
  try {
    checkRoots("-", location)
  } catch (error) {
    return Promise.reject(error)
  }
  return run((store) => Stream.runCollect(store.sessions(locationOf(location))))
}
