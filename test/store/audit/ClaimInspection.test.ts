/**
 * The audit's inspection of claims, on its own and on both worlds: what a
 * claim the store wrote reports, what a damaged one reports, and how a
 * settled claim's pointer checks out against the sidecars given to it:
 * without reading a sidecar again when the pointer names a line the scan
 * already validated and hashed there.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { checkClaimPointer, inspectClaimEntry } from "../../../src/store/audit/ClaimInspection.js"
import { scanSidecar } from "../../../src/store/audit/SidecarScan.js"
import { makeCountingFileSystem } from "../../support/CountingFileSystem.js"
import { fileSystemSuite } from "../../support/FileSystemSuite.js"
import { jobId, summaryReceipt } from "../../support/Receipts.js"
import { LEASE_MS, reserveAcquired, setup } from "../StoreKit.js"

const JOB = jobId(1)

fileSystemSuite("ClaimInspection", (it) => {
  it.effect("an active claim reports its lease and, once it ran out, an expiry notice; never its token", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const reservation = yield* reserveAcquired(kit)
      const path = kit.claimPath(JOB)
      const live = yield* inspectClaimEntry(kit.fs, path, JOB, "File", 0)
      assert.strictEqual(live?.report.state, "active")
      assert.strictEqual(live?.report.leaseMs, LEASE_MS)
      assert.strictEqual(live?.report.expired, false)
      assert.deepStrictEqual(live?.findings, [])
      assert.notInclude(JSON.stringify(live), reservation.leaseToken)
      const late = yield* inspectClaimEntry(kit.fs, path, JOB, "File", LEASE_MS + 1)
      assert.deepStrictEqual(late?.findings.map((f) => [f.kind, f.severity, f.jobId]), [[
        "claim_expired",
        "notice",
        JOB
      ]])
    }))

  it.effect("a claim released meanwhile is not reported; a damaged or misplaced one is", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* kit.fs.makeDirectory(kit.jobsDir, { recursive: true })
      assert.isUndefined(yield* inspectClaimEntry(kit.fs, kit.claimPath(JOB), JOB, "File", 0))
      yield* kit.fs.writeFileString(kit.claimPath(JOB), `{"jobId":"${jobId(2)}","state":"active"}`)
      const misnamed = yield* inspectClaimEntry(kit.fs, kit.claimPath(JOB), JOB, "File", 0)
      assert.deepStrictEqual(misnamed?.findings.map((f) => [f.kind, f.detail]), [
        ["claim_invalid", "its jobId does not match its file name"]
      ])
      const socket = yield* inspectClaimEntry(kit.fs, kit.claimPath(JOB), JOB, "Socket", 0)
      assert.strictEqual(socket?.report.state, "unreadable")
      assert.deepStrictEqual(socket?.findings.map((f) => f.kind), ["claim_unreadable"])
    }))

  it.effect("a settled pointer is verified in the sidecar that holds it, invalid elsewhere, an orphan with none", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const reservation = yield* reserveAcquired(kit)
      yield* kit.store.settle(reservation, summaryReceipt(kit.branch, "s"))
      const inspected = yield* inspectClaimEntry(kit.fs, kit.claimPath(JOB), JOB, "File", 0)
      assert.strictEqual(inspected?.report.state, "settled")
      const verified = yield* checkClaimPointer(kit.fs, inspected!, [`${kit.sidecar}.missing`, kit.sidecar])
      assert.deepStrictEqual([verified.report.pointer, verified.report.sidecar, verified.findings], [
        "verified",
        kit.sidecar,
        []
      ])
      const other = `${root}/other.jsonl`
      yield* kit.fs.writeFileString(other, "{}\n")
      const invalid = yield* checkClaimPointer(kit.fs, inspected!, [other])
      assert.deepStrictEqual([invalid.report.pointer, invalid.findings.map((f) => f.kind)], ["invalid", [
        "claim_pointer_invalid"
      ]])
      const orphan = yield* checkClaimPointer(kit.fs, inspected!, [])
      assert.deepStrictEqual([orphan.report.pointer, orphan.findings.map((f) => f.kind)], ["orphan", ["claim_orphan"]])
    }))

  it.effect("a pointer naming a line the scan hashed verifies without reading it again; any other is read", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const reservation = yield* reserveAcquired(kit)
      yield* kit.store.settle(reservation, summaryReceipt(kit.branch, "s"))
      const inspected = (yield* inspectClaimEntry(kit.fs, kit.claimPath(JOB), JOB, "File", 0))!
      const known = (yield* scanSidecar(kit.fs, kit.sidecar, new Set([JOB]))).receipts.map((receipt) => ({
        sidecar: kit.sidecar,
        offset: receipt.offset,
        length: receipt.length,
        hash: receipt.hash
      }))
      assert.strictEqual(known.length, 1)
      const other = `${root}/other.jsonl`
      yield* kit.fs.writeFileString(other, "{}\n")

      // The first candidate does not verify; the second is known, and not read.
      const counting = makeCountingFileSystem(kit.fs)
      const verified = yield* checkClaimPointer(counting.fs, inspected, [other, kit.sidecar], known)
      assert.deepStrictEqual([verified.report.pointer, verified.report.sidecar, verified.findings], [
        "verified",
        kit.sidecar,
        []
      ])
      assert.strictEqual(counting.readsOf(kit.sidecar).reads, 0)

      // A known line elsewhere in the file, or in another sidecar, does not stand in: the range is read.
      const elsewhere = [{ ...known[0], offset: known[0].offset + 1 }, { ...known[0], sidecar: other }]
      const read = yield* checkClaimPointer(counting.fs, inspected, [kit.sidecar], elsewhere)
      assert.deepStrictEqual([read.report.pointer, read.report.sidecar], ["verified", kit.sidecar])
      assert.strictEqual(counting.readsOf(kit.sidecar).reads, 1)
      const wrongHash = [{ ...known[0], hash: "0".repeat(64) }]
      yield* kit.fs.writeFileString(kit.sidecar, "")
      const invalid = yield* checkClaimPointer(counting.fs, inspected, [kit.sidecar], wrongHash)
      assert.deepStrictEqual(invalid.findings.map((f) => f.kind), ["claim_pointer_invalid"])
    }))
})
