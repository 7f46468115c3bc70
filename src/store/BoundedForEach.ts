/**
 * A function over many items with at most a fixed number running at once,
 * its results in the items' order whatever order they finish in: how the
 * audit reads tens of thousands of files without a fiber for each.
 *
 * @since 0.1.0
 */
import { Effect, Scheduler } from "effect"

/**
 * `f` over every item, at most `concurrency` at a time, the results in the
 * items' order.
 *
 * **Details**
 *
 * `concurrency` fibers (fewer when there are fewer items) each take the
 * next item not yet taken until none is left, so which fiber ran an item
 * never shows in the result. `f` cannot fail: a caller turns what it finds
 * into data first.
 *
 * The fibers share the operation budget one fiber has between yields
 * (`Scheduler.MaxOpsBeforeYield`): the scheduler runs every fiber that
 * yielded in the same turn of the event loop, so with a whole budget each,
 * work on a synchronous file system would keep timers and signals waiting
 * `concurrency` times longer than one fiber does.
 *
 * @internal
 */
export const forEachBounded = <A, B>(
  items: ReadonlyArray<A>,
  concurrency: number,
  f: (item: A) => Effect.Effect<B>
): Effect.Effect<Array<B>> =>
  Effect.suspend(() => {
    // Sized up front: results land by index, in whatever order the fibers finish.
    // oxlint-disable-next-line unicorn/no-new-array
    const results = new Array<B>(items.length)
    let next = 0
    // A chain of steps rather than a generator, which would allocate on
    // every item.
    const worker: Effect.Effect<void> = Effect.suspend(() => {
      if (next >= items.length) return Effect.void
      const index = next++
      return Effect.flatMap(f(items[index]), (result) => {
        results[index] = result
        return worker
      })
    })
    const count = Math.max(1, Math.min(concurrency, items.length))
    return Effect.flatMap(Effect.service(Scheduler.MaxOpsBeforeYield), (budget) => {
      const share = Effect.provideService(worker, Scheduler.MaxOpsBeforeYield, Math.max(1, Math.floor(budget / count)))
      const workers = Array.from({ length: count }, () => share)
      return Effect.as(Effect.all(workers, { concurrency: "unbounded", discard: true }), results)
    })
  })
