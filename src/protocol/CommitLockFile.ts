/**
 * The commit-lock file `<sidecar>.commit-lock`: one JSON line naming the
 * holder's random `token` and when it was taken.
 *
 * The seed writes `{token, claimedAt}` and, on release, compares only
 * `token`. This project adds an optional nested `owner` record (pid, host,
 * boot id, process start time, PID and time namespace), which the reference
 * ignores. Evidence written on macOS or Windows is tagged with its
 * `platform` (`"darwin"`, `"win32"`); Linux evidence carries no tag, as
 * every older version of this store wrote it. The store breaks a lock on
 * that evidence only when it proves the owner dead (see `store/lock/LockOwner`),
 * and never on age alone.
 *
 * The line is written in a fixed key order (`token`, `claimedAt`, `owner`;
 * inside `owner`: `pid`, `hostname`, `platform`, `bootId`, `startTicks`,
 * `pidNamespace`, `timeNamespace`) and our writers keep it within `MAX_LOCK_LINE_BYTES`.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { isObjectRecord } from "./internal/JsonShape.js"
import { IsoTimestamp } from "./JobClaim.js"
import { NonEmptyString, PositiveInteger } from "./ReceiptParts.js"

/**
 * Who took a lock: enough to tell, in the same boot and PID namespace,
 * whether that process still runs (a reused pid has a different start time).
 *
 * @category schemas
 * @since 0.1.0
 */
export const LockOwnerEvidence = Schema.Struct({
  pid: PositiveInteger,
  hostname: NonEmptyString,
  platform: Schema.optionalKey(Schema.String),
  bootId: Schema.optionalKey(Schema.String),
  startTicks: Schema.optionalKey(Schema.String),
  pidNamespace: Schema.optionalKey(Schema.String),
  timeNamespace: Schema.optionalKey(Schema.String)
})

/**
 * @category models
 * @since 0.1.0
 */
export type LockOwnerEvidence = typeof LockOwnerEvidence.Type

/**
 * The lock file as written: the seed's `{token, claimedAt}` plus this
 * project's optional `owner`.
 *
 * @category schemas
 * @since 0.1.0
 */
export const CommitLockFile = Schema.Struct({
  token: NonEmptyString,
  claimedAt: IsoTimestamp,
  owner: Schema.optionalKey(LockOwnerEvidence)
})

/**
 * @category models
 * @since 0.1.0
 */
export type CommitLockFile = typeof CommitLockFile.Type

/**
 * Strict decoding of a parsed lock file, rejecting unknown keys.
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeCommitLockFile = Schema.decodeUnknownResult(CommitLockFile, { onExcessProperty: "error" })

/**
 * The most bytes a lock line of ours takes, newline included.
 *
 * **Details**
 *
 * A real line takes 250 to 350 bytes (a 48-digit token, a 24-character
 * timestamp, a hostname of at most 64 bytes on Linux, a 36-character boot
 * id, two namespace names); the `/proc` probe writes no evidence rather
 * than exceed this.
 *
 * @category constants
 * @since 0.1.0
 */
export const MAX_LOCK_LINE_BYTES = 1024

/**
 * One lock line: compact JSON in the order `token`, `claimedAt`, `owner`
 * (`pid`, `hostname`, `platform`, `bootId`, `startTicks`, `pidNamespace`,
 * `timeNamespace`), then `"\n"`.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeLockLine = (lock: CommitLockFile): string => {
  const record: Record<string, unknown> = { token: lock.token, claimedAt: lock.claimedAt }
  if (lock.owner !== undefined) {
    const owner: Record<string, unknown> = { pid: lock.owner.pid, hostname: lock.owner.hostname }
    if (lock.owner.platform !== undefined) owner.platform = lock.owner.platform
    if (lock.owner.bootId !== undefined) owner.bootId = lock.owner.bootId
    if (lock.owner.startTicks !== undefined) owner.startTicks = lock.owner.startTicks
    if (lock.owner.pidNamespace !== undefined) owner.pidNamespace = lock.owner.pidNamespace
    if (lock.owner.timeNamespace !== undefined) owner.timeNamespace = lock.owner.timeNamespace
    record.owner = owner
  }
  return `${JSON.stringify(record)}\n`
}

/**
 * What a lenient read of a lock file found: the fields that have the right
 * type, each optional.
 *
 * @category models
 * @since 0.1.0
 */
export interface LockFileView {
  readonly token?: string
  readonly claimedAt?: string
  readonly owner?: LockOwnerEvidence
}

/**
 * What reading a lock file gave.
 *
 * @category models
 * @since 0.1.0
 */
export type LockFileParse =
  | { readonly _tag: "Parsed"; readonly lock: LockFileView }
  | { readonly _tag: "Torn" }

const isLockOwner = Schema.is(LockOwnerEvidence)

/**
 * Parses lock text leniently.
 *
 * **Details**
 *
 * Unparsable, empty or whitespace-only text is `Torn`. Any JSON value is
 * `Parsed`, keeping only a string `token`, a string `claimedAt` and a
 * well-formed `owner`: the seed's release compares `token` alone, so a lock
 * whose token is missing or not a string is held by nobody who can release it.
 *
 * @category decoding
 * @since 0.1.0
 */
export const parseLockFile = (text: string): LockFileParse => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return { _tag: "Torn" }
  }
  if (!isObjectRecord(parsed)) return { _tag: "Parsed", lock: {} }
  const lock: { token?: string; claimedAt?: string; owner?: LockOwnerEvidence } = {}
  if (typeof parsed.token === "string") lock.token = parsed.token
  if (typeof parsed.claimedAt === "string") lock.claimedAt = parsed.claimedAt
  if (isLockOwner(parsed.owner)) lock.owner = parsed.owner
  return { _tag: "Parsed", lock }
}

/**
 * Whether a lock view is held by `token`: the seed's release test.
 *
 * @category predicates
 * @since 0.1.0
 */
export const lockHeldBy = (lock: LockFileView, token: string): boolean => lock.token === token
