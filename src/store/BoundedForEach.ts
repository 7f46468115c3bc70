/**
 * A function over many items with at most a fixed number running at once,
 * its results in the items' order whatever order they finish in: how the
 * audit reads tens of thousands of files without a fiber for each.
 *
 * @since 0.1.0
 */
import { Effect, Scheduler } from "effect"

/**
 * How long the items of one event-loop turn may run before the fibers let
 * timers, I/O callbacks and signal handlers in.
 *
 * @internal
 */
export const TURN_SLICE_MS = 10

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
 * Operations are not time, though: one operation may parse a whole sidecar,
 * so a shared budget of 2,048 still ran 16 fibers through hundreds of
 * sidecars of 120 receipts in one turn, keeping a timer or a Ctrl-C waiting
 * for up to 0.9 s. So the turn also ends once it has run for
 * `TURN_SLICE_MS`: every fiber yields before its next item, and the first
 * to run in the next turn starts the next slice. A slice is measured on the
 * process's monotonic clock, not `Clock`, because it shares the real event
 * loop, which a `TestClock` does not stand for.
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
    let slice = 0
    let sliceStartedAt = performance.now()
    let sliceOver = false
    /**
     * Yields to the event loop. The fibers that yielded resume one after
     * another in the next turn; only the first starts a new slice, the others
     * find it running (or already over, and yield again).
     */
    const yieldTurn = Effect.suspend(() => {
      const yieldedIn = slice
      return Effect.andThen(
        Effect.yieldNow,
        Effect.sync(() => {
          if (slice === yieldedIn) {
            slice++
            sliceOver = false
            sliceStartedAt = performance.now()
          }
        })
      )
    })
    // A chain of steps rather than a generator, which would allocate on
    // every item.
    const worker: Effect.Effect<void> = Effect.suspend(() => {
      if (next >= items.length) return Effect.void
      if (sliceOver || performance.now() - sliceStartedAt > TURN_SLICE_MS) {
        sliceOver = true
        return Effect.andThen(yieldTurn, worker)
      }
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
