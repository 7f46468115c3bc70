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
 * caller waits for. The two sides alternate process by process over many
 * rounds, the side going first alternating, after untimed warm-up rounds (in
 * which our code cache is written, as by any first run after an install).
 * Rows report each side's median with its 10th–90th percentiles, and the
 * median of the rounds' ratios (a round's two processes run back to back,
 * under the same load); every round's output is checked (available, and
 * both sides print the same answer).
 *
 * Two rows without a target show what the first start after an install or
 * upgrade costs: ours with its code cache disabled.
 *
 * @since 0.1.0
 */
import { execFileSync, spawnSync } from "node:child_process"
import { accessSync, constants, copyFileSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs"
import { delimiter, join } from "node:path"
import { pathToFileURL } from "node:url"
import { writeSidecar } from "./Fixtures.js"
import { median, quantile, type Row } from "./Harness.js"

/** A process to start: the command and the environment it adds. */
interface Launch {
  readonly argv: ReadonlyArray<string>
  readonly env?: Readonly<Record<string, string>> | undefined
}

interface Native {
  readonly native: unknown
  readonly manifestHash: string
  readonly occurrenceCount: number
}

export interface ColdStartOptions {
  /** This repository. */
  readonly projectRoot: string
  /** The package whose build is "ours" (its `dist/`): this repository, or another checkout to compare with. */
  readonly packageRoot: string
  /** Where the reference's store module is. */
  readonly referenceStore: string
  /** A directory of this run, removed by the caller. */
  readonly work: string
  /** A Session to read (copied into `work`) and its native observation, for the sidecar's receipts. */
  readonly sessionFile: string
  readonly native: Native
  readonly rounds: number
  readonly warmup: number
  readonly log: (message: string) => void
}

/** The system's Node: the first `node` on PATH outside `node_modules`, unless it is the one running. */
export const systemNode = (): { readonly path: string; readonly version: string } | undefined => {
  for (const directory of (process.env.PATH ?? "").split(delimiter)) {
    if (directory === "" || directory.split(/[\\/]/).includes("node_modules")) continue
    const candidate = join(directory, "node")
    try {
      accessSync(candidate, constants.X_OK)
    } catch {
      continue
    }
    const real = realpathSync(candidate)
    if (real.split(/[\\/]/).includes("node_modules")) continue
    if (real === realpathSync(process.execPath)) return undefined
    return { path: candidate, version: execFileSync(candidate, ["--version"], { encoding: "utf8" }).trim() }
  }
  return undefined
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
const runOnce = (launch: Launch): { readonly ms: number; readonly cpuMs: number | undefined; readonly stdout: string } => {
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
  return { ms, cpuMs: cpuBefore === undefined || cpuAfter === undefined ? undefined : cpuAfter - cpuBefore, stdout: ran.stdout }
}

/** What a current read printed, checked: available, and the same on both sides. */
const answerOf = (stdout: string): string => {
  const read = JSON.parse(stdout) as { readonly availability?: unknown }
  if (read.availability !== "available") throw new Error(`the current read is ${String(read.availability)}`)
  return JSON.stringify(read)
}

/**
 * Alternates `ours` and `theirs`, one process each per round, the side
 * going first alternating; `warmup` rounds untimed.
 */
const alternateProcesses = (ours: Launch, theirs: Launch, rounds: number, warmup: number) => {
  const times = { ours: [] as Array<number>, theirs: [] as Array<number> }
  const cpu = { ours: 0 as number | undefined, theirs: 0 as number | undefined }
  for (let round = -warmup; round < rounds; round++) {
    const order = round % 2 === 0 ? (["ours", "theirs"] as const) : (["theirs", "ours"] as const)
    const answers: Array<string> = []
    for (const side of order) {
      const { ms, cpuMs, stdout } = runOnce(side === "ours" ? ours : theirs)
      answers.push(answerOf(stdout))
      if (round >= 0) {
        times[side].push(ms)
        cpu[side] = cpu[side] === undefined || cpuMs === undefined ? undefined : cpu[side] + cpuMs
      }
    }
    if (answers[0] !== answers[1]) throw new Error(`ours and the reference printed different reads:\n${answers.join("\n")}`)
  }
  // Each round's two processes ran back to back, under the same load: the
  // median of their ratios is steadier than the ratio of the two medians
  // when the machine's load drifts during the run.
  const pairedRatio = median(times.ours.map((ms, round) => ms / times.theirs[round]!))
  const meanCpu = (total: number | undefined) => (total === undefined ? undefined : total / rounds)
  return { ...times, pairedRatio, cpu: { ours: meanCpu(cpu.ours), theirs: meanCpu(cpu.theirs) } }
}

const spreadOf = (samples: ReadonlyArray<number>) => ({ p10: quantile(samples, 0.1), p90: quantile(samples, 0.9) })

export const coldStart = (options: ColdStartOptions): Array<Row> => {
  const sessionRoot = join(options.work, "cold", "sessions")
  const rarebitRoot = join(options.work, "cold", "rarebit")
  mkdirSync(join(sessionRoot, "project"), { recursive: true })
  const sessionFile = join(sessionRoot, "project", "session.jsonl")
  copyFileSync(options.sessionFile, sessionFile)
  writeSidecar(join(rarebitRoot, "materializations-v4", "project", "session.jsonl"), { receipts: 3 }, options.native)

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

  const system = systemNode()
  const nodes = [
    { path: process.execPath, label: `Node ${process.version.slice(1)}` },
    ...(system === undefined ? [] : [{ path: system.path, label: `system Node ${system.version.slice(1)}` }])
  ]
  const rows: Array<Row> = []
  const measure = (
    benchmark: string,
    ours: Launch,
    theirs: Launch,
    target: number | undefined,
    versus: string
  ) => {
    options.log(`cold start: ${benchmark}`)
    const times = alternateProcesses(ours, theirs, options.rounds, options.warmup)
    rows.push({
      benchmark,
      ours: median(times.ours),
      theirs: median(times.theirs),
      ratio: times.pairedRatio,
      target,
      versus: times.cpu.ours === undefined || times.cpu.theirs === undefined
        ? versus
        : `${versus}; CPU per process (user + system, mean) ${times.cpu.ours.toFixed(1)} / ${
          times.cpu.theirs.toFixed(1)
        } ms = ${(times.cpu.ours / times.cpu.theirs).toFixed(2)}`,
      spread: { ours: spreadOf(times.ours), theirs: spreadOf(times.theirs), rounds: options.rounds }
    })
  }
  const cliVersus = "ours = `rarebit-store current --json` (dist/cli/main.js); ref = a script importing the reference store, printing readRarebitCurrent"
  const promiseVersus = "import(\"rarebit-store/promise\") + readRarebitCurrent, printed; ref = the same with the reference store module"
  for (const node of nodes) {
    measure(
      `cold start. current --json, ${node.label}`,
      { argv: [node.path, cli, ...cliArgs], env: cache },
      { argv: [node.path, referenceCurrent, ...location] },
      1.5,
      cliVersus
    )
    measure(
      `cold start. import promise API + 1 current read, ${node.label}`,
      { argv: [node.path, oursPromise, ...location], env: cache },
      { argv: [node.path, referencePromise, ...location] },
      1.5,
      promiseVersus
    )
  }
  const running = nodes[0]!
  measure(
    `cold start, no code cache (first run). current --json, ${running.label}`,
    { argv: [running.path, cli, ...cliArgs], env: noCache },
    { argv: [running.path, referenceCurrent, ...location] },
    undefined,
    "ours without its code cache: a first start after an install or upgrade"
  )
  measure(
    `cold start, no code cache (first run). import promise API + 1 current read, ${running.label}`,
    { argv: [running.path, oursPromise, ...location], env: noCache },
    { argv: [running.path, referencePromise, ...location] },
    undefined,
    "ours without its code cache: a first start after an install or upgrade"
  )
  return rows
}
