/**
 * Diagnostics of V8's old generation, without a target: what a process
 * using the Promise API leaves there for a full collection to free, ours
 * against the reference's store module, each side in a process of its own
 * started with `--expose-gc` and the smallest young generation V8 allows
 * (1 MiB semi-spaces), so young collections are as frequent as they can be
 * and most operations span one.
 *
 * - reading Sessions the cache has not seen (a dashboard's first sweep):
 *   300 small Sessions at rest, each read once;
 * - reserve → settle cycles on one Session (a long-lived writer): 150
 *   cycles after 20 to warm up;
 * - importing the Promise API from its code cache: the memory the import
 *   adds outside the heap and to its large-object space (where a string
 *   the size of the bundle's text goes), after a young collection.
 *
 * The first two in MiB per 1,000 operations. A rise here, with the peak-RSS rows
 * of `polling`, `session-memory` and `writers` unchanged, is V8's business;
 * with them, it is where to look first (a generator function made per call
 * was such a leak: its hidden class, old from the start, kept each call's
 * arguments alive through young collections). These were tests once; V8's
 * promotion heuristics are not this package's contract, so they are
 * reported, not asserted.
 *
 * @since 0.1.0
 */
import { execFile } from "node:child_process"
import { copyFileSync, mkdirSync, utimesSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { SESSION_ID, summaryReceipt, writeSession } from "./Fixtures.js"
import type { BenchContext, BenchGroup } from "./Groups.js"
import type { MeasuredRow } from "./MeasuredTable.js"
import { nativeOf } from "./SessionFixtures.js"
import { ratioSummaryOf, spreadOf } from "./Stats.js"

const MiB = 1024 * 1024

/** Prints the old generation's growth over the reads that a full collection then frees, per read. */
const MISS_CHILD = `
import v8 from "node:v8"
const [api, sessionRoot, rarebitRoot, ...files] = process.argv.slice(1)
const { readRarebitCurrent } = await import(api)
const oldUsed = () => v8.getHeapSpaceStatistics().find((space) => space.space_name === "old_space").space_used_size
const read = (sessionFile) => readRarebitCurrent({ sessionFile, sessionRoot, rarebitRoot })
await read(files[0])
globalThis.gc()
const before = oldUsed()
for (const file of files.slice(1)) await read(file)
const grown = oldUsed()
globalThis.gc()
process.stdout.write(JSON.stringify({ garbage: (grown - oldUsed()) / (files.length - 1) }))
`

/** Prints the same for reserve → settle cycles on one Session, per cycle. */
const SETTLE_CHILD = `
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
process.stdout.write(JSON.stringify({ garbage: (grown - oldUsed()) / CYCLES }))
`

/** Prints the external and large-object memory the import adds, once a young collection freed what it dropped. */
const IMPORT_CHILD = `
import v8 from "node:v8"
const [api] = process.argv.slice(1)
const large = () => v8.getHeapSpaceStatistics().find((space) => space.space_name === "large_object_space").space_used_size
const before = process.memoryUsage().external + large()
await import(api)
globalThis.gc({ type: "minor" })
process.stdout.write(JSON.stringify({ garbage: process.memoryUsage().external + large() - before }))
`

type Side = "ours" | "reference"

/** Runs `script` on one side's store module; the bytes per operation it printed. */
const garbageOf = (
  context: BenchContext,
  side: Side,
  script: string,
  args: ReadonlyArray<string>,
  codeCache: string = "off"
) => {
  const api = side === "ours"
    ? join(context.root, "dist", "promise", "index.js")
    : join(context.root, "node_modules/@hypercarrier/rarebit/src/rarebit-store.mjs")
  const flags = ["--expose-gc", "--min-semi-space-size=1", "--max-semi-space-size=1", "--input-type=module"]
  return new Promise<number>((resolve, reject) =>
    execFile(
      process.execPath,
      [...flags, "--eval", script, pathToFileURL(api).href, ...args],
      { env: { ...process.env, RAREBIT_STORE_CODE_CACHE: codeCache } },
      (error, stdout, stderr) =>
        error === null ? resolve((JSON.parse(stdout) as { garbage: number }).garbage) : reject(new Error(stderr))
    )
  )
}

/** `rounds` processes a side, alternating which goes first; a row in MiB per 1,000 operations. */
const rowOf = async (
  context: BenchContext,
  benchmark: string,
  rounds: number,
  run: (side: Side, round: number) => Promise<number>,
  perThousand: boolean = true
): Promise<MeasuredRow> => {
  const ours: Array<number> = []
  const theirs: Array<number> = []
  for (let round = 0; round < rounds; round++) {
    for (const side of round % 2 === 0 ? (["ours", "reference"] as const) : (["reference", "ours"] as const)) {
      const bytes = await run(side, round)
      ;(side === "ours" ? ours : theirs).push((perThousand ? bytes * 1000 : bytes) / MiB)
    }
  }
  context.log(`heap: ${benchmark}`)
  const ratios = ours.map((value, index) => value / theirs[index])
  return {
    group: "heap",
    benchmark,
    unit: "MiB",
    ours: spreadOf(ours),
    theirs: spreadOf(theirs),
    ratio: ratioSummaryOf(ratios, "max rounds"),
    samples: { ours, theirs, ratios },
    note: perThousand
      ? "diagnostic, no target: old-generation garbage per 1,000 operations (1 MiB semi-spaces)"
      : "diagnostic, no target"
  }
}

const heapRows = async (context: BenchContext): Promise<ReadonlyArray<MeasuredRow>> => {
  const rounds = context.quick ? 1 : 3
  const dir = join(context.work, "heap")
  const sessionRoot = join(dir, "sessions")
  mkdirSync(join(sessionRoot, "--project--"), { recursive: true })
  // Small Sessions at rest, last written long ago, as the ones a dashboard polls mostly are.
  const small = join(context.fixtures, "sessions", "session-8KiB.jsonl")
  writeSession(small, 8 * 1024)
  const longAgo = new Date("2026-01-01T00:00:00.000Z")
  const sessions = Array.from({ length: 300 }, (_, index) => {
    const file = join(sessionRoot, "--project--", `session-${index}.jsonl`)
    copyFileSync(small, file)
    utimesSync(file, longAgo, longAgo)
    return file
  })
  const miss = await rowOf(
    context,
    "reading 300 Sessions the cache has not seen: old-generation garbage per 1,000 reads",
    rounds,
    (side, round) =>
      garbageOf(context, side, MISS_CHILD, [sessionRoot, join(dir, `rarebit-miss-${side}-${round}`), ...sessions])
  )

  const base = join(context.fixtures, "sessions", "session-100KiB.jsonl")
  writeSession(base, 100 * 1024)
  const native = await nativeOf(base, join(context.fixtures, "sessions"))
  const sessionFile = join(sessionRoot, "settled.jsonl")
  copyFileSync(base, sessionFile)
  const receiptFile = join(dir, "receipt.json")
  writeFileSync(
    receiptFile,
    JSON.stringify(summaryReceipt({
      jobId: "0".repeat(64),
      sessionId: SESSION_ID,
      manifestHash: native.manifestHash,
      occurrenceCount: native.occurrenceCount
    }))
  )
  const settle = await rowOf(
    context,
    "reserve → settle, 150 cycles on one Session: old-generation garbage per 1,000 cycles",
    rounds,
    (side, round) =>
      garbageOf(context, side, SETTLE_CHILD, [
        sessionFile,
        sessionRoot,
        join(dir, `rarebit-settle-${side}-${round}`),
        receiptFile
      ])
  )
  const codeCache = join(dir, "code-cache")
  mkdirSync(codeCache, { recursive: true, mode: 0o700 })
  // Untimed: writes our code cache, which the rounds then start from.
  await garbageOf(context, "ours", IMPORT_CHILD, [], codeCache)
  const load = await rowOf(
    context,
    "importing the Promise API: external and large-object memory it keeps",
    rounds,
    (side) => garbageOf(context, side, IMPORT_CHILD, [], codeCache),
    false
  )
  return [miss, settle, load]
}

export const heapGroup: BenchGroup = {
  name: "heap",
  summary: "diagnostics, no target: old-generation garbage of cache misses and of settles, ours and the reference's",
  run: heapRows
}
