/**
 * Interruption at every file-system call: each store operation is run once
 * per call it makes, interrupted just before that call, and the disk is then
 * checked for leftovers (a lock, a temp file, an open handle, a torn claim,
 * a receipt without a settled claim) and for a clean retry.
 */
import { assert } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber } from "effect"
import { sha256Hex } from "../../src/protocol/CanonicalJson.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { jobId, summaryReceipt } from "../support/Receipts.js"
import {
  acquired,
  assertNoLeftovers,
  bytesOf,
  interceptFileSystem,
  type Kit,
  LEASE_MS,
  readIfExists,
  receiptLine,
  setup,
  sidecarRecords
} from "./StoreKit.js"

const JOB = jobId(1)
const LATER = 100 * LEASE_MS

interface Interrupted<A, E> {
  readonly exit: Exit.Exit<A, E>
  /** Whether the run reached call `k` (and so was interrupted there). */
  readonly fired: boolean
}

/**
 * Runs `operation` on a store over `world`'s disk whose `k`th file-system
 * call first interrupts the running fiber (from another fiber, as a caller
 * would), then lets the call proceed if the fiber is not interruptible there.
 */
const interruptAt = <A, E>(world: Kit, k: number, operation: (kit: Kit) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    let calls = 0
    let fired = false
    let target: Fiber.Fiber<A, E> | undefined
    const intercepted = interceptFileSystem(world.fs, () =>
      Effect.suspend(() => {
        if (calls++ !== k || target === undefined) return Effect.void
        fired = true
        const victim = target
        return Effect.andThen(Effect.forkDetach(Fiber.interrupt(victim)), Effect.yieldNow)
      }))
    const kit = yield* setup(world.root, { fs: intercepted, writeSession: false })
    const go = yield* Deferred.make<void>()
    const fiber = yield* Effect.forkChild(Effect.andThen(Deferred.await(go), operation(kit)))
    target = fiber
    yield* Deferred.succeed(go, undefined)
    const exit = yield* Fiber.await(fiber)
    return { exit, fired } satisfies Interrupted<A, E>
  })

/** Leftover-free and consistent: no lock, temp files or handles; a claim that parses; receipt ⇔ settled claim. */
const assertConsistent = (kit: Kit, label: string) =>
  Effect.gen(function*() {
    yield* assertNoLeftovers(kit, label)
    const text = yield* readIfExists(kit.fs, kit.claimPath(JOB))
    const claim = text === undefined ? undefined : JSON.parse(text)
    if (text !== undefined) assert.isTrue(text.endsWith("}\n"), `a whole claim ${label}`)
    const receipts = (yield* sidecarRecords(kit)).filter((r) => r.type !== "rarebit_head" && r.jobId === JOB)
    assert.isAtMost(receipts.length, 1, `at most one receipt ${label}`)
    if (claim?.state === "settled") {
      assert.strictEqual(receipts.length, 1, `a settled claim has its receipt ${label}`)
      const line = bytesOf(receiptLine(receipts[0]!))
      assert.strictEqual(claim.receiptRef.receiptHash, sha256Hex(line), label)
    } else {
      assert.strictEqual(receipts.length, 0, `no receipt without a settled claim ${label}`)
    }
    return claim as { state: string; leaseToken: string } | undefined
  })

/** Whatever the interruption left, the job can be completed, once. */
const assertRecoverable = (kit: Kit, label: string) =>
  Effect.gen(function*() {
    const again = yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile, now: LATER })
    if (again._tag === "Acquired") yield* kit.store.settle(again, summaryReceipt(kit.branch, "s"))
    else assert.strictEqual(again._tag, "Duplicate", label)
    const receipts = (yield* sidecarRecords(kit)).filter((r) => r.type !== "rarebit_head" && r.jobId === JOB)
    assert.strictEqual(receipts.length, 1, `exactly one receipt after recovery ${label}`)
    const current = yield* kit.store.readCurrent({ sessionFile: kit.sessionFile })
    assert.strictEqual(current.availability, "available", label)
  })

fileSystemSuite("Interruption at every file-system call", (it) => {
  it.effect("settle", ({ root }) =>
    Effect.gen(function*() {
      let k = 0
      for (;; k++) {
        const world = yield* setup(`${root}/${k}`)
        const reservation = acquired(yield* world.store.reserve({ jobId: JOB, sessionFile: world.sessionFile }))
        const { exit, fired } = yield* interruptAt(
          world,
          k,
          (kit) => kit.store.settle(reservation, summaryReceipt(kit.branch, "s"))
        )
        const label = `(interrupted before call ${k})`
        const claim = yield* assertConsistent(world, label)
        if (claim?.state === "active") assert.strictEqual(claim.leaseToken, reservation.leaseToken, label)
        if (Exit.isSuccess(exit)) assert.strictEqual(claim?.state, "settled", label)
        yield* assertRecoverable(world, label)
        if (!fired) {
          assert.isTrue(Exit.isSuccess(exit))
          break
        }
      }
      assert.isAtLeast(k, 10, "settle makes many calls")
    }), 30_000)

  it.effect("reserve taking over an expired claim", ({ root }) =>
    Effect.gen(function*() {
      let k = 0
      for (;; k++) {
        const world = yield* setup(`${root}/${k}`)
        const stale = acquired(yield* world.store.reserve({ jobId: JOB, sessionFile: world.sessionFile, now: 0 }))
        const { exit, fired } = yield* interruptAt(
          world,
          k,
          (kit) => kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile, now: LEASE_MS + 1 })
        )
        const label = `(interrupted before call ${k})`
        const claim = yield* assertConsistent(world, label)
        assert.strictEqual(claim?.state, "active", label)
        if (Exit.isSuccess(exit)) {
          assert.strictEqual(claim?.leaseToken, acquired(exit.value).leaseToken, label)
        } else if (claim?.leaseToken !== stale.leaseToken) {
          // Interrupted after the new claim was renamed into place: whole, with a fresh token.
          assert.match(String(claim?.leaseToken), /^[0-9a-f]{48}$/, label)
        }
        yield* assertRecoverable(world, label)
        if (!fired) break
      }
      assert.isAtLeast(k, 5)
    }), 30_000)

  it.effect("withJob: an interrupted job leaves no active claim behind", ({ root }) =>
    Effect.gen(function*() {
      const stranded: Array<number> = []
      let k = 0
      for (;; k++) {
        const world = yield* setup(`${root}/${k}`)
        const { exit, fired } = yield* interruptAt(
          world,
          k,
          (kit) =>
            kit.store.withJob({ jobId: JOB, sessionFile: kit.sessionFile }, () =>
              Effect.succeed(summaryReceipt(kit.branch, "s")))
        )
        const label = `(interrupted before call ${k})`
        const claim = yield* assertConsistent(world, label)
        if (claim?.state === "active") {
          stranded.push(k)
        }
        yield* assertRecoverable(world, label)
        if (!fired) {
          assert.isTrue(Exit.isSuccess(exit))
          break
        }
      }
      assert.isAtLeast(k, 10)
      // Released on interruption: either settled or gone, never an active claim waiting out its lease.
      assert.deepStrictEqual(stranded, [], "interrupted before these calls, withJob left its claim active")
    }), 30_000)
})
