/**
 * Reserve a job, derive its receipt, settle it, and read the current state,
 * with the Effect API on the real disk. `test/examples/EffectStore.test.ts`
 * runs it against a temporary directory (imports resolve to the built
 * package, so `npm run build` comes first, as `npm test` does).
 */
import { Effect } from "effect"
import { NodeStore, RarebitStore, type ReceiptInput } from "rarebit-store"

export const program = (sessionFile: string, jobId: string, receipt: ReceiptInput) =>
  Effect.gen(function*() {
    const store = yield* RarebitStore
    const outcome = yield* store.withJob(
      { jobId, sessionFile },
      () => Effect.succeed(receipt) // a real worker calls its model here
    )
    const current = yield* store.readCurrent({ sessionFile })
    // Only an available read has a receipt, and only an `ok` Summary receipt has a summary.
    const summary = current.availability === "available" && current.receipt.status === "ok"
      ? current.receipt.summary
      : null
    return {
      outcome: outcome._tag,
      availability: current.availability,
      syncState: current.artifactState.syncState,
      summary
    }
  }).pipe(
    Effect.catchTags({
      LeaseFenced: () =>
        Effect.succeed({ outcome: "fenced" as const, availability: "unknown", syncState: "unknown", summary: null }),
      LockHeld: (error) => Effect.die(error)
    })
  )

export const run = (roots: { rarebitRoot: string; sessionRoot: string }, ...args: Parameters<typeof program>) =>
  Effect.runPromise(program(...args).pipe(Effect.provide(NodeStore.layer(roots))))
