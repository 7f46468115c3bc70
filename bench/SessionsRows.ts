/**
 * The operator overview, `rarebit-store sessions`, against what an operator
 * would do without it.
 *
 * - 2,000 and 10,000 Sessions (1 row set in `--quick`: 2,000), each side a
 *   fresh process, alternating round by round: our executable's
 *   `sessions --json` (stdout discarded) and `SessionsFloor` (a script that
 *   walks the Session root and calls the reference's `readRarebitCurrent`
 *   for each Session). Wall time from spawn to exit, CPU time and peak RSS
 *   (the `PeakRss` preload). Target for 2,000: at most 0.5× the script's time.
 * - A following overview of 1,000 Sessions (`sessions --follow --json`): a
 *   receipt and its head appended to one Session's sidecar in one write, as
 *   a settle in another process does, to the entry's line arriving on the
 *   follower's stdout (p99 target 50 ms); then its CPU per idle hour, from
 *   every thread's `/proc/<pid>/task/<tid>/schedstat` over idle windows.
 *   The reference has no following form: its side is one sweep of
 *   `readRarebitCurrent` over the same 1,000 Sessions, what a poller must
 *   do to notice any change (its latency is at least that), and for the
 *   idle CPU that sweep repeated every 10 s.
 *
 * The Sessions are the polling rows' fixture (`writeManySessions`: distinct
 * synthetic Pi Sessions of 15–110 KiB in 100 directories, each with a
 * current sidecar); the following row works on a copy, which it appends to.
 *
 * @since 0.1.0
 */
import { spawn } from "node:child_process"
import { appendFileSync, cpSync, existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { jobIdOf, receiptAndHead, SESSION_ID, summaryReceipt } from "./Fixtures.js"
import type { BenchContext, BenchGroup } from "./Groups.js"
import { siblingScript } from "./Harness.js"
import { loadStore, projectRoot } from "./Implementations.js"
import type { MeasuredRow } from "./MeasuredTable.js"
import { writeManySessions } from "./PollingRows.js"
import { type ProcessCost, timedProcess } from "./Processes.js"
import { machineNote, quantile, ratioSummaryOf, type RoundPlan, runRounds, spreadOf } from "./Stats.js"

const REFERENCE_STORE = "node_modules/@hypercarrier/rarebit/src/rarebit-store.mjs"

const executableOf = (root: string): string => {
  const bin = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { bin: Record<string, string> }).bin
  const path = join(root, bin["rarebit-store"]!)
  if (!existsSync(path)) throw new Error(`${path} is missing: run \`npm run build\` first`)
  return path
}

interface Listed {
  readonly sessions: ReadonlyArray<{ readonly availability: string; readonly syncState: string }>
}

const oneShotRows = async (context: BenchContext, count: number): Promise<ReadonlyArray<MeasuredRow>> => {
  context.log(`sessions: ${count.toLocaleString("en")} Sessions, our sessions --json against a readRarebitCurrent loop`)
  const fixture = await writeManySessions(context.fixtures, count)
  const roots = ["--root", fixture.rarebitRoot, "--session-root", fixture.sessionRoot]
  const executable = executableOf(context.root)
  const ours = (stdoutFile?: string) =>
    timedProcess([executable, "sessions", "--json", ...roots], stdoutFile === undefined ? {} : { stdoutFile })
  const floor = (stdoutFile?: string) =>
    timedProcess(
      [
        siblingScript("SessionsFloor.js"),
        join(projectRoot(), REFERENCE_STORE),
        fixture.sessionRoot,
        fixture.rarebitRoot
      ],
      stdoutFile === undefined ? {} : { stdoutFile }
    )

  // Untimed first runs fill the page cache for both and check that they agree.
  const oursFile = join(context.work, `sessions-${count}.json`)
  const floorFile = join(context.work, `sessions-floor-${count}.json`)
  await ours(oursFile)
  await floor(floorFile)
  const listed = JSON.parse(readFileSync(oursFile, "utf8")) as Listed
  const counted = JSON.parse(readFileSync(floorFile, "utf8")) as { sessions: number; states: Record<string, number> }
  const ourStates: Record<string, number> = {}
  for (const entry of listed.sessions) {
    const key = `${entry.availability}/${entry.syncState}`
    ourStates[key] = (ourStates[key] ?? 0) + 1
  }
  const sorted = (states: Record<string, number>) => JSON.stringify(Object.entries(states).sort())
  if (listed.sessions.length !== count || counted.sessions !== count || sorted(ourStates) !== sorted(counted.states)) {
    throw new Error(`sessions fixture: ours ${sorted(ourStates)}, the reference's ${sorted(counted.states)}`)
  }

  const plan: RoundPlan = context.quick
    ? { minRounds: 2, maxRounds: 2, tolerance: 0 }
    : { minRounds: 4, maxRounds: 8, tolerance: 0.05, budgetMs: count > 5_000 ? 240_000 : 120_000 }
  const rounds = await runRounds<{ ours: ProcessCost; floor: ProcessCost }>(plan, async (_, oursFirst) => {
    const first = oursFirst ? await ours() : await floor()
    const second = oursFirst ? await floor() : await ours()
    const [o, f] = oursFirst ? [first, second] : [second, first]
    return { ours: [o.wallMs], theirs: [f.wallMs], extra: { ours: o, floor: f } }
  })
  const paired = (pick: (cost: ProcessCost) => number) => {
    const o = rounds.extras.map((cost) => pick(cost.ours))
    const f = rounds.extras.map((cost) => pick(cost.floor))
    const ratios = o.map((value, index) => value / f[index]!)
    return {
      ours: spreadOf(o),
      theirs: spreadOf(f),
      ratio: ratioSummaryOf(ratios, rounds.ratio.stoppedBy),
      samples: { ours: o, theirs: f, ratios }
    }
  }
  const what = `${count.toLocaleString("en")} Sessions (${
    (fixture.bytes / 1024 / 1024).toFixed(0)
  } MiB), a fresh process`
  const versus = "a script walking the Session root and calling the reference's readRarebitCurrent for each"
  return [
    {
      group: "sessions",
      benchmark: `sessions --json, ${what}: wall time`,
      unit: "ms",
      ours: rounds.ours,
      theirs: rounds.theirs,
      ratio: rounds.ratio,
      samples: rounds.samples,
      versus,
      ...(count <= 2_000 ? { target: { ratioAtMost: 0.5 } } : {}),
      note: machineNote(rounds)
    },
    {
      group: "sessions",
      benchmark: `sessions --json, ${what}: CPU time`,
      unit: "ms",
      ...paired((cost) => cost.cpuMs),
      versus: "the same script",
      note: "user + system, same processes as the row above"
    },
    {
      group: "sessions",
      benchmark: `sessions --json, ${what}: peak RSS`,
      unit: "MiB",
      ...paired((cost) => cost.peakRssMiB),
      versus: "the same script"
    }
  ]
}

/** CPU time of every thread of `pid` so far, in ms (`schedstat`'s nanoseconds on CPU). */
const cpuOfProcessMs = (pid: number): number => {
  let ns = 0
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, "utf8").split(" ")[0])
    } catch {
      // A thread that ended between the listing and the read.
    }
  }
  return ns / 1e6
}

const followRows = async (context: BenchContext): Promise<ReadonlyArray<MeasuredRow>> => {
  const count = 1_000
  const settles = context.quick ? 30 : 200
  const windowMs = context.quick ? 5_000 : 20_000
  context.log(`sessions --follow: ${count.toLocaleString("en")} Sessions, ${settles} settles, idle CPU`)
  const source = await writeManySessions(context.fixtures, count)
  const dir = join(context.work, "sessions-follow")
  cpSync(join(source.sessionRoot, ".."), dir, { recursive: true })
  const sessionRoot = join(dir, "sessions")
  const rarebitRoot = join(dir, "rarebit")
  const list = (JSON.parse(readFileSync(join(dir, "sessions.json"), "utf8")) as Array<string>).map((file) =>
    file.replace(source.sessionRoot, sessionRoot)
  )
  const sidecarOf = (sessionFile: string) => sessionFile.replace(sessionRoot, join(rarebitRoot, "materializations-v4"))

  const child = spawn(
    process.execPath,
    [
      executableOf(context.root),
      "sessions",
      "--follow",
      "--json",
      "--root",
      rarebitRoot,
      "--session-root",
      sessionRoot
    ],
    { stdio: ["ignore", "pipe", "inherit"] }
  )
  const waiting = new Map<string, (at: bigint) => void>()
  let initial = 0
  let partial = ""
  let allInitial: () => void = () => undefined
  const started = new Promise<void>((resolve) => (allInitial = resolve))
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    const at = process.hrtime.bigint()
    partial += chunk
    for (let newline = partial.indexOf("\n"); newline >= 0; newline = partial.indexOf("\n")) {
      const line = partial.slice(0, newline)
      partial = partial.slice(newline + 1)
      const entry = JSON.parse(line) as { sessionFile: string }
      if (initial < count) {
        if (++initial === count) allInitial()
        continue
      }
      waiting.get(entry.sessionFile)?.(at)
    }
  })
  const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()))
  try {
    await started
    let job = 0
    const settleOne = async (sessionFile: string): Promise<number> => {
      const sidecar = sidecarOf(sessionFile)
      const { headLine, receiptLine } = receiptAndHead(
        summaryReceipt({
          jobId: jobIdOf("follow", job),
          sessionId: SESSION_ID,
          manifestHash: jobIdOf("manifest-follow", job),
          occurrenceCount: 3,
          observedAt: new Date(Date.UTC(2026, 1, 1) + job * 1000).toISOString()
        }),
        SESSION_ID,
        statSync(sidecar).size
      )
      job++
      const seen = new Promise<bigint>((resolve) => waiting.set(sessionFile, resolve))
      const written = process.hrtime.bigint()
      appendFileSync(sidecar, Buffer.concat([receiptLine, headLine]))
      const at = await Promise.race([
        seen,
        sleep(10_000).then(() => {
          throw new Error(`no line for ${sessionFile} within 10 s`)
        })
      ])
      waiting.delete(sessionFile)
      return Number(at - written) / 1e6
    }
    // A few untimed settles warm both processes up.
    for (let index = 0; index < 5; index++) await settleOne(list[index * 7]!)
    const latencies: Array<number> = []
    for (let index = 0; index < settles; index++) {
      latencies.push(await settleOne(list[(index * 131) % list.length]!))
      await sleep(10 + Math.random() * 30)
    }
    // Idle: two windows to let V8 finish its work after the settles, then the median of three.
    const idle = async () => {
      const before = cpuOfProcessMs(child.pid!)
      await sleep(windowMs)
      return cpuOfProcessMs(child.pid!) - before
    }
    await idle()
    await idle()
    const windows = [await idle(), await idle(), await idle()]
    const hour = 3_600_000 / windowMs
    const idlePerHour = quantile(windows, 0.5) * hour

    // The reference's side: one sweep of readRarebitCurrent over the same Sessions, in this process.
    const reference = await loadStore("reference")
    const sweep = async () => {
      const cpu = process.cpuUsage()
      const start = performance.now()
      for (const sessionFile of list) await reference.readRarebitCurrent({ sessionFile, sessionRoot, rarebitRoot })
      const used = process.cpuUsage(cpu)
      return { wallMs: performance.now() - start, cpuMs: (used.user + used.system) / 1000 }
    }
    await sweep()
    const sweeps = [await sweep(), await sweep(), await sweep()]
    const sweepMs = quantile(sweeps.map((s) => s.wallMs), 0.5)
    const sweepCpuMs = quantile(sweeps.map((s) => s.cpuMs), 0.5)

    const single = (ours: Array<number>, theirs: number) => ({
      ours: spreadOf(ours),
      theirs: spreadOf([theirs]),
      ratio: ratioSummaryOf([quantile(ours, 0.5) / theirs], "max rounds" as const)
    })
    const p99 = quantile(latencies, 0.99)
    return [
      {
        group: "sessions",
        benchmark: `sessions --follow --json, ${
          count.toLocaleString("en")
        } Sessions: settle → printed line, median (ms)`,
        unit: "ms",
        ...single(latencies, sweepMs),
        versus: `one readRarebitCurrent sweep over the ${
          count.toLocaleString("en")
        } Sessions, what a poller needs to notice`,
        note: `${settles} settles; p90 ${quantile(latencies, 0.9).toFixed(1)} ms, max ${
          Math.max(...latencies).toFixed(1)
        } ms`
      },
      {
        group: "sessions",
        benchmark: `sessions --follow --json, ${count.toLocaleString("en")} Sessions: settle → printed line, p99 (ms)`,
        unit: "ms",
        ours: spreadOf([p99]),
        theirs: spreadOf([sweepMs]),
        ratio: ratioSummaryOf([p99 / sweepMs], "max rounds"),
        versus: "the same sweep",
        target: { oursAtMost: 50 }
      },
      {
        group: "sessions",
        benchmark: `sessions --follow, ${count.toLocaleString("en")} Sessions: CPU per idle hour (ms)`,
        unit: "ms",
        ...single([idlePerHour], sweepCpuMs * 360),
        versus: `that sweep every 10 s (${sweepCpuMs.toFixed(0)} ms CPU each)`,
        note: `median of 3 windows of ${windowMs / 1000} s (${
          windows.map((w) => w.toFixed(1)).join(", ")
        } ms CPU, every thread) after ${2 * windowMs / 1000} s settling`
      }
    ]
  } finally {
    child.kill("SIGINT")
    await exited
  }
}

const sessionsRows = async (context: BenchContext): Promise<ReadonlyArray<MeasuredRow>> => [
  ...(await oneShotRows(context, 2_000)),
  ...(context.quick ? [] : await oneShotRows(context, 10_000)),
  ...(await followRows(context))
]

export const sessionsGroup: BenchGroup = {
  name: "sessions",
  summary:
    "sessions --json over 2,000 and 10,000 Sessions against a readRarebitCurrent loop; --follow latency and idle CPU",
  run: sessionsRows
}
