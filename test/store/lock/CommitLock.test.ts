/**
 * The commit lock: retries driven by the TestClock, in-process queueing,
 * token-checked release, interruption of waiters and holders, and breaking
 * locks whose owner is provably dead (never by age, never twice, never from
 * another PID namespace).
 */
import { assert } from "@effect/vitest"
import { Clock, Deferred, Effect, Exit, Fiber, FileSystem, PlatformError, Random } from "effect"
import { SecureRandom } from "effect/crypto/SecureRandom"
import { makeDarwinOwnerProbe } from "../../../src/platform/ProcessOwner.js"
import { MAX_LOCK_LINE_BYTES } from "../../../src/protocol/CommitLockFile.js"
import { acquireCommitLock, DEAD_OWNER_RECHECK_MS, makeLockQueues } from "../../../src/store/lock/CommitLock.js"
import {
  LockOwner,
  type LockOwnerProbe,
  makeLockOwnerProbe,
  type OwnerEvidence
} from "../../../src/store/lock/LockOwner.js"
import type { Acquired } from "../../../src/store/write/Reservation.js"
import { FaultPlan, makeFaultFileSystem } from "../../../src/testing/FaultFileSystem.js"
import * as TestSecureRandom from "../../../src/testing/TestSecureRandom.js"
import { fileSystemSuite } from "../../support/FileSystemSuite.js"
import { jobId, type Json, summaryReceipt } from "../../support/Receipts.js"
import {
  assertNoLeftovers,
  assertNoOpenHandles,
  claimOf,
  driveSleeps,
  FAST_RETRY,
  interceptFileSystem,
  type Kit,
  makeSleepProbe,
  readIfExists,
  reserveAcquired,
  runDriven,
  setup,
  sidecarRecords,
  strayFiles,
  writeLock
} from "../StoreKit.js"

const JOB = jobId(1)
const FOREIGN = { token: "held-by-another-process", claimedAt: "2026-07-26T00:00:00.000Z" }
const HERE: OwnerEvidence = { pid: 1, hostname: "here" }
const DEAD: OwnerEvidence = { pid: 999, hostname: "here" }

const settle = (kit: Kit, reservation: Acquired, hook?: Effect.Effect<void, unknown>) =>
  kit.store.settle(
    reservation,
    summaryReceipt(kit.branch, "s"),
    hook === undefined ? {} : { hooks: { afterLeaseValidated: hook } }
  )

/** A probe that writes `HERE` as our evidence and judges owners by `dead`. */
const probeOf = (dead: (owner: OwnerEvidence) => Effect.Effect<boolean>): LockOwnerProbe => ({
  current: HERE,
  isProvablyDead: dead
})

/**
 * A model of a host where the store's own rule judges owners: this process
 * is pid 1 (started at tick 100) in PID namespace `OUR_NAMESPACE`, where pid
 * 2 runs since tick 200 and every other pid is gone.
 */
const OUR_NAMESPACE = "pid:[4026531836]"
const OTHER_NAMESPACE = "pid:[4026532182]"
const SELF: OwnerEvidence = {
  pid: 1,
  hostname: "here",
  bootId: "boot-1",
  startTicks: "100",
  pidNamespace: OUR_NAMESPACE
}
const modelProbe = makeLockOwnerProbe(SELF, (pid) => pid === 1 ? "100" : pid === 2 ? "200" : "gone")
/** An owner our namespace proves dead: its pid is gone there. */
const GONE: OwnerEvidence = { ...SELF, pid: 999, startTicks: "50" }
const { pidNamespace: _, ...GONE_WITHOUT_NAMESPACE } = GONE
const { pidNamespace: __, ...SELF_WITHOUT_NAMESPACE } = SELF

/**
 * A made-up Mac judged by the Darwin probe's own rule: this process is pid 1
 * (started at second 100) in boot session `DARWIN_BOOT`, where pid 2 runs
 * since second 200 and every other pid is gone.
 */
const DARWIN_BOOT = "5C3B9B1E-7A2D-4B8E-9F10-2A3B4C5D6E7F"
const lstartOf: Record<number, string> = { 1: "Thu Jan  1 00:01:40 1970", 2: "Thu Jan  1 00:03:20 1970" }
const darwinModel = () =>
  makeDarwinOwnerProbe({
    pid: 1,
    hostname: () => "here",
    bootSessionId: () => DARWIN_BOOT,
    processExists: (pid) => pid in lstartOf,
    startTimeText: (pid) => lstartOf[pid]
  })

const sum = (values: ReadonlyArray<number>) => values.reduce((total, value) => total + value, 0)

/**
 * `count` waits between attempts, each a whole number of milliseconds from 3 to 7 (the protocol's 5 ms,
 * jittered), together exactly `count` × 5 ms: the protocol's budget.
 */
const assertRetryWaits = (sleeps: ReadonlyArray<number>, count: number, label?: string) => {
  assert.strictEqual(sleeps.length, count, label)
  assert.strictEqual(sum(sleeps), count * 5, label)
  for (const ms of sleeps) {
    assert.isTrue(Number.isInteger(ms) && ms >= 3 && ms <= 7, `${label ?? "wait"}: ${ms} ms`)
  }
}

const failureTag = (exit: Exit.Exit<unknown, unknown>): unknown =>
  Exit.isFailure(exit) ? (exit.cause.reasons.find((reason) => reason._tag === "Fail") as any)?.error?._tag : "Success"

fileSystemSuite("Commit lock", (it) => {
  it.effect("a lock held by someone else fails with LockHeld after the configured attempts", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { config: { lockRetry: FAST_RETRY } })
      const reservation = yield* reserveAcquired(kit)
      yield* writeLock(kit, FOREIGN)
      const { exit, sleeps } = yield* runDriven(settle(kit, reservation))
      assert.strictEqual(failureTag(exit), "LockHeld")
      if (Exit.isFailure(exit)) {
        const error = exit.cause.reasons.find((reason) => reason._tag === "Fail") as any
        assert.strictEqual(
          error.error.message,
          "Rarebit Session commit lock is held; explicit repair is required if its owner crashed"
        )
        assert.strictEqual(error.error.lockPath, kit.lockPath)
        assert.strictEqual(error.error.attempts, FAST_RETRY.attempts)
      }
      // One wait between each two attempts, driven by the TestClock alone.
      assertRetryWaits(sleeps, FAST_RETRY.attempts - 1)
      assert.strictEqual(yield* Clock.currentTimeMillis, 15)
      assert.strictEqual(yield* readIfExists(kit.fs, kit.lockPath), `${JSON.stringify(FOREIGN)}\n`, "never broken")
      assert.deepStrictEqual(yield* strayFiles(kit), [])
      // The seed keeps the claim when the lock was never acquired.
      assert.strictEqual((yield* claimOf(kit, JOB)).leaseToken, reservation.leaseToken)
      assert.isFalse(yield* kit.fs.exists(kit.sidecar))
      yield* assertNoOpenHandles(kit.fs, "after LockHeld")
    }))

  it.effect("the protocol's schedule is 2000 attempts over exactly 1999 × 5 ms, each wait 3 to 7 ms", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const reservation = yield* reserveAcquired(kit)
      yield* writeLock(kit, FOREIGN)
      const { exit, sleeps } = yield* runDriven(settle(kit, reservation))
      assert.strictEqual(failureTag(exit), "LockHeld")
      assertRetryWaits(sleeps, 1999)
      // Jittered: spread over the whole range, not one fixed step.
      assert.deepStrictEqual([...new Set(sleeps)].sort(), [3, 4, 5, 6, 7])
      // Yet no attempt comes later than on the fixed 5 ms schedule (a caller that advances the clock by
      // k × 5 ms has seen k retries), and the budget is exactly the reference's 1999 waits of 5 ms.
      let elapsed = 0
      sleeps.forEach((ms, index) => {
        elapsed += ms
        assert.isAtMost(elapsed, (index + 1) * 5, `attempt ${index + 1} at ${elapsed} ms`)
      })
      assert.strictEqual(sum(sleeps), 9995)
      assert.strictEqual(yield* Clock.currentTimeMillis, 9995)
    }).pipe(Random.withSeed("protocol-schedule")))

  it.effect("release and a takeover wait for the lock too", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { config: { lockRetry: FAST_RETRY } })
      const reservation = yield* reserveAcquired(kit)
      yield* writeLock(kit, FOREIGN)
      const released = yield* runDriven(kit.store.release(reservation))
      assert.strictEqual(failureTag(released.exit), "LockHeld")
      assert.strictEqual((yield* claimOf(kit, JOB)).state, "active")
      const takeover = yield* runDriven(
        kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile, now: 10 * 60_000 * 60 })
      )
      assert.strictEqual(failureTag(takeover.exit), "LockHeld")
      assert.strictEqual(released.sleeps.length + takeover.sleeps.length, 6)
      assert.strictEqual((yield* claimOf(kit, JOB)).leaseToken, reservation.leaseToken)
    }))

  it.effect("fibers of one process queue for a lock instead of polling it", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const queues = makeLockQueues(kit.fs)
      const single = { intervalMs: 5, attempts: 1 }
      const lock = (fiberName: string, gate?: Deferred.Deferred<void>, held?: Deferred.Deferred<void>) =>
        Effect.scoped(Effect.gen(function*() {
          const heldLock = yield* acquireCommitLock(kit.fs, queues, kit.lockPath, single, false)
          if (held !== undefined) yield* Deferred.succeed(held, undefined)
          if (gate !== undefined) yield* Deferred.await(gate)
          return `${fiberName}:${heldLock.token === JSON.parse(yield* kit.fs.readFileString(kit.lockPath)).token}`
        }))
      yield* kit.fs.makeDirectory(kit.path.dirname(kit.lockPath), { recursive: true })
      const gate = yield* Deferred.make<void>()
      const held = yield* Deferred.make<void>()
      const first = yield* Effect.forkChild(lock("first", gate, held))
      yield* Deferred.await(held)
      const second = yield* Effect.forkChild(lock("second"))
      // The second fiber is now queued in process; with one attempt, a poll of the file would fail.
      yield* Effect.yieldNow
      yield* Effect.yieldNow
      assert.isUndefined(second.pollUnsafe())
      yield* Deferred.succeed(gate, undefined)
      assert.deepStrictEqual(yield* Fiber.joinAll([first, second]), ["first:true", "second:true"])
      assert.isFalse(yield* kit.fs.exists(kit.lockPath))
      assert.strictEqual(queues.size(), 0, "queues are dropped when unused")
    }).pipe(Effect.provideService(SecureRandom, TestSecureRandom.make("queued-locks"))))

  it.effect("concurrent settles on one sidecar all succeed with a single lock attempt each", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { config: { lockRetry: { intervalMs: 5, attempts: 1 } } })
      const jobs = [1, 2, 3, 4, 5, 6].map(jobId)
      const reservations = yield* Effect.forEach(jobs, (job) => reserveAcquired(kit, job))
      const hook = Effect.andThen(Effect.yieldNow, Effect.yieldNow)
      const settled = yield* Effect.forEach(reservations, (r) => settle(kit, r, hook), { concurrency: "unbounded" })
      assert.strictEqual(settled.length, jobs.length)
      const receipts = (yield* sidecarRecords(kit)).filter((r) => r.type === "rarebit_summary")
      assert.deepStrictEqual(receipts.map((r) => r.jobId).sort(), [...jobs].sort())
      for (const job of jobs) assert.strictEqual((yield* claimOf(kit, job)).state, "settled")
      yield* assertNoLeftovers(kit, "after concurrent settles")
    }))

  it.effect("queued fibers of one process take the file lock over instead of re-creating it", ({ root }) =>
    Effect.gen(function*() {
      let links = 0
      const base = yield* FileSystem.FileSystem
      const fs = interceptFileSystem(base, (method) => Effect.sync(() => void (method === "link" && links++)))
      const kit = yield* setup(root, { fs, config: { lockRetry: { intervalMs: 5, attempts: 1 } } })
      const jobs = [11, 12, 13, 14, 15, 16].map(jobId)
      const reservations = yield* Effect.forEach(jobs, (job) => reserveAcquired(kit, job))
      links = 0
      const tokensSeen: Array<string> = []
      const hook = Effect.orDie(
        Effect.map(base.readFileString(kit.lockPath), (text) => void tokensSeen.push(JSON.parse(text).token))
      ).pipe(Effect.andThen(Effect.yieldNow))
      yield* Effect.forEach(reservations, (r) => settle(kit, r, hook), { concurrency: "unbounded" })
      // Every settle ran under a lock file, but fewer lock files were created than settles.
      assert.strictEqual(tokensSeen.length, jobs.length)
      assert.isBelow(links, jobs.length)
      assert.isBelow(new Set(tokensSeen).size, jobs.length)
      for (const job of jobs) assert.strictEqual((yield* claimOf(kit, job)).state, "settled")
      yield* assertNoLeftovers(kit, "after handed-over settles")
    }))

  it.effect("a handed-over lock that cannot be re-read is released, so the next holder is not blocked by it", ({ root }) =>
    Effect.gen(function*() {
      // Fails the first read of the lock file after a holder entered its
      // critical section (the lock path is opened only to be read): the
      // re-read by which the next queued fiber takes the lock over.
      let lockPath = ""
      let armed = false
      const base = yield* FileSystem.FileSystem
      const fs = interceptFileSystem(base, (method, args) => {
        // The lock is read through an open (the non-blocking one), at most its bound, and decoded as the reference does.
        if (!(armed && method === "open" && args[0] === lockPath)) return Effect.void
        armed = false
        return Effect.fail(
          PlatformError.systemError({ _tag: "Unknown", module: "FileSystem", method, pathOrDescriptor: lockPath })
        )
      })
      const kit = yield* setup(root, { fs, config: { lockRetry: { intervalMs: 5, attempts: 1 } } })
      lockPath = kit.lockPath
      const reservations = yield* Effect.forEach([21, 22].map(jobId), (job) => reserveAcquired(kit, job))
      let entered = 0
      const hook = Effect.sync(() => void (entered++ === 0 && (armed = true))).pipe(Effect.andThen(Effect.yieldNow))
      yield* Effect.forEach(reservations, (r) => settle(kit, r, hook), { concurrency: "unbounded" })
      assert.isFalse(armed, "the take-over re-read was made and failed")
      for (const job of [21, 22].map(jobId)) assert.strictEqual((yield* claimOf(kit, job)).state, "settled")
      yield* assertNoLeftovers(kit, "after a failed take-over")
    }))

  it.effect("the lock file holds a fresh token, the Clock's time and our owner evidence", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const reservation = yield* reserveAcquired(kit)
      const seen: Array<Json> = []
      const hook = Effect.orDie(Effect.map(kit.fs.readFileString(kit.lockPath), (text) => seen.push(JSON.parse(text))))
      yield* settle(kit, reservation, hook).pipe(
        Effect.provideService(LockOwner, probeOf(() => Effect.succeed(false)))
      )
      assert.deepStrictEqual(Object.keys(seen[0]!), ["token", "claimedAt", "owner"])
      assert.match(String(seen[0]!.token), /^[0-9a-f]{48}$/)
      assert.notStrictEqual(seen[0]!.token, reservation.leaseToken)
      assert.strictEqual(seen[0]!.claimedAt, new Date(0).toISOString())
      assert.deepStrictEqual(seen[0]!.owner, HERE)
      yield* assertNoLeftovers(kit, "after settle")
    }).pipe(Random.withSeed("lock-content")))

  it.effect("evidence that would make the lock line longer than MAX_LOCK_LINE_BYTES is left out", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const seen: Array<string> = []
      const hook = Effect.orDie(Effect.map(kit.fs.readFileString(kit.lockPath), (text) => seen.push(text)))
      const fits = { ...HERE, hostname: "h".repeat(MAX_LOCK_LINE_BYTES - 150) }
      const tooLong = { ...HERE, hostname: "h".repeat(MAX_LOCK_LINE_BYTES) }
      for (const [job, current] of [[1, fits], [2, tooLong]] as const) {
        const probe: LockOwnerProbe = { current, isProvablyDead: () => Effect.succeed(false) }
        yield* settle(kit, yield* reserveAcquired(kit, jobId(job)), hook).pipe(Effect.provideService(LockOwner, probe))
      }
      assert.deepStrictEqual(JSON.parse(seen[0]!).owner, fits)
      assert.isAtMost(new TextEncoder().encode(seen[0]!).length, MAX_LOCK_LINE_BYTES)
      assert.deepStrictEqual(Object.keys(JSON.parse(seen[1]!)), ["token", "claimedAt"])
      yield* assertNoLeftovers(kit, "after settles")
    }))

  it.effect("release removes the lock only while it still holds our token", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      // Someone replaces the lock mid-way (e.g. a repair followed by another writer).
      const replace = Effect.orDie(kit.fs.writeFileString(kit.lockPath, `${JSON.stringify(FOREIGN)}\n`))
      yield* settle(kit, yield* reserveAcquired(kit, jobId(1)), replace)
      assert.strictEqual(yield* readIfExists(kit.fs, kit.lockPath), `${JSON.stringify(FOREIGN)}\n`)
      yield* kit.fs.remove(kit.lockPath)
      // The lock removed under us: releasing is not an error.
      yield* settle(kit, yield* reserveAcquired(kit, jobId(2)), Effect.orDie(kit.fs.remove(kit.lockPath)))
      assert.strictEqual((yield* claimOf(kit, jobId(2))).state, "settled")
      // An unparsable lock is not ours either.
      yield* settle(kit, yield* reserveAcquired(kit, jobId(3)), Effect.orDie(kit.fs.writeFileString(kit.lockPath, "{")))
      assert.strictEqual(yield* readIfExists(kit.fs, kit.lockPath), "{")
      yield* kit.fs.remove(kit.lockPath)
      yield* assertNoLeftovers(kit, "after foreign replacements")
    }))

  it.effect("interrupting a fiber that waits for another process's lock leaves nothing behind", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const reservation = yield* reserveAcquired(kit)
      yield* writeLock(kit, FOREIGN)
      const probe = yield* makeSleepProbe
      const fiber = yield* Effect.forkChild(probe.instrument(settle(kit, reservation)))
      yield* probe.next
      yield* Fiber.interrupt(fiber)
      assert.isTrue(Exit.hasInterrupts(yield* Fiber.await(fiber)))
      assert.strictEqual(yield* readIfExists(kit.fs, kit.lockPath), `${JSON.stringify(FOREIGN)}\n`)
      assert.deepStrictEqual(yield* strayFiles(kit), [])
      assert.strictEqual((yield* claimOf(kit, JOB)).leaseToken, reservation.leaseToken, "the claim is untouched")
      yield* assertNoOpenHandles(kit.fs, "after interrupting a waiter")
      // The in-process queue was released too: the same store settles once the lock is gone.
      yield* kit.fs.remove(kit.lockPath)
      yield* settle(kit, reservation)
      yield* assertNoLeftovers(kit, "after the retried settle")
    }))

  it.effect("interrupting a fiber queued behind another in-process holder leaves nothing behind", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const first = yield* reserveAcquired(kit, jobId(1))
      const second = yield* reserveAcquired(kit, jobId(2))
      const inHook = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(
        settle(kit, first, Effect.andThen(Deferred.succeed(inHook, undefined), Deferred.await(gate)))
      )
      yield* Deferred.await(inHook)
      const waiter = yield* Effect.forkChild(settle(kit, second))
      yield* Effect.yieldNow
      yield* Fiber.interrupt(waiter)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holder)
      assert.strictEqual((yield* claimOf(kit, jobId(1))).state, "settled")
      assert.strictEqual((yield* claimOf(kit, jobId(2))).state, "active", "the waiter never held the lock")
      yield* assertNoLeftovers(kit, "after interrupting a queued waiter")
      yield* settle(kit, second)
      assert.strictEqual((yield* claimOf(kit, jobId(2))).state, "settled")
    }))

  it.effect("interrupting the holder inside the hook removes the lock and the claim, and appends nothing", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const reservation = yield* reserveAcquired(kit)
      const inHook = yield* Deferred.make<void>()
      const fiber = yield* Effect.forkChild(
        settle(kit, reservation, Effect.andThen(Deferred.succeed(inHook, undefined), Effect.never))
      )
      yield* Deferred.await(inHook)
      assert.isTrue(yield* kit.fs.exists(kit.lockPath), "the hook runs under the lock")
      yield* Fiber.interrupt(fiber)
      assert.isFalse(yield* kit.fs.exists(kit.claimPath(JOB)), "the owner's claim is removed so the job can run again")
      assert.isFalse(yield* kit.fs.exists(kit.sidecar))
      yield* assertNoLeftovers(kit, "after interrupting the holder")
      assert.strictEqual((yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile }))._tag, "Acquired")
    }))

  it.effect("a lock whose owner is provably dead is broken", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { config: { lockRetry: FAST_RETRY } })
      const reservation = yield* reserveAcquired(kit)
      yield* writeLock(kit, { token: "dead-token", claimedAt: FOREIGN.claimedAt, owner: DEAD })
      const judged: Array<OwnerEvidence> = []
      const probe = probeOf((owner) => Effect.sync(() => (judged.push(owner), owner.pid === DEAD.pid)))
      const { exit, sleeps } = yield* runDriven(settle(kit, reservation).pipe(Effect.provideService(LockOwner, probe)))
      assert.strictEqual(failureTag(exit), "Success")
      assert.deepStrictEqual(sleeps, [], "broken at once, no waiting")
      assert.deepStrictEqual(judged, [DEAD])
      assert.strictEqual((yield* claimOf(kit, JOB)).state, "settled")
      yield* assertNoLeftovers(kit, "after breaking a dead lock")
    }))

  it.effect("a waiter judges a held lock when it first finds it, then only after the lock kept its token DEAD_OWNER_RECHECK_MS", ({ root }) =>
    Effect.gen(function*() {
      let lockPath = ""
      let links = 0
      let lockReads = 0
      const base = yield* FileSystem.FileSystem
      const fs = interceptFileSystem(base, (method, args) =>
        Effect.sync(() => {
          if (method === "link" && args[1] === lockPath) links++
          // The lock file is read through the non-blocking open.
          if (method === "open" && args[0] === lockPath) lockReads++
        }))
      const kit = yield* setup(root, { fs, config: { lockRetry: { intervalMs: 5, attempts: 200 } } })
      lockPath = kit.lockPath
      const reservation = yield* reserveAcquired(kit)
      yield* writeLock(kit, { ...FOREIGN, owner: DEAD })
      const judgedAt: Array<number> = []
      const alive = probeOf(() => Effect.map(Clock.currentTimeMillis, (now) => (judgedAt.push(now), false)))
      const { exit, sleeps } = yield* runDriven(settle(kit, reservation).pipe(Effect.provideService(LockOwner, alive)))
      assert.strictEqual(failureTag(exit), "LockHeld")
      assert.strictEqual(links, 1, "only the first attempt links; the later ones look at the path")
      assert.strictEqual(lockReads, judgedAt.length, "the lock is read only to judge it")
      assert.strictEqual(judgedAt[0], 0, "judged when first found held")
      // Then again once per DEAD_OWNER_RECHECK_MS of the same token, not on every attempt.
      for (let index = 1; index < judgedAt.length; index++) {
        assert.isAtLeast(judgedAt[index]! - judgedAt[index - 1]!, DEAD_OWNER_RECHECK_MS)
        assert.isBelow(judgedAt[index]! - judgedAt[index - 1]!, DEAD_OWNER_RECHECK_MS + 7)
      }
      assert.isAtLeast(judgedAt.length, Math.floor(sum(sleeps) / (DEAD_OWNER_RECHECK_MS + 7)))
      assert.isAtLeast(judgedAt.length, 3)
    }))

  it.effect("a lock whose holder keeps changing is judged only when first found held", ({ root }) =>
    Effect.gen(function*() {
      let lockPath = ""
      let swappedAt = 0
      let holders = 0
      const base = yield* FileSystem.FileSystem
      // Another process's writers take turns: every 100 ms the lock holds a new token.
      const fs = interceptFileSystem(base, (method, args) =>
        method === "exists" && args[0] === lockPath
          ? Effect.flatMap(Clock.currentTimeMillis, (now) => {
            if (now - swappedAt < 100) return Effect.void
            swappedAt = now
            const lock = { token: `writer-${++holders}`, claimedAt: FOREIGN.claimedAt, owner: DEAD }
            return Effect.orDie(base.writeFileString(lockPath, `${JSON.stringify(lock)}\n`))
          })
          : Effect.void)
      const kit = yield* setup(root, { fs, config: { lockRetry: { intervalMs: 5, attempts: 200 } } })
      lockPath = kit.lockPath
      const reservation = yield* reserveAcquired(kit)
      yield* writeLock(kit, { ...FOREIGN, owner: DEAD })
      let judged = 0
      const alive = probeOf(() => Effect.sync(() => (judged++, false)))
      const { exit } = yield* runDriven(settle(kit, reservation).pipe(Effect.provideService(LockOwner, alive)))
      assert.strictEqual(failureTag(exit), "LockHeld")
      assert.isAtLeast(holders, 5)
      assert.strictEqual(judged, 1)
    }))

  it.effect("an owner that dies while a waiter waits is judged dead within DEAD_OWNER_RECHECK_MS, and its lock broken", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { config: { lockRetry: { intervalMs: 5, attempts: 400 } } })
      const reservation = yield* reserveAcquired(kit)
      yield* writeLock(kit, { token: "dies-at-600", claimedAt: FOREIGN.claimedAt, owner: DEAD })
      const judgedAt: Array<number> = []
      const diesAt600 = probeOf(() => Effect.map(Clock.currentTimeMillis, (now) => (judgedAt.push(now), now >= 600)))
      const { exit } = yield* runDriven(settle(kit, reservation).pipe(Effect.provideService(LockOwner, diesAt600)))
      assert.strictEqual(failureTag(exit), "Success")
      const last = judgedAt[judgedAt.length - 1]!
      assert.isAtLeast(last, 600)
      assert.isBelow(last, 600 + DEAD_OWNER_RECHECK_MS + 7)
      assert.strictEqual((yield* claimOf(kit, JOB)).state, "settled")
      yield* assertNoLeftovers(kit, "after breaking a lock whose owner died meanwhile")
    }))

  it.effect("a lock without evidence, with a live owner, or with breaking disabled is never broken", ({ root }) =>
    Effect.gen(function*() {
      const everyoneDead = probeOf(() => Effect.succeed(true))
      const locks: Array<[string, Json, boolean]> = [
        ["no evidence (the reference's lock)", FOREIGN, true],
        ["malformed evidence", { ...FOREIGN, owner: { pid: "1", hostname: "here" } }, true],
        ["no token", { claimedAt: FOREIGN.claimedAt, owner: DEAD }, true],
        ["breaking disabled", { ...FOREIGN, owner: DEAD }, false]
      ]
      for (const [label, lock, breakDeadLocks] of locks) {
        const kit = yield* setup(`${root}/${locks.findIndex((l) => l[0] === label)}`, {
          config: { lockRetry: FAST_RETRY, breakDeadLocks }
        })
        const reservation = yield* reserveAcquired(kit)
        yield* writeLock(kit, lock)
        const { exit } = yield* runDriven(settle(kit, reservation).pipe(Effect.provideService(LockOwner, everyoneDead)))
        assert.strictEqual(failureTag(exit), "LockHeld", label)
        assert.strictEqual(yield* readIfExists(kit.fs, kit.lockPath), `${JSON.stringify(lock)}\n`, label)
      }
      const kit = yield* setup(`${root}/alive`, { config: { lockRetry: FAST_RETRY } })
      const reservation = yield* reserveAcquired(kit)
      yield* writeLock(kit, { ...FOREIGN, owner: DEAD })
      const alive = probeOf(() => Effect.succeed(false))
      const { exit } = yield* runDriven(settle(kit, reservation).pipe(Effect.provideService(LockOwner, alive)))
      assert.strictEqual(failureTag(exit), "LockHeld")
    }))

  it.effect("a dead owner's lock from another PID or time namespace, boot or host, or naming none, is never broken", ({ root }) =>
    Effect.gen(function*() {
      // Each lock is identical to one our namespace proves dead but for one field.
      const locks: Array<[string, OwnerEvidence]> = [
        ["another PID namespace", { ...GONE, pidNamespace: OTHER_NAMESPACE }],
        ["no PID namespace (an older version of this store)", GONE_WITHOUT_NAMESPACE],
        ["another time namespace", { ...GONE, timeNamespace: "time:[4026532200]" }],
        ["another boot (maybe another machine of the same name)", { ...GONE, bootId: "boot-0" }],
        ["another host", { ...GONE, hostname: "there" }],
        ["a reused pid of another PID namespace", {
          ...SELF,
          pid: 2,
          startTicks: "150",
          pidNamespace: OTHER_NAMESPACE
        }],
        ["this very process's pid and start time in another PID namespace", { ...SELF, pidNamespace: OTHER_NAMESPACE }],
        ["this very process's evidence without a PID namespace", SELF_WITHOUT_NAMESPACE]
      ]
      for (const [index, [label, owner]] of locks.entries()) {
        const kit = yield* setup(`${root}/${index}`, { config: { lockRetry: FAST_RETRY } })
        const reservation = yield* reserveAcquired(kit)
        const lock = { token: "c".repeat(48), claimedAt: FOREIGN.claimedAt, owner }
        yield* writeLock(kit, lock)
        const { exit, sleeps } = yield* runDriven(
          settle(kit, reservation).pipe(Effect.provideService(LockOwner, modelProbe))
        )
        assert.strictEqual(failureTag(exit), "LockHeld", label)
        // Every attempt was made, the TestClock driving the waits between them.
        assertRetryWaits(sleeps, FAST_RETRY.attempts - 1, label)
        assert.strictEqual(
          yield* readIfExists(kit.fs, kit.lockPath),
          `${JSON.stringify(lock)}\n`,
          `${label}: untouched`
        )
        assert.deepStrictEqual(yield* strayFiles(kit), [], label)
      }
    }))

  it.effect("under a Darwin probe a dead owner's lock is broken, and a live one's, or another boot's or Linux's, never", ({ root }) =>
    Effect.gen(function*() {
      const probe = darwinModel()
      const self = probe.current!
      // Locks are judged against the TestClock at 0: "old" ones were taken a minute before.
      const old = "1969-12-31T23:59:00.000Z"
      const young = "1970-01-01T00:00:00.000Z"
      const cases: Array<[string, string, OwnerEvidence, "Success" | "LockHeld"]> = [
        ["pid gone", young, { ...self, pid: 999, startTicks: "1" }, "Success"],
        ["pid reused in an old lock", old, { ...self, pid: 2, startTicks: "1" }, "Success"],
        ["pid alive", old, { ...self, pid: 2, startTicks: "200" }, "LockHeld"],
        ["pid exists, young lock", young, { ...self, pid: 2, startTicks: "1" }, "LockHeld"],
        ["pid gone in another boot", young, { ...self, pid: 999, bootId: "boot-0" }, "LockHeld"],
        ["pid gone, Linux evidence", young, { ...GONE, hostname: self.hostname }, "LockHeld"],
        ["pid gone, unknown platform", young, { ...self, pid: 999, platform: "plan9" }, "LockHeld"]
      ]
      for (const [index, [label, claimedAt, owner, outcome]] of cases.entries()) {
        const kit = yield* setup(`${root}/${index}`, { config: { lockRetry: FAST_RETRY } })
        const reservation = yield* reserveAcquired(kit)
        const lock = { token: "d".repeat(48), claimedAt, owner }
        yield* writeLock(kit, lock)
        const { exit } = yield* runDriven(settle(kit, reservation).pipe(Effect.provideService(LockOwner, probe)))
        assert.strictEqual(failureTag(exit), outcome, label)
        if (outcome === "LockHeld") {
          assert.strictEqual(yield* readIfExists(kit.fs, kit.lockPath), `${JSON.stringify(lock)}\n`, label)
        } else {
          assert.strictEqual((yield* claimOf(kit, JOB)).state, "settled", label)
          yield* assertNoLeftovers(kit, label)
        }
      }
    }))

  it.effect("a dead owner's lock from our own PID namespace is still broken, and so is our own leaked one", ({ root }) =>
    Effect.gen(function*() {
      const locks: Array<[string, OwnerEvidence]> = [
        ["a gone pid", GONE],
        ["a reused pid", { ...SELF, pid: 2, startTicks: "150" }],
        ["our own evidence, a token we do not hold", SELF]
      ]
      for (const [index, [label, owner]] of locks.entries()) {
        const kit = yield* setup(`${root}/${index}`, { config: { lockRetry: FAST_RETRY } })
        const reservation = yield* reserveAcquired(kit)
        yield* writeLock(kit, { token: "d".repeat(48), claimedAt: FOREIGN.claimedAt, owner })
        const seen: Array<Json> = []
        const hook = Effect.orDie(
          Effect.map(kit.fs.readFileString(kit.lockPath), (text) => seen.push(JSON.parse(text)))
        )
        const { exit, sleeps } = yield* runDriven(
          settle(kit, reservation, hook).pipe(Effect.provideService(LockOwner, modelProbe))
        )
        assert.strictEqual(failureTag(exit), "Success", label)
        assert.deepStrictEqual(sleeps, [], `${label}: broken at once`)
        // The lock we then held names our namespace, so others can judge it.
        assert.deepStrictEqual(seen[0]!.owner, SELF, label)
        assert.strictEqual((yield* claimOf(kit, JOB)).state, "settled", label)
        yield* assertNoLeftovers(kit, `after breaking ${label}`)
      }
    }))

  it.effect("two waiters racing to break one dead lock: one breaks it, the fresh lock survives", ({ root }) =>
    Effect.gen(function*() {
      const world = yield* setup(root)
      const logged = makeFaultFileSystem(world.fs, FaultPlan.none)
      // Enough attempts for the losing waiter to judge the fresh lock, which it does only once that lock
      // has kept its token DEAD_OWNER_RECHECK_MS.
      const kit = yield* setup(root, {
        fs: logged,
        writeSession: false,
        config: { lockRetry: { intervalMs: 5, attempts: 400 } }
      })
      const other = yield* kit.otherStore()
      const r1 = yield* reserveAcquired(kit, jobId(1))
      const r2 = yield* reserveAcquired(kit, jobId(2))
      yield* writeLock(kit, { token: "dead-token", claimedAt: FOREIGN.claimedAt, owner: DEAD })

      // Both waiters must have judged the dead lock before either may act on it. The
      // waiter that lost then judges the fresh lock once it has kept its token a while,
      // and is held there until the winner is done, so the TestClock cannot run its
      // attempts out meanwhile.
      const bothJudged = yield* Deferred.make<void>()
      const retriedAgainstFresh = yield* Deferred.make<void>()
      const winnerDone = yield* Deferred.make<void>()
      let deadJudgements = 0
      const probe = probeOf((owner) =>
        owner.pid === DEAD.pid
          ? Effect.suspend(() => {
            deadJudgements++
            return Effect.as(
              deadJudgements === 2 ? Deferred.succeed(bothJudged, undefined) : Deferred.await(bothJudged),
              true
            )
          })
          : Deferred.succeed(retriedAgainstFresh, undefined).pipe(
            Effect.andThen(Deferred.await(winnerDone)),
            Effect.as(false)
          )
      )

      let holders = 0
      let entered = 0
      const overlaps: Array<string> = []
      const contender = (run: (hook: Effect.Effect<void>) => Effect.Effect<unknown, unknown>) =>
        Effect.suspend(() => {
          let first = false
          const hook = Effect.gen(function*() {
            first = entered++ === 0
            holders++
            if (holders !== 1) overlaps.push(first ? "first" : "second")
            const token = JSON.parse(yield* kit.fs.readFileString(kit.lockPath)).token
            assert.notStrictEqual(token, "dead-token")
            // The winner holds the lock until the other waiter has tried again against it.
            if (first) yield* Deferred.await(retriedAgainstFresh)
            const after = JSON.parse(yield* kit.fs.readFileString(kit.lockPath)).token
            assert.strictEqual(after, token, "the fresh lock survives the other waiter")
            holders--
          }).pipe(Effect.orDie)
          return run(hook).pipe(
            Effect.ensuring(Effect.suspend(() => first ? Deferred.succeed(winnerDone, undefined) : Effect.void))
          )
        })

      const race = Effect.all([
        contender((hook) => settle(kit, r1, hook)),
        contender((hook) => other.settle(r2, summaryReceipt(kit.branch, "s"), { hooks: { afterLeaseValidated: hook } }))
      ], { concurrency: 2 }).pipe(Effect.provideService(LockOwner, probe))
      const sleepProbe = yield* makeSleepProbe
      const fiber = yield* Effect.forkChild(sleepProbe.instrument(race))
      const { exit } = yield* driveSleeps(fiber, sleepProbe)
      assert.strictEqual(failureTag(exit), "Success")
      assert.deepStrictEqual(overlaps, [])
      // Each waiter judged the dead lock at least once (a waiter may look again before it is gone).
      assert.isAtLeast(deadJudgements, 2)
      assert.strictEqual((yield* claimOf(kit, jobId(1))).state, "settled")
      assert.strictEqual((yield* claimOf(kit, jobId(2))).state, "settled")
      // The dead lock was removed once by a breaker and each holder removed its own lock.
      const lockRemovals = logged.operations().filter((op) => op.method === "remove" && op.path === kit.lockPath)
      assert.strictEqual(lockRemovals.length, 3)
      yield* assertNoLeftovers(world, "after the race")
    }))
})
