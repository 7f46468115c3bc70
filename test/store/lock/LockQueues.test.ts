/**
 * The in-process queues on their own, with locks that are plain values: who
 * gets a handed-over lock, when a lock is given back, and that a queue is
 * forgotten once nobody uses it. The file behind a commit lock is tested in
 * `CommitLock.test.ts`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import * as LockQueues from "../../../src/store/lock/LockQueues.js"

interface Lock {
  readonly lockPath: string
  readonly id: number
}

const PATH = "/rarebit/materializations-v4/s.jsonl.commit-lock"

/** Queues over locks numbered as they are minted, recording every release. */
const makeWorld = (stillHeld: (lock: Lock) => boolean = () => true) => {
  let minted = 0
  const released: Array<number> = []
  const queues = LockQueues.make<Lock>({
    release: (lock) => Effect.sync(() => void released.push(lock.id)),
    stillHeld: (lock) => Effect.sync(() => stillHeld(lock))
  })
  /** Holds the queue as `acquireCommitLock` does: a handed-over lock, else a fresh one; hands it on at scope end. */
  const use = (inside: Effect.Effect<void> = Effect.void) =>
    Effect.scoped(Effect.gen(function*() {
      const entry = yield* queues.hold(PATH)
      const handed = yield* queues.takeHandedOver(entry)
      const lock = handed ?? { lockPath: PATH, id: ++minted }
      yield* Effect.addFinalizer(() => queues.handOffOrRelease(entry, lock))
      yield* inside
      return { id: lock.id, handed: handed !== undefined }
    }))
  return { queues, use, released, minted: () => minted }
}

describe("LockQueues", () => {
  it.effect("a lock passes to queued fibers at most MAX_LOCK_HANDOFFS times in a row, then is given back", () =>
    Effect.gen(function*() {
      const world = makeWorld()
      const waiters = LockQueues.MAX_LOCK_HANDOFFS + 3
      const gate = yield* Deferred.make<void>()
      const entered = yield* Deferred.make<void>()
      const first = yield* Effect.forkChild(
        world.use(Effect.andThen(Deferred.succeed(entered, undefined), Deferred.await(gate)))
      )
      yield* Deferred.await(entered)
      const queued = yield* Effect.forEach(
        Array.from({ length: waiters }, () => world.use()),
        (use) => Effect.forkChild(use)
      )
      yield* Effect.yieldNow
      yield* Deferred.succeed(gate, undefined)
      const uses = [yield* Fiber.join(first), ...(yield* Fiber.joinAll(queued))]

      // The first lock serves its minter and MAX_LOCK_HANDOFFS takers, then a second one serves the rest.
      assert.strictEqual(uses.filter((use) => use.handed).length, uses.length - 2)
      assert.strictEqual(uses.filter((use) => use.id === 1).length, LockQueues.MAX_LOCK_HANDOFFS + 1)
      assert.strictEqual(world.minted(), 2)
      assert.deepStrictEqual(world.released, [1, 2], "each lock is given back once, the last by the last holder")
      assert.strictEqual(world.queues.size(), 0, "an unused queue is forgotten")
    }))

  it.effect("a handed-over lock no longer held is given back, and the next holder takes a fresh one", () =>
    Effect.gen(function*() {
      const world = makeWorld((lock) => lock.id !== 1)
      const gate = yield* Deferred.make<void>()
      const entered = yield* Deferred.make<void>()
      const first = yield* Effect.forkChild(
        world.use(Effect.andThen(Deferred.succeed(entered, undefined), Deferred.await(gate)))
      )
      yield* Deferred.await(entered)
      const second = yield* Effect.forkChild(world.use())
      yield* Effect.yieldNow
      yield* Deferred.succeed(gate, undefined)
      assert.deepStrictEqual(yield* Fiber.joinAll([first, second]), [{ id: 1, handed: false }, {
        id: 2,
        handed: false
      }])
      assert.deepStrictEqual(world.released, [1, 2])
    }))

  it.effect("a lone holder gives its lock back at once", () =>
    Effect.gen(function*() {
      const world = makeWorld()
      assert.deepStrictEqual(yield* world.use(), { id: 1, handed: false })
      assert.deepStrictEqual(yield* world.use(), { id: 2, handed: false })
      assert.deepStrictEqual(world.released, [1, 2])
      assert.strictEqual(world.queues.size(), 0)
    }))
})
