/**
 * The audit's compact list of claim reports must give back, for every index,
 * a report equal to the one added, its keys in the same order (the CLI
 * prints from it), whether the report was packed or kept as it was.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import type { ClaimReport } from "../../src/store/ClaimInspection.js"
import { ClaimReportList } from "../../src/store/ClaimReportList.js"
import { fuzzRuns } from "../support/FuzzRuns.js"

const JOBS = "/store/jobs-v4"
const hex64 = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((bytes) => Buffer.from(bytes).toString("hex"))

/** A settled claim whose pointer verified: the kind the list packs. */
const verified = fc.record({
  jobId: hex64,
  hash: hex64,
  offset: fc.nat({ max: 2 ** 40 }),
  length: fc.integer({ min: 1, max: 49_152 }),
  sidecar: fc.constantFrom("/store/materializations-v4/a/s.jsonl", "/store/materializations-v4/b/t.jsonl")
}).map(({ hash, jobId, length, offset, sidecar }): ClaimReport => ({
  path: `${JOBS}/${jobId}.json`,
  jobId,
  state: "settled",
  claimedAt: null,
  leaseMs: null,
  expiresAt: null,
  expired: null,
  receiptRef: { receiptOffset: offset, receiptLength: length, receiptHash: hash },
  pointer: "verified",
  sidecar,
  detail: null
}))

/** Reports the list must keep as they are: each differs from a packable one in one way. */
const other = fc.tuple(verified, fc.integer({ min: 0, max: 7 }), fc.string({ maxLength: 8 })).map(
  ([report, how, text]): ClaimReport => {
    switch (how) {
      case 0:
        return { ...report, pointer: "invalid" }
      case 1:
        return {
          ...report,
          state: "active",
          receiptRef: null,
          pointer: null,
          sidecar: null,
          claimedAt: text,
          leaseMs: 5
        }
      case 2:
        return { ...report, path: `/elsewhere/${report.jobId}.json` }
      case 3:
        return {
          ...report,
          receiptRef: { ...report.receiptRef!, receiptHash: report.receiptRef!.receiptHash.toUpperCase() }
        }
      case 4:
        return { ...report, detail: text }
      case 5:
        return { ...report, jobId: `${report.jobId}${text}`, path: `${JOBS}/${report.jobId}${text}.json` }
      case 6:
        // Keys in another order are printed in that order, so such a report is kept.
        return Object.fromEntries([["jobId", report.jobId], ...Object.entries(report)]) as unknown as ClaimReport
      default: {
        const { receiptHash, ...range } = report.receiptRef!
        return { ...report, receiptRef: { receiptHash, ...range } }
      }
    }
  }
)

describe("ClaimReportList", () => {
  it("gives back every report added, equal and with its keys in the same order, packed or not", () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(verified, other), { maxLength: 300 }), (reports) => {
        const list = new ClaimReportList(JOBS)
        for (const report of reports) list.push(report)
        assert.strictEqual(list.length, reports.length)
        reports.forEach((report, index) => {
          assert.deepStrictEqual(list.at(index), report)
          assert.strictEqual(JSON.stringify(list.at(index)), JSON.stringify(report))
        })
        assert.strictEqual(JSON.stringify(list.toArray()), JSON.stringify(reports))
        assert.isUndefined(list.at(reports.length))
        assert.isUndefined(list.at(-1))
      }),
      { numRuns: fuzzRuns(200) }
    )
  })

  it("packs the common report: verified settled claims are not kept as the objects added", () => {
    const list = new ClaimReportList(JOBS)
    const reports = fc.sample(verified, { numRuns: 1000, seed: 1 })
    for (const report of reports) list.push(report)
    // Each `at` makes a new object, equal to the one added: nothing of it was held.
    assert.notStrictEqual(list.at(999), reports[999])
    assert.deepStrictEqual(list.at(999), reports[999])
    const kept = fc.sample(other, { numRuns: 1, seed: 2 })[0]
    list.push(kept)
    assert.strictEqual(list.at(1000), kept)
  })
})
