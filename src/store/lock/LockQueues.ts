/**
 * In-process queues in front of a file lock, one per lock path, so that
 * fibers of one process wait for each other without polling the file every
 * few milliseconds.
 *
 * Guarantees:
 * - One fiber at a time holds a path's queue (a semaphore of one permit);
 *   the others wait on it, in the process, without touching the disk.
 * - When a holder finishes while other fibers of this process are queued, it
 *   hands its file lock to the next one instead of releasing and re-taking
 *   it, at most `MAX_LOCK_HANDOFFS` times in a row, so processes waiting for
 *   the same file are not starved. The next holder takes a handed-over lock
 *   up only while `stillHeld` says the file still holds it (an operator may
 *   have removed it); otherwise it is released and a fresh one taken.
 * - The last fiber to leave a queue releases a lock nobody took up, and the
 *   queue is forgotten: the map holds only paths in use.
 *
 * The queues know nothing of the file: what releasing a lock and checking
 * it mean is given by the lock (`CommitLock`). Nothing here is durable; a
 * crash loses the queues with the process, and the file lock then speaks for
 * itself.
 *
 * @since 0.1.0
 */
import { Effect, type Scope, Semaphore } from "effect"

/**
 * How many times in a row a file lock may pass from one fiber of this
 * process to the next before it is given back, so that other processes
 * waiting for the same sidecar are not starved.
 *
 * @category constants
 * @since 0.1.0
 */
export const MAX_LOCK_HANDOFFS = 16

/** What the queues need to know of a lock. @category models @since 0.1.0 */
export interface LockHandling<L> {
  /** Gives the lock back; cannot fail (a failure is the lock's to log). */
  readonly release: (lock: L) => Effect.Effect<void>
  /** Whether the lock is still held as it was handed over; `false` when that cannot be told. */
  readonly stillHeld: (lock: L) => Effect.Effect<boolean>
}

/** One lock path's queue. @category models @since 0.1.0 */
export interface LockQueue<L> {
  readonly semaphore: Semaphore.Semaphore
  /** Fibers waiting for or holding the queue. */
  users: number
  /** A lock passed on by the previous holder, not yet taken up. */
  handedOver: L | undefined
  handoffs: number
}

/** The in-process queues of one store. @category models @since 0.1.0 */
export interface LockQueues<L> {
  /** Takes the in-process queue of `lockPath` for the current scope. */
  readonly hold: (lockPath: string) => Effect.Effect<LockQueue<L>, never, Scope.Scope>
  /** Passes the lock to the next queued fiber, or releases it. Runs while the queue is still held. */
  readonly handOffOrRelease: (entry: LockQueue<L>, lock: L) => Effect.Effect<void>
  /**
   * Takes up a handed-over lock if it is still held. Otherwise it is
   * released: left holding our token after a failed re-read, it would keep
   * counting as held here, so no waiter of this process could ever break it.
   */
  readonly takeHandedOver: (entry: LockQueue<L>) => Effect.Effect<L | undefined>
  /** How many lock paths have a queue now. */
  readonly size: () => number
}

/**
 * Makes an empty set of queues for locks handled by `handling`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = <L>(handling: LockHandling<L>): LockQueues<L> => {
  const queues = new Map<string, LockQueue<L>>()
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
  const leave = (lockPath: string, entry: LockQueue<L>) =>
    Effect.suspend(() => {
      if (--entry.users > 0) return Effect.void
      queues.delete(lockPath)
      const orphan = entry.handedOver
      entry.handedOver = undefined
      return orphan === undefined ? Effect.void : handling.release(orphan)
    })
  const hold = (lockPath: string): Effect.Effect<LockQueue<L>, never, Scope.Scope> =>
    Effect.acquireRelease(enter(lockPath), (entry) => leave(lockPath, entry)).pipe(
      Effect.tap((entry) => entry.semaphore.takeScoped(1))
    )
  const handOffOrRelease = (entry: LockQueue<L>, lock: L): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (entry.users > 1 && entry.handoffs < MAX_LOCK_HANDOFFS) {
        entry.handedOver = lock
        entry.handoffs++
        return Effect.void
      }
      entry.handoffs = 0
      return handling.release(lock)
    })
  const takeHandedOver = Effect.fnUntraced(function*(entry: LockQueue<L>) {
    const lock = entry.handedOver
    entry.handedOver = undefined
    if (lock === undefined) return undefined
    if (yield* handling.stillHeld(lock)) return lock
    entry.handoffs = 0
    yield* handling.release(lock)
    return undefined
  })
  return { hold, handOffOrRelease, takeHandedOver, size: () => queues.size }
}
