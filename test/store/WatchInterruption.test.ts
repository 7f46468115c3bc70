/**
 * A watch interrupted at every file-system call it makes, as the
 * interruption suite does for the writers: whatever call the consumer is
 * interrupted before, every watch the stream made is closed and no file is
 * left open but those the store's caches hold for reading.
 */
import { assert } from "@effect/vitest"
import { Effect, Exit, Fiber, FileSystem } from "effect"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { assertNoOpenHandles, interceptFileSystem, setup } from "./StoreKit.js"
import { countingWatches, drive, memoryWatchers, settleJob, summaryOf, watchReads } from "./WatchKit.js"

fileSystemSuite("RarebitStore.watch interrupted at every file-system call", (it) => {
  it.effect("closes every watch and handle it opened", ({ root }) =>
    Effect.gen(function*() {
      const world = yield* FileSystem.FileSystem
      let k = 0
      for (;; k++) {
        const base = `${root}/${k}`
        // The settles run on a store of their own, over the plain file system: only the watch's calls count.
        const writer = yield* setup(base)
        const counted = countingWatches(world)
        let calls = 0
        let fired = false
        let target: Fiber.Fiber<void, unknown> | undefined
        const intercepted = interceptFileSystem(counted.fs, () =>
          Effect.suspend(() => {
            if (calls++ !== k || target === undefined) return Effect.void
            fired = true
            const victim = target
            return Effect.andThen(Effect.forkDetach(Fiber.interrupt(victim)), Effect.yieldNow)
          }))
        const watched = yield* setup(base, { fs: intercepted, writeSession: false })
        const watch = yield* drive(watchReads(watched))
        target = watch.fiber
        const scenario = yield* Effect.exit(Effect.gen(function*() {
          yield* watch.next
          yield* settleJob(writer, 1)
          assert.strictEqual(summaryOf(yield* watch.nextEmitted), "summary 1")
          yield* settleJob(writer, 2)
          assert.strictEqual(summaryOf(yield* watch.nextEmitted), "summary 2")
        }))
        yield* Fiber.interrupt(watch.fiber)
        const label = `(interrupted before call ${k})`
        assert.strictEqual(counted.open(), 0, `no watch left open ${label}`)
        const memory = memoryWatchers(world)
        if (memory !== undefined) assert.deepStrictEqual(memory, [], label)
        yield* assertNoOpenHandles(world, label)
        if (!fired) {
          assert.isTrue(Exit.isSuccess(scenario), `the uninterrupted run completes ${String(scenario)}`)
          break
        }
      }
      assert.isAtLeast(k, 20, "a watch makes many calls")
    }), 60_000)
})
