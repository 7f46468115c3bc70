/**
 * The store's error unions are derived from what its operations can fail
 * with; this pins them, so a new failure reaching a caller is a decision
 * made here, not a side effect. Checked by `npm run typecheck`; nothing
 * here runs.
 */
import type {
  HeadInvalid,
  HeadTooLarge,
  HistoryBoundsInvalid,
  HistoryUnreadable,
  InvalidJobId,
  InvalidLease,
  LeaseFenced,
  LockHeld,
  NotRegularFile,
  PathError,
  ReceiptInvalid,
  ReceiptTooLarge,
  ReceiptTypeUnsupported,
  ReleaseError,
  ReservationNotAcquired,
  ReserveError,
  SessionFileRequired,
  SessionOutsideRoot,
  SessionRootNotFound,
  SettleError,
  SettleHookFailed,
  StoreError,
  StoreIo,
  UnsafeDirectory
} from "../../src/index.js"
import type { ProjectionInputInvalid } from "../../src/state/ArtifactState.js"

type Equals<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false
type Assert<T extends true> = T

export type Pinned = [
  Assert<Equals<PathError, SessionFileRequired | SessionOutsideRoot>>,
  Assert<
    Equals<
      ReserveError,
      PathError | InvalidJobId | InvalidLease | HeadInvalid | NotRegularFile | LockHeld | StoreIo | UnsafeDirectory
    >
  >,
  Assert<
    Equals<
      SettleError,
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
    >
  >,
  Assert<Equals<ReleaseError, LockHeld | StoreIo | UnsafeDirectory>>,
  Assert<
    Equals<
      StoreError,
      | ReserveError
      | SettleError
      | ReleaseError
      | HistoryBoundsInvalid
      | HistoryUnreadable
      | ProjectionInputInvalid
      | SessionRootNotFound
    >
  >
]
