/**
 * rarebit-store: the Rarebit sidecar store as an Effect service.
 *
 * Provide `NodeStore.layer(config)` (or `RarebitStore.layer(config)` over
 * your own `FileSystem` and `Path`) and call the `RarebitStore` operations;
 * failures are the tagged errors exported here. The pure protocol, Session
 * evidence and artifact-state modules are exported as namespaces.
 *
 * @since 0.1.0
 */
export * from "./store/Errors.js"
export * as CommitLock from "./store/CommitLock.js"
export { LockOwner, type LockOwnerProbe, type OwnerEvidence } from "./store/LockOwner.js"
export {
  commitLockPath,
  JOBS_DIR,
  MATERIALIZATIONS_DIR,
  materializationPath
} from "./store/MirroredPath.js"
export {
  type CurrentRead,
  type JobOutcome,
  RarebitStore,
  type ReadCurrentOptions,
  type ReadHistoryOptions,
  RECOVERY_WINDOW_BYTES,
  type ReserveOptions,
  type SettleHooks,
  type SettleOptions
} from "./store/RarebitStore.js"
export type { Acquired, Duplicate, InFlight, Reservation, SettledReceipt } from "./store/Reservation.js"
export type { HistoryPage, HistoryRecord, SidecarCurrent, SidecarDiagnostics } from "./store/SidecarReader.js"
export {
  DEFAULT_RAREBIT_ROOT,
  DEFAULT_RAREBIT_SESSION_ROOT,
  defaultStoreConfig,
  type LockRetry,
  makeStoreConfig,
  type StoreConfig
} from "./store/StoreConfig.js"
export * as SidecarAudit from "./store/SidecarAudit.js"
export * as NodeStore from "./platform/NodeStore.js"
export * as DirectFileSystem from "./platform/DirectFileSystem.js"
export * as Protocol from "./protocol/index.js"
export * as Session from "./session/index.js"
export * as ArtifactState from "./state/index.js"
