/**
 * Reserve a job, derive its receipt, settle it, and read the current state,
 * with the Effect API on the real disk. `test/examples/EffectStore.test.ts`
 * runs it against a temporary directory (imports resolve to the built
 * package, so `npm run build` comes first, as `npm test` does).
 */
import { Effect } from "effect"
import { NodeStore, RarebitStore } from "rarebit-store"

export const program = (sessionFile: string, jobId: string, receipt: Record<string, unknown>) =>
  Effect.gen(function*() {
    const store = yield* RarebitStore
    const outcome = yield* store.withJob(
      { jobId, sessionFile },
      () => Effect.succeed(receipt) // a real worker calls its model here
    )
    const current = yield* store.readCurrent({ sessionFile })
    return { outcome: outcome._tag, availability: current.availability, syncState: current.artifactState.syncState }
  }).pipe(
    Effect.catchTags({
      LeaseFenced: () => Effect.succeed({ outcome: "fenced" as const, availability: "unknown", syncState: "unknown" }),
      LockHeld: (error) => Effect.die(error)
    })
  )

export const run = (roots: { rarebitRoot: string; sessionRoot: string }, ...args: Parameters<typeof program>) =>
  Effect.runPromise(program(...args).pipe(Effect.provide(NodeStore.layer(roots))))
