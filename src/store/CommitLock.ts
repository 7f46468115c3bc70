/**
 * The commit lock of a sidecar, as a scoped resource.
 *
 * On disk the lock is `<sidecar>.commit-lock`, created exclusively and
 * holding `{token, claimedAt}` (plus our owner evidence); it is removed only
 * by the holder of its token. Acquisition retries every `intervalMs` for
 * `attempts` tries, then fails with `LockHeld`.
 *
 * Guarantees:
 * - The lock file appears with its full content or not at all: it is written
 *   to a private temp file, fsynced, then hard-linked into place (a link
 *   fails if the name exists, like `wx`). A crash can therefore never leave
 *   an empty lock that nobody could attribute.
 * - Fibers of one process queue on an in-process semaphore per sidecar, so
 *   only one of them polls the file; the file still excludes other
 *   processes, unchanged on disk.
 * - Release runs on success, failure and interruption, and removes the file
 *   only if it still holds our token.
 * - A lock whose owner evidence proves its process dead (written in this
 *   process's own host, boot, PID and time namespace, pid gone or reused
 *   there; see `LockOwner`) is broken, under a per-token break file so two
 *   waiters never both break and a fresh lock is never removed. Locks
 *   without evidence (the reference's), or whose evidence comes from
 *   another namespace, host or boot, are never broken, whatever their age.
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
 * @since 0.1.0
 */
import { Clock, Effect, Scope, Semaphore } from "effect"
import * as SecureRandom from "effect/crypto/SecureRandom"
import type { FileSystem } from "effect/FileSystem"
import type { PlatformError } from "effect/PlatformError"
import { describeType, type FileNotRegular, readBounded } from "../io/RegularFile.js"
import { encodeLockLine, MAX_LOCK_LINE_BYTES } from "../protocol/CommitLockFile.js"
import { fileIdentity } from "../protocol/internal/FileInfo.js"
import { parseJsonOrNull } from "../protocol/internal/JsonParse.js"
import { memberOf } from "../protocol/internal/JsonShape.js"
import { decodeUtf8 } from "../protocol/internal/Utf8.js"
import { MAX_LOCK_FILE_BYTES } from "../protocol/Limits.js"
import { LockHeld, StoreIo, storeIo } from "./Errors.js"
import { isOwnEvidence, LockOwner, type OwnerEvidence, ownerEvidenceOf } from "./LockOwner.js"
import type { LockRetry } from "./StoreConfig.js"

const encoder = new TextEncoder()

/**
 * A random hex token of `bytes` bytes from the `SecureRandom` service.
 *
 * **Details**
 *
 * Lease and lock tokens are capabilities, and fencing is only as good as
 * their uniqueness: a worker holding another's token could settle, release
 * or unlock in its name. They never come from `Random`, which a caller may
 * seed for its own reasons (two reserves under `Random.withSeed(1)` would
 * otherwise get one token) and whose default is not a secure generator.
 *
 * @category constructors
 * @since 0.1.0
 */
export const randomToken = (bytes: number): Effect.Effect<string, never, SecureRandom.SecureRandom> =>
  SecureRandom.SecureRandom.use((random) => Effect.map(random.randomBytes(bytes), toHex))

const toHex = (bytes: Uint8Array): string => {
  let hex = ""
  for (const byte of bytes) hex += byte.toString(16).padStart(2, "0")
  return hex
}

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
  Effect.map(readLockFile(fs, path), (read) =>
    read._tag === "Absent" ? undefined : read._tag === "Read" ? read.content : null)

/**
 * Writes `content` to a fresh private file and fsyncs it, so it can be
 * linked or renamed into place whole.
 *
 * **Details**
 *
 * The exclusive create (`wx`: `O_CREAT | O_EXCL`) never follows a symlink
 * and never opens anything already at the path, a FIFO included: it fails
 * with `AlreadyExists`. Only a file this call created is removed when a
 * later step fails.
 *
 * @internal
 */
export const writeDurableTemp = Effect.fnUntraced(function*(fs: FileSystem, tempPath: string, content: string) {
  yield* Effect.scoped(Effect.gen(function*() {
    const file = yield* fs.open(tempPath, { flag: "wx", mode: 0o600 })
    yield* Effect.gen(function*() {
      yield* file.writeAll(encoder.encode(content))
      yield* file.sync
    }).pipe(Effect.onError(() => Effect.ignore(removeIgnoringMissing(fs, tempPath))))
  }))
})

const removeIgnoringMissing = (fs: FileSystem, path: string) =>
  fs.remove(path).pipe(Effect.catchReason("PlatformError", "NotFound", () => Effect.void))

/**
 * Removes `lockPath` only if it still holds `token`.
 *
 * @internal
 */
export const releaseFileLock = (fs: FileSystem, lockPath: string, token: string): Effect.Effect<void, StoreIo> =>
  Effect.gen(function*() {
    const current = yield* readJsonFile(fs, lockPath)
    if (memberOf(current, "token") === token) yield* removeIgnoringMissing(fs, lockPath)
  }).pipe(Effect.mapError(storeIo("release commit lock", lockPath)))

/**
 * The private temp file a lock is written to before it is linked into
 * place: `<lock>.<token>.tmp`, or `.commit-lock.<token>.tmp` in the same
 * directory when that name would be longer than a file name can be (a
 * Session file name of 191 to 243 bytes), so that every lock name the
 * reference can create, this store can create too.
 *
 * @internal
 */
export const lockTempPath = (lockPath: string, token: string): string => {
  const slash = lockPath.lastIndexOf("/")
  const named = `${lockPath}.${token}.tmp`
  return encoder.encode(named.slice(slash + 1)).length <= 255
    ? named
    : `${lockPath.slice(0, slash + 1)}.commit-lock.${token}.tmp`
}

/** Where the break of the lock holding `deadToken` is claimed. @internal */
export const breakFilePath = (lockPath: string, deadToken: string): string => `${lockPath}.break-${deadToken}`

/**
 * Claims the break of the lock holding `deadToken`: `false` when someone
 * else already has. Breakers in this process, the operator's `unlock` and
 * other processes all race on this one exclusive create.
 *
 * @internal
 */
export const createBreakFile = (fs: FileSystem, lockPath: string, deadToken: string): Effect.Effect<boolean, PlatformError> =>
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
const breakDeadLock = (fs: FileSystem, lockPath: string, deadToken: string): Effect.Effect<boolean, PlatformError> =>
  Effect.gen(function*() {
    const breakPath = breakFilePath(lockPath, deadToken)
    if (!(yield* createBreakFile(fs, lockPath, deadToken))) return false
    // The break file goes whatever happens here: left behind after a failed
    // read or removal, it would stop every later waiter from breaking the
    // dead lock. Removing it is safe at any point, since a lock can only be
    // removed while it still holds the dead token.
    return yield* Effect.gen(function*() {
      const current = yield* readJsonFile(fs, lockPath)
      const broken = memberOf(current, "token") === deadToken
      if (broken) yield* removeIgnoringMissing(fs, lockPath)
      return broken
    }).pipe(Effect.ensuring(Effect.ignore(removeIgnoringMissing(fs, breakPath))))
  })

/**
 * Creates the lock file for the current scope, waiting for other processes
 * as configured.
 *
 * **Details**
 *
 * Everything runs uninterruptibly except the waits between attempts, so an
 * interruption lands either before the link (nothing to undo) or after the
 * release finalizer is registered (the lock is removed).
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
      const claimedAt = new Date(yield* Clock.currentTimeMillis).toISOString()
      const content = lockLine(token, claimedAt, probe.current)
      const tempPath = lockTempPath(lockPath, token)
      yield* writeDurableTemp(fs, tempPath, content)
      tokensHeldHere.add(token)
      let linked = false
      return yield* Effect.gen(function*() {
        for (let attempt = 0; attempt < retry.attempts; attempt++) {
          linked = yield* fs.link(tempPath, lockPath).pipe(
            Effect.as(true),
            Effect.catchReason("PlatformError", "AlreadyExists", () => Effect.succeed(false))
          )
          if (linked) {
            const lock: HeldLock = { lockPath, token }
            yield* Effect.addFinalizer(() => release(lock))
            return lock
          }
          if (breakDeadLocks) {
            const holder = yield* readJsonFile(fs, lockPath)
            const owner = ownerEvidenceOf(holder)
            const holderToken = memberOf(holder, "token")
            if (
              owner && typeof holderToken === "string" &&
              (leakedHere(probe.current, owner, holderToken) || (yield* probe.isProvablyDead(owner)))
            ) {
              if (yield* breakDeadLock(fs, lockPath, holderToken)) continue
            }
          }
          if (attempt + 1 < retry.attempts) yield* restore(Effect.sleep(retry.intervalMs))
        }
        return yield* new LockHeld({ lockPath, attempts: retry.attempts })
      }).pipe(
        Effect.ensuring(Effect.suspend(() => {
          if (!linked) tokensHeldHere.delete(token)
          return Effect.ignore(removeIgnoringMissing(fs, tempPath))
        }))
      )
    })
  ).pipe(Effect.catchTag("PlatformError", (error) => Effect.fail(storeIo("acquire commit lock", lockPath)(error))))

/**
 * How many times in a row a file lock may pass from one fiber of this
 * process to the next before it is given back, so that other processes
 * waiting for the same sidecar are not starved.
 *
 * @category constants
 * @since 0.1.0
 */
export const MAX_LOCK_HANDOFFS = 16

interface LockQueue {
  readonly semaphore: Semaphore.Semaphore
  /** Fibers waiting for or holding the queue. */
  users: number
  /** A file lock passed on by the previous holder, not yet taken up. */
  handedOver: HeldLock | undefined
  handoffs: number
}

const releaseLogged = (fs: FileSystem, lock: HeldLock) =>
  releaseFileLock(fs, lock.lockPath, lock.token).pipe(
    Effect.catch((error) => Effect.logWarning("commit lock release failed", error)),
    // Even if the file could not be removed, this process no longer holds
    // the lock: a later waiter here may then recognise it as leaked.
    Effect.ensuring(Effect.sync(() => tokensHeldHere.delete(lock.token)))
  )

/**
 * In-process queues, one per lock path, so that fibers of this process wait
 * for each other without polling the file every few milliseconds.
 *
 * **Details**
 *
 * When a holder finishes while other fibers of this process are queued, it
 * hands its file lock to the next one instead of removing and re-creating
 * it (at most `MAX_LOCK_HANDOFFS` times in a row): under contention a
 * settle then costs no lock-file creation, fsync or removal. The next holder
 * re-reads the lock file and creates a fresh lock if the handed-over one is
 * no longer there (an operator removed it). The last fiber to leave the
 * queue removes a lock nobody took up.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeLockQueues = (fs: FileSystem) => {
  const queues = new Map<string, LockQueue>()
  const enter = (lockPath: string) =>
    Effect.sync(() => {
      let entry = queues.get(lockPath)
      if (entry === undefined) {
        entry = { semaphore: Semaphore.makeUnsafe(1), users: 0, handedOver: undefined, handoffs: 0 }
        queues.set(lockPath, entry)
      }
      entry.users++
      return entry
    })
  const leave = (lockPath: string, entry: LockQueue) =>
    Effect.suspend(() => {
      if (--entry.users > 0) return Effect.void
      queues.delete(lockPath)
      const orphan = entry.handedOver
      entry.handedOver = undefined
      return orphan === undefined ? Effect.void : releaseLogged(fs, orphan)
    })
  /** Takes the in-process queue of `lockPath` for the current scope. */
  const hold = (lockPath: string): Effect.Effect<LockQueue, never, Scope.Scope> =>
    Effect.acquireRelease(enter(lockPath), (entry) => leave(lockPath, entry)).pipe(
      Effect.tap((entry) => entry.semaphore.takeScoped(1))
    )
  /** Passes the lock to the next queued fiber, or removes it. Runs while the queue is still held. */
  const handOffOrRelease = (entry: LockQueue, lock: HeldLock): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (entry.users > 1 && entry.handoffs < MAX_LOCK_HANDOFFS) {
        entry.handedOver = lock
        entry.handoffs++
        return Effect.void
      }
      entry.handoffs = 0
      return releaseLogged(fs, lock)
    })
  /**
   * Takes up a handed-over lock if it is still on disk with its token.
   * Otherwise it is released: left holding our token after a failed
   * re-read, it would keep counting as held here, so no waiter of this
   * process could ever break it.
   */
  const takeHandedOver = (entry: LockQueue) =>
    Effect.gen(function*() {
      const lock = entry.handedOver
      entry.handedOver = undefined
      if (lock === undefined) return undefined
      const current = yield* readJsonFile(fs, lock.lockPath).pipe(Effect.orElseSucceed(() => undefined))
      if (memberOf(current, "token") === lock.token) return lock
      entry.handoffs = 0
      yield* releaseLogged(fs, lock)
      return undefined
    })
  return { hold, handOffOrRelease, takeHandedOver, size: () => queues.size }
}

/** The in-process queues of one store. @category models @since 0.1.0 */
export type LockQueues = ReturnType<typeof makeLockQueues>

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
export const acquireCommitLock = (
  fs: FileSystem,
  queues: LockQueues,
  lockPath: string,
  retry: LockRetry,
  breakDeadLocks: boolean
): Effect.Effect<HeldLock, LockHeld | StoreIo, Scope.Scope | SecureRandom.SecureRandom> =>
  Effect.gen(function*() {
    const entry = yield* queues.hold(lockPath)
    const release = (lock: HeldLock) => queues.handOffOrRelease(entry, lock)
    const handedOver = yield* Effect.uninterruptible(
      Effect.tap(queues.takeHandedOver(entry), (lock) => (lock ? Effect.addFinalizer(() => release(lock)) : Effect.void))
    )
    if (handedOver !== undefined) return handedOver
    return yield* acquireFileLock(fs, lockPath, retry, breakDeadLocks, release)
  })
