/**
 * One writer process of the settle and writers rows: loads an
 * implementation (after `LockTrace`, which records its commit-lock
 * intervals), warms it up with a few cycles on a private sidecar, prints
 * `ready`, then answers each request line `{ sessionFile, series, count }`
 * by running `count` reserve → settle → release cycles on that Session, one
 * after another, and printing one JSON line: when it started and ended
 * (`monotonicMs`), each cycle's three phases, its CPU time and fsync calls
 * over the request, and the commit-lock intervals it saw. Exits when stdin closes.
 *
 * Usage: WriterWorker.js <ours|reference> <sessionRoot> <rarebitRoot> <receiptFile> <warmSessionFile> <name>
 *
 * @since 0.1.0
 */
import { readFileSync } from "node:fs"
import { createInterface } from "node:readline"
// First: it wraps Node's file functions before either implementation loads.
import { type LockInterval, lockIntervals, monotonicMs, syncCalls } from "./LockTrace.js"

const { jobIdOf } = await import("./Fixtures.js")
const { loadStore } = await import("./Implementations.js")

const [side, sessionRoot, rarebitRoot, receiptFile, warmSessionFile, name] = process.argv.slice(2)
const store = await loadStore(side as "ours" | "reference")
const receipt = JSON.parse(readFileSync(receiptFile, "utf8")) as Record<string, unknown>

export interface CycleTimes {
  readonly reserveMs: number
  readonly settleMs: number
  readonly releaseMs: number
}

export interface WriterReply {
  readonly startedAt: number
  readonly endedAt: number
  readonly cycles: ReadonlyArray<CycleTimes>
  readonly cpuMs: number
  /** fsync/fdatasync calls over the request. */
  readonly syncs: number
  readonly locks: ReadonlyArray<LockInterval>
}

const cycle = async (location: Record<string, unknown>, jobId: string): Promise<CycleTimes> => {
  const start = performance.now()
  const reservation = await store.reserveRarebitJob({ ...location, jobId })
  if (!reservation.acquired) throw new Error(`job ${jobId} was not acquired`)
  const reserved = performance.now()
  await store.settleRarebitJob(reservation, receipt)
  const settled = performance.now()
  await store.releaseRarebitJob(reservation)
  return { reserveMs: reserved - start, settleMs: settled - reserved, releaseMs: performance.now() - settled }
}

// A few cycles on a private sidecar first, so what is timed is not JIT warm-up.
const warm = { sessionRoot, rarebitRoot: `${rarebitRoot}-warm-${name}`, sessionFile: warmSessionFile }
for (let index = 0; index < 4; index++) await cycle(warm, jobIdOf(`warm-${name}`, index))
lockIntervals.length = 0
process.stdout.write("ready\n")

for await (const line of createInterface({ input: process.stdin })) {
  const request = JSON.parse(line) as { sessionFile: string; series: string; count: number }
  const location = { sessionRoot, rarebitRoot, sessionFile: request.sessionFile }
  lockIntervals.length = 0
  syncCalls.count = 0
  const cpu = process.cpuUsage()
  const startedAt = monotonicMs()
  const cycles: Array<CycleTimes> = []
  for (let index = 0; index < request.count; index++) cycles.push(await cycle(location, jobIdOf(request.series, index)))
  const endedAt = monotonicMs()
  const used = process.cpuUsage(cpu)
  const reply: WriterReply = {
    startedAt,
    endedAt,
    cycles,
    cpuMs: (used.user + used.system) / 1000,
    syncs: syncCalls.count,
    locks: [...lockIntervals]
  }
  process.stdout.write(`${JSON.stringify(reply)}\n`)
}
