/**
 * The failures of the sidecar store, one tagged class per condition.
 *
 * Readers never fail for data they find on disk: a damaged sidecar is a
 * result (`availability` / `diagnostics.reason`). These errors are for caller
 * mistakes and for write paths that must stop. Messages keep the phrases
 * plain callers match on; which of the reference's error classes each
 * becomes is the Promise API's one mapping (`promise/PlainErrors`).
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import type { PlatformError } from "effect/PlatformError"
import type { FileNotRegular, NotDirectory } from "../io/RegularFile.js"
import { memberOf } from "../protocol/internal/JsonShape.js"
import { clipText } from "../protocol/internal/Text.js"

/** The Session file argument is missing or blank. @category errors @since 0.1.0 */
export class SessionFileRequired extends Schema.TaggedError<SessionFileRequired>()("SessionFileRequired", {}) {
  override get message() {
    return "A persisted Pi Session file is required"
  }
}

/** The Session file lies outside `sessionRoot` and external Sessions are not allowed. @category errors @since 0.1.0 */
export class SessionOutsideRoot extends Schema.TaggedError<SessionOutsideRoot>()("SessionOutsideRoot", {
  sessionFile: Schema.String,
  sessionRoot: Schema.String
}) {
  override get message() {
    return "Pi Session file is outside the configured Session root"
  }
}

/** A sidecar path is a symlink, a directory or another non-regular file. @category errors @since 0.1.0 */
export class NotRegularFile extends Schema.TaggedError<NotRegularFile>()("NotRegularFile", {
  path: Schema.String
}) {
  override get message() {
    return "Rarebit materialization path must be a regular file"
  }
}

/**
 * A directory the store would create or write into under the rarebit root
 * is not one it may use: a symlink, not a directory, or owned by another
 * user. Nothing was written there.
 *
 * @category errors
 * @since 0.1.0
 */
export class UnsafeDirectory extends Schema.TaggedError<UnsafeDirectory>()("UnsafeDirectory", {
  path: Schema.String,
  /** e.g. "a symlink", "a FIFO, not a directory", "owned by uid 1001, not by uid 1000". */
  reason: Schema.String
}) {
  override get message() {
    return `Rarebit store directory ${this.path} is ${this.reason}; refusing to use it`
  }
}

/** A job id is not 64 lower-case hex digits. @category errors @since 0.1.0 */
export class InvalidJobId extends Schema.TaggedError<InvalidJobId>()("InvalidJobId", {
  jobId: Schema.Unknown
}) {
  override get message() {
    return "Rarebit jobId must be a SHA-256 hex string"
  }
}

/** A lease is not a positive finite number of milliseconds. @category errors @since 0.1.0 */
export class InvalidLease extends Schema.TaggedError<InvalidLease>()("InvalidLease", {
  leaseMs: Schema.Unknown
}) {
  override get message() {
    return "Rarebit leaseMs must be a positive finite number"
  }
}

/** A history page was asked for outside the protocol's offset and limit bounds. @category errors @since 0.1.0 */
export class HistoryBoundsInvalid extends Schema.TaggedError<HistoryBoundsInvalid>()("HistoryBoundsInvalid", {
  fromOffset: Schema.Unknown,
  limit: Schema.Unknown
}) {
  override get message() {
    return "History offset and limit are outside protocol bounds"
  }
}

/** Settle was called with something other than an acquired reservation. @category errors @since 0.1.0 */
export class ReservationNotAcquired extends Schema.TaggedError<ReservationNotAcquired>()("ReservationNotAcquired", {}) {
  override get message() {
    return "An acquired Rarebit reservation is required"
  }
}

/** A receipt's `type` is neither `rarebit_summary` nor `rarebit_title`. @category errors @since 0.1.0 */
export class ReceiptTypeUnsupported extends Schema.TaggedError<ReceiptTypeUnsupported>()("ReceiptTypeUnsupported", {
  type: Schema.Unknown
}) {
  override get message() {
    return "Rarebit derivation receipt type is unsupported"
  }
}

/**
 * A receipt does not validate against its v4 schema.
 *
 * **Details**
 *
 * `message` says why, with the schema decoder's explanation (`reason`, e.g.
 * `Missing key at ["sessionId"]`), then the receipt's status and sorted keys
 * (cut to a few hundred characters). The Promise API rebuilds the
 * reference's own wording from the fields: `… does not match protocol v4
 * (<status>; keys: <keys>)`.
 *
 * @category errors
 * @since 0.1.0
 */
export class ReceiptInvalid extends Schema.TaggedError<ReceiptInvalid>()("ReceiptInvalid", {
  kind: Schema.Literals(["Summary", "Title"]),
  status: Schema.Unknown,
  keys: Schema.Array(Schema.String),
  reason: Schema.String
}) {
  override get message() {
    const keys = clipText(this.keys.join(","), 300)
    return `Rarebit ${this.kind} receipt does not match protocol v4: ${this.reason} (status ${
      describeNonString(this.status)
    }; keys: ${keys})`
  }
}

/** A receipt line would exceed 48 KiB. @category errors @since 0.1.0 */
export class ReceiptTooLarge extends Schema.TaggedError<ReceiptTooLarge>()("ReceiptTooLarge", {
  bytes: Schema.Number
}) {
  override get message() {
    return "Rarebit receipt exceeds protocol byte limit"
  }
}

/** A head line would exceed 8 KiB. @category errors @since 0.1.0 */
export class HeadTooLarge extends Schema.TaggedError<HeadTooLarge>()("HeadTooLarge", {
  bytes: Schema.Number
}) {
  override get message() {
    return "Rarebit head exceeds protocol byte limit"
  }
}

/** The reservation's lease token no longer owns the job claim: a newer worker took it over. @category errors @since 0.1.0 */
export class LeaseFenced extends Schema.TaggedError<LeaseFenced>()("LeaseFenced", {
  jobId: Schema.String,
  claimPath: Schema.String
}) {
  override get message() {
    return "Rarebit reservation lease was fenced by a newer worker"
  }
}

/**
 * The commit lock stayed held through every retry.
 *
 * **Details**
 *
 * A lock left by a crashed process is never broken by age alone. Locks with
 * owner evidence whose owner is provably dead are broken automatically; any
 * other stale lock needs `rarebit-store unlock`.
 *
 * @category errors
 * @since 0.1.0
 */
export class LockHeld extends Schema.TaggedError<LockHeld>()("LockHeld", {
  lockPath: Schema.String,
  attempts: Schema.Number
}) {
  override get message() {
    return "Rarebit Session commit lock is held; explicit repair is required if its owner crashed"
  }
}

/** A settled claim's receipt pointer does not verify against the sidecar. @category errors @since 0.1.0 */
export class HeadInvalid extends Schema.TaggedError<HeadInvalid>()("HeadInvalid", {
  claimPath: Schema.String,
  materializationPath: Schema.String
}) {
  override get message() {
    return "Rarebit settled job receipt pointer is invalid"
  }
}

/** The caller's settle hook failed; `cause` is what it failed with. @category errors @since 0.1.0 */
export class SettleHookFailed extends Schema.TaggedError<SettleHookFailed>()("SettleHookFailed", {
  cause: Schema.Defect()
}) {
  override get message() {
    return "Rarebit settle hook failed"
  }
}

/**
 * A file-system operation of a write path failed.
 *
 * @category errors
 * @since 0.1.0
 */
export class StoreIo extends Schema.TaggedError<StoreIo>()("StoreIo", {
  operation: Schema.String,
  path: Schema.String,
  cause: Schema.Defect()
}) {
  override get message() {
    return `Rarebit store ${this.operation} failed for ${this.path}: ${
      String(memberOf(this.cause, "message") ?? this.cause)
    }`
  }
}

/**
 * Wraps a platform error (or a refusal to open something that is not what
 * the store expects at a path) with the operation and path it came from.
 *
 * **Details**
 *
 * A path that is not a string (a hand-made reservation from a plain caller)
 * is recorded by its string form; the file system's own error, in `cause`,
 * says what was wrong with it.
 *
 * @category constructors
 * @since 0.1.0
 */
export const storeIo =
  (operation: string, path: string) => (cause: PlatformError | FileNotRegular | NotDirectory): StoreIo =>
    new StoreIo({ operation, path: typeof path === "string" ? path : describeNonString(path), cause })

// The string form of any value, cut short, even where `String` throws (a
// value nested too deep, a throwing `toString`).
const describeNonString = (value: unknown): string => {
  try {
    return clipText(String(value), 300)
  } catch {
    return Object.prototype.toString.call(value)
  }
}

/** The history stream met a sidecar it cannot read. @category errors @since 0.1.0 */
export class HistoryUnreadable extends Schema.TaggedError<HistoryUnreadable>()("HistoryUnreadable", {
  path: Schema.String,
  offset: Schema.Number
}) {
  override get message() {
    return `Rarebit sidecar history is unreadable at offset ${this.offset}: ${this.path}`
  }
}
