/**
 * Cold start: a new process that does one thing and exits, ours against the
 * reference on the same files, as an operator or a script meets it.
 *
 * - `rarebit-store current --json` (the built executable, `dist/cli/main.js`)
 *   against a minimal script that imports the reference's store module and
 *   prints `readRarebitCurrent`'s result as JSON;
 * - `import("rarebit-store/promise")` then one `readRarebitCurrent`, printed,
 *   against the same with the reference's store module.
 *
 * Each on the Node running the benchmark and on the system's Node (the first
 * `node` on `PATH` outside any `node_modules`, when it is another binary).
 * Timed is the wall time from spawning the process to its exit, what a
 * caller waits for. The two sides alternate process by process over a fixed
 * number of rounds (`Stats.runRounds`, the side going first alternating),
 * after untimed warm-up rounds (in which our code cache is written, as by
 * any first run after an install). Rows are `MeasuredRow`s: each side's
 * median with its 10th–90th percentiles, and the median of the rounds'
 * ratios (a round's two processes run back to back, under the same load);
 * every round's output is checked (available, and both sides print the same
 * answer).
 *
 * Two rows without a target show what the first start after an install or
 * upgrade costs: ours with its code cache disabled.
 *
 * @since 0.1.0
 */
import { execFileSync, spawnSync } from "node:child_process"
import { copyFileSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { writeSession, writeSidecar } from "./Fixtures.js"
import type { BenchGroup } from "./Groups.js"
import type { MeasuredRow } from "./MeasuredTable.js"
import { systemNode } from "./Processes.js"
import { nativeOf } from "./SessionFixtures.js"
import { type RoundPlan, runRounds } from "./Stats.js"

/** A process to start: the command and the environment it adds. */
interface Launch {
  readonly argv: ReadonlyArray<string>
  readonly env?: Readonly<Record<string, string>> | undefined
}

interface ColdStartOptions {
  /** This repository. */
  readonly projectRoot: string
  /** The package whose build is "ours" (its `dist/`): this repository, or another checkout to compare with. */
  readonly packageRoot: string
  /** Where the reference's store module is. */
  readonly referenceStore: string
  /** A directory of this run, removed by the caller. */
  readonly work: string
  /** A fixture Session to read (copied into `work`), and the root its native observation is computed under. */
  readonly sessionFile: string
  readonly sessionRoot: string
  readonly plan: RoundPlan
  readonly warmup: number
  readonly log: (message: string) => void
}

/** Clock ticks per second of `/proc`'s CPU times. */
const ticksPerSecond = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100
  } catch {
    return 100
  }
})()

/**
 * The CPU time (user + system, ms) of this process's children that have been
 * waited for, from `/proc/self/stat`; `undefined` where there is no `/proc`.
 * In ticks (10 ms), so only sums over many processes mean anything: the
 * rows report the mean over all rounds, which is exact to a fraction of a
 * millisecond.
 */
const childrenCpuMs = (): number | undefined => {
  try {
    const stat = readFileSync("/proc/self/stat", "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    // After the command name: state is field 3, cutime 16 and cstime 17 (man 5 proc).
    return ((Number(fields[13]) + Number(fields[14])) * 1000) / ticksPerSecond
  } catch {
    return undefined
  }
}

/** Runs one process to its exit; its wall time in ms and what it printed. */
const runOnce = (
  launch: Launch
): { readonly ms: number; readonly cpuMs: number | undefined; readonly stdout: string } => {
  const [command, ...args] = launch.argv
  const cpuBefore = childrenCpuMs()
  const started = performance.now()
  const ran = spawnSync(command!, args, {
    encoding: "utf8",
    env: { ...process.env, ...launch.env },
    maxBuffer: 16 * 1024 * 1024
  })
  const ms = performance.now() - started
  const cpuAfter = childrenCpuMs()
  if (ran.status !== 0) {
    throw new Error(`${launch.argv.join(" ")} exited ${ran.status ?? ran.signal}\n${ran.stderr}`)
  }
  return {
    ms,
    cpuMs: cpuBefore === undefined || cpuAfter === undefined ? undefined : cpuAfter - cpuBefore,
    stdout: ran.stdout
  }
}

/** What a current read printed, checked: available, and the same on both sides. */
const answerOf = (stdout: string): string => {
  const read = JSON.parse(stdout) as { readonly availability?: unknown }
  if (read.availability !== "available") throw new Error(`the current read is ${String(read.availability)}`)
  return JSON.stringify(read)
}

/** One round: `ours` and `theirs` once each, in the order given; both must print the same available read. */
const roundOf = (ours: Launch, theirs: Launch, oursFirst: boolean) => {
  const order = oursFirst ? (["ours", "theirs"] as const) : (["theirs", "ours"] as const)
  const runs = { ours: undefined, theirs: undefined } as Record<
    "ours" | "theirs",
    ReturnType<typeof runOnce> | undefined
  >
  const answers: Array<string> = []
  for (const side of order) {
    const run = runOnce(side === "ours" ? ours : theirs)
    answers.push(answerOf(run.stdout))
    runs[side] = run
  }
  if (answers[0] !== answers[1]) {
    throw new Error(`ours and the reference printed different reads:\n${answers.join("\n")}`)
  }
  return { ours: runs.ours!, theirs: runs.theirs! }
}

/**
 * Alternates `ours` and `theirs`, one process each per round, the side
 * going first alternating; `warmup` rounds untimed. The rows' ratio is the
 * median of the rounds' ratios: each round's two processes ran back to back,
 * under the same load, which is steadier than the ratio of the two medians
 * when the machine's load drifts during the run.
 */
const alternateProcesses = async (ours: Launch, theirs: Launch, plan: RoundPlan, warmup: number) => {
  for (let round = -warmup; round < 0; round++) roundOf(ours, theirs, round % 2 === 0)
  const rounds = await runRounds<{ readonly ours: number | undefined; readonly theirs: number | undefined }>(
    plan,
    async (_, oursFirst) => {
      const run = roundOf(ours, theirs, oursFirst)
      return { ours: [run.ours.ms], theirs: [run.theirs.ms], extra: { ours: run.ours.cpuMs, theirs: run.theirs.cpuMs } }
    }
  )
  const meanCpu = (pick: (cpu: (typeof rounds.extras)[number]) => number | undefined) => {
    const values = rounds.extras.map(pick)
    return values.some((value) => value === undefined)
      ? undefined
      : values.reduce((sum: number, value) => sum + value!, 0) / values.length
  }
  return { rounds, cpu: { ours: meanCpu((cpu) => cpu.ours), theirs: meanCpu((cpu) => cpu.theirs) } }
}

export const coldStart = async (options: ColdStartOptions): Promise<Array<MeasuredRow>> => {
  const sessionRoot = join(options.work, "cold", "sessions")
  const rarebitRoot = join(options.work, "cold", "rarebit")
  mkdirSync(join(sessionRoot, "project"), { recursive: true })
  const sessionFile = join(sessionRoot, "project", "session.jsonl")
  copyFileSync(options.sessionFile, sessionFile)
  const native = await nativeOf(options.sessionFile, options.sessionRoot)
  writeSidecar(join(rarebitRoot, "materializations-v4", "project", "session.jsonl"), { receipts: 3 }, native)

  // The scripts live in the run directory, inside this package, so that
  // `rarebit-store/promise` resolves to it by the package's own name.
  const referenceUrl = pathToFileURL(options.referenceStore).href
  const print = "process.stdout.write(`${JSON.stringify(read, null, 2)}\\n`)"
  const script = (name: string, text: string) => {
    const file = join(options.work, name)
    writeFileSync(file, text)
    return file
  }
  const referenceCurrent = script(
    "reference-current.mjs",
    [
      `import { readRarebitCurrent } from ${JSON.stringify(referenceUrl)}`,
      "const [sessionFile, sessionRoot, rarebitRoot] = process.argv.slice(2)",
      "const read = await readRarebitCurrent({ sessionFile, sessionRoot, rarebitRoot })",
      print
    ].join("\n")
  )
  const importThenRead = (name: string, specifier: string) =>
    script(
      name,
      [
        `const { readRarebitCurrent } = await import(${JSON.stringify(specifier)})`,
        "const [sessionFile, sessionRoot, rarebitRoot] = process.argv.slice(2)",
        "const read = await readRarebitCurrent({ sessionFile, sessionRoot, rarebitRoot })",
        print
      ].join("\n")
    )
  const oursPromise = importThenRead(
    "ours-promise.mjs",
    options.packageRoot === options.projectRoot
      ? "rarebit-store/promise"
      : pathToFileURL(join(options.packageRoot, "dist", "promise", "index.js")).href
  )
  const referencePromise = importThenRead("reference-promise.mjs", referenceUrl)
  const location = [sessionFile, sessionRoot, rarebitRoot]
  const cli = join(options.packageRoot, "dist", "cli", "main.js")
  const cliArgs = ["current", "--json", "--session", sessionFile, "--root", rarebitRoot, "--session-root", sessionRoot]
  // Our code cache for this run only, so neither an earlier build's nor another user's is measured.
  const cache = { RAREBIT_STORE_CODE_CACHE: join(options.work, "code-cache") }
  const noCache = { RAREBIT_STORE_CODE_CACHE: "off" }

  // The system's Node only when it is another binary than the one running.
  const system = systemNode()
  const nodes = [
    { path: process.execPath, label: `Node ${process.version.slice(1)}` },
    ...(system === undefined || system.realPath === realpathSync(process.execPath)
      ? []
      : [{ path: system.path, label: `system Node ${system.version.slice(1)}` }])
  ]
  const rows: Array<MeasuredRow> = []
  const measure = async (
    benchmark: string,
    ours: Launch,
    theirs: Launch,
    ratioAtMost: number | undefined,
    versus: string,
    about: string
  ) => {
    options.log(`cold start: ${benchmark}`)
    const { cpu, rounds } = await alternateProcesses(ours, theirs, options.plan, options.warmup)
    const cpuNote = cpu.ours === undefined || cpu.theirs === undefined
      ? undefined
      : `CPU per process (user + system, mean) ${cpu.ours.toFixed(1)} / ${cpu.theirs.toFixed(1)} ms = ${
        (cpu.ours / cpu.theirs).toFixed(2)
      }`
    rows.push({
      group: "cold",
      benchmark,
      unit: "ms",
      ours: rounds.ours,
      theirs: rounds.theirs,
      ratio: rounds.ratio,
      samples: rounds.samples,
      versus,
      target: ratioAtMost === undefined ? undefined : { ratioAtMost },
      // Not machineNote: its sampler of runnable tasks cannot run while spawnSync blocks this process.
      note: [about, cpuNote, `load ${rounds.machine.loadAverage.toFixed(1)}`].filter((part) => part !== undefined).join(
        "; "
      )
    })
  }
  const cliVersus = "a script importing the reference store, printing readRarebitCurrent"
  const cliAbout = "ours = `rarebit-store current --json` (dist/cli/main.js)"
  const promiseVersus = "the same script on the reference store module"
  const promiseAbout = "ours = import(\"rarebit-store/promise\") + readRarebitCurrent, printed"
  const firstRun = "without its code cache: a first start after an install or upgrade"
  for (const node of nodes) {
    await measure(
      `cold start. current --json, ${node.label}`,
      { argv: [node.path, cli, ...cliArgs], env: cache },
      { argv: [node.path, referenceCurrent, ...location] },
      1.5,
      cliVersus,
      cliAbout
    )
    await measure(
      `cold start. import promise API + 1 current read, ${node.label}`,
      { argv: [node.path, oursPromise, ...location], env: cache },
      { argv: [node.path, referencePromise, ...location] },
      1.5,
      promiseVersus,
      promiseAbout
    )
  }
  const running = nodes[0]!
  await measure(
    `cold start, no code cache (first run). current --json, ${running.label}`,
    { argv: [running.path, cli, ...cliArgs], env: noCache },
    { argv: [running.path, referenceCurrent, ...location] },
    undefined,
    cliVersus,
    `${cliAbout}, ${firstRun}`
  )
  await measure(
    `cold start, no code cache (first run). import promise API + 1 current read, ${running.label}`,
    { argv: [running.path, oursPromise, ...location], env: noCache },
    { argv: [running.path, referencePromise, ...location] },
    undefined,
    promiseVersus,
    `${promiseAbout}, ${firstRun}`
  )
  return rows
}

/**
 * The cold-start group, timing `packageRoot`'s build as ours (this
 * repository's by default; another checkout's with `--cold-package`).
 */
export const coldStartGroup = (packageRoot?: string): BenchGroup => ({
  name: "cold",
  summary: "cold start of `rarebit-store current --json` and of the Promise API, new processes, on both Nodes",
  run: async (context) => {
    // The 100 KiB fixture Session the other groups read, and a three-receipt sidecar current for it.
    const sessionRoot = join(context.fixtures, "sessions")
    const sessionFile = join(sessionRoot, "session-100KiB.jsonl")
    writeSession(sessionFile, 100 * 1024)
    return coldStart({
      projectRoot: context.root,
      packageRoot: packageRoot === undefined ? context.root : resolve(packageRoot),
      referenceStore: join(context.root, "node_modules/@hypercarrier/rarebit/src/rarebit-store.mjs"),
      work: context.work,
      sessionFile,
      sessionRoot,
      // A fixed number of rounds: the rows' medians and spreads are over as many processes on every run.
      plan: context.quick
        ? { minRounds: 10, maxRounds: 10, tolerance: 0.05 }
        : { minRounds: 60, maxRounds: 60, tolerance: 0.05 },
      warmup: context.quick ? 2 : 3,
      log: context.log
    })
  }
})
