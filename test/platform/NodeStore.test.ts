/**
 * The live Node layer as a program sees it: tokens from `node:crypto`
 * through `SecureRandom` whatever the program does with `Random`, the
 * program's `Random` left alone, and the file system and path the store runs
 * on provided to the program as well, so it can read Sessions under this one
 * layer.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem, Path, Random } from "effect"
import { NodeStore, RarebitStore, type Reservation, Session } from "rarebit-store"
import { jobId, sessionText, summaryReceipt } from "../support/Receipts.js"

/** Temporary roots holding one Session, removed with the test's scope. */
const tempRoots = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const root = yield* fs.makeTempDirectoryScoped({ prefix: "rarebit-node-store-" })
  const sessionRoot = path.join(root, "sessions")
  const sessionFile = path.join(sessionRoot, "project", "trace.jsonl")
  const { branch, text } = sessionText("s")
  yield* fs.makeDirectory(path.dirname(sessionFile), { recursive: true })
  yield* fs.writeFileString(sessionFile, text)
  return { rarebitRoot: path.join(root, "rarebit"), sessionRoot, sessionFile, branch }
}).pipe(Effect.provide(NodeStore.fileLayer))

/** A temporary store with one Session; `body` runs under the live layer and nothing else. */
const inTempStore = <A, E>(
  body: (sessionFile: string) => Effect.Effect<A, E, RarebitStore | FileSystem.FileSystem | Path.Path>
) =>
  Effect.gen(function*() {
    const { rarebitRoot, sessionFile, sessionRoot } = yield* tempRoots
    return yield* body(sessionFile).pipe(Effect.provide(NodeStore.layer({ rarebitRoot, sessionRoot })))
  })

const leaseTokenOf = (reservation: Reservation): string => {
  if (reservation._tag !== "Acquired") return assert.fail(`expected Acquired, got ${reservation._tag}`)
  return reservation.leaseToken
}

describe("NodeStore.layer", () => {
  it.effect("two reserves under one seeded Random get different tokens", () =>
    inTempStore((sessionFile) =>
      Effect.gen(function*() {
        const store = yield* RarebitStore
        const first = yield* store.reserve({ jobId: jobId(1), sessionFile }).pipe(Random.withSeed(1))
        const second = yield* store.reserve({ jobId: jobId(2), sessionFile }).pipe(Random.withSeed(1))
        assert.match(leaseTokenOf(first), /^[0-9a-f]{48}$/)
        assert.notStrictEqual(leaseTokenOf(first), leaseTokenOf(second))
      })
    ))

  it.effect("leaves the program's Random alone", () =>
    Effect.gen(function*() {
      const underTheLayer = yield* Random.nextInt.pipe(Effect.provide(NodeStore.layer()), Random.withSeed("mine"))
      const without = yield* Random.nextInt.pipe(Random.withSeed("mine"))
      assert.strictEqual(underTheLayer, without)
    }))

  it.effect("provides the file system and path it runs on: a Session is read under this layer alone", () =>
    inTempStore((sessionFile) =>
      Effect.gen(function*() {
        const read = yield* Session.readSession(sessionFile, { sessionRoot: "/nowhere" })
        assert.strictEqual(read.session.id, "s")
        assert.strictEqual(read.sessionFile, sessionFile)
      })
    ))

  it.effect("threadpoolLayer is the same store with every call on the pool: it sees what layer settled", () =>
    Effect.gen(function*() {
      const { branch, rarebitRoot, sessionFile, sessionRoot } = yield* tempRoots
      const roots = { rarebitRoot, sessionRoot }
      const settle = (job: string) =>
        RarebitStore.use((store) =>
          Effect.map(store.withJob({ jobId: job, sessionFile }, () => Effect.succeed(summaryReceipt(branch, "s"))), (
            outcome
          ) => outcome._tag)
        )
      assert.strictEqual(yield* settle(jobId(1)).pipe(Effect.provide(NodeStore.layer(roots))), "Settled")
      assert.strictEqual(yield* settle(jobId(1)).pipe(Effect.provide(NodeStore.threadpoolLayer(roots))), "Duplicate")
      assert.strictEqual(yield* settle(jobId(2)).pipe(Effect.provide(NodeStore.threadpoolLayer(roots))), "Settled")
      const current = yield* RarebitStore.use((store) => store.readCurrent({ sessionFile })).pipe(
        Effect.provide(NodeStore.layer(roots))
      )
      assert.strictEqual(current.availability, "available")
      assert.strictEqual(current.receipt?.jobId, jobId(2))
    }))
})
