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
export * as CommitLock from "./store/lock/CommitLock.js"
export { LockOwner, type LockOwnerProbe, type OwnerEvidence } from "./store/lock/LockOwner.js"
export { commitLockPath, JOBS_DIR, materializationPath, MATERIALIZATIONS_DIR } from "./store/MirroredPath.js"
export {
  type CurrentRead,
  type JobOutcome,
  type PathError,
  RarebitStore,
  type ReadCurrentOptions,
  type ReadHistoryOptions,
  RECOVERY_WINDOW_BYTES,
  type ReleaseError,
  type ReserveError,
  type ReserveOptions,
  type Settled,
  type SettleError,
  type SettleHooks,
  type SettleOptions,
  type StoreError
} from "./store/RarebitStore.js"
export {
  type SessionOverviewEntry,
  type SessionOverviewOptions,
  SessionRootNotFound
} from "./store/read/SessionOverview.js"
export type {
  Availability,
  AvailableSidecarCurrent,
  HistoryPage,
  HistoryRecord,
  SidecarCurrent,
  SidecarDiagnostics,
  SidecarReason,
  UnavailableSidecarCurrent
} from "./store/read/SidecarReader.js"
export {
  type CacheBudgetConfig,
  DEFAULT_CACHE_BUDGET,
  DEFAULT_RAREBIT_ROOT,
  DEFAULT_RAREBIT_SESSION_ROOT,
  defaultStoreConfig,
  type LocationOverrides,
  type LockRetry,
  makeStoreConfig,
  type StoreConfig
} from "./store/StoreConfig.js"
export type {
  WatchedCurrent,
  WatchMode,
  WatchOptions,
  WatchSessionsOptions,
  WatchTuning
} from "./store/watch/CurrentWatch.js"
export type {
  Acquired,
  Duplicate,
  InFlight,
  Reservation,
  ReservationLocation,
  SettledReceipt
} from "./store/write/Reservation.js"
// The models of the protocol's records, by name; their Schemas are under `Protocol`.
export * as DirectFileSystem from "./platform/DirectFileSystem.js"
export * as NodeStore from "./platform/NodeStore.js"
export type { CommitLockFile } from "./protocol/CommitLockFile.js"
export type { Head, ReceiptReference } from "./protocol/Head.js"
export * as Protocol from "./protocol/index.js"
export type { ActiveClaim, JobClaim, SettledClaim } from "./protocol/JobClaim.js"
export type { Receipt, ReceiptInput } from "./protocol/Receipt.js"
export type {
  FailureSummaryReceipt,
  IneligibleSummaryReceipt,
  InhibitedSummaryReceipt,
  OkSummaryReceipt,
  SessionAssessment,
  SummaryReceipt,
  UnavailableOverflowSummaryReceipt
} from "./protocol/SummaryReceipt.js"
export type {
  FailureTitleReceipt,
  SkippedTitleReceipt,
  TitledTitleReceipt,
  TitleReceipt
} from "./protocol/TitleReceipt.js"
export * as Session from "./session/index.js"
export type { SessionObservation } from "./session/SessionReader.js"
export type { ArtifactExpectation, NativeObservation } from "./state/ArtifactState.js"
export * as ArtifactState from "./state/index.js"
export * as SidecarAudit from "./store/audit/SidecarAudit.js"
export * as CommitLockRepair from "./store/lock/CommitLockRepair.js"
