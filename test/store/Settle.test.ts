/**
 * Settlement, release and `withJob`: receipt checks with the seed's messages,
 * new or repeated heads, the hook under the lock, cleanup of the claim on
 * every failure while still the owner, and release only by the owner.
 */
import { assert } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Random } from "effect"
import { TestClock } from "effect/testing"
import { sha256Hex } from "../../src/protocol/CanonicalJson.js"
import type { Acquired } from "../../src/store/write/Reservation.js"
import { FaultPlan, makeFaultFileSystem } from "../../src/testing/FaultFileSystem.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { branchOf, fromPlainCaller, jobId, type Json, summaryReceipt, titleReceipt } from "../support/Receipts.js"
import {
  appendRaw,
  assertNoLeftovers,
  assertNoOpenHandles,
  assertSettledPointer,
  bytesOf,
  claimOf,
  headFor,
  headLine,
  LEASE_MS,
  modeOf,
  readIfExists,
  receiptLine,
  reserveAcquired,
  setup,
  sidecarRecords,
  strayFiles
} from "./StoreKit.js"

const JOB = jobId(1)

/** Our message for a receipt that does not validate: the schema's reason first, then the seed's status and keys. */
const invalidMessage = (kind: "Summary" | "Title", receipt: Json, job: string, reason: string) => {
  const settled: Json = { ...receipt, jobId: job }
  return `Rarebit ${kind} receipt does not match protocol v4: ${reason} (status ${String(settled.status)}; keys: ${
    Object.keys(settled).sort().join(",")
  })`
}

fileSystemSuite("RarebitStore.settle", (it) => {
  it.effect("a current Summary is appended with a new head, and the claim points at it", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const reservation = yield* reserveAcquired(kit)
      const receipt = summaryReceipt(kit.branch, "s")
      const settled = yield* kit.store.settle(reservation, receipt)
      const stored = { ...receipt, jobId: JOB }
      assert.deepStrictEqual(settled, { ...stored, path: kit.sidecar })
      const line = receiptLine(stored)
      assert.strictEqual(yield* readIfExists(kit.fs, kit.sidecar), line + headLine(headFor("s", 0, line)))
      const claim = yield* assertSettledPointer(kit, JOB, stored)
      assert.deepStrictEqual(claim, {
        jobId: JOB,
        state: "settled",
        leaseToken: reservation.leaseToken,
        receiptRef: { receiptOffset: 0, receiptLength: bytesOf(line).length, receiptHash: sha256Hex(bytesOf(line)) }
      })
      assert.strictEqual(yield* modeOf(kit.fs, kit.sidecar), 0o600)
      assert.strictEqual(yield* modeOf(kit.fs, kit.claimPath(JOB)), 0o600)
      yield* assertNoLeftovers(kit, "after settle")
      const current = yield* kit.store.readCurrent({ sessionFile: kit.sessionFile })
      assert.strictEqual(current.availability, "available")
      assert.deepStrictEqual(current.receipt, stored)
    }).pipe(Random.withSeed("settle-current")))

  it.effect("a sidecar that exists with looser modes is tightened to 0600", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* appendRaw(kit, "")
      yield* kit.fs.chmod(kit.sidecar, 0o644)
      yield* kit.store.settle(yield* reserveAcquired(kit), summaryReceipt(kit.branch, "s"))
      assert.strictEqual(yield* modeOf(kit.fs, kit.sidecar), 0o600)
    }))

  it.effect("a Title repeats the current head; an older Summary does too", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* kit.store.settle(yield* reserveAcquired(kit, jobId(1)), summaryReceipt(kit.branch, "s"))
      const before = (yield* kit.store.readCurrent({ sessionFile: kit.sessionFile })).head!
      const title = titleReceipt(kit.branch, "s")
      yield* kit.store.settle(yield* reserveAcquired(kit, jobId(2)), title)
      // A summary of only the first message: not current for the Session's selection.
      const older = summaryReceipt(kit.branch.slice(0, 1), "s")
      yield* kit.store.settle(yield* reserveAcquired(kit, jobId(3)), older)
      const records = yield* sidecarRecords(kit)
      assert.deepStrictEqual(records.map((r) => r.type), [
        "rarebit_summary",
        "rarebit_head",
        "rarebit_title",
        "rarebit_head",
        "rarebit_summary",
        "rarebit_head"
      ])
      assert.deepStrictEqual(records[3], before)
      assert.deepStrictEqual(records[5], before)
      const current = yield* kit.store.readCurrent({ sessionFile: kit.sessionFile })
      assert.strictEqual(current.receipt?.jobId, jobId(1))
      assert.deepStrictEqual(current.diagnostics, { tornTail: false, tailOffset: 0 })
      yield* assertSettledPointer(kit, jobId(2), { ...title, jobId: jobId(2) })
      yield* assertSettledPointer(kit, jobId(3), { ...older, jobId: jobId(3) })
    }))

  it.effect("a newer Summary for a longer Session gets a new head", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* kit.store.settle(yield* reserveAcquired(kit, jobId(1)), summaryReceipt(kit.branch, "s"))
      const longer = branchOf([["user", "first request"], ["assistant", "done"], ["user", "more"], ["assistant", "ok"]])
      const next = yield* setup(root, { branch: longer })
      yield* next.store.settle(yield* reserveAcquired(next, jobId(2)), summaryReceipt(longer, "s"))
      const current = yield* next.store.readCurrent({ sessionFile: next.sessionFile })
      assert.strictEqual(current.receipt?.jobId, jobId(2))
      assert.strictEqual(current.artifactState.syncState, "assessment_current")
    }))

  it.effect("without a head so far, a receipt that is not current gets no head", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const title = titleReceipt(kit.branch, "s")
      yield* kit.store.settle(yield* reserveAcquired(kit, jobId(1)), title)
      assert.strictEqual(yield* readIfExists(kit.fs, kit.sidecar), receiptLine({ ...title, jobId: jobId(1) }))
      // A Summary settled while the Session cannot be read is not current either.
      yield* kit.fs.remove(kit.sessionFile)
      yield* kit.store.settle(yield* reserveAcquired(kit, jobId(2)), summaryReceipt(kit.branch, "s"))
      assert.deepStrictEqual((yield* sidecarRecords(kit)).map((r) => r.type), ["rarebit_title", "rarebit_summary"])
      const current = yield* kit.store.readCurrent({ sessionFile: kit.sessionFile })
      assert.strictEqual(current.availability, "missing")
      assert.strictEqual(current.diagnostics.reason, "sidecar_head_missing")
    }))

  it.effect("the receipt's jobId is always the reservation's", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const settled = yield* kit.store.settle(
        yield* reserveAcquired(kit),
        summaryReceipt(kit.branch, "s", { jobId: jobId(99) })
      )
      assert.strictEqual(settled.jobId, JOB)
      assert.strictEqual((yield* sidecarRecords(kit))[0]!.jobId, JOB)
    }))

  it.effect("an unsupported type, an invalid receipt and an oversized receipt are refused before the lock", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const reservation = yield* reserveAcquired(kit)
      const claimBefore = yield* readIfExists(kit.fs, kit.claimPath(JOB))

      for (
        const receipt of [{ type: "rarebit_other" }, {}, { ...summaryReceipt(kit.branch, "s"), type: "rarebit_head" }]
      ) {
        const error = yield* Effect.flip(kit.store.settle(reservation, fromPlainCaller(receipt)))
        assert.strictEqual(error._tag, "ReceiptTypeUnsupported")
        assert.strictEqual(error.message, "Rarebit derivation receipt type is unsupported")
      }

      const extra = { ...summaryReceipt(kit.branch, "s"), extra: true }
      const summaryError = yield* Effect.flip(kit.store.settle(reservation, extra))
      assert.strictEqual(summaryError._tag, "ReceiptInvalid")
      assert.strictEqual(
        summaryError.message,
        invalidMessage("Summary", extra, JOB, "Expected no excess property at [\"extra\"]")
      )
      const { status: _status, ...noStatus } = summaryReceipt(kit.branch, "s")
      assert.strictEqual(
        (yield* Effect.flip(kit.store.settle(reservation, fromPlainCaller(noStatus)))).message,
        invalidMessage(
          "Summary",
          noStatus,
          JOB,
          "Missing key at [\"status\"]; Expected no excess property at [\"summary\"]"
        )
      )
      const badTitle = { ...titleReceipt(kit.branch, "s"), title: 7 }
      const titleError = yield* Effect.flip(kit.store.settle(reservation, fromPlainCaller(badTitle)))
      assert.strictEqual(titleError._tag, "ReceiptInvalid")
      assert.strictEqual(
        titleError.message,
        invalidMessage(
          "Title",
          badTitle,
          JOB,
          "Expected string at [\"title\"]; " +
            "Expected \"skipped_session_changed\" | \"skipped_title_changed\" | \"skipped_existing_title\" at [\"status\"]"
        )
      )

      const large = summaryReceipt(kit.branch, "s", { summary: "x".repeat(50 * 1024) })
      const tooLarge = yield* Effect.flip(kit.store.settle(reservation, large))
      assert.strictEqual(tooLarge._tag, "ReceiptTooLarge")
      assert.strictEqual(tooLarge.message, "Rarebit receipt exceeds protocol byte limit")
      if (tooLarge._tag === "ReceiptTooLarge") {
        assert.strictEqual(tooLarge.bytes, bytesOf(receiptLine({ ...large, jobId: JOB })).length)
      }

      // None of these touched the claim or the sidecar: the job can still be settled.
      assert.strictEqual(yield* readIfExists(kit.fs, kit.claimPath(JOB)), claimBefore)
      assert.isFalse(yield* kit.fs.exists(kit.sidecar))
      yield* assertNoLeftovers(kit, "after refused receipts")
      yield* kit.store.settle(reservation, summaryReceipt(kit.branch, "s"))
    }))

  it.effect("a reservation that is not acquired is refused with ReservationNotAcquired", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* kit.store.settle(yield* reserveAcquired(kit), summaryReceipt(kit.branch, "s"))
      const duplicate = yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile })
      assert.strictEqual(duplicate._tag, "Duplicate")
      for (const outcome of [duplicate, { ...duplicate, _tag: "InFlight" }, null, {}]) {
        const error = yield* Effect.flip(
          kit.store.settle(outcome as unknown as Acquired, summaryReceipt(kit.branch, "s"))
        )
        assert.strictEqual(error._tag, "ReservationNotAcquired")
        assert.strictEqual(error.message, "An acquired Rarebit reservation is required")
      }
      assert.strictEqual((yield* sidecarRecords(kit)).length, 2, "nothing appended")
    }))

  it.effect("settling twice is fenced: the claim is no longer active", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const reservation = yield* reserveAcquired(kit)
      yield* kit.store.settle(reservation, summaryReceipt(kit.branch, "s"))
      const sidecar = yield* readIfExists(kit.fs, kit.sidecar)
      const error = yield* Effect.flip(kit.store.settle(reservation, summaryReceipt(kit.branch, "s")))
      assert.strictEqual(error._tag, "LeaseFenced")
      assert.strictEqual(yield* readIfExists(kit.fs, kit.sidecar), sidecar)
      assert.strictEqual((yield* claimOf(kit, JOB)).state, "settled", "the settled claim is kept")
      yield* assertNoLeftovers(kit, "after a second settle")
    }))

  it.effect("settling after a release is fenced", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const reservation = yield* reserveAcquired(kit)
      yield* kit.store.release(reservation)
      const error = yield* Effect.flip(kit.store.settle(reservation, summaryReceipt(kit.branch, "s")))
      assert.strictEqual(error._tag, "LeaseFenced")
      assert.isFalse(yield* kit.fs.exists(kit.sidecar))
      yield* assertNoLeftovers(kit, "after settling a released job")
    }))

  it.effect("a torn tail is ended before the receipt, which gets a line of its own", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const fragment = "{\"type\":\"rarebit_summ"
      yield* appendRaw(kit, fragment)
      const settled = yield* kit.store.settle(yield* reserveAcquired(kit), summaryReceipt(kit.branch, "s"))
      const { path: _path, ...receipt } = settled
      // Unlike the seed, which appends right after the fragment, the store ends it with a newline first.
      const offset = bytesOf(fragment).length + 1
      const line = receiptLine(receipt)
      assert.strictEqual(
        yield* readIfExists(kit.fs, kit.sidecar),
        `${fragment}\n${line}${headLine(headFor("s", offset, line))}`
      )
      const current = yield* kit.store.readCurrent({ sessionFile: kit.sessionFile })
      assert.strictEqual(current.availability, "available")
      assert.deepStrictEqual(current.receipt, receipt)
      yield* assertSettledPointer(kit, JOB, receipt)
      const history = yield* kit.store.readHistory({ sessionFile: kit.sessionFile })
      assert.deepStrictEqual(history.records, [{ offset, record: receipt }])
    }))

  it.effect("the hook runs under the commit lock, after the lease check and before anything is appended", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const reservation = yield* reserveAcquired(kit)
      const seen: Array<unknown> = []
      const hook = Effect.gen(function*() {
        const lock = JSON.parse((yield* readIfExists(kit.fs, kit.lockPath)) ?? "null")
        seen.push(lock, yield* claimOf(kit, JOB), yield* kit.fs.exists(kit.sidecar))
      }).pipe(Effect.orDie)
      yield* TestClock.setTime(Date.UTC(2026, 6, 26))
      yield* kit.store.settle(reservation, summaryReceipt(kit.branch, "s"), { hooks: { afterLeaseValidated: hook } })
      const [lock, claim, sidecarExists] = seen as [Json, Json, boolean]
      assert.match(String(lock.token), /^[0-9a-f]{48}$/)
      assert.strictEqual(lock.claimedAt, new Date(Date.UTC(2026, 6, 26)).toISOString())
      assert.strictEqual(claim.state, "active")
      assert.strictEqual(claim.leaseToken, reservation.leaseToken)
      assert.isFalse(sidecarExists)
      yield* assertNoLeftovers(kit, "after a hooked settle")
    }))

  it.effect("a failing hook fails the settle, removes the claim and appends nothing", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const reservation = yield* reserveAcquired(kit)
      const error = yield* Effect.flip(
        kit.store.settle(reservation, summaryReceipt(kit.branch, "s"), {
          hooks: { afterLeaseValidated: Effect.fail("boom") }
        })
      )
      assert.strictEqual(error._tag, "SettleHookFailed")
      if (error._tag === "SettleHookFailed") assert.strictEqual(error.cause, "boom")
      assert.isFalse(yield* kit.fs.exists(kit.claimPath(JOB)), "the claim is removed so the job can be retried")
      assert.isFalse(yield* kit.fs.exists(kit.sidecar))
      yield* assertNoLeftovers(kit, "after a failed hook")
      assert.strictEqual((yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile }))._tag, "Acquired")
    }))

  it.effect("a hook that takes the job over fences the settle after the append, and the new owner keeps its claim", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const reservation = yield* reserveAcquired(kit)
      // During the hook, another worker's claim replaces ours (as a takeover would).
      const takeover = Effect.orDie(kit.fs.writeFileString(
        kit.claimPath(JOB),
        `${
          JSON.stringify({
            jobId: JOB,
            state: "active",
            leaseToken: "newer",
            claimedAt: new Date(0).toISOString(),
            leaseMs: LEASE_MS
          })
        }\n`
      ))
      const error = yield* Effect.flip(
        kit.store.settle(reservation, summaryReceipt(kit.branch, "s"), { hooks: { afterLeaseValidated: takeover } })
      )
      assert.strictEqual(error._tag, "LeaseFenced")
      // The seed appends before its second lease check; the receipt stays, unreferenced.
      assert.strictEqual((yield* sidecarRecords(kit))[0]!.type, "rarebit_summary")
      assert.strictEqual((yield* claimOf(kit, JOB)).leaseToken, "newer")
      yield* assertNoLeftovers(kit, "after a late fence")
    }))

  it.effect("an I/O failure while appending removes the claim, releases the lock and closes every handle", ({ root }) =>
    Effect.gen(function*() {
      const world = yield* setup(root, { writeSession: true })
      const fault = makeFaultFileSystem(
        world.fs,
        FaultPlan.make({ kind: "write", path: (p) => p === world.sidecar, action: { _tag: "Fail", error: "EIO" } })
      )
      const kit = yield* setup(root, { fs: fault })
      const reservation = yield* reserveAcquired(kit)
      const error = yield* Effect.flip(kit.store.settle(reservation, summaryReceipt(kit.branch, "s")))
      assert.strictEqual(error._tag, "StoreIo")
      if (error._tag === "StoreIo") {
        assert.strictEqual(error.operation, "append to sidecar")
        assert.strictEqual(error.path, kit.sidecar)
      }
      assert.isFalse(yield* world.fs.exists(kit.claimPath(JOB)))
      assert.isFalse(yield* world.fs.exists(kit.lockPath))
      assert.deepStrictEqual(yield* strayFiles(world), [])
      yield* assertNoOpenHandles(world.fs, "after a failed append")
      assert.strictEqual((yield* world.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile }))._tag, "Acquired")
    }))

  it.effect("a head that would exceed 8 KiB fails the settle and appends nothing", ({ root }) =>
    Effect.gen(function*() {
      const sessionId = "s".repeat(9000)
      const kit = yield* setup(root, { sessionId })
      const reservation = yield* reserveAcquired(kit)
      const error = yield* Effect.flip(kit.store.settle(reservation, summaryReceipt(kit.branch, sessionId)))
      assert.strictEqual(error._tag, "HeadTooLarge")
      assert.strictEqual(error.message, "Rarebit head exceeds protocol byte limit")
      assert.deepStrictEqual(yield* sidecarRecords(kit), [])
      assert.isFalse(yield* kit.fs.exists(kit.claimPath(JOB)))
      yield* assertNoLeftovers(kit, "after a too large head")
    }))

  it.effect("a sidecar path that is a symlink or a directory is never written through", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const target = kit.path.join(root, "target.jsonl")
      yield* kit.fs.writeFileString(target, "")
      yield* kit.fs.makeDirectory(kit.path.dirname(kit.sidecar), { recursive: true })
      yield* kit.fs.symlink(target, kit.sidecar)
      const error = yield* Effect.flip(kit.store.settle(yield* reserveAcquired(kit), summaryReceipt(kit.branch, "s")))
      assert.strictEqual(error._tag, "NotRegularFile")
      assert.strictEqual(error.message, "Rarebit materialization path must be a regular file")
      assert.strictEqual(yield* kit.fs.readFileString(target), "")
      assert.isFalse(yield* kit.fs.exists(kit.claimPath(JOB)))
      yield* assertNoLeftovers(kit, "after a symlink sidecar")

      yield* kit.fs.remove(kit.sidecar)
      yield* kit.fs.makeDirectory(kit.sidecar)
      const again = yield* Effect.flip(kit.store.settle(yield* reserveAcquired(kit), summaryReceipt(kit.branch, "s")))
      assert.strictEqual(again._tag, "NotRegularFile")
      yield* assertNoLeftovers(kit, "after a directory sidecar")
    }))
})

fileSystemSuite("RarebitStore.release", (it) => {
  it.effect("an owner's release deletes the claim, under the lock", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const reservation = yield* reserveAcquired(kit)
      yield* kit.store.release(reservation)
      assert.isFalse(yield* kit.fs.exists(kit.claimPath(JOB)))
      yield* assertNoLeftovers(kit, "after release")
      assert.strictEqual((yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile }))._tag, "Acquired")
    }))

  it.effect("a release after a takeover, or after settling, keeps the claim", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const first = yield* reserveAcquired(kit)
      yield* TestClock.adjust(LEASE_MS + 1)
      const second = yield* reserveAcquired(kit)
      yield* kit.store.release(first)
      assert.strictEqual((yield* claimOf(kit, JOB)).leaseToken, second.leaseToken)
      yield* kit.store.settle(second, summaryReceipt(kit.branch, "s"))
      const settled = yield* readIfExists(kit.fs, kit.claimPath(JOB))
      yield* kit.store.release(second)
      assert.strictEqual(yield* readIfExists(kit.fs, kit.claimPath(JOB)), settled)
      yield* assertNoLeftovers(kit, "after releases that are not the owner's")
    }))

  it.effect("releasing a duplicate or an in-flight outcome does nothing, not even take the lock", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* reserveAcquired(kit)
      const inFlight = yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile })
      assert.strictEqual(inFlight._tag, "InFlight")
      // A lock held elsewhere would make any locked release wait.
      yield* kit.fs.writeFileString(kit.lockPath, "{\"token\":\"elsewhere\"}\n")
      yield* kit.store.release(inFlight)
      assert.strictEqual((yield* claimOf(kit, JOB)).state, "active")
      assert.strictEqual(yield* readIfExists(kit.fs, kit.lockPath), "{\"token\":\"elsewhere\"}\n")
    }))
})

fileSystemSuite("RarebitStore.withJob", (it) => {
  it.effect("reserves, derives, settles, and reports Settled", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const seen: Array<string> = []
      const outcome = yield* kit.store.withJob({ jobId: JOB, sessionFile: kit.sessionFile }, (reservation) =>
        Effect.sync(() => {
          seen.push(reservation.leaseToken)
          return summaryReceipt(kit.branch, "s")
        }))
      assert.strictEqual(outcome._tag, "Settled")
      assert.strictEqual(seen.length, 1)
      assert.strictEqual((yield* claimOf(kit, JOB)).leaseToken, seen[0])
      yield* assertSettledPointer(kit, JOB, { ...summaryReceipt(kit.branch, "s"), jobId: JOB })
      yield* assertNoLeftovers(kit, "after withJob")
    }))

  it.effect("a duplicate or in-flight job is reported without deriving", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      let derived = 0
      const derive = () => Effect.sync(() => (derived++, summaryReceipt(kit.branch, "s")))
      yield* reserveAcquired(kit, jobId(2))
      assert.strictEqual(
        (yield* kit.store.withJob({ jobId: jobId(2), sessionFile: kit.sessionFile }, derive))._tag,
        "InFlight"
      )
      yield* kit.store.withJob({ jobId: JOB, sessionFile: kit.sessionFile }, derive)
      assert.strictEqual(
        (yield* kit.store.withJob({ jobId: JOB, sessionFile: kit.sessionFile }, derive))._tag,
        "Duplicate"
      )
      assert.strictEqual(derived, 1)
    }))

  it.effect("a failing, dying or invalid derivation releases the claim", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const options = { jobId: JOB, sessionFile: kit.sessionFile }
      const failed = yield* Effect.flip(kit.store.withJob(options, () => Effect.fail("model down" as const)))
      assert.strictEqual(failed, "model down")
      assert.isFalse(yield* kit.fs.exists(kit.claimPath(JOB)))

      const died = yield* Effect.exit(kit.store.withJob(options, () => Effect.die("bug")))
      assert.isTrue(Exit.hasDies(died))
      assert.isFalse(yield* kit.fs.exists(kit.claimPath(JOB)))

      const invalid = yield* Effect.flip(
        kit.store.withJob(options, () => Effect.succeed(fromPlainCaller({ type: "rarebit_summary" })))
      )
      assert.strictEqual(invalid._tag, "ReceiptInvalid")
      assert.isFalse(yield* kit.fs.exists(kit.claimPath(JOB)))
      assert.isFalse(yield* kit.fs.exists(kit.sidecar))
      yield* assertNoLeftovers(kit, "after failed derivations")
    }))

  it.effect("interrupting the derivation releases the claim", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const started = yield* Deferred.make<void>()
      const fiber = yield* Effect.forkChild(
        kit.store.withJob({ jobId: JOB, sessionFile: kit.sessionFile }, () =>
          Effect.andThen(Deferred.succeed(started, undefined), Effect.never))
      )
      yield* Deferred.await(started)
      assert.strictEqual((yield* claimOf(kit, JOB)).state, "active")
      yield* Fiber.interrupt(fiber)
      assert.isFalse(yield* kit.fs.exists(kit.claimPath(JOB)))
      assert.isFalse(yield* kit.fs.exists(kit.sidecar))
      yield* assertNoLeftovers(kit, "after an interrupted derivation")
      assert.strictEqual((yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile }))._tag, "Acquired")
    }))
})
