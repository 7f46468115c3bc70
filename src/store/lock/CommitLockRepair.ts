/**
 * The explicit repair of a commit lock: reading a lock's evidence for an
 * operator, and removing a lock on the operator's word.
 *
 * The store never breaks a lock by age: only a lock whose owner evidence
 * proves its process dead is broken automatically (`CommitLock`). Any other
 * lock left by a crash blocks its sidecar until someone removes it, and this
 * is how: `inspectCommitLock` says what the lock is (token, age, owner,
 * whether the owner is provably gone, break files next to it) and gives the
 * key of exactly that lock; `removeCommitLock` removes the lock only while it
 * is still the one inspected.
 *
 * Guarantees:
 * - A removal never removes a lock taken after the inspection: it claims the
 *   same per-token break file the store's dead-lock breaker uses (created
 *   exclusively, so of all parties acting on one lock exactly one proceeds),
 *   re-reads the lock, and removes it only if it still has the inspected
 *   key. A crash in between leaves only the break file, which a forced
 *   repair clears once it is older than `staleAfterMs`.
 * - Without `force`, a lock is removed only when its owner is provably dead,
 *   judged by the same `LockOwner` probe as the store's breaker.
 * - Nothing is written by an inspection, and a lock that cannot be read as
 *   one (a FIFO, a device, an oversized file) is described, never opened
 *   for more than its bound (`readLockFile`); its key is a digest of its
 *   device and inode, so a forced removal acts on that very file.
 * - Reports stay small whatever the lock holds (`ReportFields`).
 *
 * @since 0.1.0
 */
import { Clock, Effect } from "effect"
import { FileSystem } from "effect/FileSystem"
import { Path } from "effect/Path"
import { sha256Hex } from "../../protocol/CanonicalJson.js"
import { isObjectRecord } from "../../protocol/internal/JsonShape.js"
import { clipField, clipNullableField, modifiedAt, stringMember } from "../audit/ReportFields.js"
import { storeIo } from "../Errors.js"
import { removeIfPresent } from "../write/DurableFile.js"
import { breakFilePath, createBreakFile, fitsFileName, type LockFileRead, readLockFile } from "./CommitLock.js"
import { LockOwner, type OwnerEvidence, ownerEvidenceOf } from "./LockOwner.js"

/**
 * How old a commit lock, temp file or break file must be before the audit
 * calls it a leftover rather than the trace of a write in progress, and
 * before a forced repair clears a break file as a crashed breaker's.
 *
 * @category constants
 * @since 0.1.0
 */
export const DEFAULT_STALE_AFTER_MS = 10_000

/**
 * Whether a lock's owner is known to be gone: `dead` (its evidence proves
 * it), `unknown` (evidence that proves nothing here: alive, or written on
 * another host, in another boot or in another PID or time namespace, or
 * without naming its namespace), `no_evidence` (a lock without owner
 * evidence, e.g. the reference's).
 *
 * @category models
 * @since 0.1.0
 */
export type OwnerLiveness = "dead" | "unknown" | "no_evidence"

/**
 * A commit lock's evidence.
 *
 * **Details**
 *
 * `tokenPrefix` is the first 12 hex digits of the token, enough to tell two
 * locks apart. `torn` means the file is empty or unparsable (a writer that
 * crashed between creating and filling it, which only the reference can
 * leave). `ageMs` is measured from `claimedAt`, or from the file's
 * modification time when `claimedAt` is unusable. Strings copied from the
 * file (`claimedAt`, the owner's) are cut to `MAX_FIELD_CHARS`.
 *
 * @category models
 * @since 0.1.0
 */
export interface LockReport {
  readonly path: string
  readonly tokenPrefix: string | null
  readonly claimedAt: string | null
  readonly ageMs: number | null
  readonly owner: OwnerEvidence | null
  readonly liveness: OwnerLiveness
  readonly torn: boolean
  /**
   * Why the lock cannot be read at all, e.g. "a FIFO, not a regular file" or
   * "larger than 4096 bytes" (then `torn` is `true` too); `null` when it
   * could be read.
   */
  readonly unreadable: string | null
  /** Break files next to the lock: a repair in progress, or one that crashed. */
  readonly breakFiles: ReadonlyArray<string>
}

/** A lock file that is there, read once. */
type PresentLock = Exclude<LockFileRead, { readonly _tag: "Absent" }>

/**
 * The break-file name a lock is broken under: the token, or for a torn lock
 * (no hex token) a digest of its exact content, or for a lock that cannot be
 * read (not a regular file, oversized) a digest of its device and inode.
 *
 * A token too long to fit in a break file's name also gets a digest: the
 * store's own breaker, which names the file after the raw token, cannot
 * create that file, so no other party can be using the raw name.
 */
const breakKey = (lockPath: string, read: PresentLock): string => {
  if (read._tag === "Unreadable") return `torn-${sha256Hex(`unreadable ${read.identity}`).slice(0, 32)}`
  const token = stringMember(read.content, "token")
  if (token === null || !/^[0-9a-f]+$/.test(token)) return `torn-${sha256Hex(read.raw).slice(0, 32)}`
  return fitsFileName(breakFilePath(lockPath.slice(lockPath.lastIndexOf("/") + 1), token))
    ? token
    : `long-${sha256Hex(token).slice(0, 32)}`
}

/** What a present lock parsed to; `null` when it cannot be read at all. */
const contentOf = (read: PresentLock): unknown => (read._tag === "Read" ? read.content : null)

/** Owner evidence with its strings cut to `MAX_FIELD_CHARS`, for reports. */
const reportedOwner = (owner: OwnerEvidence): OwnerEvidence => ({
  pid: owner.pid,
  hostname: clipField(owner.hostname),
  ...(owner.platform === undefined ? {} : { platform: clipField(owner.platform) }),
  ...(owner.bootId === undefined ? {} : { bootId: clipField(owner.bootId) }),
  ...(owner.startTicks === undefined ? {} : { startTicks: clipField(owner.startTicks) }),
  ...(owner.pidNamespace === undefined ? {} : { pidNamespace: clipField(owner.pidNamespace) }),
  ...(owner.timeNamespace === undefined ? {} : { timeNamespace: clipField(owner.timeNamespace) })
})

/**
 * A commit lock as read once: its evidence, and the key `removeCommitLock`
 * expects for exactly this lock (its token, or for a torn lock a digest of
 * its content).
 *
 * @category models
 * @since 0.1.0
 */
export interface InspectedLock {
  readonly lock: LockReport
  readonly key: string
}

/**
 * Reads a commit lock's evidence; `undefined` when there is no lock.
 *
 * **Details**
 *
 * Liveness comes from the `LockOwner` probe in the environment (the Node
 * layer's reads `/proc`); the default probe proves nothing dead.
 *
 * @category readers
 * @since 0.1.0
 */
export const inspectCommitLock = Effect.fn("CommitLockRepair.inspectCommitLock")(function*(lockPath: string) {
  const fs = yield* FileSystem
  const path = yield* Path
  const probe = yield* LockOwner
  const now = yield* Clock.currentTimeMillis
  const read = yield* readLockFile(fs, lockPath).pipe(Effect.mapError(storeIo("read commit lock", lockPath)))
  if (read._tag === "Absent") return undefined
  const content = contentOf(read)
  // Torn: unparsable, or a JSON value that cannot hold a token. An array is
  // parsed and holds none, but is not counted as torn.
  const torn = !isObjectRecord(content) && !Array.isArray(content)
  const token = stringMember(content, "token")
  const claimedAt = stringMember(content, "claimedAt")
  const claimedAtMs = claimedAt === null ? Number.NaN : Date.parse(claimedAt)
  const mtime = yield* modifiedAt(fs, lockPath)
  const ageMs = Number.isFinite(claimedAtMs) ? now - claimedAtMs : mtime === undefined ? null : now - mtime
  const owner = ownerEvidenceOf(content) ?? null
  const liveness: OwnerLiveness = owner === null
    ? "no_evidence"
    : (yield* probe.isProvablyDead(owner, ageMs ?? undefined))
    ? "dead"
    : "unknown"
  const directory = path.dirname(lockPath)
  const prefix = `${path.basename(lockPath)}.break-`
  const entries = yield* fs.readDirectoryEntries(directory).pipe(Effect.catch(() => Effect.succeed([])))
  const breakFiles = entries
    .filter((entry) => entry.name.startsWith(prefix))
    .map((entry) => path.join(directory, entry.name))
    .sort()
  const lock: LockReport = {
    path: lockPath,
    tokenPrefix: token === null ? null : token.slice(0, 12),
    claimedAt: clipNullableField(claimedAt),
    ageMs,
    owner: owner === null ? null : reportedOwner(owner),
    liveness,
    torn,
    unreadable: read._tag === "Unreadable" ? read.reason : null,
    breakFiles
  }
  return { lock, key: breakKey(lockPath, read) } satisfies InspectedLock
})

/**
 * The outcome of `removeCommitLock`.
 *
 * - `Removed`: the lock held the expected token and is gone.
 * - `Absent`: there was no lock (any more).
 * - `Changed`: the lock now holds another token; it was left alone.
 * - `BreakInProgress`: the break file for that token exists, so another
 *   repair (or the store's own dead-lock breaker) is acting, or crashed.
 * - `OwnerMayBeAlive`: the lock's owner is not provably dead and the caller
 *   did not force the removal; it was left alone.
 *
 * @category models
 * @since 0.1.0
 */
export type LockRemoval =
  | { readonly _tag: "Removed" }
  | { readonly _tag: "Absent" }
  | { readonly _tag: "Changed"; readonly tokenPrefix: string | null }
  | { readonly _tag: "BreakInProgress"; readonly breakPath: string }
  | { readonly _tag: "OwnerMayBeAlive"; readonly liveness: Exclude<OwnerLiveness, "dead"> }

const removed: LockRemoval = { _tag: "Removed" }
const absent: LockRemoval = { _tag: "Absent" }
const changed = (read: PresentLock): LockRemoval => ({
  _tag: "Changed",
  tokenPrefix: stringMember(contentOf(read), "token")?.slice(0, 12) ?? null
})
const breakInProgress = (breakPath: string): LockRemoval => ({ _tag: "BreakInProgress", breakPath })
const ownerMayBeAlive = (liveness: Exclude<OwnerLiveness, "dead">): LockRemoval => ({
  _tag: "OwnerMayBeAlive",
  liveness
})

/**
 * Options of `removeCommitLock`.
 *
 * @category models
 * @since 0.1.0
 */
export interface RemoveLockOptions {
  /**
   * Remove the lock even though its owner is not provably dead (no
   * evidence, or evidence from another host, boot or namespace). Only for an
   * operator who knows no writer is running.
   */
  readonly force?: boolean | undefined
  /** Remove a break file older than `staleAfterMs` (its breaker crashed) and go on. */
  readonly clearStaleBreakFile?: boolean | undefined
  readonly staleAfterMs?: number | undefined
}

/**
 * Whether `expected` names the lock with `key`: the whole key, or a prefix
 * of at least 8 characters.
 *
 * @category repair
 * @since 0.1.0
 */
export const keyMatches = (key: string, expected: string): boolean =>
  key === expected || (expected.length >= 8 && key.startsWith(expected))

/**
 * Removes a commit lock only if its owner is provably dead (or `force`) and
 * it still is the one the caller inspected.
 *
 * **Details**
 *
 * `expectedKey` is the `key` of `inspectCommitLock`, or a prefix of it of
 * at least 8 characters (see `keyMatches`). Without `force`, the owner is
 * judged by the `LockOwner` probe in the environment, exactly as the store's
 * breaker judges it, and a lock it cannot prove dead is `OwnerMayBeAlive`.
 * The break file `<lock>.break-<token>` is created exclusively first, the
 * same file the store's dead-lock breaker uses, so of all parties acting on
 * this lock exactly one proceeds; then the lock is read again and removed
 * only if it still holds that token. A lock created afterwards by someone
 * else has another token and is left alone.
 *
 * **Gotchas**
 *
 * With `force`, if the owner is alive and releases its own lock at the very
 * moment of removal, a lock taken in that instant could be removed; this is
 * why `force` is for when no writer is running.
 *
 * @category repair
 * @since 0.1.0
 */
export const removeCommitLock = Effect.fn("CommitLockRepair.removeCommitLock")(function*(
  lockPath: string,
  expectedKey: string,
  options: RemoveLockOptions = {}
) {
  const fs = yield* FileSystem
  const io = storeIo("remove commit lock", lockPath)
  const first = yield* readLockFile(fs, lockPath).pipe(Effect.mapError(io))
  if (first._tag === "Absent") return absent
  if (!keyMatches(breakKey(lockPath, first), expectedKey)) return changed(first)
  if (options.force !== true) {
    // The token is random and checked again below, so the lock removed is
    // the one judged here, and an owner proven dead cannot come back.
    const owner = ownerEvidenceOf(contentOf(first))
    if (owner === undefined) return ownerMayBeAlive("no_evidence")
    const probe = yield* LockOwner
    const claimedAt = Date.parse(stringMember(contentOf(first), "claimedAt") ?? "")
    const ageMs = Number.isFinite(claimedAt) ? (yield* Clock.currentTimeMillis) - claimedAt : undefined
    if (!(yield* probe.isProvablyDead(owner, ageMs))) return ownerMayBeAlive("unknown")
  }
  const key = breakKey(lockPath, first)
  const breakPath = breakFilePath(lockPath, key)
  const claimBreak = createBreakFile(fs, lockPath, key).pipe(Effect.mapError(io))
  let created = yield* claimBreak
  if (!created && options.clearStaleBreakFile === true) {
    // A break takes microseconds, so a break file this old was left by a
    // breaker that crashed. Clearing it is the operator's call (`--force`,
    // with no other repair running), since another repairer could be
    // between the same two steps.
    const modified = yield* modifiedAt(fs, breakPath)
    const now = yield* Clock.currentTimeMillis
    const staleAfterMs = options.staleAfterMs ?? DEFAULT_STALE_AFTER_MS
    if (modified !== undefined && now - modified >= staleAfterMs) {
      yield* removeIfPresent(fs, breakPath).pipe(Effect.mapError(io))
      created = yield* claimBreak
    }
  }
  if (!created) return breakInProgress(breakPath)
  return yield* Effect.gen(function*() {
    const again = yield* readLockFile(fs, lockPath).pipe(Effect.mapError(io))
    if (again._tag === "Absent") return absent
    if (breakKey(lockPath, again) !== key) return changed(again)
    yield* removeIfPresent(fs, lockPath).pipe(Effect.mapError(io))
    return removed
  }).pipe(
    Effect.ensuring(Effect.ignore(fs.remove(breakPath)))
  )
})
