/**
 * A worker that crashes after appending its receipt but before marking its
 * claim settled: the next reserve after the lease completes that settlement
 * instead of running the job again. Simulated by hand on both worlds, then
 * at every crash point of a real reserve and settle on the memory world,
 * power cuts losing directory operations no directory fsync made durable.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem, Path, Random } from "effect"
import { LockOwner, type LockOwnerProbe } from "../../src/store/lock/LockOwner.js"
import { exploreCrashPoints } from "../../src/testing/CrashPoints.js"
import { makeMemoryFileSystem } from "../../src/testing/MemoryFileSystem.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { jobId, type Json, sessionText, summaryReceipt, titleReceipt } from "../support/Receipts.js"
import {
  acquired,
  appendRaw,
  appendReceiptWithHead,
  assertSettledPointer,
  claimOf,
  type Kit,
  LEASE_MS,
  receiptLine,
  setup,
  sidecarRecords,
  strayFiles
} from "./StoreKit.js"

const JOB = jobId(1)

const receiptsOf = (kit: Kit, job: string) =>
  Effect.map(sidecarRecords(kit), (records) => records.filter((r) => r.type !== "rarebit_head" && r.jobId === job))

/** The claim is settled and its pointer is the line of the one receipt of the job. */
const assertRecovered = (kit: Kit, job: string, receipt: Json) =>
  Effect.gen(function*() {
    yield* assertSettledPointer(kit, job, receipt)
    assert.strictEqual((yield* receiptsOf(kit, job)).length, 1, "never a second receipt")
  })

fileSystemSuite("Crash recovery", (it) => {
  it.effect("a receipt and head appended for an expired active claim make the next reserve a duplicate", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const crashed = acquired(yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile }))
      // The crashed worker got as far as appending its receipt and head.
      const receipt = summaryReceipt(kit.branch, "s", { jobId: JOB })
      yield* appendReceiptWithHead(kit, receipt)
      const before = yield* kit.fs.readFileString(kit.sidecar)

      // Still within the lease: nothing is decided yet.
      assert.strictEqual((yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile }))._tag, "InFlight")
      const again = yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile, now: LEASE_MS + 1 })
      assert.strictEqual(again._tag, "Duplicate")
      if (again._tag === "Duplicate") assert.deepStrictEqual(again.record, { ...receipt, path: kit.sidecar })
      yield* assertRecovered(kit, JOB, receipt)
      assert.strictEqual(
        yield* kit.fs.readFileString(kit.sidecar),
        before,
        "the head was already current: nothing appended"
      )
      assert.strictEqual((yield* claimOf(kit, JOB)).leaseToken, crashed.leaseToken)
      // And from then on, a plain duplicate.
      assert.strictEqual(
        (yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile, now: 10 * LEASE_MS }))._tag,
        "Duplicate"
      )
      // The crashed worker, were it to come back, is fenced.
      assert.strictEqual((yield* Effect.flip(kit.store.settle(crashed, receipt)))._tag, "LeaseFenced")
      assert.strictEqual((yield* receiptsOf(kit, JOB)).length, 1)
      assert.deepStrictEqual(yield* strayFiles(kit), [])
    }).pipe(Random.withSeed("recover-with-head")))

  it.effect("a receipt appended without its head is recovered and made current", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile })
      const receipt = summaryReceipt(kit.branch, "s", { jobId: JOB })
      yield* appendReceiptWithHead(kit, receipt, { head: false })
      assert.strictEqual((yield* kit.store.readCurrent({ sessionFile: kit.sessionFile })).availability, "missing")
      const again = yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile, now: LEASE_MS + 1 })
      assert.strictEqual(again._tag, "Duplicate")
      yield* assertRecovered(kit, JOB, receipt)
      const current = yield* kit.store.readCurrent({ sessionFile: kit.sessionFile })
      assert.strictEqual(current.availability, "available")
      assert.deepStrictEqual(current.receipt, receipt)
      assert.deepStrictEqual((yield* sidecarRecords(kit)).map((r) => r.type), ["rarebit_summary", "rarebit_head"])
    }))

  it.effect("a recovered Title settles without a head", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile })
      const title = titleReceipt(kit.branch, "s", { jobId: JOB })
      yield* appendRaw(kit, receiptLine(title))
      const again = yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile, now: LEASE_MS + 1 })
      assert.strictEqual(again._tag, "Duplicate")
      yield* assertRecovered(kit, JOB, title)
      assert.deepStrictEqual((yield* sidecarRecords(kit)).map((r) => r.type), ["rarebit_title"])
    }))

  it.effect("a sidecar that cannot be scanned blocks the takeover instead of risking a second run", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const crashed = acquired(yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile }))
      yield* kit.fs.makeDirectory(kit.sidecar, { recursive: true })
      const error = yield* Effect.flip(
        kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile, now: LEASE_MS + 1 })
      )
      assert.strictEqual(error._tag, "StoreIo")
      assert.strictEqual((yield* claimOf(kit, JOB)).leaseToken, crashed.leaseToken, "the claim is left as it was")
      assert.isFalse(yield* kit.fs.exists(kit.lockPath))
    }))

  it.effect("receipts of other jobs, or from before the claim, are not mistaken for the crashed one", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      // An older settlement of the same job id, before this claim was taken (its claim since deleted).
      yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: JOB }))
      const crashed = acquired(yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile }))
      assert.isAbove((yield* claimOf(kit, JOB)).sidecarOffset, 0)
      yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: jobId(2) }))
      const again = acquired(yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile, now: LEASE_MS + 1 }))
      assert.notStrictEqual(again.leaseToken, crashed.leaseToken)
      yield* kit.store.settle(again, summaryReceipt(kit.branch, "s"))
      assert.strictEqual((yield* receiptsOf(kit, JOB)).length, 2)
    }))
})

describe("Crash recovery at every crash point of a settle", () => {
  const crashedOwner: LockOwnerProbe = {
    current: { pid: 1, hostname: "worker" },
    isProvablyDead: () => Effect.succeed(false)
  }
  // After the "restart" the first worker's process is gone, and we are a new one.
  const restarted: LockOwnerProbe = {
    current: { pid: 2, hostname: "worker" },
    isProvablyDead: (owner) => Effect.succeed(owner.pid === 1)
  }

  it.effect("the job ends settled exactly once, whatever the crash left", () =>
    Effect.gen(function*() {
      const { branch, text } = sessionText("s")
      const root = "/work"
      const initial = makeMemoryFileSystem({ files: { [`${root}/sessions/project/trace.jsonl`]: text } })
      const path = yield* Path.Path
      const kitOn = (fs: FileSystem.FileSystem) =>
        setup(root, { fs, writeSession: false }).pipe(
          Effect.provideService(Path.Path, path),
          Effect.provideService(FileSystem.FileSystem, fs)
        )

      const outcomes = new Map<string, number>()
      const exploration = yield* exploreCrashPoints({
        initial,
        program: Effect.gen(function*() {
          const kit = yield* kitOn(yield* FileSystem.FileSystem)
          const reservation = acquired(yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile }))
          yield* kit.store.settle(reservation, summaryReceipt(branch, "s"))
        }).pipe(Random.withSeed("crash-run"), Effect.provideService(LockOwner, crashedOwner)),
        verify: (point) =>
          Effect.gen(function*() {
            const label = `${point.mode} crash at ${point.operation?.method ?? "the end"} ${
              point.operation?.path ?? ""
            }`
            const kit = yield* kitOn(point.image)
            const again = yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile, now: LEASE_MS + 1 })
            outcomes.set(again._tag, (outcomes.get(again._tag) ?? 0) + 1)
            if (again._tag === "Acquired") yield* kit.store.settle(again, summaryReceipt(branch, "s"))
            else assert.strictEqual(again._tag, "Duplicate", label)
            const receipts = yield* receiptsOf(kit, JOB)
            assert.strictEqual(receipts.length, 1, `one receipt after ${label}`)
            yield* assertRecovered(kit, JOB, receipts[0]!)
            const current = yield* kit.store.readCurrent({ sessionFile: kit.sessionFile })
            assert.strictEqual(current.availability, "available", label)
            // A lock the crash left behind is broken by the next worker that needs it.
            const next = acquired(yield* kit.store.reserve({ jobId: jobId(2), sessionFile: kit.sessionFile }))
            yield* kit.store.settle(next, titleReceipt(branch, "s"))
            assert.isFalse(yield* kit.fs.exists(kit.lockPath), `no lock after recovering from ${label}`)
          }).pipe(Random.withSeed("recovery"), Effect.provideService(LockOwner, restarted))
      })
      assert.isAtLeast(exploration.points, 15)
      // Power cuts were also tried losing directory operations, not only with every one kept.
      assert.isAbove(exploration.images, 2 * exploration.points)
      // Some crash points must need the recovery path, others a fresh run.
      assert.isAtLeast(outcomes.get("Duplicate") ?? 0, 1)
      assert.isAtLeast(outcomes.get("Acquired") ?? 0, 1)
    }).pipe(Effect.provide(Path.layer)))
})
