/**
 * Peak memory of `readRarebitSession`, ours against the reference: each read
 * runs in a fresh process, which notes its peak resident set size once the
 * implementation is loaded (and has read a tiny Session, so lazy
 * initialisation is not counted) and prints how much one read of the target
 * grows it. Sessions are the benchmark's synthetic Pi Sessions (tool
 * outputs, thinking, usage records), generated once under `.bench-data/`.
 *
 * Usage (after `npm run build` and `tsc -p tsconfig.bench.json`):
 *   node dist-bench/bench/SessionReadMemory.js [--sizes=100,500] [--runs=3]
 * prints, per size in MiB, the median peak growth of each side and the
 * ratio; `probe <side> <sessionFile> <warmupFile>` is the child. The
 * benchmark's `session-memory` rows (`SessionMemoryRows.ts`) use the same
 * probe and fixtures in interleaved rounds.
 *
 * @since 0.1.0
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { writeSession } from "./Fixtures.js"
import { median, runChild } from "./Harness.js"
import { loadOurPromiseApi, projectRoot, type Side } from "./Implementations.js"
import { peakRssMiB } from "./PeakMemory.js"

const MiB = 1024 * 1024

const loadReadSession = async (side: Side) => {
  const module = side === "ours"
    ? await loadOurPromiseApi()
    : await import(
      pathToFileURL(join(projectRoot(), "node_modules/@hypercarrier/rarebit/src/rarebit-session.mjs")).href
    )
  return module.readRarebitSession as (reference: string, options: { sessionRoot: string }) => Promise<any>
}

const probe = async (side: Side, sessionFile: string, warmupFile: string) => {
  const readSession = await loadReadSession(side)
  await readSession(warmupFile, { sessionRoot: "/" })
  const before = peakRssMiB()
  const started = performance.now()
  const read = await readSession(sessionFile, { sessionRoot: "/" })
  const ms = performance.now() - started
  if (read.parsed.entries.length === 0) throw new Error("no entries")
  const peakGrowthMiB = peakRssMiB() - before
  process.stdout.write(`${JSON.stringify({ peakGrowthMiB, ms, entries: read.parsed.entries.length })}\n`)
}

/** What one read in a fresh process cost. */
export interface SessionReadCost {
  readonly peakGrowthMiB: number
  readonly ms: number
}

/** The synthetic Session of `sizeMiB` and the tiny warm-up one, generated once. */
export const sessionMemoryFixtures = (sizeMiB: number) => {
  const fixtures = join(projectRoot(), ".bench-data", "fixtures", "session-memory")
  const warmup = join(fixtures, "warmup.jsonl")
  writeSession(warmup, 4 * 1024)
  const file = join(fixtures, `session-${sizeMiB}MiB.jsonl`)
  writeSession(file, sizeMiB * MiB)
  return { file, warmup }
}

/** One read of `file` by `side` in a fresh process. */
export const probeSessionRead = async (side: Side, file: string, warmup: string): Promise<SessionReadCost> =>
  (await runChild("SessionReadMemory.js", ["probe", side, file, warmup])) as SessionReadCost

const main = async (args: ReadonlyArray<string>) => {
  const option = (name: string, fallback: string) =>
    args.find((arg) => arg.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback
  const sizes = option("sizes", "100,500").split(",").map(Number)
  const runs = Number(option("runs", "3"))
  const fixtures = join(projectRoot(), ".bench-data", "fixtures", "session-memory")
  const rows: Array<string> = []
  for (const size of sizes) {
    const { file, warmup } = sessionMemoryFixtures(size)
    const peaks: Record<Side, Array<number>> = { ours: [], reference: [] }
    const times: Record<Side, Array<number>> = { ours: [], reference: [] }
    for (let run = 0; run < runs; run++) {
      for (const side of ["reference", "ours"] as const) {
        const result = await probeSessionRead(side, file, warmup)
        peaks[side].push(result.peakGrowthMiB)
        times[side].push(result.ms)
      }
    }
    const ours = median(peaks.ours)
    const reference = median(peaks.reference)
    rows.push(
      `| ${size} MiB | ${ours.toFixed(0)} | ${reference.toFixed(0)} | ${(ours / reference).toFixed(2)} | ${
        median(times.ours).toFixed(0)
      } | ${median(times.reference).toFixed(0)} |`
    )
  }
  const table = [
    `readRarebitSession, peak RSS growth of one read in a fresh process (MiB), median of ${runs}; Node ${process.version}`,
    "",
    "| Session | ours MiB | reference MiB | ratio | ours ms | reference ms |",
    "| --- | ---: | ---: | ---: | ---: | ---: |",
    ...rows
  ].join("\n")
  process.stdout.write(`${table}\n`)
  writeFileSync(join(fixtures, "last-run.md"), `${table}\n`)
}

// Run as a script (not when the benchmark imports it for its rows).
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [mode, ...rest] = process.argv.slice(2)
  if (mode === "probe") await probe(rest[0] as Side, rest[1], rest[2])
  else await main(process.argv.slice(2))
}
