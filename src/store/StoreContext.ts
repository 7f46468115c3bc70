/**
 * What every operation of one store instance is given: its configuration,
 * its file system and path, its caches, its commit locks and its tokens.
 *
 * `RarebitStore.make` builds one per instance and hands it to the modules
 * that implement the operations (`StoreReads`, `Reservation`, `Settlement`,
 * `SettlementRecovery`), so each of them is written once, as plain
 * functions of a context, and the service module keeps only its shape and
 * the wiring. Nothing here is durable: a context lives as long as the scope
 * its store was built in.
 *
 * @since 0.1.0
 */
import type { Effect, Scope } from "effect"
import type { SecureRandom } from "effect/crypto/SecureRandom"
import type { FileSystem } from "effect/FileSystem"
import type { Path } from "effect/Path"
import type { NativeObservation } from "../state/ArtifactState.js"
import type { LockHeld, StoreIo } from "./Errors.js"
import type { PathError, SessionIdentity } from "./MirroredPath.js"
import type { SidecarCurrent } from "./read/SidecarReader.js"
import type { StoreConfig, StoreLocation } from "./StoreConfig.js"

/**
 * The dependencies of one store instance's operations.
 *
 * @category models
 * @since 0.1.0
 */
export interface StoreContext {
  readonly config: StoreConfig
  readonly fs: FileSystem
  readonly path: Path
  /**
   * The canonical spelling of a Session path and its roots (`makeSessionIdentity`):
   * taken once at each operation's entry, so every key below it is one per file.
   */
  readonly identify: SessionIdentity["canonical"]
  /** A Session's sidecar path under `location`, or the path rule's failure. */
  readonly sidecarPath: (sessionFile: unknown, location: StoreLocation) => Effect.Effect<string, PathError>
  /** The bounded current read of a sidecar, through the instance's cache of open sidecars. */
  readonly readSidecar: (sidecar: string) => Effect.Effect<SidecarCurrent>
  /** What the Session says now, through the instance's Session cache unless `cacheSessions` is off. */
  readonly observeNative: (sessionFile: string, location: StoreLocation) => Effect.Effect<NativeObservation>
  /** Gives an effect the instance's own `SecureRandom`, never the caller's, for lease and lock tokens. */
  readonly withTokens: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, Exclude<R, SecureRandom>>
  /** Runs `body` under the commit lock of `sidecar`, queued behind this instance's other fibers. */
  readonly withLock: <A, E, R>(
    sidecar: string,
    body: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | LockHeld | StoreIo, Exclude<R, Scope.Scope> | SecureRandom>
}
