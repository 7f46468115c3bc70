/**
 * Many-Session polling: `readRarebitCurrent` round-robin over 1,000 and
 * 10,000 idle Sessions (each with a current sidecar), in a fresh polling
 * process per side and round (`PollProbe`), the side going first
 * alternating. Three rows per count: the mean time per read of a sweep over
 * all Sessions (after one untimed sweep), the peak RSS of the polling
 * process, and the longest its event loop was held at once. Over 1,000, each round also polls with ours keeping no cached
 * state (`RAREBIT_STORE_CACHE_MAX_BYTES=0`), for a third row that tells
 * what the caches cost from what the rest does.
 *
 * The Sessions are distinct synthetic Pi Sessions (their own seeds) of
 * 4–64 KiB targets (a turn more than the target, so ~15–110 KiB), in 100
 * directories, last written long ago; each sidecar holds three receipts
 * current for its Session. Generated once under `.bench-data/fixtures`
 * (the native observations by the reference, ~1 minute for 10,000).
 *
 * @since 0.1.0
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { jobIdOf, receiptAndHead, SESSION_ID, sessionWriter, summaryReceipt } from "./Fixtures.js"
import type { BenchContext, BenchGroup } from "./Groups.js"
import { runChild } from "./Harness.js"
import { loadReferenceSession, loadStore, type Side } from "./Implementations.js"
import type { MeasuredRow } from "./MeasuredTable.js"
import { formatValue } from "./MeasuredTable.js"
import type { HeapGenerations } from "./PeakMemory.js"
import { machineNote, quantile, ratioSummaryOf, type RoundPlan, runRounds, spreadOf } from "./Stats.js"

const FIXTURE_VERSION = 1
const KiB = 1024
const TARGET_KIB = [4, 8, 12, 16, 24, 32, 48, 64]
const RECEIPTS = 3
/** Long before any run: the Sessions are idle. */
const WRITTEN_AT = Date.UTC(2026, 0, 1) / 1000

interface ManySessions {
  readonly sessionRoot: string
  readonly rarebitRoot: string
  readonly listFile: string
  readonly bytes: number
}

/** `count` Sessions with current sidecars (reused while the stamp matches). */
export const writeManySessions = async (fixtures: string, count: number): Promise<ManySessions> => {
  const dir = join(fixtures, `many-sessions-${count}`)
  const stampFile = join(dir, "complete.json")
  const key = { version: FIXTURE_VERSION, count, targets: TARGET_KIB, receipts: RECEIPTS }
  const layout = {
    sessionRoot: join(dir, "sessions"),
    rarebitRoot: join(dir, "rarebit"),
    listFile: join(dir, "sessions.json")
  }
  if (existsSync(stampFile)) {
    const stamp = JSON.parse(readFileSync(stampFile, "utf8")) as { key: unknown; bytes: number }
    if (JSON.stringify(stamp.key) === JSON.stringify(key)) return { ...layout, bytes: stamp.bytes }
  }
  rmSync(dir, { recursive: true, force: true })
  const building = join(dir, "building")
  const readSession = (await loadReferenceSession()).readRarebitSession
  const sessions: Array<string> = []
  let bytes = 0
  for (let index = 0; index < count; index++) {
    const relative = join(`--project-${index % 100}--`, `session-${index}.jsonl`)
    const sessionFile = join(building, "sessions", relative)
    if (index < 100) mkdirSync(join(building, "sessions", `--project-${index % 100}--`), { recursive: true })
    const writer = sessionWriter(1000 + index, SESSION_ID)
    const lines = writer.preamble()
    let length = 0
    while (length < TARGET_KIB[index % TARGET_KIB.length] * KiB) {
      for (const line of writer.turn()) {
        lines.push(line)
        length += Buffer.byteLength(line) + 1
      }
    }
    writeFileSync(sessionFile, `${lines.join("\n")}\n`)
    bytes += statSync(sessionFile).size
    const session = await readSession(sessionFile, { sessionRoot: join(building, "sessions") })
    const parts: Array<Uint8Array> = []
    let offset = 0
    for (let receipt = 0; receipt < RECEIPTS; receipt++) {
      const { headLine, receiptLine } = receiptAndHead(
        summaryReceipt({
          jobId: jobIdOf(`poll-${index}`, receipt),
          sessionId: SESSION_ID,
          manifestHash: session.selection.manifestHash,
          occurrenceCount: session.selection.occurrences.length,
          observedAt: new Date(Date.UTC(2026, 0, 1) + receipt * 1000).toISOString()
        }),
        SESSION_ID,
        offset
      )
      parts.push(receiptLine, headLine)
      offset += receiptLine.byteLength + headLine.byteLength
    }
    const sidecar = join(building, "rarebit", "materializations-v4", relative)
    if (index < 100) {
      mkdirSync(join(building, "rarebit", "materializations-v4", `--project-${index % 100}--`), { recursive: true })
    }
    writeFileSync(sidecar, Buffer.concat(parts))
    utimesSync(sessionFile, WRITTEN_AT, WRITTEN_AT)
    utimesSync(sidecar, WRITTEN_AT, WRITTEN_AT)
    sessions.push(join(layout.sessionRoot, relative))
  }
  writeFileSync(join(building, "sessions.json"), JSON.stringify(sessions))
  renameSync(building, dir + "-done")
  rmSync(dir, { recursive: true, force: true })
  renameSync(dir + "-done", dir)
  writeFileSync(stampFile, JSON.stringify({ key, bytes }))
  return { ...layout, bytes }
}

interface PollResult {
  readonly msPerRead: Array<number>
  readonly loadedRssMiB: number
  readonly rssMiB: number
  readonly peakRssMiB: number
  readonly longestLoopDelayMs: number
  readonly heapAfterSweeps: HeapGenerations
}

const pollingRows = async (context: BenchContext): Promise<ReadonlyArray<MeasuredRow>> => {
  const counts = [1_000, 10_000]
  context.log(`polling: generating or reusing ${Math.max(...counts).toLocaleString("en")} Sessions`)
  const fixture = await writeManySessions(context.fixtures, Math.max(...counts))
  const list = JSON.parse(readFileSync(fixture.listFile, "utf8")) as Array<string>
  // Both implementations must report the same state for these Sessions.
  const [ours, reference] = [await loadStore("ours"), await loadStore("reference")]
  for (const sessionFile of list.slice(0, 16)) {
    const options = { sessionFile, sessionRoot: fixture.sessionRoot, rarebitRoot: fixture.rarebitRoot }
    const [mine, theirs] = [await ours.readRarebitCurrent(options), await reference.readRarebitCurrent(options)]
    if (JSON.stringify(mine.artifactState) !== JSON.stringify(theirs.artifactState)) {
      throw new Error(`polling fixture ${sessionFile}: the two sides report different states`)
    }
  }
  const rows: Array<MeasuredRow> = []
  for (const count of counts) {
    const large = count > 1_000
    context.log(`polling: ${count.toLocaleString("en")} Sessions round-robin`)
    // Quick runs time the first sweep over 10,000 (no untimed one before it).
    const sweeps = large ? { warm: context.quick ? 0 : 1, timed: 1 } : { warm: 1, timed: context.quick ? 1 : 2 }
    const plan: RoundPlan = context.quick
      ? { minRounds: large ? 1 : 2, maxRounds: large ? 1 : 2, tolerance: 0 }
      : large
      ? { minRounds: 4, maxRounds: 6, tolerance: 0.05, budgetMs: 150_000 }
      : { minRounds: 6, maxRounds: 30, tolerance: 0.05, budgetMs: 180_000 }
    const poll = async (side: Side, env?: Readonly<Record<string, string>>) =>
      (await runChild("PollProbe.js", [side, JSON.stringify({ ...fixture, count, ...sweeps })], env)) as PollResult
    // Over 1,000, ours also runs with no cached state, between the two sides:
    // what its caches cost, apart from what loading it does.
    const probes: ReadonlyArray<Probe> = large ? ["ours", "reference"] : ["ours", "uncached", "reference"]
    const rounds = await runRounds<Record<Probe, PollResult>>(plan, async (_, oursFirst) => {
      const result = {} as Record<Probe, PollResult>
      for (const probe of oursFirst ? probes : [...probes].reverse()) {
        result[probe] = probe === "uncached" ? await poll("ours", UNCACHED) : await poll(probe)
      }
      return { ours: result.ours.msPerRead, theirs: result.reference.msPerRead, extra: result }
    })
    const results = rounds.extras
    const pair = (pick: (result: PollResult) => number) =>
      `${formatValue(quantile(results.map((result) => pick(result.ours)), 0.5))}/${
        formatValue(quantile(results.map((result) => pick(result.reference)), 0.5))
      }`
    const what = `${count.toLocaleString("en")} idle Sessions (${
      (fixture.bytes * count / list.length / 1024 / 1024).toFixed(0)
    } MiB) round-robin`
    rows.push({
      group: "polling",
      benchmark: `current, ${what}: time per read`,
      unit: "ms",
      ours: rounds.ours,
      theirs: rounds.theirs,
      ratio: rounds.ratio,
      samples: rounds.samples,
      target: large ? undefined : { ratioAtMost: 0.3 },
      note:
        `mean of a sweep over every Session, ${sweeps.timed} timed after ${sweeps.warm} untimed, fresh process per side and round; ${
          machineNote(rounds)
        }`
    })
    /** One figure of each round's two polling processes: each side's spread, and the ratio of the rounds. */
    const bothSides = (pick: (result: PollResult) => number) => ({
      ours: spreadOf(results.map((result) => pick(result.ours))),
      theirs: spreadOf(results.map((result) => pick(result.reference))),
      ratio: ratioSummaryOf(results.map((result) => pick(result.ours) / pick(result.reference)), rounds.ratio.stoppedBy)
    })
    rows.push({
      group: "polling",
      benchmark: `current, ${what}: peak RSS of the polling process`,
      unit: "MiB",
      ...bothSides((result) => result.peakRssMiB),
      // Revised in issue 29 so that the caches can keep plain objects: 1.10 over 1,000, 1.5 over 10,000.
      target: { ratioAtMost: large ? 1.5 : 1.1 },
      note: `RSS once loaded ${pair((result) => result.loadedRssMiB)}, after the sweeps ${
        pair((result) => result.rssMiB)
      } MiB o/r; V8 heap after the sweeps: young generation ${
        pair((result) => result.heapAfterSweeps.youngMiB)
      }, old generation ${pair((result) => result.heapAfterSweeps.oldMiB)} MiB o/r`
    })
    rows.push({
      group: "polling",
      benchmark: `current, ${what}: longest event-loop delay of the polling process`,
      unit: "ms",
      ...bothSides((result) => result.longestLoopDelayMs),
      target: large ? undefined : { oursAtMost: LOOP_DELAY_TARGET_MS },
      note:
        "the most the process's event loop was held at once over the timed sweeps (Node's monitorEventLoopDelay, a 1 ms timer: the longest time between two turns): what a timer, a socket or one of V8's tasks could wait"
    })
    if (!large) {
      const uncached = results.map((result) => result.uncached)
      const median = (values: ReadonlyArray<number>) => formatValue(quantile(values, 0.5))
      rows.push({
        group: "polling",
        benchmark: `current, ${what}: peak RSS with no cached state (ours with RAREBIT_STORE_CACHE_MAX_BYTES=0)`,
        unit: "MiB",
        ours: spreadOf(uncached.map((result) => result.peakRssMiB)),
        theirs: spreadOf(results.map((result) => result.reference.peakRssMiB)),
        ratio: ratioSummaryOf(
          results.map((result) => result.uncached.peakRssMiB / result.reference.peakRssMiB),
          rounds.ratio.stoppedBy
        ),
        note:
          `diagnostic, no target: the same rounds, ours keeping nothing between reads, against the reference; ours with its caches ${
            median(results.map((result) => result.ours.peakRssMiB))
          } MiB; uncached RSS once loaded ${median(uncached.map((result) => result.loadedRssMiB))} MiB, ${
            median(uncached.map((result) => result.msPerRead.at(-1)!))
          } ms per read`
      })
    }
  }
  return rows
}

/**
 * How long a polling process may hold its event loop at once: a server
 * polling its Sessions must still answer its other requests. Ours lets the
 * loop turn before every call (`promise/Runtime`); the margin is for a
 * loaded machine's scheduling and collections.
 */
const LOOP_DELAY_TARGET_MS = 20

/** What each round runs: the two sides, and ours keeping no cached state. */
type Probe = Side | "uncached"

const UNCACHED = { RAREBIT_STORE_CACHE_MAX_BYTES: "0" }

export const pollingGroup: BenchGroup = {
  name: "polling",
  summary: "readRarebitCurrent round-robin over 1,000 and 10,000 Sessions: time per read and RSS, a process per side",
  run: pollingRows
}
