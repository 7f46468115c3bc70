/**
 * How long settle holds the commit lock, measured from outside the code
 * under test: before either implementation is loaded, `LockTrace` wraps
 * Node's own `fs` functions so that the moment a `*.commit-lock` file comes
 * into existence (our hard link, the reference's exclusive open) and the
 * moment its removal completes are recorded. Both implementations then
 * settle jobs one after another, with no contention.
 *
 * Usage: LockProbe.js <ours|reference> <sessionRoot> <rarebitRoot> <sessionFile> <series> <count> <receiptFile>
 * Prints `{ holdMs: [...], settleMs: [...] }`.
 *
 * @since 0.1.0
 */
import fs from "node:fs"
// First: it wraps Node's file functions before either implementation loads.
import { lockIntervals } from "./LockTrace.js"

const { jobIdOf } = await import("./Fixtures.js")
const { loadStore } = await import("./Implementations.js")
const [side, sessionRoot, rarebitRoot, sessionFile, series, count, receiptFile] = process.argv.slice(2)
const store = await loadStore(side as "ours" | "reference")
const receipt = JSON.parse(fs.readFileSync(receiptFile, "utf8")) as Record<string, unknown>
const location = { sessionRoot, rarebitRoot, sessionFile }

const settles: Array<number> = []
const settleHolds: Array<number> = []
for (let index = 0; index < Number(count); index++) {
  const reservation = await store.reserveRarebitJob({ ...location, jobId: jobIdOf(series, index) })
  lockIntervals.length = 0
  const start = performance.now()
  await store.settleRarebitJob(reservation, receipt)
  settles.push(performance.now() - start)
  if (lockIntervals.length !== 1) throw new Error(`expected one lock hold in settle, saw ${lockIntervals.length}`)
  settleHolds.push(lockIntervals[0].releasedAt - lockIntervals[0].acquiredAt)
}
process.stdout.write(`${JSON.stringify({ holdMs: settleHolds, settleMs: settles })}\n`)
