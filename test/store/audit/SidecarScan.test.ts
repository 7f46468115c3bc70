/**
 * The audit's scan of one sidecar, on its own and on both worlds: what it
 * counts, which claimed jobs it notes, and what it reports about each line,
 * at the exact offsets the store wrote. A sidecar whose heads name the
 * receipts written before them is read exactly once, and what the scan says
 * the current reader answers is what that reader answers.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { scanSidecar } from "../../../src/store/audit/SidecarScan.js"
import { readSidecarCurrent } from "../../../src/store/read/SidecarReader.js"
import { makeCountingFileSystem } from "../../support/CountingFileSystem.js"
import { fileSystemSuite } from "../../support/FileSystemSuite.js"
import { jobId, summaryReceipt, titleReceipt } from "../../support/Receipts.js"
import { makeSpecial } from "../../support/SpecialFiles.js"
import { appendRaw, appendReceiptWithHead, headFor, headLine, setup, sizeOf } from "../StoreKit.js"

fileSystemSuite("SidecarScan", (it) => {
  it.effect("counts lines, receipts and heads, and notes only the wanted jobs it meets", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: jobId(1) }))
      yield* appendRaw(kit, `${JSON.stringify(titleReceipt(kit.branch, "s", { jobId: jobId(2) }))}\n`)
      const scan = yield* scanSidecar(kit.fs, kit.sidecar, new Set([jobId(2), jobId(3)]))
      assert.deepStrictEqual(
        { ...scan.summary, current: undefined },
        {
          path: kit.sidecar,
          bytes: yield* sizeOf(kit.fs, kit.sidecar),
          lines: 3,
          receipts: 2,
          heads: 1,
          current: undefined
        }
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

  it.effect("a sidecar whose heads name the receipts before them is read once, in one read, and its current answer is the reader's", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: jobId(1) }))
      const second = yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: jobId(2) }))
      // A title, then the current head repeated, as settle writes them.
      yield* appendRaw(kit, `${JSON.stringify(titleReceipt(kit.branch, "s", { jobId: jobId(3) }))}\n`)
      yield* appendRaw(kit, headLine(second.head))
      const counting = makeCountingFileSystem(kit.fs)
      const scan = yield* scanSidecar(counting.fs, kit.sidecar, new Set([jobId(2)]))
      assert.deepStrictEqual(scan.findings, [])
      assert.deepStrictEqual(counting.readsOf(kit.sidecar), { reads: 1, bytes: yield* sizeOf(kit.fs, kit.sidecar) })
      const current = yield* readSidecarCurrent(kit.fs, kit.sidecar)
      assert.deepStrictEqual(scan.summary.current, { availability: current.availability, reason: null })
      assert.strictEqual(current.availability, "available")
      // The wanted job's receipt, where it lies and the hash a claim's pointer names.
      assert.deepStrictEqual(scan.receipts, [{
        jobId: jobId(2),
        offset: second.offset,
        length: second.head.receiptLength,
        hash: second.head.receiptHash
      }])
    }))

  it.effect("a head naming a receipt long before it is read back and verified", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const first = yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: jobId(1) }))
      for (let job = 2; job <= 40; job++) {
        yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: jobId(job) }))
      }
      yield* appendRaw(kit, headLine(first.head))
      const size = yield* sizeOf(kit.fs, kit.sidecar)
      const counting = makeCountingFileSystem(kit.fs)
      const scan = yield* scanSidecar(counting.fs, kit.sidecar, new Set())
      assert.deepStrictEqual(scan.findings, [])
      assert.strictEqual(scan.summary.heads, 41)
      assert.deepStrictEqual(scan.summary.current, { availability: "available", reason: null })
      // The whole file once, then the first receipt's range again.
      assert.strictEqual(counting.readsOf(kit.sidecar).bytes, size + first.head.receiptLength)

      // The same head, its hash naming other bytes: a finding at its offset, and the reader fails closed.
      yield* appendRaw(kit, headLine({ ...first.head, receiptHash: "0".repeat(64) }))
      const broken = yield* scanSidecar(kit.fs, kit.sidecar, new Set())
      assert.deepStrictEqual(broken.findings.map((f) => `${f.kind}@${f.offset}`), [
        `head_range_invalid@${yield* Effect.map(
          sizeOf(kit.fs, kit.sidecar),
          (end) => end - headLine(first.head).length
        )}`
      ])
      assert.deepStrictEqual(broken.summary.current, { availability: "unreadable", reason: "sidecar_head_invalid" })
    }))

  it.effect("a line longer than any record that the reader takes for the current head: the scan asks the reader", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const first = yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: jobId(1) }))
      // Valid JSON of a valid head, padded past the record limit: the scan calls it invalid, the reader reads it.
      yield* appendRaw(kit, `${JSON.stringify(first.head)}${" ".repeat(50_000)}\n`)
      const scan = yield* scanSidecar(kit.fs, kit.sidecar, new Set())
      const current = yield* readSidecarCurrent(kit.fs, kit.sidecar)
      assert.deepStrictEqual(scan.summary.current, {
        availability: current.availability,
        reason: current.diagnostics.reason ?? null
      })
      assert.deepStrictEqual(scan.summary.current, { availability: "available", reason: null })
      assert.deepStrictEqual(scan.findings.map((f) => f.kind), ["invalid_head", "uncommitted_tail"])
    }))
})
