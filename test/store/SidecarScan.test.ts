/**
 * The audit's scan of one sidecar, on its own and on both worlds: what it
 * counts, which claimed jobs it notes, and what it reports about each line,
 * at the exact offsets the store wrote.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { scanSidecar } from "../../src/store/SidecarScan.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { jobId, summaryReceipt, titleReceipt } from "../support/Receipts.js"
import { makeSpecial } from "../support/SpecialFiles.js"
import { appendRaw, appendReceiptWithHead, headFor, headLine, setup, sizeOf } from "./StoreKit.js"

fileSystemSuite("SidecarScan", (it) => {
  it.effect("counts lines, receipts and heads, and notes only the wanted jobs it meets", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: jobId(1) }))
      yield* appendRaw(kit, `${JSON.stringify(titleReceipt(kit.branch, "s", { jobId: jobId(2) }))}\n`)
      const scan = yield* scanSidecar(kit.fs, kit.sidecar, new Set([jobId(2), jobId(3)]))
      assert.deepStrictEqual(
        { ...scan.summary, current: undefined },
        { path: kit.sidecar, bytes: yield* sizeOf(kit.fs, kit.sidecar), lines: 3, receipts: 2, heads: 1, current: undefined }
      )
      assert.deepStrictEqual(scan.summary.current, { availability: "available", reason: "sidecar_uncommitted_tail" })
      assert.deepStrictEqual([...scan.jobIds], [jobId(2)])
      assert.deepStrictEqual(scan.findings.map((f) => [f.kind, f.severity, f.expectedAfterCrash]), [
        ["uncommitted_tail", "notice", true]
      ])
    }))

  it.effect("reports every bad line at its offset: a head whose range does not verify, garbage, a torn tail", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const first = yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: jobId(1) }))
      const badHeadAt = yield* sizeOf(kit.fs, kit.sidecar)
      // A valid head whose hash names other bytes than the receipt it points at.
      yield* appendRaw(kit, headLine({ ...headFor("s", first.offset, first.line), receiptHash: "0".repeat(64) }))
      const garbageAt = yield* sizeOf(kit.fs, kit.sidecar)
      yield* appendRaw(kit, "{\"type\":\"rarebit_summary\"}\n")
      const tornAt = yield* sizeOf(kit.fs, kit.sidecar)
      yield* appendRaw(kit, "{\"type\":\"rar")
      const scan = yield* scanSidecar(kit.fs, kit.sidecar, new Set())
      assert.deepStrictEqual(scan.findings.map((f) => `${f.kind}@${f.offset}`), [
        `head_range_invalid@${badHeadAt}`,
        `invalid_record@${garbageAt}`,
        `torn_tail@${tornAt}`,
        `uncommitted_tail@${garbageAt}`
      ])
      assert.match(scan.findings[0].detail, /do not hash to receiptHash/)
      assert.match(scan.findings[1].detail, /^summary receipt fails v4 validation/)
      assert.strictEqual(scan.summary.heads, 2)
    }))

  it.effect("a sidecar path that is not a regular file is reported, and nothing of it is read", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* kit.fs.makeDirectory(kit.path.dirname(kit.sidecar), { recursive: true })
      yield* makeSpecial(kit.sidecar, "fifo")
      const scan = yield* scanSidecar(kit.fs, kit.sidecar, new Set())
      assert.deepStrictEqual(scan.summary.bytes, null)
      assert.deepStrictEqual(scan.findings.map((f) => [f.kind, f.severity]), [["sidecar_not_regular", "damage"]])
      assert.match(scan.findings[0].detail, /FIFO/)
    }))
})
