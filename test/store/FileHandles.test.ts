/**
 * Every handle the store opens is closed, whatever happens: a seeded storm of
 * I/O failures across reads and writes, with the memory world's open
 * descriptors checked after every operation, and the disk checked for torn
 * claims and duplicate receipts at the end.
 */
import { assert } from "@effect/vitest"
import { Effect, Exit, Random, Stream } from "effect"
import type { FaultKind } from "../../src/testing/FaultFileSystem.js"
import { FaultPlan, makeFaultFileSystem } from "../../src/testing/FaultFileSystem.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { jobId, summaryReceipt, titleReceipt } from "../support/Receipts.js"
import {
  assertNoOpenHandles,
  FAST_RETRY,
  type Kit,
  LEASE_MS,
  readIfExists,
  runDriven,
  setup,
  sidecarRecords
} from "./StoreKit.js"

const FAULTED: ReadonlyArray<FaultKind> = [
  "open",
  "read",
  "write",
  "sync",
  "stat",
  "lstat",
  "readFile",
  "writeFile",
  "link",
  "rename",
  "remove",
  "chmod",
  "mkdir",
  "readDirectory"
]

/** One round of every store operation, each run to its exit and followed by a descriptor check. */
const workload = (kit: Kit, world: Kit, round: number) =>
  Effect.gen(function*() {
    const sessionFile = kit.sessionFile
    // Driven, since a lock whose release failed makes later operations wait for it.
    const step = <A, E>(label: string, effect: Effect.Effect<A, E>) =>
      Effect.map(runDriven(effect), ({ exit }) => exit).pipe(
        Effect.tap(() => assertNoOpenHandles(world.fs, `after ${label} (round ${round})`))
      )
    const job = (n: number) => jobId(round * 10 + n)

    const first = yield* step("reserve", kit.store.reserve({ jobId: job(1), sessionFile }))
    if (Exit.isSuccess(first) && first.value._tag === "Acquired") {
      yield* step("settle", kit.store.settle(first.value, summaryReceipt(kit.branch, "s")))
    }
    yield* step("readCurrent", kit.store.readCurrent({ sessionFile }))
    yield* step("readHistory", kit.store.readHistory({ sessionFile, limit: 2 }))
    yield* step("history", Stream.runCollect(kit.store.history({ sessionFile, limit: 1 })))
    const second = yield* step("reserve", kit.store.reserve({ jobId: job(2), sessionFile }))
    if (Exit.isSuccess(second)) yield* step("release", kit.store.release(second.value))
    yield* step(
      "withJob",
      kit.store.withJob({ jobId: job(3), sessionFile }, () => Effect.succeed(titleReceipt(kit.branch, "s")))
    )
    // A duplicate check and a takeover read settled and expired claims.
    yield* step("reserve again", kit.store.reserve({ jobId: job(1), sessionFile, now: LEASE_MS * 2 }))
  })

fileSystemSuite("File handles under I/O failures", (it) => {
  it.effect(
    "no handle stays open and no claim is torn, across seeded fault storms",
    ({ root }) =>
      Effect.gen(function*() {
        for (let seed = 1; seed <= 8; seed++) {
          const dir = `${root}/${seed}`
          const world = yield* setup(dir)
          const fault = makeFaultFileSystem(
            world.fs,
            FaultPlan.random({ seed, probability: 0.025, kinds: FAULTED })
          )
          const kit = yield* setup(dir, { fs: fault, writeSession: false, config: { lockRetry: FAST_RETRY } })
          for (let round = 0; round < 4; round++) yield* workload(kit, world, round)
          assert.isAbove(
            fault.operations().filter((op) => op.fault !== undefined).length,
            0,
            `seed ${seed} injected faults`
          )

          // Claims are whole, and no job has two receipts.
          for (const file of yield* world.fs.readDirectory(world.jobsDir).pipe(Effect.orElseSucceed(() => []))) {
            if (!file.endsWith(".json")) continue
            const text = yield* readIfExists(world.fs, world.path.join(world.jobsDir, file))
            if (text !== undefined) assert.doesNotThrow(() => JSON.parse(text), `claim ${file} (seed ${seed})`)
          }
          const receipts = (yield* sidecarRecords(world).pipe(Effect.orElseSucceed(() => []))).filter((r) =>
            r.type !== "rarebit_head"
          )
          const jobs = receipts.map((r) => r.jobId)
          assert.strictEqual(new Set(jobs).size, jobs.length, `one receipt per job (seed ${seed})`)
        }
      }).pipe(Random.withSeed("fault-storm")),
    30_000
  )
})
