/**
 * The commit lock of a sidecar, as a scoped resource.
 *
 * On disk the lock is `<sidecar>.commit-lock`, created exclusively and
 * holding `{token, claimedAt}` (plus our owner evidence); it is removed only
 * by the holder of its token. Acquisition makes `attempts` tries, waiting
 * `intervalMs` between them on average (each attempt up to half an interval
 * earlier than on a fixed schedule, never later; the waits together exactly
 * `(attempts - 1) × intervalMs`), then fails with `LockHeld`.
 *
 * Guarantees:
 * - The lock file appears with its full content or not at all: it is written
 *   to a private temp file, fsynced, then hard-linked into place (a link
 *   fails if the name exists, like `wx`; see `DurableFile`). A crash can
 *   therefore never leave an empty lock that nobody could attribute.
 * - Fibers of one process queue in front of the file (`LockQueues`), so
 *   only one of them polls it and a held lock can pass from one to the
 *   next; the file still excludes other processes, unchanged on disk.
 * - Release runs on success, failure and interruption, and removes the file
 *   only if it still holds our token; the removal is fsynced, so a power cut
 *   after a release never brings back a lock that, after the reboot, names
 *   a boot that is gone (see docs/power-loss.md).
 * - A lock whose owner evidence proves its process dead (written on this
 *   process's own platform and host, in its boot, PID and time namespace,
 *   pid gone or reused there; see `LockOwner`) is broken, under a per-token break file so two
 *   waiters never both break and a fresh lock is never removed. Locks
 *   without evidence (the reference's), or whose evidence comes from
 *   another namespace, host or boot, are never broken, whatever their age.
 *   A waiter judges the owner when it first finds the lock held, then again
 *   each time the lock has kept its token `DEAD_OWNER_RECHECK_MS` (250 ms),
 *   so an owner that dies while others wait has its lock broken within
 *   about that long; in between, an attempt only looks whether the file is
 *   there.
 * - The lock line stays within `MAX_LOCK_LINE_BYTES`: evidence that would
 *   not fit is left out.
 * - A lock is decoded exactly as the reference's `readFile(path, "utf8")`
 *   decodes it (`decodeUtf8`): a BOM is kept, so a lock that starts with one
 *   is not JSON, holds no token or evidence, and is never broken.
 * - A lock file is read without blocking and at most `MAX_LOCK_FILE_BYTES`
 *   of it (`io/RegularFile`): one that cannot be read as a lock — a FIFO, a
 *   device, a socket or a symlink at the path, or an oversized file — is
 *   held exactly like a torn lock: never broken, never removed by a
 *   release, `LockHeld` once the retries run out.
 *
 * Inspecting a lock and removing one on an operator's word is the lock's
 * repair (`CommitLockRepair`), which shares the break files used here.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Random, type Scope } from "effect"
import type * as SecureRandom from "effect/crypto/SecureRandom"
import type { FileSystem } from "effect/FileSystem"
import type { PlatformError } from "effect/PlatformError"
import { platformTraitsOf } from "../../io/NonBlockingOpen.js"
import { describeType, type FileNotRegular, readBounded } from "../../io/RegularFile.js"
import { encodeLockLine, MAX_LOCK_LINE_BYTES } from "../../protocol/CommitLockFile.js"
import { fileIdentity } from "../../protocol/internal/FileInfo.js"
import { isoTimestampOf } from "../../protocol/internal/IsoTimestamp.js"
import { parseJsonOrNull } from "../../protocol/internal/JsonParse.js"
import { memberOf } from "../../protocol/internal/JsonShape.js"
import { decodeUtf8 } from "../../protocol/internal/Utf8.js"
import { MAX_LOCK_FILE_BYTES } from "../../protocol/Limits.js"
import { LockHeld, type StoreIo, storeIo } from "../Errors.js"
import { randomToken } from "../RandomToken.js"
import type { LockRetry } from "../StoreConfig.js"
import { installExclusive, removeIfPresent, syncDirectory, writeDurableTemp } from "../write/DurableFile.js"
import { isOwnEvidence, LockOwner, type OwnerEvidence, ownerEvidenceOf } from "./LockOwner.js"
import * as LockQueues from "./LockQueues.js"

const encoder = new TextEncoder()

/**
 * Tokens of the lock files this process holds (or is creating), across all
 * store instances. A lock file with this process's own evidence but a token
 * not in this set was left by a release that failed here, and can be
 * broken by the next waiter instead of blocking the sidecar until exit.
 */
const tokensHeldHere: Set<string> = ((globalThis as Record<symbol, unknown>)[
  // Shared by every copy of this module in the process (nested installs of
  // two versions), so neither takes the other's live locks for leaked ones.
  Symbol.for("rarebit-store/tokensHeldHere")
] ??= new Set<string>()) as Set<string>

/**
 * A lock with exactly this process's evidence (boot and PID namespace
 * included: a pid of another namespace is another process) whose token this
 * process does not hold.
 */
const leakedHere = (self: OwnerEvidence | undefined, owner: OwnerEvidence, token: string): boolean =>
  isOwnEvidence(self, owner) && !tokensHeldHere.has(token)

/** How long ago the lock was taken, by its `claimedAt`; `undefined` when it has none. */
const lockAgeOf = (holder: unknown, now: number): number | undefined => {
  const claimedAt = memberOf(holder, "claimedAt")
  const at = typeof claimedAt === "string" ? Date.parse(claimedAt) : Number.NaN
  return Number.isFinite(at) ? now - at : undefined
}

/** The lock line, with our evidence when the line then stays within its bound. */
const lockLine = (token: string, claimedAt: string, owner: OwnerEvidence | undefined): string => {
  const bare = encodeLockLine({ token, claimedAt })
  if (owner === undefined) return bare
  const withOwner = encodeLockLine({ token, claimedAt, owner })
  return encoder.encode(withOwner).length <= MAX_LOCK_LINE_BYTES ? withOwner : bare
}

/** A lock this process holds. @category models @since 0.1.0 */
export interface HeldLock {
  readonly lockPath: string
  readonly token: string
}

/**
 * A lock file as read once.
 *
 * - `Absent`: no file at the path.
 * - `Read`: its text and what it parses to (`null` when it does not: torn).
 * - `Unreadable`: not a regular file, or longer than `MAX_LOCK_FILE_BYTES`;
 *   `reason` says which, `identity` is its device and inode (from `lstat`)
 *   so a repair can tell whether the same file is still there.
 *
 * @category models
 * @since 0.1.0
 */
export type LockFileRead =
  | { readonly _tag: "Absent" }
  | { readonly _tag: "Read"; readonly raw: string; readonly content: unknown }
  | { readonly _tag: "Unreadable"; readonly reason: string; readonly identity: string }

const unreadable = (fs: FileSystem, path: string, reason: string): Effect.Effect<LockFileRead> =>
  fs.lstat(path).pipe(
    Effect.map((info) => fileIdentity(info) ?? "unknown"),
    Effect.orElseSucceed(() => "unknown"),
    Effect.map((identity): LockFileRead => ({ _tag: "Unreadable", reason, identity }))
  )

/**
 * Reads a lock file without following a symlink, without blocking and
 * without reading more than `MAX_LOCK_FILE_BYTES + 1` bytes.
 *
 * @internal
 */
export const readLockFile = (fs: FileSystem, path: string): Effect.Effect<LockFileRead, PlatformError> =>
  readBounded(fs, path, { maxBytes: MAX_LOCK_FILE_BYTES, followSymlinks: false }).pipe(
    Effect.flatMap((read): Effect.Effect<LockFileRead> => {
      if (read._tag === "Read") {
        const raw = decodeUtf8(read.bytes)
        return Effect.succeed({ _tag: "Read", raw, content: parseJsonOrNull(raw) })
      }
      return unreadable(fs, path, `larger than ${MAX_LOCK_FILE_BYTES} bytes`)
    }),
    Effect.catchTag(
      "FileNotRegular",
      (error: FileNotRegular) => unreadable(fs, path, `${describeType(error.type)}, not a regular file`)
    ),
    Effect.catchReason("PlatformError", "NotFound", () => Effect.succeed<LockFileRead>({ _tag: "Absent" }))
  )

/** A lock's parsed content; `undefined` when absent, `null` when it cannot be read as a lock (torn, or not one). */
const readJsonFile = (fs: FileSystem, path: string): Effect.Effect<unknown, PlatformError> =>
  Effect.map(
    readLockFile(fs, path),
    (read) => read._tag === "Absent" ? undefined : read._tag === "Read" ? read.content : null
  )

/** The directory a lock file is in. */
const directoryOf = (lockPath: string): string => {
  const slash = lockPath.lastIndexOf("/")
  return slash < 0 ? "." : slash === 0 ? "/" : lockPath.slice(0, slash)
}

/**
 * Removes `lockPath` only if it still holds `token`.
 *
 * @internal
 */
export const releaseFileLock: (fs: FileSystem, lockPath: string, token: string) => Effect.Effect<void, StoreIo> = Effect
  .fnUntraced(function*(fs: FileSystem, lockPath: string, token: string) {
    const current = yield* readJsonFile(fs, lockPath)
    if (memberOf(current, "token") !== token) return
    yield* removeIfPresent(fs, lockPath)
    // A removal a power cut loses brings the lock back; after the reboot its
    // owner's evidence names another boot, and it is never broken (only
    // `rarebit-store unlock` removes it). Its link may be durable already:
    // any fsync of the directory while it was held made it so.
    yield* syncDirectory(fs, directoryOf(lockPath))
  }, (effect, _fs, lockPath) => Effect.mapError(effect, storeIo("release commit lock", lockPath)))

/**
 * The private temp file a lock is written to before it is linked into
 * place: `<lock>.<token>.tmp`, or `.commit-lock.<token>.tmp` in the same
 * directory when that name would be longer than a file name can be (a
 * Session file name of 191 to 243 bytes), so that every lock name the
 * reference can create, this store can create too.
 *
 * @internal
 */
export const lockTempPath = (lockPath: string, token: string, backslashSeparator = false): string => {
  const slash = lastSeparator(lockPath, backslashSeparator)
  const named = `${lockPath}.${token}.tmp`
  return fitsFileName(named.slice(slash + 1)) ? named : `${lockPath.slice(0, slash + 1)}.commit-lock.${token}.tmp`
}

/** Where the last component of `path` starts, less one: `/` always separates, `\\` too on Windows. */
const lastSeparator = (path: string, backslashSeparator: boolean): number =>
  backslashSeparator ? Math.max(path.lastIndexOf("/"), path.lastIndexOf("\\")) : path.lastIndexOf("/")

// The longest file name most file systems accept, in bytes.
const NAME_MAX = 255

/**
 * Whether `name`, one path component, is short enough to be a file name on
 * most file systems (`NAME_MAX`, 255 bytes of UTF-8).
 *
 * @internal
 */
export const fitsFileName = (name: string): boolean => encoder.encode(name).length <= NAME_MAX

/** Where the break of the lock holding `deadToken` is claimed. @internal */
export const breakFilePath = (lockPath: string, deadToken: string): string => `${lockPath}.break-${deadToken}`

/**
 * Claims the break of the lock holding `deadToken`: `false` when someone
 * else already has. Breakers in this process, the operator's `unlock` and
 * other processes all race on this one exclusive create.
 *
 * @internal
 */
export const createBreakFile = (
  fs: FileSystem,
  lockPath: string,
  deadToken: string
): Effect.Effect<boolean, PlatformError> =>
  fs.writeFile(breakFilePath(lockPath, deadToken), encoder.encode(`${JSON.stringify({ deadToken })}\n`), {
    flag: "wx",
    mode: 0o600
  }).pipe(Effect.as(true), Effect.catchReason("PlatformError", "AlreadyExists", () => Effect.succeed(false)))

/**
 * Breaks a lock whose owner is provably dead.
 *
 * **Details**
 *
 * The break file `<lock>.break-<deadToken>` is created exclusively, so of
 * all waiters that judged the same lock dead exactly one proceeds. It then
 * re-reads the lock and removes it only if it still holds the dead token: a
 * fresh lock can be created only after the dead one is gone, so a token
 * match means the file is still the dead owner's. A crash inside this step
 * leaves the break file, and that lock then needs `rarebit-store unlock
 * --force`, which clears a break file old enough to be a crashed breaker's.
 */
const breakDeadLock: (fs: FileSystem, lockPath: string, deadToken: string) => Effect.Effect<boolean, PlatformError> =
  Effect.fnUntraced(function*(fs: FileSystem, lockPath: string, deadToken: string) {
    const breakPath = breakFilePath(lockPath, deadToken)
    if (!(yield* createBreakFile(fs, lockPath, deadToken))) return false
    // The break file goes whatever happens here: left behind after a failed
    // read or removal, it would stop every later waiter from breaking the
    // dead lock. Removing it is safe at any point, since a lock can only be
    // removed while it still holds the dead token.
    return yield* Effect.gen(function*() {
      const current = yield* readJsonFile(fs, lockPath)
      const broken = memberOf(current, "token") === deadToken
      if (broken) yield* removeIfPresent(fs, lockPath)
      return broken
    }).pipe(Effect.ensuring(Effect.ignore(removeIfPresent(fs, breakPath))))
  })

/**
 * How long a waiter lets a lock stay with one token before it looks at its
 * owner again. A waiter judges the owner when it first finds the lock held;
 * after that, only a lock that kept its token this long is read and judged
 * again, so a waiter's attempts are a look at the path, not a read, a parse
 * and a `/proc` lookup every few milliseconds.
 *
 * @internal
 */
export const DEAD_OWNER_RECHECK_MS = 250

/**
 * How much earlier than its place on the `intervalMs` grid an attempt may
 * be made: up to half an interval (2 ms for the protocol's 5), never later,
 * so the waits between attempts run from half an interval to one and a half
 * (3 to 7 ms). Waiters that failed at the same moment (workers started
 * together, or all queued on one holder) then do not poll the file in step,
 * and one of them looks soon after a release. No attempt comes later than
 * on the fixed schedule, and the last one sits on the grid, so the waits add
 * up to exactly `(attempts - 1) × intervalMs`: the protocol's budget.
 *
 * @internal
 */
export const retryJitterMs = (intervalMs: number): number => Math.floor(intervalMs / 2)

/** The lock as a waiter last read it: its token, and since when it had that token. */
interface SeenHolder {
  readonly token: unknown
  readonly since: number
  readonly readAt: number
}

/**
 * Creates the lock file for the current scope, waiting for other processes
 * as configured.
 *
 * **Details**
 *
 * Everything runs uninterruptibly except the waits between attempts, so an
 * interruption lands either before the link (nothing to undo) or after the
 * release finalizer is registered (the lock is removed).
 *
 * The first attempt links at once. A later one first looks whether the
 * lock file is there, and links only when it is not: a link that can only
 * fail costs an exception (and its stack) where the look is one `access`.
 * Either way an attempt fails exactly when the file exists, as the
 * reference's exclusive create does.
 *
 * The owner is judged when the lock is first found held, and afterwards
 * only once the lock has kept its token for `DEAD_OWNER_RECHECK_MS` (see
 * there): a lock whose holder keeps changing belongs to live writers.
 */
const acquireFileLock = (
  fs: FileSystem,
  lockPath: string,
  retry: LockRetry,
  breakDeadLocks: boolean,
  release: (lock: HeldLock) => Effect.Effect<void>
) =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      const probe = yield* LockOwner
      const token = yield* randomToken(24)
      const claimedAt = isoTimestampOf(yield* Clock.currentTimeMillis)
      const content = lockLine(token, claimedAt, probe.current)
      const tempPath = lockTempPath(lockPath, token, platformTraitsOf(fs).backslashSeparator)
      yield* writeDurableTemp(fs, tempPath, content)
      tokensHeldHere.add(token)
      let linked = false
      // Whether the owner of the lock now at the path has been proven dead (and the lock broken).
      const brokeDeadOwner = Effect.fnUntraced(function*(holder: unknown, now: number) {
        const owner = ownerEvidenceOf(holder)
        const holderToken = memberOf(holder, "token")
        if (
          owner && typeof holderToken === "string" &&
          (leakedHere(probe.current, owner, holderToken) ||
            (yield* probe.isProvablyDead(owner, lockAgeOf(holder, now))))
        ) {
          return yield* breakDeadLock(fs, lockPath, holderToken)
        }
        return false
      })
      return yield* Effect.gen(function*() {
        let seen: SeenHolder | undefined
        // How far (0 or less) the current attempt sits from its place on the grid (see `retryJitterMs`).
        const jitter = retryJitterMs(retry.intervalMs)
        let offGrid = 0
        for (let attempt = 0; attempt < retry.attempts; attempt++) {
          const free = attempt === 0 || !(yield* fs.exists(lockPath))
          linked = free && (yield* installExclusive(fs, tempPath, lockPath))
          if (linked) {
            const lock: HeldLock = { lockPath, token }
            yield* Effect.addFinalizer(() => release(lock))
            return lock
          }
          if (breakDeadLocks) {
            const now = yield* Clock.currentTimeMillis
            if (seen === undefined || now - seen.readAt >= DEAD_OWNER_RECHECK_MS) {
              const holder = yield* readJsonFile(fs, lockPath)
              const holderToken = memberOf(holder, "token")
              const unchanged = seen !== undefined && holderToken === seen.token
              if (seen === undefined || (unchanged && now - seen.since >= DEAD_OWNER_RECHECK_MS)) {
                if (yield* brokeDeadOwner(holder, now)) {
                  seen = undefined
                  continue
                }
              }
              seen = { token: holderToken, since: unchanged ? seen!.since : now, readAt: now }
            }
          }
          if (attempt + 1 < retry.attempts) {
            const next = jitter === 0 || attempt + 2 === retry.attempts ? 0 : -(yield* Random.nextIntBetween(0, jitter))
            const wait = retry.intervalMs + next - offGrid
            offGrid = next
            yield* restore(Effect.sleep(wait))
          }
        }
        return yield* new LockHeld({ lockPath, attempts: retry.attempts })
      }).pipe(
        Effect.ensuring(Effect.suspend(() => {
          if (!linked) tokensHeldHere.delete(token)
          return Effect.ignore(removeIfPresent(fs, tempPath))
        }))
      )
    })
  ).pipe(Effect.catchTag("PlatformError", (error) => Effect.fail(storeIo("acquire commit lock", lockPath)(error))))

const releaseLogged = (fs: FileSystem, lock: HeldLock) =>
  releaseFileLock(fs, lock.lockPath, lock.token).pipe(
    Effect.catch((error) => Effect.logWarning("commit lock release failed", error)),
    // Even if the file could not be removed, this process no longer holds
    // the lock: a later waiter here may then recognise it as leaked.
    Effect.ensuring(Effect.sync(() => tokensHeldHere.delete(lock.token)))
  )

/**
 * The in-process queues of one store's commit locks (see `LockQueues`): a
 * handed-over lock is taken up only while the file still holds its token,
 * and a lock is given back by removing the file if it still holds it.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeLockQueues = (fs: FileSystem): CommitLockQueues =>
  LockQueues.make<HeldLock>({
    release: (lock) => releaseLogged(fs, lock),
    stillHeld: (lock) =>
      readJsonFile(fs, lock.lockPath).pipe(
        Effect.map((current) => memberOf(current, "token") === lock.token),
        Effect.orElseSucceed(() => false)
      )
  })

/** The in-process queues of one store's commit locks. @category models @since 0.1.0 */
export type CommitLockQueues = LockQueues.LockQueues<HeldLock>

/**
 * Acquires a sidecar's commit lock for the current scope.
 *
 * **Details**
 *
 * The release step runs whatever ends the scope (success, failure,
 * interruption): it hands the lock to a queued fiber of this process or
 * removes the file, only if it still holds our token. A failed release is
 * logged, since the protocol can recover from a leftover lock only by
 * repair (or, for our locks, once the owner is provably gone).
 *
 * @category resources
 * @since 0.1.0
 */
export const acquireCommitLock: (
  fs: FileSystem,
  queues: CommitLockQueues,
  lockPath: string,
  retry: LockRetry,
  breakDeadLocks: boolean
) => Effect.Effect<HeldLock, LockHeld | StoreIo, Scope.Scope | SecureRandom.SecureRandom> = Effect.fnUntraced(function*(
  fs: FileSystem,
  queues: CommitLockQueues,
  lockPath: string,
  retry: LockRetry,
  breakDeadLocks: boolean
) {
  const entry = yield* queues.hold(lockPath)
  const release = (lock: HeldLock) => queues.handOffOrRelease(entry, lock)
  const handedOver = yield* Effect.uninterruptible(
    Effect.tap(
      queues.takeHandedOver(entry),
      (lock) => (lock ? Effect.addFinalizer(() => release(lock)) : Effect.void)
    )
  )
  if (handedOver !== undefined) return handedOver
  return yield* acquireFileLock(fs, lockPath, retry, breakDeadLocks, release)
})

/**
 * The lock is created through a temp file and a link, so a lock path the
 * file system refuses outright (a NUL byte, a name longer than `NAME_MAX`)
 * would fail naming the temp file or the link. The reference opens the lock
 * path itself; opening it first, only for such names, fails exactly as the
 * reference's open does.
 */
const lockPathAccepted = (fs: FileSystem, lockPath: string): Effect.Effect<void, StoreIo> =>
  lockPath.includes("\0") ||
    !fitsFileName(lockPath.slice(lastSeparator(lockPath, platformTraitsOf(fs).backslashSeparator) + 1))
    ? Effect.scoped(fs.open(lockPath, { flag: "r" })).pipe(
      Effect.catchReason("PlatformError", "NotFound", () => Effect.void),
      Effect.asVoid,
      Effect.mapError(storeIo("acquire commit lock", lockPath))
    )
    : Effect.void

/**
 * Runs `body` holding the commit lock at `lockPath`, released (or handed to
 * a queued fiber) whatever ends it.
 *
 * @category resources
 * @since 0.1.0
 */
export const withCommitLock = <A, E, R>(
  fs: FileSystem,
  queues: CommitLockQueues,
  lockPath: string,
  retry: LockRetry,
  breakDeadLocks: boolean,
  body: Effect.Effect<A, E, R>
): Effect.Effect<A, E | LockHeld | StoreIo, Exclude<R, Scope.Scope> | SecureRandom.SecureRandom> =>
  Effect.scoped(
    Effect.andThen(
      Effect.andThen(lockPathAccepted(fs, lockPath), acquireCommitLock(fs, queues, lockPath, retry, breakDeadLocks)),
      body
    )
  )
