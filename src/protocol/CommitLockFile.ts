/**
 * The commit-lock file `<sidecar>.commit-lock`: one JSON line naming the
 * holder's random `token` and when it was taken.
 *
 * The seed writes `{token, claimedAt}` and, on release, compares only
 * `token`. This project may add an optional nested `owner` record (process
 * id, host, process start time, boot id) as evidence for an operator deciding
 * whether a holder crashed; the reference ignores it. A lock is never broken
 * on this evidence or on age alone.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { isObjectRecord } from "./internal/JsonShape.js"
import { IsoTimestamp } from "./JobClaim.js"
import { NonEmptyString, PositiveInteger } from "./ReceiptParts.js"

/**
 * Who took a lock: enough to tell, on the same host, whether that process
 * still runs (a reused pid has a different start time or boot id).
 *
 * @category schemas
 * @since 0.1.0
 */
export const LockOwnerEvidence = Schema.Struct({
  pid: PositiveInteger,
  hostname: NonEmptyString,
  bootId: Schema.optionalKey(Schema.String),
  startTicks: Schema.optionalKey(Schema.String)
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
 * One lock line: compact JSON in the order `token`, `claimedAt`, `owner`,
 * then `"\n"`.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeLockLine = (lock: CommitLockFile): string => {
  const record: Record<string, unknown> = { token: lock.token, claimedAt: lock.claimedAt }
  if (lock.owner !== undefined) {
    const owner: Record<string, unknown> = { pid: lock.owner.pid, hostname: lock.owner.hostname }
    if (lock.owner.bootId !== undefined) owner.bootId = lock.owner.bootId
    if (lock.owner.startTicks !== undefined) owner.startTicks = lock.owner.startTicks
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
export const lockHeldBy = (lock: LockFileView, token: string): boolean =>
  lock.token === token
