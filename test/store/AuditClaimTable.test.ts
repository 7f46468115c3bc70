/**
 * The audit's claim table must give back every claim recorded, equal and
 * with its keys in the same order, and the receipts noted of each job as the
 * objects it replaced held them; a claim it reports verified at once must be
 * exactly what the pointer check reports without reading anything. The
 * common claim (settled, its job's one receipt named by its pointer) must
 * not be held as objects: that is the audit's memory saving.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { FileSystem } from "effect/FileSystem"
import fc from "fast-check"
import { AuditClaimTable } from "../../src/store/AuditClaimTable.js"
import { checkClaimPointer, type InspectedClaim, type KnownReceipt } from "../../src/store/ClaimInspection.js"
import { ClaimReportList } from "../../src/store/ClaimReportList.js"
import type { ScannedReceipt } from "../../src/store/SidecarScan.js"
import { fuzzRuns } from "../support/FuzzRuns.js"

const JOBS = "/store/jobs-v4"
const sidecarAt = (walkIndex: number) => `/store/materializations-v4/p/s${walkIndex}.jsonl`
const hex64 = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((bytes) => Buffer.from(bytes).toString("hex"))

/** A file system the pointer checks must not touch: they verify from what the scan found. */
const untouchable = new Proxy({}, {
  get: (_, name) => {
    throw new Error(`the pointer check used fs.${String(name)}`)
  }
}) as FileSystem

const settled = (jobId: string, ref: { receiptOffset: number; receiptLength: number; receiptHash: string }) =>
  ({
    report: {
      path: `${JOBS}/${jobId}.json`,
      jobId,
      state: "settled",
      claimedAt: null,
      leaseMs: null,
      expiresAt: null,
      expired: null,
      receiptRef: { ...ref },
      pointer: null,
      sidecar: null,
      detail: null
    },
    findings: [],
    receiptRef: { ...ref }
  }) satisfies InspectedClaim

/** A claim as inspected: the packable kind, or one that differs from it in one way. */
const claimOf = (
  jobId: string,
  ref: { receiptOffset: number; receiptLength: number; receiptHash: string },
  how: number
): InspectedClaim => {
  const claim = settled(jobId, ref)
  switch (how) {
    case 0:
      return {
        ...claim,
        findings: [{
          kind: "claim_invalid",
          severity: "damage",
          expectedAfterCrash: false,
          path: claim.report.path,
          offset: null,
          jobId,
          detail: "x"
        }]
      }
    case 1:
      return {
        report: {
          ...claim.report,
          state: "active",
          receiptRef: null,
          claimedAt: "2026-01-01T00:00:00.000Z",
          leaseMs: 5
        },
        findings: []
      }
    case 2:
      return { ...claim, receiptRef: { ...ref, sessionId: "s" } }
    case 3:
      return { ...claim, receiptRef: { ...ref, receiptHash: ref.receiptHash.toUpperCase() } }
    case 4:
      return { ...claim, report: { ...claim.report, path: `/elsewhere/${jobId}.json` } }
    case 5: {
      const { receiptHash, ...range } = ref
      return { ...claim, receiptRef: { receiptHash, ...range } }
    }
    default:
      return claim
  }
}

const store = fc.uniqueArray(hex64, { minLength: 1, maxLength: 40 }).chain((jobIds) =>
  fc.record({
    jobIds: fc.constant(jobIds),
    claims: fc.tuple(
      ...jobIds.map(() =>
        fc.record({
          ref: fc.record({
            receiptOffset: fc.nat({ max: 2 ** 40 }),
            receiptLength: fc.integer({ min: 1, max: 49_152 }),
            receiptHash: hex64
          }),
          how: fc.integer({ min: 0, max: 12 }),
          receipts: fc.array(
            fc.record({
              walkIndex: fc.integer({ min: 0, max: 5 }),
              // 0: elsewhere; 1: the line the claim names; 2: the same range, other bytes
              named: fc.integer({ min: 0, max: 2 }),
              offset: fc.nat({ max: 2 ** 40 }),
              length: fc.integer({ min: 1, max: 49_152 }),
              hash: hex64
            }),
            { maxLength: 3 }
          )
        })
      )
    ),
    released: fc.array(fc.nat(), { maxLength: 3 }),
    walkOrder: fc.shuffledSubarray([0, 1, 2, 3, 4, 5], { minLength: 6, maxLength: 6 })
  })
)

describe("AuditClaimTable", () => {
  it("gives back what was recorded and noted, and verifies at once exactly what the pointer check verifies without reading", () => {
    fc.assert(
      fc.property(store, ({ claims, jobIds, released, walkOrder }) => {
        const table = new AuditClaimTable(JOBS, jobIds.map((jobId) => `${jobId}.json`), sidecarAt)
        const recorded: Array<InspectedClaim | undefined> = claims.map(({ how, ref }, slot) =>
          released.includes(slot) ? undefined : claimOf(jobIds[slot], ref, how)
        )
        recorded.forEach((claim, slot) => table.record(slot, claim))
        // What the scan found, sidecar by sidecar, in the order the scans end.
        const receipts = claims.flatMap(({ receipts, ref }, slot) =>
          receipts.map((receipt): ScannedReceipt & { walkIndex: number } => ({
            walkIndex: receipt.walkIndex,
            jobId: jobIds[slot],
            ...(receipt.named === 0
              ? { offset: receipt.offset, length: receipt.length, hash: receipt.hash }
              : {
                offset: ref.receiptOffset,
                length: ref.receiptLength,
                hash: receipt.named === 1 ? ref.receiptHash : receipt.hash
              })
          }))
        )
        for (const walkIndex of walkOrder) {
          table.noteReceipts(walkIndex, receipts.filter((receipt) => receipt.walkIndex === walkIndex))
        }

        assert.strictEqual(table.present, recorded.filter((claim) => claim !== undefined).length)
        recorded.forEach((claim, slot) => {
          const jobId = jobIds[slot]
          assert.strictEqual(table.slotOf(jobId), slot)
          assert.strictEqual(table.jobIdAt(slot), jobId)
          assert.strictEqual(table.has(jobId), claim !== undefined)
          assert.strictEqual(table.isPresent(slot), claim !== undefined)
          const ofJob = receipts.filter((receipt) => receipt.jobId === jobId)
          assert.strictEqual(table.hasReceipts(slot), ofJob.length > 0)
          const held = table.receiptsOf(slot)
          if (ofJob.length === 0) assert.isUndefined(held)
          else {
            const walk = [...new Set(ofJob.map((receipt) => receipt.walkIndex))].sort((a, b) => a - b)
            assert.deepStrictEqual(held!.sidecars, walk.map(sidecarAt))
            const known = (list: ReadonlyArray<KnownReceipt>) => list.map((receipt) => JSON.stringify(receipt)).sort()
            assert.deepStrictEqual(
              known(held!.known),
              known(
                ofJob.map(({ hash, length, offset, walkIndex }) => ({
                  sidecar: sidecarAt(walkIndex),
                  offset,
                  length,
                  hash
                }))
              )
            )
          }
          if (claim === undefined) return
          const back = table.inspected(slot)
          assert.deepStrictEqual(back, claim)
          assert.strictEqual(JSON.stringify(back), JSON.stringify(claim))
          if (!table.verifiesAtOnce(slot)) return
          // Verified at once: the pointer check says so too, without reading, and the same report is listed.
          assert.strictEqual(held!.sidecars.length, 1)
          const checked = Effect.runSync(checkClaimPointer(untouchable, back, held!.sidecars, held!.known))
          assert.strictEqual(checked.report.pointer, "verified")
          assert.deepStrictEqual(checked.findings, [])
          const list = new ClaimReportList(JOBS)
          table.pushVerified(slot, list)
          assert.strictEqual(JSON.stringify(list.at(0)), JSON.stringify(checked.report))
        })
        assert.isUndefined(table.has("0".repeat(63)) ? "found" : undefined)
      }),
      { numRuns: fuzzRuns(200) }
    )
  })

  it("holds the common claim packed: settled, its job's one receipt named by its pointer", () => {
    const jobIds = fc.sample(hex64, { numRuns: 1000, seed: 3 })
    const table = new AuditClaimTable(JOBS, jobIds.map((jobId) => `${jobId}.json`), sidecarAt)
    jobIds.forEach((jobId, slot) => {
      const ref = { receiptOffset: 100 * slot, receiptLength: 90, receiptHash: jobIds[(slot + 1) % 1000] }
      table.record(slot, settled(jobId, ref))
      table.noteReceipts(slot % 6, [{
        jobId,
        offset: ref.receiptOffset,
        length: ref.receiptLength,
        hash: ref.receiptHash
      }])
    })
    assert.strictEqual(table.present, 1000)
    assert.strictEqual(table.heldAsObjects, 0)
    for (let slot = 0; slot < 1000; slot++) assert.isTrue(table.verifiesAtOnce(slot))
    // A second receipt of a job, or a claim that is not the common kind, is held as it was.
    table.noteReceipts(7, [{ jobId: jobIds[0], offset: 5, length: 5, hash: jobIds[2] }])
    assert.strictEqual(table.heldAsObjects, 1)
    assert.isFalse(table.verifiesAtOnce(0))
  })
})
