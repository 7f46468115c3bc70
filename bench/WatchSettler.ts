/**
 * The writing side of the watch benchmark, in a process of its own: on each
 * `settle <n>` line on stdin it reserves and settles job `n` with our plain
 * API and prints `{"at"}`, the moment (`process.hrtime`, nanoseconds) the
 * settle's receipt-and-head write returned: from then on a reader can see
 * the new head. Node's `fs.writeSync`, which the direct file system appends
 * with, is wrapped before the store loads to catch that moment.
 *
 * Each receipt is observed a second later than the one before, so it is the
 * Session's current summary and the settle moves the head; a settle that
 * did not is an error.
 *
 * Usage: WatchSettler.js <sessionRoot> <rarebitRoot> <sessionFile> <series> <selectionFile>
 * (`selectionFile`: `{ sessionId, manifestHash, occurrenceCount }` of the Session)
 *
 * @since 0.1.0
 */
import fs from "node:fs"
import { syncBuiltinESMExports } from "node:module"
import { createInterface } from "node:readline"

let headWrittenAt: bigint | undefined
const writeSync = fs.writeSync as (...args: Array<unknown>) => number
;(fs as { writeSync: unknown }).writeSync = (...args: Array<unknown>) => {
  const written = writeSync(...args)
  const buffer = args[1]
  if (
    buffer instanceof Uint8Array &&
    Buffer.from(buffer.buffer, buffer.byteOffset, buffer.byteLength).includes("\"rarebit_head\"")
  ) {
    headWrittenAt = process.hrtime.bigint()
  }
  return written
}
syncBuiltinESMExports()

const { jobIdOf, summaryReceipt } = await import("./Fixtures.js")
const { loadStore } = await import("./Implementations.js")
const [sessionRoot, rarebitRoot, sessionFile, series, selectionFile] = process.argv.slice(2)
const store = await loadStore("ours")
const selection = JSON.parse(fs.readFileSync(selectionFile, "utf8")) as {
  readonly sessionId: string
  readonly manifestHash: string
  readonly occurrenceCount: number
}
const location = { sessionRoot, rarebitRoot, sessionFile }

process.stdout.write(`${JSON.stringify({ ready: true })}\n`)
const lines = createInterface({ input: process.stdin })
for await (const line of lines) {
  const [command, argument] = line.split(" ")
  if (command !== "settle") break
  const n = Number(argument)
  const reservation = await store.reserveRarebitJob({ ...location, jobId: jobIdOf(series, n) })
  if (!reservation.acquired) throw new Error(`job ${series}:${n} was not acquired`)
  const observedAt = new Date(Date.UTC(2026, 0, 1) + n * 1000).toISOString()
  const receipt = summaryReceipt({ ...selection, jobId: jobIdOf(series, n), observedAt })
  headWrittenAt = undefined
  const settled = await store.settleRarebitJob(reservation, receipt)
  const at = headWrittenAt as bigint | undefined
  if (at === undefined) throw new Error("the settle wrote no head")
  const current = await store.readRarebitCurrent(location)
  if (current.receipt?.jobId !== settled.jobId) throw new Error(`settle ${n} did not move the head`)
  process.stdout.write(`${JSON.stringify({ at: String(at) })}\n`)
}
lines.close()
