/**
 * `forEachBounded`: never more than its bound running at once, and the
 * results of a sequential `forEach`, in the items' order, whatever order
 * the calls finish in.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Scheduler } from "effect"
import { forEachBounded } from "../../src/store/BoundedForEach.js"

/** `f`, which yields a varying number of times (fixed per item) before it answers, counting how many run at once. */
const probe = () => {
  let running = 0
  let most = 0
  const started: Array<number> = []
  const f = (item: number) =>
    Effect.gen(function*() {
      started.push(item)
      running++
      most = Math.max(most, running)
      for (let turn = (item * 7) % 5; turn > 0; turn--) yield* Effect.yieldNow
      running--
      return item * item
    })
  return { f, most: () => most, started }
}

describe("forEachBounded", () => {
  it.effect("runs at most `concurrency` at once and answers what a sequential forEach answers, in order", () =>
    Effect.gen(function*() {
      const items = Array.from({ length: 100 }, (_, index) => index)
      const sequential = yield* Effect.forEach(items, (item) => Effect.succeed(item * item))
      for (const concurrency of [1, 3, 16, 200]) {
        const { f, most, started } = probe()
        const results = yield* forEachBounded(items, concurrency, f)
        assert.deepStrictEqual(results, sequential, `concurrency ${concurrency}`)
        // The bound is reached, never passed (with more room than items, those that never yield end before the last start).
        if (concurrency < items.length) assert.strictEqual(most(), concurrency, `concurrency ${concurrency}`)
        else assert.isTrue(most() > 16 && most() <= items.length, `concurrency ${concurrency}: ${most()}`)
        // Items are taken in order, each once.
        assert.deepStrictEqual(started, items)
      }
    }))

  it.effect("no items, no calls", () =>
    Effect.gen(function*() {
      const { f, started } = probe()
      assert.deepStrictEqual(yield* forEachBounded([], 16, f), [])
      assert.deepStrictEqual(started, [])
    }))

  it.effect("the fibers share the operation budget of one, so a turn of the event loop is no longer than with one", () =>
    Effect.gen(function*() {
      const budget = yield* Effect.service(Scheduler.MaxOpsBeforeYield)
      const seen = yield* forEachBounded([1, 2, 3, 4, 5], 4, () => Effect.service(Scheduler.MaxOpsBeforeYield))
      assert.deepStrictEqual(seen, [1, 2, 3, 4, 5].map(() => Math.floor(budget / 4)))
      const alone = yield* forEachBounded([1], 16, () => Effect.service(Scheduler.MaxOpsBeforeYield))
      assert.deepStrictEqual(alone, [budget])
    }))

  it.live("a turn ends after a slice of time, however few operations its items take", () =>
    Effect.gen(function*() {
      // Each item is one operation of 1 ms (the items of a real scan are
      // sidecars parsed in one step), so the operation budget alone would run
      // all 400 in a single turn and the timer would fire only after them.
      let done = 0
      let doneWhenTimerFired = -1
      const timer = setTimeout(() => (doneWhenTimerFired = done), 0)
      const busy = () => {
        const until = performance.now() + 1
        while (performance.now() < until) { /* an item's synchronous work */ }
        done++
      }
      yield* forEachBounded(Array.from({ length: 400 }, (_, index) => index), 16, () => Effect.sync(busy))
      clearTimeout(timer)
      // One slice is TURN_SLICE_MS of items, a few more when the machine is busy.
      assert.isAtLeast(doneWhenTimerFired, 0, "the timer never fired")
      assert.isBelow(doneWhenTimerFired, 100, `${doneWhenTimerFired} of 400 items ran before a 0 ms timer`)
    }))
})
