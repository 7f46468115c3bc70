/**
 * Finishing a crashed settlement, on its own and on both worlds: which
 * receipt a claim can be settled with, what completing it writes, and when
 * nothing is recovered so that the job runs again.
 */
import { assert } from "@effect/vitest"
import { Effect, FileSystem, Path } from "effect"
import { SecureRandom } from "effect/crypto/SecureRandom"
import { makeContext } from "../../../src/store/RarebitStore.js"
import type { ReservationLocation } from "../../../src/store/write/Reservation.js"
import {
  completeSettlement,
  receiptSinceClaim,
  recoverSettlement
} from "../../../src/store/write/SettlementRecovery.js"
import { fileSystemSuite } from "../../support/FileSystemSuite.js"
import { jobId, summaryReceipt, titleReceipt } from "../../support/Receipts.js"
import { tokensSeededFromRandom } from "../../support/Tokens.js"
import {
  acquired,
  appendRaw,
  appendReceiptWithHead,
  assertSettledPointer,
  claimOf,
  type Kit,
  receiptLine,
  setup,
  sidecarRecords,
  sizeOf
} from "../StoreKit.js"

const JOB = jobId(1)

/** The kit's store context, built like the store's own. */
const contextOf = (kit: Kit) =>
  Effect.gen(function*() {
    const tokens = yield* tokensSeededFromRandom
    return yield* makeContext(kit.config).pipe(
      Effect.provideService(FileSystem.FileSystem, kit.fs),
      Effect.provideService(Path.Path, kit.path),
      Effect.provideService(SecureRandom, tokens)
    )
  })

const locationOf = (kit: Kit, job: string): ReservationLocation => ({
  jobId: job,
  materializationPath: kit.sidecar,
  sessionFile: kit.sessionFile,
  rarebitRoot: kit.rarebitRoot,
  sessionRoot: kit.sessionRoot,
  allowExternalSession: false
})

fileSystemSuite("SettlementRecovery", (it) => {
  it.effect("a claim finds the last receipt of its job appended after its sidecarOffset, by its exact range", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const ctx = yield* contextOf(kit)
      const before = yield* appendReceiptWithHead(
        kit,
        summaryReceipt(kit.branch, "s", { jobId: JOB, summary: "earlier lease" })
      )
      const sidecarOffset = yield* sizeOf(kit.fs, kit.sidecar)
      yield* appendRaw(kit, receiptLine(titleReceipt(kit.branch, "s", { jobId: jobId(2) })))
      const ours = yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: JOB }), { head: false })
      const found = yield* receiptSinceClaim(ctx, locationOf(kit, JOB), { sidecarOffset })
      assert.deepStrictEqual(found?.receiptRef, {
        receiptOffset: ours.offset,
        receiptLength: ours.head.receiptLength,
        receiptHash: ours.head.receiptHash
      })
      assert.strictEqual(found?.record.jobId, JOB)
      // Nothing of the job after the offset, or no offset at all: nothing to recover.
      assert.isUndefined(yield* receiptSinceClaim(ctx, locationOf(kit, jobId(3)), { sidecarOffset }))
      assert.isUndefined(yield* receiptSinceClaim(ctx, locationOf(kit, JOB), {}))
      assert.isUndefined(yield* receiptSinceClaim(ctx, locationOf(kit, JOB), { sidecarOffset: -1 }))
      const end = yield* sizeOf(kit.fs, kit.sidecar)
      assert.isUndefined(yield* receiptSinceClaim(ctx, locationOf(kit, JOB), { sidecarOffset: end }))
      assert.isBelow(before.offset, sidecarOffset)
    }))

  it.effect("completing a settlement appends the head it lacks, then settles the claim on that receipt", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const ctx = yield* contextOf(kit)
      const reservation = acquired(yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile }))
      const receipt = summaryReceipt(kit.branch, "s", { jobId: JOB })
      yield* appendReceiptWithHead(kit, receipt, { head: false })
      const found = yield* receiptSinceClaim(ctx, reservation, yield* claimOf(kit, JOB))
      assert.isDefined(found)
      yield* ctx.withTokens(completeSettlement(ctx, reservation, reservation.claimPath, reservation.leaseToken, found!))
      yield* assertSettledPointer(kit, JOB, receipt)
      assert.deepStrictEqual((yield* sidecarRecords(kit)).map((record) => record.type), [
        "rarebit_summary",
        "rarebit_head"
      ])
      const current = yield* kit.store.readCurrent({ sessionFile: kit.sessionFile })
      assert.strictEqual(current.availability, "available")
      // Completed again (a retry), the head already points at it: nothing more is appended.
      yield* ctx.withTokens(completeSettlement(ctx, reservation, reservation.claimPath, reservation.leaseToken, found!))
      assert.strictEqual((yield* sidecarRecords(kit)).length, 2)
    }))

  it.effect("a claim that cannot say when it was taken recovers nothing, so the job runs again", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const ctx = yield* contextOf(kit)
      yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: JOB }))
      yield* kit.fs.makeDirectory(kit.jobsDir, { recursive: true })
      const claimPath = kit.claimPath(JOB)
      const reference = {
        jobId: JOB,
        state: "active",
        leaseToken: "t".repeat(48),
        claimedAt: "2026-01-01T00:00:00.000Z",
        leaseMs: 1
      }
      for (
        const read of [
          { _tag: "Parsed", claim: reference } as const,
          { _tag: "Parsed", claim: { ...reference, sidecarOffset: 0, leaseToken: 42 } } as const,
          { _tag: "Torn", modifiedAtMs: 0 } as const
        ]
      ) {
        assert.isUndefined(
          yield* ctx.withTokens(recoverSettlement(ctx, read, locationOf(kit, JOB), claimPath)),
          read._tag
        )
      }
      assert.isFalse(yield* kit.fs.exists(claimPath), "no claim was written")
      const recovered = yield* ctx.withTokens(recoverSettlement(
        ctx,
        { _tag: "Parsed", claim: { ...reference, sidecarOffset: 0 } },
        locationOf(kit, JOB),
        claimPath
      ))
      assert.strictEqual(recovered?.jobId, JOB)
      assert.strictEqual((yield* claimOf(kit, JOB)).state, "settled")
    }))
})
