/**
 * The audit reader: bounded pages at absolute offsets, resumable from inside
 * a line, never stalled by a line longer than a page, and the `history`
 * stream over all pages.
 */
import { assert } from "@effect/vitest"
import { Effect, Stream } from "effect"
import type { Receipt } from "../../src/protocol/Receipt.js"
import type { HistoryPage, HistoryRecord } from "../../src/store/read/SidecarReader.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { jobId, summaryReceipt, titleReceipt } from "../support/Receipts.js"
import {
  appendRaw,
  appendReceiptWithHead,
  assertNoOpenHandles,
  bytesOf,
  headFor,
  headLine,
  type Kit,
  receiptLine,
  setup,
  sizeOf
} from "./StoreKit.js"

const MIB = 1024 * 1024

const page = (kit: Kit, fromOffset?: number, limit?: number) =>
  Effect.tap(
    kit.store.readHistory({
      sessionFile: kit.sessionFile,
      ...(fromOffset === undefined ? {} : { fromOffset }),
      ...(limit === undefined ? {} : { limit })
    }),
    () => assertNoOpenHandles(kit.fs, "after readHistory")
  )

/** Every page from `fromOffset` until `nextOffset` is null. */
const allPages = (kit: Kit, fromOffset: number, limit: number) =>
  Effect.gen(function*() {
    const pages: Array<HistoryPage> = []
    let offset: number | null = fromOffset
    while (offset !== null) {
      const next: HistoryPage = yield* page(kit, offset, limit)
      pages.push(next)
      assert.isTrue(next.nextOffset === null || next.nextOffset > offset, "a page always advances")
      offset = next.nextOffset
    }
    return pages
  })

/**
 * A sidecar of five receipts (summaries and titles) with heads, a blank
 * line, garbage and an invalid receipt in between. Returns the receipts
 * with their offsets, in file order.
 */
const mixedSidecar = (kit: Kit) =>
  Effect.gen(function*() {
    const receipts: Array<HistoryRecord> = []
    const add = (record: Receipt) =>
      Effect.map(appendReceiptWithHead(kit, record), ({ offset }) => receipts.push({ offset, record }))
    yield* add(summaryReceipt(kit.branch, "s", { jobId: jobId(1) }))
    yield* appendRaw(kit, "\nnot json\n")
    yield* add(titleReceipt(kit.branch, "s", { jobId: jobId(2) }))
    yield* appendRaw(kit, receiptLine({ ...summaryReceipt(kit.branch, "s", { jobId: jobId(9) }), extra: 1 }))
    yield* add(summaryReceipt(kit.branch, "s", { jobId: jobId(3) }))
    yield* appendRaw(kit, "[1,2,3]\nnull\n{\"type\":\"rarebit_summary\"}\n")
    yield* add(titleReceipt(kit.branch, "s", { jobId: jobId(4) }))
    yield* add(summaryReceipt(kit.branch, "s", { jobId: jobId(5) }))
    return receipts
  })

fileSystemSuite("RarebitStore.readHistory", (it) => {
  it.effect("offset and limit outside the protocol bounds are a typed failure", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const bad: Array<[number, number]> = [
        [0, 0],
        [0, 1001],
        [0, 1.5],
        [0, -1],
        [0, Number.NaN],
        [-1, 10],
        [0.5, 10],
        [2 ** 53, 10],
        [Number.POSITIVE_INFINITY, 10]
      ]
      for (const [fromOffset, limit] of bad) {
        const error = yield* Effect.flip(page(kit, fromOffset, limit))
        assert.strictEqual(error._tag, "HistoryBoundsInvalid", `${fromOffset}/${limit}`)
        assert.strictEqual(error.message, "History offset and limit are outside protocol bounds")
        const streamed = yield* Effect.flip(
          Stream.runCollect(kit.store.history({ sessionFile: kit.sessionFile, fromOffset, limit }))
        )
        assert.strictEqual(streamed._tag, "HistoryBoundsInvalid")
      }
      // The bounds themselves are fine.
      assert.strictEqual((yield* page(kit, 0, 1)).availability, "missing")
      assert.strictEqual((yield* page(kit, 0, 1000)).availability, "missing")
    }))

  it.effect("a missing sidecar is missing; an offset at or past the end is an empty last page", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      assert.deepStrictEqual(yield* page(kit), {
        availability: "missing",
        path: kit.sidecar,
        records: [],
        nextOffset: null
      })
      yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: jobId(1) }))
      const size = yield* sizeOf(kit.fs, kit.sidecar)
      for (const fromOffset of [size, size + 1, 10 * MIB]) {
        assert.deepStrictEqual(yield* page(kit, fromOffset), {
          availability: "available",
          path: kit.sidecar,
          records: [],
          nextOffset: null
        })
      }
    }))

  it.effect("pages return valid receipts at absolute offsets, skipping heads and invalid lines", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const receipts = yield* mixedSidecar(kit)
      const whole = yield* page(kit)
      assert.deepStrictEqual(whole, {
        availability: "available",
        path: kit.sidecar,
        records: receipts,
        nextOffset: null
      })
      // Offsets point at the exact receipt lines.
      const text = yield* kit.fs.readFile(kit.sidecar)
      for (const { offset, record } of receipts) {
        const line = bytesOf(receiptLine(record))
        assert.deepStrictEqual([...text.subarray(offset, offset + line.length)], [...line])
      }
    }))

  it.effect("a limit splits history into resumable pages; nextOffset is null only at the end", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const receipts = yield* mixedSidecar(kit)
      for (const limit of [1, 2, 3, 5, 1000]) {
        const pages = yield* allPages(kit, 0, limit)
        assert.deepStrictEqual(pages.flatMap((p) => p.records), receipts, `limit ${limit}`)
        for (const p of pages) assert.isAtMost(p.records.length, limit)
        for (const p of pages.slice(0, -1)) assert.isNotNull(p.nextOffset)
        assert.isNull(pages.at(-1)!.nextOffset)
      }
      // The page that fills its limit with the last receipt still points at the head after it.
      const first = yield* page(kit, 0, 5)
      assert.strictEqual(first.records.length, 5)
      const size = yield* sizeOf(kit.fs, kit.sidecar)
      assert.isNotNull(first.nextOffset)
      assert.isBelow(first.nextOffset!, size)
      assert.deepStrictEqual(yield* page(kit, first.nextOffset!, 5), {
        availability: "available",
        path: kit.sidecar,
        records: [],
        nextOffset: null
      })
    }))

  it.effect("without a limit a page holds at most 100 receipts", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const line = (n: number) => receiptLine(titleReceipt(kit.branch, "s", { jobId: jobId(n) }))
      yield* appendRaw(kit, Array.from({ length: 105 }, (_, n) => line(n)).join(""))
      const first = yield* page(kit)
      assert.strictEqual(first.records.length, 100)
      assert.strictEqual(first.nextOffset, bytesOf(Array.from({ length: 100 }, (_, n) => line(n)).join("")).length)
      const rest = yield* page(kit, first.nextOffset!)
      assert.deepStrictEqual(rest.records.map((r) => r.record.jobId), [100, 101, 102, 103, 104].map(jobId))
      assert.isNull(rest.nextOffset)
    }))

  it.effect("an offset inside a line resumes at the next line; an offset at a line start reads it", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const receipts = yield* mixedSidecar(kit)
      const second = receipts[1]!
      assert.deepStrictEqual((yield* page(kit, second.offset, 1)).records, [second])
      assert.deepStrictEqual((yield* page(kit, second.offset + 1, 1)).records, [receipts[2]!])
      // One byte earlier is the previous line's newline: the next line is this receipt.
      assert.deepStrictEqual((yield* page(kit, second.offset - 1, 1)).records, [second])
      assert.deepStrictEqual((yield* page(kit, second.offset - 2, 1)).records, [second])
      // Every offset gives exactly the receipts that start at or after it.
      const size = yield* sizeOf(kit.fs, kit.sidecar)
      for (let offset = 0; offset < size; offset += 97) {
        const pages = yield* allPages(kit, offset, 2)
        const expected = receipts.filter((r) => r.offset >= offset)
        const text = yield* kit.fs.readFile(kit.sidecar)
        const atLineStart = offset === 0 || text[offset - 1] === 10
        assert.deepStrictEqual(
          pages.flatMap((p) => p.records),
          atLineStart ? expected : expected.filter((r) => r.offset > offset),
          `from ${offset}`
        )
      }
    }))

  it.effect("a torn last line is not returned, and the page points at it", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const receipt = summaryReceipt(kit.branch, "s", { jobId: jobId(1) })
      yield* appendRaw(kit, receiptLine(receipt))
      const tornAt = yield* sizeOf(kit.fs, kit.sidecar)
      yield* appendRaw(kit, receiptLine(titleReceipt(kit.branch, "s", { jobId: jobId(2) })).slice(0, -1))
      const first = yield* page(kit)
      assert.deepStrictEqual(first.records, [{ offset: 0, record: receipt }])
      assert.strictEqual(first.nextOffset, tornAt)
      // From inside the torn line there is no complete line left.
      const inside = yield* page(kit, tornAt + 1)
      assert.deepStrictEqual(inside.records, [])
      assert.isNull(inside.nextOffset)
    }))

  it.effect("a line longer than a page is skipped through nextOffset, never stalling", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const before = summaryReceipt(kit.branch, "s", { jobId: jobId(1) })
      yield* appendRaw(kit, receiptLine(before))
      const longAt = yield* sizeOf(kit.fs, kit.sidecar)
      yield* appendRaw(kit, `${JSON.stringify({ pad: "z".repeat(MIB + MIB / 4) })}\n`)
      const afterAt = yield* sizeOf(kit.fs, kit.sidecar)
      const after = titleReceipt(kit.branch, "s", { jobId: jobId(2) })
      yield* appendRaw(kit, receiptLine(after))

      const first = yield* page(kit, 0, 10)
      assert.deepStrictEqual(first.records, [{ offset: 0, record: before }])
      assert.strictEqual(first.nextOffset, longAt)
      // A page that starts at the long line finds no newline in its 1 MiB and skips the window.
      const long = yield* page(kit, longAt, 10)
      assert.deepStrictEqual(long.records, [])
      assert.strictEqual(long.nextOffset, longAt + MIB)
      const rest = yield* page(kit, longAt + MIB, 10)
      assert.deepStrictEqual(rest.records, [{ offset: afterAt, record: after }])
      assert.isNull(rest.nextOffset)

      const streamed = yield* Stream.runCollect(kit.store.history({ sessionFile: kit.sessionFile, limit: 1 }))
      assert.deepStrictEqual(streamed, [
        { offset: 0, record: before },
        { offset: afterAt, record: after }
      ])
      yield* assertNoOpenHandles(kit.fs, "after the history stream")
    }))

  it.effect("the history stream returns every receipt across pages, in order", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const receipts = yield* mixedSidecar(kit)
      for (const limit of [1, 2, 1000]) {
        const all = yield* Stream.runCollect(kit.store.history({ sessionFile: kit.sessionFile, limit }))
        assert.deepStrictEqual(all, receipts, `limit ${limit}`)
      }
      const fromThird = yield* Stream.runCollect(
        kit.store.history({ sessionFile: kit.sessionFile, fromOffset: receipts[2]!.offset, limit: 2 })
      )
      assert.deepStrictEqual(fromThird, receipts.slice(2))
      // Stopping early closes whatever the stream had open.
      const firstTwo = yield* Stream.runCollect(
        Stream.take(kit.store.history({ sessionFile: kit.sessionFile, limit: 1 }), 2)
      )
      assert.deepStrictEqual(firstTwo, receipts.slice(0, 2))
      yield* assertNoOpenHandles(kit.fs, "after an early stop")
    }))

  it.effect("the history stream of a missing sidecar is empty; of an unreadable one, a typed failure", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const none = yield* Stream.runCollect(kit.store.history({ sessionFile: kit.sessionFile }))
      assert.deepStrictEqual(none, [])
      yield* kit.fs.makeDirectory(kit.sidecar, { recursive: true })
      assert.deepStrictEqual(yield* page(kit), {
        availability: "unreadable",
        path: kit.sidecar,
        records: [],
        nextOffset: null
      })
      const error = yield* Effect.flip(Stream.runCollect(kit.store.history({ sessionFile: kit.sessionFile })))
      assert.strictEqual(error._tag, "HistoryUnreadable")
    }))

  it.effect("a symlink sidecar is unreadable and never followed", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const target = kit.path.join(root, "target.jsonl")
      const line = receiptLine(summaryReceipt(kit.branch, "s", { jobId: jobId(1) }))
      yield* kit.fs.writeFileString(target, line + headLine(headFor("s", 0, line)))
      yield* kit.fs.makeDirectory(kit.path.dirname(kit.sidecar), { recursive: true })
      yield* kit.fs.symlink(target, kit.sidecar)
      assert.deepStrictEqual(yield* page(kit), {
        availability: "unreadable",
        path: kit.sidecar,
        records: [],
        nextOffset: null
      })
    }))
})
