/**
 * What one reserve → settle cycle leaves behind in the old generation, in a
 * process of its own settling through the Promise API
 * (`dist/promise/index.js`), as a long-lived writer does job after job.
 *
 * What must hold: the writer's steps (reservation, settlement, the commit
 * lock, claims, the private directories) make their generator functions
 * once (`Effect.fnUntraced`). One made per call
 * (`(…) => Effect.gen(function*() { … })`) has a prototype and a hidden
 * class of its own; the hidden class, in the old generation from the start,
 * keeps the function and the call's arguments reachable through every young
 * collection, so a cycle's paths, stats, claims and receipts are promoted
 * and stay until a full collection: ~21 KB a cycle against ~14.5 KB with the
 * functions made once (what is left: what is alive across the cycle's
 * file-system calls, and the generators still built inside a step's body).
 *
 * Measured as the old generation's growth over the cycles that a full
 * collection then frees, with young collections as frequent as they can be
 * (1 MiB semi-spaces).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { writeFile } from "node:fs/promises"
import { join } from "node:path"
import { runPromiseChild } from "../support/PromiseChild.js"
import { entry, makeRoots, type Roots, summaryReceipt, writeSession } from "../support/Reference.js"

const MAX_GARBAGE_BYTES_PER_CYCLE = 17_500

let roots: Roots
let receiptFile = ""

/** The child: settles job after job on one Session, then reports what a full collection freed, per cycle. */
const CHILD = `
import v8 from "node:v8"
import { readFileSync } from "node:fs"
const [api, sessionFile, sessionRoot, rarebitRoot, receiptFile] = process.argv.slice(1)
const { reserveRarebitJob, settleRarebitJob } = await import(api)
const receipt = JSON.parse(readFileSync(receiptFile, "utf8"))
const oldUsed = () => v8.getHeapSpaceStatistics().find((space) => space.space_name === "old_space").space_used_size
const cycle = async (n) => {
  const jobId = n.toString(16).padStart(64, "0")
  const reservation = await reserveRarebitJob({ sessionFile, sessionRoot, rarebitRoot, jobId })
  if (!reservation.acquired) throw new Error("job " + n + " was not acquired")
  await settleRarebitJob(reservation, receipt)
}
const WARM = 20
const CYCLES = 150
for (let n = 1; n <= WARM; n++) await cycle(n)
globalThis.gc()
const before = oldUsed()
for (let n = WARM + 1; n <= WARM + CYCLES; n++) await cycle(n)
const grown = oldUsed()
globalThis.gc()
const kept = oldUsed()
process.stdout.write(JSON.stringify({ garbagePerCycle: (grown - kept) / CYCLES, keptPerCycle: (kept - before) / CYCLES }))
`

interface Promotion {
  /** Bytes a cycle left in the old generation that a full collection freed. */
  readonly garbagePerCycle: number
  /** Bytes a cycle added to what the old generation keeps. */
  readonly keptPerCycle: number
}

const settleMany = (): Promise<Promotion> =>
  runPromiseChild<Promotion>({
    script: CHILD,
    nodeFlags: ["--expose-gc", "--min-semi-space-size=1", "--max-semi-space-size=1"],
    args: [roots.sessionFile, roots.sessionRoot, roots.rarebitRoot, receiptFile],
    codeCache: "off"
  })

beforeAll(async () => {
  roots = await makeRoots("rarebit-settle-promotion-")
  const branch = [entry("u1", "user", "question"), entry("a1", "assistant", "answer")]
  await writeSession(roots.sessionFile, "settle-promotion-session", branch)
  receiptFile = join(roots.root, "receipt.json")
  await writeFile(receiptFile, JSON.stringify(summaryReceipt(branch, "settle-promotion-session")))
})

afterAll(async () => {
  await roots?.cleanup()
})

describe("settling job after job in one process", () => {
  it("promotes little that outlives its cycle", async () => {
    const promotion = await settleMany()
    assert.isBelow(promotion.garbagePerCycle, MAX_GARBAGE_BYTES_PER_CYCLE)
  }, 120_000)
})
