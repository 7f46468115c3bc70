/**
 * The claim life cycle of `reserve`: argument checks, exclusive creation
 * stamped by the Clock, in flight, duplicate through a verified pointer,
 * takeover after the lease only under the lock after re-reading, torn claims.
 */
import { assert } from "@effect/vitest"
import { Effect, Fiber, Random } from "effect"
import { TestClock } from "effect/testing"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { jobId, summaryReceipt, titleReceipt } from "../support/Receipts.js"
import {
  acquired,
  appendReceiptWithHead,
  assertNoOpenHandles,
  claimOf,
  interceptFileSystem,
  type Kit,
  LEASE_MS,
  makeSleepProbe,
  modeOf,
  readIfExists,
  setup,
  sidecarRecords,
  sizeOf,
  strayFiles,
  writeLock
} from "./StoreKit.js"

const JOB = jobId(1)
const T0 = Date.UTC(2026, 6, 26, 12, 0, 0)

const reserve = (kit: Kit, options: Record<string, unknown> = {}) =>
  Effect.tap(
    kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile, ...options }),
    () => assertNoOpenHandles(kit.fs, "after reserve")
  )

/** Reserves and settles a summary for `job`; returns the settled receipt. */
const settleJob = (kit: Kit, job: string) =>
  Effect.gen(function*() {
    const reservation = acquired(yield* reserve(kit, { jobId: job }))
    return yield* kit.store.settle(reservation, summaryReceipt(kit.branch, "s"))
  })

fileSystemSuite("RarebitStore.reserve", (it) => {
  it.effect("a job id that is not 64 lower-case hex digits is refused before anything is written", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      for (
        const bad of ["abc", "A".repeat(64), "0".repeat(63), "0".repeat(65), ` ${"0".repeat(63)}`, 42, null, undefined]
      ) {
        const error = yield* Effect.flip(reserve(kit, { jobId: bad }))
        assert.strictEqual(error._tag, "InvalidJobId", String(bad))
        assert.strictEqual(error.message, "Rarebit jobId must be a SHA-256 hex string")
      }
      assert.isFalse(yield* kit.fs.exists(kit.rarebitRoot))
    }))

  it.effect("a lease that is not a positive finite number is refused", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      for (const leaseMs of [0, 0.5, -1, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, "60000"]) {
        const error = yield* Effect.flip(reserve(kit, { leaseMs }))
        assert.strictEqual(error._tag, "InvalidLease", String(leaseMs))
        assert.strictEqual(error.message, "Rarebit leaseMs must be a positive finite number")
      }
      assert.isFalse(yield* kit.fs.exists(kit.rarebitRoot))
      assert.strictEqual((yield* reserve(kit, { leaseMs: 1 }))._tag, "Acquired")
    }))

  it.effect("the first reserve creates an active claim stamped by the Clock", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* TestClock.setTime(T0)
      const reservation = acquired(yield* reserve(kit))
      assert.deepStrictEqual(reservation, {
        _tag: "Acquired",
        jobId: JOB,
        materializationPath: kit.sidecar,
        sessionFile: kit.sessionFile,
        rarebitRoot: kit.rarebitRoot,
        sessionRoot: kit.sessionRoot,
        allowExternalSession: false,
        claimPath: kit.claimPath(JOB),
        leaseToken: reservation.leaseToken,
        native: null
      })
      assert.match(reservation.leaseToken, /^[0-9a-f]{48}$/)
      const text = yield* kit.fs.readFileString(kit.claimPath(JOB))
      assert.isTrue(text.endsWith("}\n") && text.indexOf("\n") === text.length - 1, "one JSON line")
      const claim = JSON.parse(text)
      // The seed's keys in the seed's order, then where the sidecar ended at claim time.
      assert.deepStrictEqual(Object.keys(claim), [
        "jobId",
        "state",
        "leaseToken",
        "claimedAt",
        "leaseMs",
        "sidecarOffset"
      ])
      assert.deepStrictEqual(claim, {
        jobId: JOB,
        state: "active",
        leaseToken: reservation.leaseToken,
        claimedAt: new Date(T0).toISOString(),
        leaseMs: LEASE_MS,
        sidecarOffset: 0
      })
      assert.deepStrictEqual(yield* strayFiles(kit), [])
    }).pipe(Random.withSeed("reserve-claim")))

  it.effect("a reserve that finds a claim in flight or settled writes nothing", ({ root }) =>
    Effect.gen(function*() {
      const world = yield* setup(root)
      yield* TestClock.setTime(T0)
      const settledJob = jobId(2)
      const settling = acquired(yield* world.store.reserve({ jobId: settledJob, sessionFile: world.sessionFile }))
      yield* world.store.settle(settling, summaryReceipt(world.branch, world.sessionId))
      acquired(yield* world.store.reserve({ jobId: JOB, sessionFile: world.sessionFile }))
      // A second store on the same disk, whose every call is recorded.
      const calls: Array<string> = []
      const kit = yield* setup(root, {
        writeSession: false,
        fs: interceptFileSystem(world.fs, (method) => Effect.sync(() => void calls.push(method)))
      })
      const inFlight = yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile })
      const duplicate = yield* kit.store.reserve({ jobId: settledJob, sessionFile: kit.sessionFile })
      assert.strictEqual(inFlight._tag, "InFlight")
      assert.strictEqual(duplicate._tag, "Duplicate")
      const writes = calls.filter((method) =>
        ["link", "rename", "remove", "writeFile", "chmod", "makeDirectory", "File.write", "File.writeAll", "File.sync"]
          .includes(method)
      )
      assert.deepStrictEqual(writes, [])
      assert.deepStrictEqual(yield* strayFiles(world), [])
    }))

  it.effect("`now` and `leaseMs` given by the caller win over the Clock and the layer", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const { offset } = yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: jobId(7) }))
      const size = yield* sizeOf(kit.fs, kit.sidecar)
      assert.strictEqual(offset, 0)
      acquired(yield* reserve(kit, { now: T0 + 5, leaseMs: 1234 }))
      const claim = yield* claimOf(kit, JOB)
      assert.strictEqual(claim.claimedAt, new Date(T0 + 5).toISOString())
      assert.strictEqual(claim.leaseMs, 1234)
      assert.strictEqual(claim.sidecarOffset, size)
    }))

  it.effect("tokens do not come from Random: two reserves under one seeded Random get different tokens", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const a = acquired(yield* reserve(kit).pipe(Random.withSeed(1)))
      const b = acquired(yield* reserve(kit, { jobId: jobId(2) }).pipe(Random.withSeed(1)))
      assert.match(a.leaseToken, /^[0-9a-f]{48}$/)
      assert.match(b.leaseToken, /^[0-9a-f]{48}$/)
      assert.notStrictEqual(a.leaseToken, b.leaseToken)
    }))

  it.effect("claims and sidecar folders are private: 0700 folders, 0600 claims", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      // Folders that already exist with looser modes are tightened.
      yield* kit.fs.makeDirectory(kit.jobsDir, { recursive: true, mode: 0o755 })
      yield* kit.fs.chmod(kit.jobsDir, 0o755)
      acquired(yield* reserve(kit))
      assert.strictEqual(yield* modeOf(kit.fs, kit.jobsDir), 0o700)
      assert.strictEqual(yield* modeOf(kit.fs, kit.path.dirname(kit.sidecar)), 0o700)
      assert.strictEqual(yield* modeOf(kit.fs, kit.claimPath(JOB)), 0o600)
      // Reserving does not create the sidecar itself.
      assert.isFalse(yield* kit.fs.exists(kit.sidecar))
    }))

  it.effect("a second reserve while the lease runs is in flight and leaves the claim alone", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      acquired(yield* reserve(kit))
      const before = yield* readIfExists(kit.fs, kit.claimPath(JOB))
      yield* TestClock.adjust(LEASE_MS)
      const second = yield* reserve(kit)
      assert.deepStrictEqual(second, {
        _tag: "InFlight",
        jobId: JOB,
        materializationPath: kit.sidecar,
        sessionFile: kit.sessionFile,
        rarebitRoot: kit.rarebitRoot,
        sessionRoot: kit.sessionRoot,
        allowExternalSession: false
      })
      assert.strictEqual(yield* readIfExists(kit.fs, kit.claimPath(JOB)), before)
    }))

  it.effect("after the lease a new worker takes over, and the old reservation is fenced", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const first = acquired(yield* reserve(kit))
      yield* TestClock.adjust(LEASE_MS + 1)
      const second = acquired(yield* reserve(kit))
      assert.notStrictEqual(second.leaseToken, first.leaseToken)
      const claim = yield* claimOf(kit, JOB)
      assert.strictEqual(claim.leaseToken, second.leaseToken)
      assert.strictEqual(claim.claimedAt, new Date(LEASE_MS + 1).toISOString())
      assert.isFalse(yield* kit.fs.exists(kit.lockPath), "the takeover lock is released")

      const fenced = yield* Effect.flip(kit.store.settle(first, summaryReceipt(kit.branch, "s")))
      assert.strictEqual(fenced._tag, "LeaseFenced")
      assert.strictEqual(fenced.message, "Rarebit reservation lease was fenced by a newer worker")
      assert.deepStrictEqual(yield* sidecarRecords(kit), [], "nothing appended")
      assert.strictEqual((yield* claimOf(kit, JOB)).leaseToken, second.leaseToken, "the new owner keeps its claim")
      yield* assertNoOpenHandles(kit.fs, "after a fenced settle")

      // The new owner settles normally.
      const settled = yield* kit.store.settle(second, summaryReceipt(kit.branch, "s"))
      assert.strictEqual(settled.jobId, JOB)
    }).pipe(Random.withSeed("takeover")))

  it.effect("`now` drives expiry too, and the lease boundary is exclusive", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      acquired(yield* reserve(kit, { now: T0 }))
      assert.strictEqual((yield* reserve(kit, { now: T0 + LEASE_MS }))._tag, "InFlight")
      acquired(yield* reserve(kit, { now: T0 + LEASE_MS + 1 }))
    }))

  it.effect("a settled claim whose pointer verifies is a duplicate carrying its receipt", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const settled = yield* settleJob(kit, JOB)
      yield* TestClock.adjust(10 * LEASE_MS)
      const again = yield* reserve(kit)
      const { path, ...receipt } = settled
      assert.deepStrictEqual(again, {
        _tag: "Duplicate",
        jobId: JOB,
        materializationPath: kit.sidecar,
        sessionFile: kit.sessionFile,
        rarebitRoot: kit.rarebitRoot,
        sessionRoot: kit.sessionRoot,
        allowExternalSession: false,
        record: { ...receipt, path }
      })
      assert.strictEqual(path, kit.sidecar)
      assert.strictEqual((yield* sidecarRecords(kit)).filter((r) => r.type === "rarebit_summary").length, 1)
    }))

  it.effect("a settled Title is a duplicate too", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const reservation = acquired(yield* reserve(kit))
      yield* kit.store.settle(reservation, titleReceipt(kit.branch, "s"))
      const again = yield* reserve(kit)
      assert.strictEqual(again._tag, "Duplicate")
      if (again._tag === "Duplicate") assert.strictEqual(again.record.type, "rarebit_title")
    }))

  it.effect("a settled claim whose pointer does not verify is HeadInvalid, not a duplicate", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* settleJob(kit, JOB)
      const claim = yield* claimOf(kit, JOB)
      const broken = [
        { ...claim.receiptRef, receiptHash: "f".repeat(64) },
        { ...claim.receiptRef, receiptOffset: claim.receiptRef.receiptOffset + 1 },
        { ...claim.receiptRef, receiptLength: 10 ** 6 },
        { ...claim.receiptRef, receiptOffset: -1 }
      ]
      for (const receiptRef of broken) {
        yield* kit.fs.writeFileString(kit.claimPath(JOB), `${JSON.stringify({ ...claim, receiptRef })}\n`)
        const error = yield* Effect.flip(reserve(kit))
        assert.strictEqual(error._tag, "HeadInvalid", JSON.stringify(receiptRef))
        assert.strictEqual(error.message, "Rarebit settled job receipt pointer is invalid")
      }
      // A pointer into a sidecar that is gone does not verify either.
      yield* kit.fs.writeFileString(kit.claimPath(JOB), `${JSON.stringify(claim)}\n`)
      yield* kit.fs.remove(kit.sidecar)
      assert.strictEqual((yield* Effect.flip(reserve(kit)))._tag, "HeadInvalid")
      yield* assertNoOpenHandles(kit.fs)
    }))

  it.effect("a settled claim without a pointer, or a claim that is not an object, stays in flight (as the seed)", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* kit.fs.makeDirectory(kit.jobsDir, { recursive: true })
      for (const claim of [{ jobId: JOB, state: "settled", leaseToken: "t" }, null, 42, "text", []]) {
        yield* kit.fs.writeFileString(kit.claimPath(JOB), `${JSON.stringify(claim)}\n`)
        assert.strictEqual((yield* reserve(kit, { now: T0 + 100 * LEASE_MS }))._tag, "InFlight", JSON.stringify(claim))
      }
      // An active claim whose time does not parse never expires.
      yield* kit.fs.writeFileString(
        kit.claimPath(JOB),
        `${JSON.stringify({ jobId: JOB, state: "active", leaseToken: "t", claimedAt: "soon", leaseMs: 1 })}\n`
      )
      assert.strictEqual((yield* reserve(kit, { now: T0 + 100 * LEASE_MS }))._tag, "InFlight")
    }))

  it.effect("an empty (torn) claim is in flight while fresh and taken over once older than the lease", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* kit.fs.makeDirectory(kit.jobsDir, { recursive: true })
      yield* kit.fs.writeFileString(kit.claimPath(JOB), "")
      const written = new Date(T0)
      yield* kit.fs.utimes(kit.claimPath(JOB), written, written)
      assert.strictEqual((yield* reserve(kit, { now: T0 + 1000 }))._tag, "InFlight")
      assert.strictEqual(yield* readIfExists(kit.fs, kit.claimPath(JOB)), "")
      const reservation = acquired(yield* reserve(kit, { now: T0 + LEASE_MS + 1 }))
      const claim = yield* claimOf(kit, JOB)
      assert.strictEqual(claim.state, "active")
      assert.strictEqual(claim.leaseToken, reservation.leaseToken)
      // A partly written claim is torn the same way.
      yield* kit.fs.writeFileString(kit.claimPath(JOB), "{\"jobId\":\"")
      yield* kit.fs.utimes(kit.claimPath(JOB), written, written)
      assert.strictEqual((yield* reserve(kit, { now: T0 + 1000 }))._tag, "InFlight")
    }))

  it.effect("a takeover re-reads the claim under the lock: a settlement that landed meanwhile is a duplicate", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const first = acquired(yield* reserve(kit))
      yield* TestClock.adjust(LEASE_MS + 1)
      // Another process holds the sidecar's commit lock.
      yield* writeLock(kit, { token: "other-process", claimedAt: new Date(0).toISOString() })
      const probe = yield* makeSleepProbe
      const taker = yield* Effect.forkChild(probe.instrument(reserve(kit)))
      yield* probe.next
      // While the taker waits, the first worker (another process, late) settles the job.
      yield* kit.fs.remove(kit.lockPath)
      const other = yield* kit.otherStore()
      const settled = yield* other.settle(first, summaryReceipt(kit.branch, "s"))
      yield* TestClock.adjust(5)
      const outcome = yield* Fiber.await(taker)
      assert.strictEqual(outcome._tag, "Success")
      if (outcome._tag === "Success") {
        assert.strictEqual(outcome.value._tag, "Duplicate")
        if (outcome.value._tag === "Duplicate") assert.deepStrictEqual(outcome.value.record, settled)
      }
      assert.strictEqual((yield* claimOf(kit, JOB)).state, "settled")
    }))

  it.effect("a takeover re-reads the claim under the lock: a fresher takeover meanwhile means in flight", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      acquired(yield* reserve(kit))
      yield* TestClock.adjust(LEASE_MS + 1)
      yield* writeLock(kit, { token: "other-process", claimedAt: new Date(0).toISOString() })
      const probe = yield* makeSleepProbe
      const taker = yield* Effect.forkChild(probe.instrument(reserve(kit)))
      yield* probe.next
      // Another process takes the job over first, then lets the lock go.
      const other = yield* kit.otherStore()
      yield* kit.fs.remove(kit.lockPath)
      const winner = acquired(yield* other.reserve({ jobId: JOB, sessionFile: kit.sessionFile }))
      yield* TestClock.adjust(5)
      const outcome = yield* Fiber.await(taker)
      assert.strictEqual(outcome._tag === "Success" ? outcome.value._tag : outcome._tag, "InFlight")
      assert.strictEqual((yield* claimOf(kit, JOB)).leaseToken, winner.leaseToken)
    }))
})
