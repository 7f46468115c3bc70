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
import { DEFAULT_LEASE_MS, SIDECAR_PROTOCOL_VERSION } from "../protocol/Limits.js"
import type { Acquired, Reservation } from "../store/Reservation.js"
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
 * The sidecar path of a Session.
 *
 * @category store
 * @since 0.1.0
 */
export function rarebitMaterializationPath(sessionFile: unknown, options: LocationOptions = {}): string {
  return runSync((store) => store.materializationPath(sessionFile, locationOf(options)))
}

/**
 * The bounded current read, with artifact state.
 *
 * @category store
 * @since 0.1.0
 */
export function readRarebitCurrent(
  { deadlineExpired, expectation, native = null, sessionFile, ...options }: {
    readonly sessionFile?: unknown
    readonly native?: any
    readonly expectation?: any
    readonly deadlineExpired?: any
  } & LocationOptions = {}
): Promise<any> {
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
  { fromOffset = 0, limit = 100, sessionFile, ...options }: {
    readonly sessionFile?: unknown
    readonly fromOffset?: any
    readonly limit?: any
  } & LocationOptions = {}
): Promise<any> {
  return run((store) => store.readHistory({ sessionFile, fromOffset, limit, ...locationOf(options) }))
}

/** The reference's reservation object for an Effect reservation. */
const plainReservation = (reservation: Reservation, hooks: unknown) => {
  const shared = {
    jobId: reservation.jobId,
    materializationPath: reservation.materializationPath
  }
  const location = {
    sessionFile: reservation.sessionFile,
    rarebitRoot: reservation.rarebitRoot,
    sessionRoot: reservation.sessionRoot,
    allowExternalSession: reservation.allowExternalSession
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
        allowExternalSession: reservation.allowExternalSession,
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
    allowExternalSession = false,
    hooks = null,
    jobId,
    leaseMs = DEFAULT_RAREBIT_LEASE_MS,
    native = null,
    now,
    rarebitRoot = DEFAULT_RAREBIT_ROOT,
    sessionFile,
    sessionRoot = DEFAULT_RAREBIT_SESSION_ROOT
  }: {
    readonly jobId?: any
    readonly sessionFile?: any
    readonly native?: any
    readonly rarebitRoot?: string
    readonly sessionRoot?: string
    readonly leaseMs?: any
    readonly allowExternalSession?: boolean
    readonly now?: number
    readonly hooks?: any
  } = {}
): Promise<any> {
  const reservation = await run((store) =>
    store.reserve({
      jobId,
      sessionFile,
      native,
      leaseMs,
      now: now ?? Date.now(),
      rarebitRoot,
      sessionRoot,
      allowExternalSession
    })
  )
  return plainReservation(reservation, hooks)
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
  const hook = reservation.hooks?.afterLeaseValidated
  const afterLeaseValidated = typeof hook === "function"
    ? Effect.tryPromise({ try: async () => await hook(), catch: (error) => error })
    : undefined
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
