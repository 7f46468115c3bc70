/**
 * The outcomes of reserving a job.
 *
 * `Acquired` carries what settle and release need: the claim it owns (by
 * lease token) and where the receipt goes. `Duplicate` means the job was
 * already settled and its verified receipt is returned; `InFlight` means
 * another worker holds a live lease.
 *
 * @since 0.1.0
 */
import type { Receipt } from "../protocol/Receipt.js"
import type { NativeObservation } from "../state/ArtifactState.js"

/** Where a reservation's files are. @category models @since 0.1.0 */
export interface ReservationLocation {
  readonly jobId: string
  readonly materializationPath: string
  readonly sessionFile: string
  readonly rarebitRoot: string
  readonly sessionRoot: string
  readonly allowExternalSession: boolean
}

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
