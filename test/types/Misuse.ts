/**
 * What the types let a caller write, and what they refuse. Checked by
 * `npm run typecheck`; nothing here runs.
 *
 * Each `@ts-expect-error` line is a mistake the types must catch: if the
 * line compiled, the directive itself would be reported as unused and the
 * typecheck would fail. The lines around them are the correct use, written
 * without a single cast.
 */
import { Effect } from "effect"
import type {
  Head,
  HistoryRecord,
  OkSummaryReceipt,
  RarebitStore,
  ReceiptInput,
  SettledReceipt,
  SummaryReceipt,
  TitledTitleReceipt
} from "../../src/index.js"
import {
  readRarebitCurrent,
  readRarebitHistory,
  releaseRarebitJob,
  reserveRarebitJob,
  settleRarebitJob
} from "../../src/promise/index.js"

declare const store: RarebitStore["Service"]
declare const sessionFile: string
declare const jobId: string
declare const summary: OkSummaryReceipt
declare const title: TitledTitleReceipt

const useSummary = (receipt: SummaryReceipt): string => receipt.selection.manifestHash

/** A worker's receipt, built without the job id the store writes in. */
const withoutJobId = ({ jobId: _jobId, ...receipt }: OkSummaryReceipt): ReceiptInput => receipt

export const effectOptions = Effect.gen(function*() {
  // @ts-expect-error a job id is a string
  yield* store.reserve({ jobId: 42, sessionFile })
  // @ts-expect-error a Session file is a path
  yield* store.readCurrent({ sessionFile: {} })
  // @ts-expect-error a Session file is a path
  yield* store.readHistory({ sessionFile: 7 })
  // @ts-expect-error a lease is a number of milliseconds
  yield* store.reserve({ jobId, sessionFile, leaseMs: "10 minutes" })
  // @ts-expect-error a native observation is available, missing or unreadable
  yield* store.readCurrent({ sessionFile, native: { availability: "gone" } })
  // @ts-expect-error the issue's example: neither value is what `withJob` takes
  yield* store.withJob({ jobId: 42, sessionFile: {} }, () => Effect.succeed(summary))
  // @ts-expect-error `derive` must produce a receipt
  yield* store.withJob({ jobId, sessionFile }, () => Effect.succeed({ summary: "text" }))
  const outcome = yield* store.withJob({ jobId, sessionFile, leaseMs: 30_000 }, () => Effect.succeed(title))
  return outcome._tag === "Settled" ? outcome.receipt.path : outcome.materializationPath
})

export const effectReservations = Effect.gen(function*() {
  const reservation = yield* store.reserve({ jobId, sessionFile })
  // @ts-expect-error only an acquired reservation can be settled
  yield* store.settle(reservation, summary)
  switch (reservation._tag) {
    case "Duplicate": {
      // @ts-expect-error a Duplicate cannot be settled
      yield* store.settle(reservation, summary)
      const record: SettledReceipt = reservation.record
      return record.path
    }
    case "InFlight": {
      // @ts-expect-error an InFlight reservation cannot be settled
      yield* store.settle(reservation, summary)
      yield* store.release(reservation)
      return reservation.sessionFile
    }
    case "Acquired": {
      // @ts-expect-error an `ok` receipt's status is "ok"
      yield* store.settle(reservation, { ...summary, status: "done" })
      yield* store.settle(reservation, withoutJobId(summary))
      const settled = yield* store.settle(reservation, title)
      return settled.path
    }
  }
})

export const effectReads = Effect.gen(function*() {
  const current = yield* store.readCurrent({ sessionFile })
  // @ts-expect-error the receipt is null unless the read is available
  void current.receipt.status
  if (current.availability === "available") {
    // @ts-expect-error only an `ok` Summary receipt has a summary
    void current.receipt.summary
    const head: Head = current.head
    useSummary(current.receipt)
    if (current.receipt.status === "ok") {
      const text: string = current.receipt.summary
      return `${text} @ ${head.receiptOffset}`
    }
  }
  const page = yield* store.readHistory({ sessionFile, fromOffset: 0, limit: 10 })
  const first: HistoryRecord | undefined = page.records[0]
  if (first !== undefined) {
    // @ts-expect-error a history record may be a Title receipt
    useSummary(first.record)
    if (first.record.type === "rarebit_summary") useSummary(first.record)
  }
  // @ts-expect-error a Title receipt is not a Summary receipt
  useSummary(title)
  return current.diagnostics.reason ?? current.artifactState.syncState
})

export const receiptShapes = () => {
  // @ts-expect-error an `ok` receipt pairs each status with its own reasons
  const wrongPair: OkSummaryReceipt = { ...summary, sessionStatus: "finished", statusReason: "blocker" }
  const rightPair: OkSummaryReceipt = { ...summary, sessionStatus: "needs_attention", statusReason: "blocker" }
  return [wrongPair, rightPair]
}

export async function promiseApi(): Promise<string> {
  // @ts-expect-error a job id is a string
  await reserveRarebitJob({ jobId: 42, sessionFile })
  // @ts-expect-error a Session file is a path
  await readRarebitCurrent({ sessionFile: {} })
  // @ts-expect-error history bounds are numbers
  await readRarebitHistory({ sessionFile, limit: "all" })

  const reservation = await reserveRarebitJob({ jobId, sessionFile, leaseMs: 30_000 })
  // @ts-expect-error only an acquired reservation can be settled
  await settleRarebitJob(reservation, summary)
  if (reservation.duplicate) {
    // @ts-expect-error a duplicate cannot be settled
    await settleRarebitJob(reservation, summary)
    return reservation.record.path
  }
  if (reservation.inFlight) {
    // @ts-expect-error an in-flight reservation cannot be settled
    await settleRarebitJob(reservation, summary)
    await releaseRarebitJob(reservation)
    return reservation.materializationPath
  }
  const settled = await settleRarebitJob(reservation, withoutJobId(summary))
  await releaseRarebitJob(reservation)

  const current = await readRarebitCurrent({ sessionFile })
  // @ts-expect-error the receipt is null unless the read is available
  void current.receipt.jobId
  if (current.availability === "available" && current.receipt.status === "ok") return current.receipt.summary
  return settled.path
}
