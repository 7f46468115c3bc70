/**
 * One process of the multi-process contention benchmark: loads an
 * implementation, says "ready", waits for "go" on stdin, then reserves and
 * settles `count` distinct jobs on the shared Session and prints "done"; the
 * parent times from "go" to that line. Before "ready" it settles one job on
 * a private sidecar, so the timed part measures contention rather than JIT
 * warm-up.
 *
 * Usage: Worker.js <ours|reference> <sessionRoot> <rarebitRoot> <sessionFile> <series> <count> <receiptFile>
 *
 * @since 0.1.0
 */
import { readFileSync } from "node:fs"
import { createInterface } from "node:readline"
import { jobIdOf } from "./Fixtures.js"
import { loadStore, type Side } from "./Implementations.js"

const [side, sessionRoot, rarebitRoot, sessionFile, series, count, receiptFile] = process.argv.slice(2)
const store = await loadStore(side as Side)
const receipt = JSON.parse(readFileSync(receiptFile, "utf8")) as Record<string, unknown>
const location = { sessionRoot, rarebitRoot, sessionFile }

// One settle on a private sidecar first, so what is timed is contention, not JIT warm-up.
const warm = { ...location, rarebitRoot: `${rarebitRoot}-warm-${series}` }
const warmReservation = await store.reserveRarebitJob({ ...warm, jobId: jobIdOf(`${series}-warm`, 0) })
await store.settleRarebitJob(warmReservation, receipt)

process.stdout.write("ready\n")
await new Promise<void>((resolve) => {
  const lines = createInterface({ input: process.stdin })
  lines.once("line", () => {
    lines.close()
    resolve()
  })
})

for (let index = 0; index < Number(count); index++) {
  const reservation = await store.reserveRarebitJob({ ...location, jobId: jobIdOf(series, index) })
  if (!reservation.acquired) throw new Error(`job ${series}:${index} was not acquired`)
  await store.settleRarebitJob(reservation, receipt)
}
process.stdout.write("done\n")
