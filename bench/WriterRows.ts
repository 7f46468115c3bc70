/**
 * The write-side rows of issue 15, each side in its own processes
 * (`WriterWorker`), warmed up before anything is timed:
 *
 * - `settle`: reserve → settle → release one after another in one process.
 *   One worker per side; a round is four cycles on each side, alternating
 *   one by one in ABBA order, so the fsync latency of a moment falls on
 *   both sides.
 * - `writers`: 1, 4 and 8 writer processes, all on one shared Session's
 *   sidecar (they queue on its commit lock) or each on its own Session, with
 *   the machine as it is ("no added load") and with `BackgroundLoad` busy loops
 *   ("loaded"). A round is one batch per side: every worker of the side runs
 *   its cycles at once; the batch's wall time runs from the first worker's
 *   start to the last one's end. Reported per cycle (wall ÷ cycles), so the
 *   counts compare; the note gives CPU per cycle, and for the shared sidecar
 *   how long the lock stood idle between one holder's release and the next
 *   one's acquisition, and how long it was held.
 *
 * The workers of both sides stay alive through the group (idle ones wait on
 * stdin), and every count uses the first workers of its side's pool.
 *
 * @since 0.1.0
 */
import { copyFileSync, mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { type BackgroundLoad, startLoad } from "./BackgroundLoad.js"
import { SESSION_ID, summaryReceipt, writeSession } from "./Fixtures.js"
import type { BenchContext, BenchGroup } from "./Groups.js"
import type { Side } from "./Implementations.js"
import type { MeasuredRow } from "./MeasuredTable.js"
import { formatValue } from "./MeasuredTable.js"
import { LineChild } from "./Processes.js"
import { nativeOf } from "./SessionFixtures.js"
import { machineNote, quantile, type RoundPlan, runRounds } from "./Stats.js"
import type { WriterReply } from "./WriterWorker.js"

const KiB = 1024
const SIDES: ReadonlyArray<Side> = ["ours", "reference"]

/** Sessions, receipt and a pool of writers per side, in the run directory. */
const prepare = async (context: BenchContext, name: string, workers: number) => {
  const fixtureRoot = join(context.fixtures, "sessions")
  const base = join(fixtureRoot, "session-100KiB.jsonl")
  writeSession(base, 100 * KiB)
  const native = await nativeOf(base, fixtureRoot)
  const dir = join(context.work, name)
  const sessionRoot = join(dir, "sessions")
  mkdirSync(sessionRoot, { recursive: true })
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
  const shared = join(sessionRoot, "shared.jsonl")
  copyFileSync(base, shared)
  const own = Array.from({ length: workers }, (_, index) => {
    const file = join(sessionRoot, `writer-${index}.jsonl`)
    copyFileSync(base, file)
    return file
  })
  const rarebitRootOf = (side: Side) => join(dir, `rarebit-${side}`)
  const spawnPool = (side: Side) =>
    own.map((file, index) =>
      new LineChild("WriterWorker.js", [side, sessionRoot, rarebitRootOf(side), receiptFile, file, `${side}-${index}`])
    )
  // One side's pool after the other, so their warm-ups do not overlap.
  const pools = {} as Record<Side, Array<LineChild>>
  for (const side of SIDES) {
    pools[side] = spawnPool(side)
    await Promise.all(pools[side].map((worker) => worker.ready()))
  }
  const sidecarOf = (side: Side, sessionFile: string) =>
    join(rarebitRootOf(side), "materializations-v4", sessionFile.slice(sessionRoot.length + 1))
  return {
    shared,
    own,
    pools,
    sidecarOf,
    close: () => Promise.all(SIDES.flatMap((side) => pools[side].map((worker) => worker.close())))
  }
}

let series = 0

interface Batch {
  readonly wallMs: number
  readonly cycles: number
  readonly cpuMs: number
  readonly syncs: number
  readonly cycleMs: ReadonlyArray<number>
  readonly phases: { reserve: Array<number>; settle: Array<number>; release: Array<number> }
  readonly holdMs: ReadonlyArray<number>
  readonly idleMs: ReadonlyArray<number>
}

/** Runs `count` cycles on each of `workers` at once; `sessionOf(index)` is each one's Session. */
const batch = async (
  workers: ReadonlyArray<LineChild>,
  sessionOf: (index: number) => string,
  count: number,
  lockOf: (sessionFile: string) => string
): Promise<Batch> => {
  const replies = await Promise.all(
    workers.map((worker, index) =>
      worker.request<WriterReply>({ sessionFile: sessionOf(index), series: `s${series++}`, count })
    )
  )
  const started = Math.min(...replies.map((reply) => reply.startedAt))
  const ended = Math.max(...replies.map((reply) => reply.endedAt))
  const cycles = replies.flatMap((reply) => reply.cycles)
  // Lock intervals per lock file, in order of acquisition; the idle time is
  // from one holder's release to the next one's acquisition.
  const byLock = new Map<string, Array<{ acquiredAt: number; releasedAt: number }>>()
  const wanted = new Set(workers.map((_, index) => lockOf(sessionOf(index))))
  for (const interval of replies.flatMap((reply) => reply.locks)) {
    if (!wanted.has(interval.path)) continue
    byLock.set(interval.path, [...(byLock.get(interval.path) ?? []), interval])
  }
  const holdMs: Array<number> = []
  const idleMs: Array<number> = []
  for (const intervals of byLock.values()) {
    intervals.sort((a, b) => a.acquiredAt - b.acquiredAt)
    intervals.forEach((interval, index) => {
      holdMs.push(interval.releasedAt - interval.acquiredAt)
      if (index > 0) idleMs.push(Math.max(0, interval.acquiredAt - intervals[index - 1].releasedAt))
    })
  }
  return {
    wallMs: ended - started,
    cycles: cycles.length,
    cpuMs: replies.reduce((sum, reply) => sum + reply.cpuMs, 0),
    syncs: replies.reduce((sum, reply) => sum + reply.syncs, 0),
    cycleMs: cycles.map((cycle) => cycle.reserveMs + cycle.settleMs + cycle.releaseMs),
    phases: {
      reserve: cycles.map((cycle) => cycle.reserveMs),
      settle: cycles.map((cycle) => cycle.settleMs),
      release: cycles.map((cycle) => cycle.releaseMs)
    },
    holdMs,
    idleMs
  }
}

const med = (values: ReadonlyArray<number>) => formatValue(quantile(values, 0.5))
const pairOf = (batches: ReadonlyArray<Record<Side, Batch>>, pick: (batch: Batch) => ReadonlyArray<number>) =>
  `${med(batches.flatMap((entry) => pick(entry.ours)))}/${med(batches.flatMap((entry) => pick(entry.reference)))}`

// ---- settle -----------------------------------------------------------------------------

const settleRows = async (context: BenchContext): Promise<ReadonlyArray<MeasuredRow>> => {
  context.log("settle: reserve → settle → release, one process per side")
  const setup = await prepare(context, "settle", 1)
  try {
    // Cycles alternate one by one in ABBA order (ours, ref, ref, ours, …), so
    // a burst of fsync latency from the rest of the machine falls on both.
    const pairs = 4
    const plan: RoundPlan = context.quick
      ? { minRounds: 6, maxRounds: 6, tolerance: 0 }
      : { minRounds: 20, maxRounds: 400, tolerance: 0.03, budgetMs: 75_000 }
    const cycleOf = (side: Side) =>
      batch(setup.pools[side], () => setup.own[0], 1, (file) => `${setup.sidecarOf(side, file)}.commit-lock`)
    const rounds = await runRounds<Record<Side, Array<Batch>>>(plan, async (_, oursFirst) => {
      const result: Record<Side, Array<Batch>> = { ours: [], reference: [] }
      for (let pair = 0; pair < pairs; pair++) {
        const order = (pair % 2 === 0) === oursFirst ? SIDES : [...SIDES].reverse()
        for (const side of order) result[side].push(await cycleOf(side))
      }
      return {
        ours: result.ours.flatMap((b) => b.cycleMs),
        theirs: result.reference.flatMap((b) => b.cycleMs),
        extra: result
      }
    })
    const batches = rounds.extras.flatMap((round) =>
      round.ours.map((ours, index) => ({ ours, reference: round.reference[index] }))
    )
    return [{
      group: "settle",
      benchmark: "reserve → settle → release, one after another in one process, Session 100 KiB",
      unit: "ms",
      ours: rounds.ours,
      theirs: rounds.theirs,
      ratio: rounds.ratio,
      samples: rounds.samples,
      target: { ratioAtMost: 1 },
      note: `per cycle, ${pairs} per side and round, alternating one by one; reserve ${
        pairOf(batches, (b) => b.phases.reserve)
      }, settle ${pairOf(batches, (b) => b.phases.settle)}, release ${
        pairOf(batches, (b) => b.phases.release)
      } ms o/r; lock hold ${pairOf(batches, (b) => b.holdMs)} ms o/r; CPU per cycle ${
        pairOf(batches, (b) => [b.cpuMs / b.cycles])
      } ms o/r; fsyncs per cycle ${pairOf(batches, (b) => [b.syncs / b.cycles])} o/r; ${machineNote(rounds)}`
    }]
  } finally {
    await setup.close()
  }
}

// ---- writers ----------------------------------------------------------------------------

/** Busy loops while loaded: twice the 2 cores of the machine these rows were made on. */
export const LOAD_PROCESSES = 4

const writersRows = async (context: BenchContext): Promise<ReadonlyArray<MeasuredRow>> => {
  const counts = [1, 4, 8]
  const perWorker = context.quick ? 3 : 4
  context.log(
    `writers: ${counts.join("/")} processes × ${perWorker} cycles, shared sidecar and one each, idle and loaded`
  )
  const setup = await prepare(context, "writers", Math.max(...counts))
  const rows: Array<MeasuredRow> = []
  let load: BackgroundLoad | undefined
  try {
    for (const loaded of [false, true]) {
      if (loaded) {
        load = startLoad(LOAD_PROCESSES)
        // Let the spinners start before anything is timed.
        await new Promise((resolve) => setTimeout(resolve, 1000))
      }
      for (const processes of counts) {
        for (const mode of ["shared", "each"] as const) {
          const label = `${processes} writer process${processes === 1 ? "" : "es"}, ${
            mode === "shared" ? "one shared sidecar" : "one Session each"
          }, ${loaded ? `loaded (+${LOAD_PROCESSES} busy loops)` : "no added load"}`
          context.log(`writers: ${label}`)
          const plan: RoundPlan = context.quick
            ? { minRounds: 2, maxRounds: 2, tolerance: 0 }
            : { minRounds: 12, maxRounds: 200, tolerance: 0.05, budgetMs: 40_000 }
          const rounds = await runRounds<Record<Side, Batch>>(plan, async (_, oursFirst) => {
            const result = {} as Record<Side, Batch>
            for (const side of oursFirst ? SIDES : [...SIDES].reverse()) {
              result[side] = await batch(
                setup.pools[side].slice(0, processes),
                (index) => (mode === "shared" ? setup.shared : setup.own[index]),
                perWorker,
                (file) => `${setup.sidecarOf(side, file)}.commit-lock`
              )
            }
            return {
              ours: [result.ours.wallMs / result.ours.cycles],
              theirs: [result.reference.wallMs / result.reference.cycles],
              extra: result
            }
          })
          const batches = rounds.extras
          rows.push({
            group: "writers",
            benchmark: `writers: ${label}`,
            unit: "ms",
            ours: rounds.ours,
            theirs: rounds.theirs,
            ratio: rounds.ratio,
            samples: rounds.samples,
            target: { ratioAtMost: 1 },
            note: [
              `wall ÷ cycles, ${processes}×${perWorker} cycles per batch`,
              `CPU per cycle ${pairOf(batches, (b) => [b.cpuMs / b.cycles])} ms o/r`,
              `fsyncs per cycle ${pairOf(batches, (b) => [b.syncs / b.cycles])} o/r`,
              ...(mode === "shared" && processes > 1
                ? [`lock idle between holders ${pairOf(batches, (b) => b.idleMs)} ms o/r`]
                : []),
              `lock hold ${pairOf(batches, (b) => b.holdMs)} ms o/r`,
              machineNote(rounds)
            ].join("; ")
          })
        }
      }
    }
  } finally {
    await load?.stop()
    await setup.close()
  }
  return rows
}

export const settleGroup: BenchGroup = {
  name: "settle",
  summary: "reserve → settle → release one after another in one process (a child per side)",
  run: settleRows
}

export const writersGroup: BenchGroup = {
  name: "writers",
  summary:
    `1/4/8 writer processes, shared sidecar and one Session each, with no added load and with ${LOAD_PROCESSES} busy loops`,
  run: writersRows
}
