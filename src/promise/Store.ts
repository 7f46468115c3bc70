/**
 * The reference's store functions as Promises, run by the Effect store.
 *
 * Same names, parameters, result shapes, error classes and message phrases
 * as `@hypercarrier/rarebit`'s store, so a caller switches by changing an
 * import. Nothing here decides protocol behaviour: each function translates
 * its arguments, runs one `RarebitStore` operation on a runtime built once
 * over the live Node layer, and translates the result or the failure back.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { dirname, join, resolve } from "node:path"
import { DEFAULT_LEASE_MS, SIDECAR_PROTOCOL_VERSION } from "../protocol/Limits.js"
import { jobIdValid, leaseValid } from "../store/RarebitStore.js"
import type { Acquired, Reservation } from "../store/Reservation.js"
import { historyBoundsValid } from "../store/SidecarReader.js"
import { DEFAULT_RAREBIT_ROOT, DEFAULT_RAREBIT_SESSION_ROOT } from "../store/StoreConfig.js"
import { runStore as run, runStoreSync as runSync } from "./Runtime.js"

export { DEFAULT_RAREBIT_ROOT, DEFAULT_RAREBIT_SESSION_ROOT }

/** Ten minutes. @category constants @since 0.1.0 */
export const DEFAULT_RAREBIT_LEASE_MS = DEFAULT_LEASE_MS

/** The head protocol version. @category constants @since 0.1.0 */
export const RAREBIT_SIDECAR_PROTOCOL_VERSION = SIDECAR_PROTOCOL_VERSION

interface LocationOptions {
  readonly sessionRoot?: string | undefined
  readonly rarebitRoot?: string | undefined
  readonly allowExternalSession?: boolean | undefined
}

const locationOf = (options: LocationOptions) => ({
  rarebitRoot: options.rarebitRoot,
  sessionRoot: options.sessionRoot,
  allowExternalSession: options.allowExternalSession
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
const checkRoots = (sessionFile: unknown, options: LocationOptions): void => {
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
export function rarebitMaterializationPath(sessionFile: unknown, options: LocationOptions = {}): string {
  // Read in the reference's order, so a `null` options object fails with its message.
  const location = {
    sessionRoot: options.sessionRoot,
    rarebitRoot: options.rarebitRoot,
    allowExternalSession: options.allowExternalSession
  }
  checkRoots(sessionFile, location)
  return runSync((store) => store.materializationPath(sessionFile, locationOf(location)))
}

/**
 * The bounded current read, with artifact state.
 *
 * @category store
 * @since 0.1.0
 */
export function readRarebitCurrent(
  // Parameters are destructured in the reference's order, which decides the TypeError for `null`.
  { sessionFile, native = null, expectation, deadlineExpired, ...options }: {
    readonly sessionFile?: unknown
    readonly native?: any
    readonly expectation?: any
    readonly deadlineExpired?: any
  } & LocationOptions = {}
): Promise<any> {
  try {
    checkRoots(sessionFile, options)
  } catch (error) {
    return Promise.reject(error)
  }
  return run((store) =>
    store.readCurrent({ sessionFile, native, expectation, deadlineExpired, ...locationOf(options) })
  )
}

/**
 * One bounded page of history.
 *
 * @category store
 * @since 0.1.0
 */
export function readRarebitHistory(
  { sessionFile, fromOffset = 0, limit = 100, ...options }: {
    readonly sessionFile?: unknown
    readonly fromOffset?: any
    readonly limit?: any
  } & LocationOptions = {}
): Promise<any> {
  // The reference checks the bounds before it computes the path.
  try {
    if (historyBoundsValid(fromOffset, limit)) checkRoots(sessionFile, options)
  } catch (error) {
    return Promise.reject(error)
  }
  return run((store) =>
    store.readHistory({
      sessionFile,
      fromOffset: nullAsInvalid(fromOffset) as number,
      limit: nullAsInvalid(limit) as number,
      ...locationOf(options)
    })
  )
}

/**
 * The reference's reservation object for an Effect reservation.
 *
 * `allowExternalSession` is echoed as the caller passed it, as the
 * reference does (the store has already normalized it to a boolean).
 */
const plainReservation = (reservation: Reservation, hooks: unknown, allowExternalSession: unknown) => {
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
const acquiredFrom = (reservation: any): Acquired => ({
  _tag: "Acquired",
  jobId: reservation.jobId,
  claimPath: reservation.claimPath,
  leaseToken: reservation.leaseToken,
  materializationPath: reservation.materializationPath,
  sessionFile: reservation.sessionFile,
  rarebitRoot: reservation.rarebitRoot,
  sessionRoot: reservation.sessionRoot,
  allowExternalSession: reservation.allowExternalSession ?? false,
  native: reservation.native ?? null
})

/**
 * Reserves a job: acquired, duplicate or in flight.
 *
 * @category store
 * @since 0.1.0
 */
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
  }: {
    readonly jobId?: any
    readonly sessionFile?: any
    readonly native?: any
    readonly rarebitRoot?: string
    readonly sessionRoot?: string
    readonly leaseMs?: any
    readonly allowExternalSession?: boolean
    readonly now?: number | null
    readonly hooks?: any
  } = {}
): Promise<any> {
  // The reference checks the job id and the lease before it computes the path.
  if (jobIdValid(jobId) && leaseValid(leaseMs)) checkRoots(sessionFile, { rarebitRoot, sessionRoot })
  const reservation = await run((store) =>
    store.reserve({
      jobId,
      sessionFile,
      native,
      leaseMs: nullAsInvalid(leaseMs) as number,
      // The reference stamps `new Date(now)` and computes `now - claimedAt`; both read `null` as 0.
      now: now === undefined ? Date.now() : now === null ? 0 : now,
      rarebitRoot,
      sessionRoot,
      allowExternalSession
    })
  )
  return plainReservation(reservation, hooks, allowExternalSession)
}

/**
 * Settles an acquired reservation with its receipt.
 *
 * @category store
 * @since 0.1.0
 */
export async function settleRarebitJob(reservation: any, record: unknown): Promise<any> {
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
export async function releaseRarebitJob(reservation: any): Promise<void> {
  if (!reservation?.claimPath || !reservation.materializationPath) return
  await run((store) => store.release(acquiredFrom(reservation)))
}
