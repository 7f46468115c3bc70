#!/usr/bin/env node
/**
 * Multi-process stress of the Rarebit store: N worker processes contend on a
 * few Sessions for colliding jobs with short leases, while this process
 * SIGKILLs and SIGSTOPs them at random and appends to the Sessions; the
 * workers crash themselves inside locked sections too (see `worker.mjs`).
 * Nobody repairs anything: killed workers are replaced, and after the
 * deadline one more worker of the same implementation finishes every job it
 * can (past every lease) and takes each sidecar's lock once. Then
 * `check.mjs` verifies every invariant on disk and compares both
 * implementations' readers.
 *
 * Configurations: `ours` (every worker runs our store), `mixed` (some
 * workers run the reference), `reference` (every worker runs the reference,
 * for comparison). Run `node stress/run.mjs --help` for the options; the
 * exit code is non-zero when a configuration with our workers has a
 * violation.
 */
import { spawn } from "node:child_process"
import { createWriteStream } from "node:fs"
import { appendFile, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises"
import { cpus, loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { checkRun, readJournals } from "./check.mjs"

/** @import { ChildProcess } from "node:child_process" */
/** @import { Impl } from "./receipts.mjs" */
/** @import { Assignment, JournalEvent, WorkerConfig } from "./worker.mjs" */

/**
 * @typedef {{
 *   quick: boolean
 *   configs: Array<string>
 *   workers: number
 *   referenceWorkers: number
 *   duration: number
 *   sessions: number
 *   lease: number
 *   killEvery: number
 *   stallEvery: number
 *   appendEvery: number
 *   jobEvery: number
 *   selfKill: number
 *   json: string | undefined
 *   keep: boolean
 * }} Options
 */

/**
 * The options set by a number.
 * @typedef {"workers" | "referenceWorkers" | "duration" | "sessions" | "lease"
 *   | "killEvery" | "stallEvery" | "appendEvery" | "jobEvery" | "selfKill"} NumericOption
 */

/**
 * A worker that exited when it should not have, or the drain worker's failure.
 * @typedef {{
 *   readonly slot: number | "spare" | "drain"
 *   readonly impl: Impl
 *   readonly code: number | null
 *   readonly signal?: NodeJS.Signals | null
 * }} UnexpectedExit
 */

const here = fileURLToPath(new URL(".", import.meta.url))

const usage = `Usage: node stress/run.mjs [options]

  --quick                 CI configuration: 4 workers, 6 s, configurations ours and mixed
  --configs LIST          comma-separated: ours, mixed, reference (default: all three)
  --workers N             worker processes (default 8)
  --reference-workers N   reference workers in the mixed configuration (default 2)
  --duration S            seconds of contention per configuration (default 30)
  --sessions N            Sessions contended for (default 3)
  --lease MS              lease of every reservation (default 300)
  --kill-every MS         mean interval between SIGKILLs of a random worker (default 1500; quick 1000)
  --stall-every MS        mean interval between SIGSTOPs (1.6 leases long) of a random worker (default 2000)
  --append-every MS       mean interval between Session appends (default 150)
  --job-every MS          how fast new jobs appear, per Session (default 300)
  --self-kill P           chance of each in-lock crash point (K1, K2a, K2b) per settle (default 0.005)
  --json FILE             also write the figures as JSON
  --keep                  keep the temporary directories
`

/**
 * @param {ReadonlyArray<string>} argv
 * @returns {Options}
 */
const parseArgs = (argv) => {
  /** @type {Options} */
  const options = {
    quick: false,
    configs: ["ours", "mixed", "reference"],
    workers: 8,
    referenceWorkers: 2,
    duration: 30,
    sessions: 3,
    lease: 300,
    killEvery: 1500,
    stallEvery: 2000,
    appendEvery: 150,
    jobEvery: 300,
    selfKill: 0.005,
    json: undefined,
    keep: false
  }
  /** @type {Set<keyof Options>} */
  const explicit = new Set()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    const value = () => argv[++i]
    switch (arg) {
      case "--help":
        console.log(usage)
        process.exit(0)
        break
      case "--quick":
        options.quick = true
        break
      case "--keep":
        options.keep = true
        break
      case "--configs":
        options.configs = value().split(",")
        explicit.add("configs")
        break
      case "--json":
        options.json = value()
        break
      default: {
        /** @type {Record<string, NumericOption | undefined>} */
        const numeric = {
          "--workers": "workers",
          "--reference-workers": "referenceWorkers",
          "--duration": "duration",
          "--sessions": "sessions",
          "--lease": "lease",
          "--kill-every": "killEvery",
          "--stall-every": "stallEvery",
          "--append-every": "appendEvery",
          "--job-every": "jobEvery",
          "--self-kill": "selfKill"
        }
        const key = numeric[arg]
        if (key === undefined) {
          console.error(`unknown option ${arg}\n\n${usage}`)
          process.exit(2)
        }
        options[key] = Number(value())
        explicit.add(key)
      }
    }
  }
  if (options.quick) {
    if (!explicit.has("workers")) options.workers = 4
    if (!explicit.has("referenceWorkers")) options.referenceWorkers = 1
    if (!explicit.has("duration")) options.duration = 6
    if (!explicit.has("killEvery")) options.killEvery = 1000
    if (!explicit.has("configs")) options.configs = ["ours", "mixed"]
  }
  return options
}

/** @param {number} ms @returns {Promise<void>} */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
/** @param {number} mean */
const jitter = (mean) => Math.max(1, Math.round(mean * (0.5 + Math.random())))

/** @param {string} id @param {"user" | "assistant"} role @param {string} text */
const entryLine = (id, role, text) =>
  `${
    JSON.stringify({
      type: "message",
      id,
      message: { role, content: text, ...(role === "assistant" ? { stopReason: "stop" } : {}) }
    })
  }\n`

/**
 * Runs one configuration end to end and returns its figures.
 * @param {string} name
 * @param {Options} options
 */
const runConfiguration = async (name, options) => {
  const root = await mkdtemp(join(tmpdir(), `rarebit-stress-${name}-`))
  const sessionRoot = join(root, "sessions")
  const rarebitRoot = join(root, "rarebit")
  const runDir = join(root, "run")
  await mkdir(join(sessionRoot, "project"), { recursive: true })
  await mkdir(runDir, { recursive: true })
  /** @type {Array<{ readonly name: string; readonly file: string; entries: number }>} */
  const sessions = []
  for (let i = 0; i < options.sessions; i++) {
    const file = join(sessionRoot, "project", `s${i}.jsonl`)
    await writeFile(
      file,
      `${JSON.stringify({ type: "session", id: `stress-session-${i}` })}\n` +
        entryLine(`s${i}-u0`, "user", `question 0 of session ${i}`) +
        entryLine(`s${i}-a0`, "assistant", `answer 0 of session ${i}`)
    )
    sessions.push({ name: `s${i}`, file, entries: 2 })
  }

  /** @param {number} slot @returns {Impl} */
  const implOf = (slot) =>
    name === "ours"
      ? "ours"
      : name === "reference"
      ? "reference"
      : slot >= options.workers - options.referenceWorkers
      ? "reference"
      : "ours"
  /** @type {Omit<WorkerConfig, "impl">} */
  const baseConfig = {
    runDir,
    rarebitRoot,
    sessionRoot,
    sessions: sessions.map(({ file, name }) => ({ file, name })),
    leaseMs: options.lease,
    jobEveryMs: options.jobEvery,
    stallP: 0.02,
    lockStallP: 0.005,
    titleP: 0.15,
    selfKill: { K1: options.selfKill, K2a: options.selfKill, K2b: options.selfKill }
  }

  const figures = {
    orchestratorKills: 0,
    sigstops: 0,
    sessionAppends: 0,
    /** @type {Array<UnexpectedExit>} */
    unexpectedExits: [],
    hung: 0
  }
  /**
   * Workers put to work, by process.
   * @type {Map<
   *   ChildProcess,
   *   { readonly child: ChildProcess; readonly slot: number; readonly impl: Impl; stopped: boolean }
   * >}
   */
  const live = new Map()
  /**
   * Processes that have loaded everything and wait for a slot, by implementation.
   * @type {Record<Impl, Array<ChildProcess>>}
   */
  const spares = { ours: [], reference: [] }
  /** Slots waiting for a spare, by implementation. @type {Record<Impl, Array<number>>} */
  const waiting = { ours: [], reference: [] }
  /** @type {Set<ChildProcess>} */
  const processes = new Set()
  let stopping = false
  /** Set once every worker is ready. @type {Omit<Assignment, "slot"> | undefined} */
  let timing

  /** @param {ChildProcess} child @param {Impl} impl @param {number} slot */
  const assign = (child, impl, slot) => {
    live.set(child, { child, slot, impl, stopped: false })
    // Workers are put to work only once the clock has started.
    if (timing === undefined) throw new Error(`slot ${slot} assigned before the start`)
    child.send(/** @satisfies {Assignment} */ ({ slot, ...timing }))
  }
  /** @param {Impl} impl */
  const spawnSpare = (impl) => {
    const child = spawn(process.execPath, [join(here, "worker.mjs")], {
      env: {
        ...process.env,
        STRESS_CONFIG: JSON.stringify(/** @satisfies {WorkerConfig} */ ({ ...baseConfig, impl }))
      },
      stdio: ["ignore", "ignore", "pipe", "ipc"]
    })
    processes.add(child)
    child.stderr?.pipe(createWriteStream(join(runDir, `stderr-${impl}-${child.pid}.log`)))
    child.once("message", () => {
      const slot = waiting[impl].shift()
      if (slot !== undefined && !stopping) assign(child, impl, slot)
      else spares[impl].push(child)
    })
    child.on("exit", (code, signal) => {
      processes.delete(child)
      const worker = live.get(child)
      live.delete(child)
      spares[impl] = spares[impl].filter((spare) => spare !== child)
      if (worker === undefined) {
        if (!stopping && signal === null && code !== 0) figures.unexpectedExits.push({ slot: "spare", impl, code })
        return
      }
      if (signal === null && code !== 0) figures.unexpectedExits.push({ slot: worker.slot, impl, code })
      if (!stopping && timing !== undefined && Date.now() < timing.deadline - 20) replace(impl, worker.slot)
    })
  }
  /** @param {Impl} impl @param {number} slot */
  const replace = (impl, slot) => {
    const spare = spares[impl].shift()
    if (spare !== undefined) assign(spare, impl, slot)
    else waiting[impl].push(slot)
    spawnSpare(impl)
  }

  // Start every worker and a few spares, and start the clock once the workers are ready.
  const counts = { ours: 0, reference: 0 }
  for (let slot = 0; slot < options.workers; slot++) counts[implOf(slot)]++
  for (const impl of /** @type {const} */ (["ours", "reference"])) {
    for (let n = 0; n < counts[impl] + Math.min(3, counts[impl]); n++) spawnSpare(impl)
  }
  while (spares.ours.length < counts.ours || spares.reference.length < counts.reference) {
    if (figures.unexpectedExits.length > 0) {
      for (const child of processes) child.kill("SIGKILL")
      throw new Error(`workers failed to start (see ${runDir}): ${JSON.stringify(figures.unexpectedExits)}`)
    }
    await sleep(20)
  }
  const start = Date.now()
  const deadline = start + options.duration * 1000
  timing = { start, deadline }
  for (let slot = 0; slot < options.workers; slot++) {
    const spare = spares[implOf(slot)].shift()
    // The wait above counted a spare for every slot, and no exit has run since.
    if (spare === undefined) throw new Error(`no ${implOf(slot)} worker ready for slot ${slot}`)
    assign(spare, implOf(slot), slot)
  }

  const pickLive = () => {
    const workers = [...live.values()].filter((worker) => !worker.stopped)
    return workers[Math.floor(Math.random() * workers.length)]
  }
  /** @type {Set<NodeJS.Timeout>} */
  const timers = new Set()
  /** @param {number} mean @param {() => void} f */
  const every = (mean, f) => {
    /** @type {NodeJS.Timeout} */
    let handle
    const schedule = () => {
      handle = setTimeout(tick, jitter(mean))
      timers.add(handle)
    }
    const tick = () => {
      timers.delete(handle)
      if (stopping) return
      f()
      schedule()
    }
    schedule()
  }
  every(options.killEvery, () => {
    const worker = pickLive()
    if (worker === undefined) return
    figures.orchestratorKills++
    worker.child.kill("SIGKILL")
  })
  every(options.stallEvery, () => {
    const worker = pickLive()
    if (worker === undefined) return
    worker.stopped = true
    figures.sigstops++
    worker.child.kill("SIGSTOP")
    setTimeout(() => {
      worker.stopped = false
      if (live.has(worker.child)) worker.child.kill("SIGCONT")
    }, Math.round(options.lease * 1.6))
  })
  every(options.appendEvery, () => {
    const session = sessions[Math.floor(Math.random() * sessions.length)]
    const n = session.entries++
    const role = n % 2 === 0 ? "user" : "assistant"
    figures.sessionAppends++
    // One write of one whole line: readers never see half of it in practice.
    appendFile(session.file, entryLine(`${session.name}-e${n}`, role, `${role} turn ${n}`)).catch(() => undefined)
  })

  await sleep(Math.max(0, deadline - Date.now()))
  stopping = true
  for (const timer of timers) clearTimeout(timer)
  for (const worker of live.values()) if (worker.stopped) worker.child.kill("SIGCONT")
  // A worker still waiting for a lock after this is blocked for good (both stores wait about 10 s).
  const graceMs = options.quick ? 12_000 : 20_000
  const graceUntil = Date.now() + graceMs
  while (live.size > 0 && Date.now() < graceUntil) await sleep(50)
  for (const worker of live.values()) {
    figures.hung++
    worker.child.kill("SIGKILL")
  }
  while (live.size > 0) await sleep(20)
  for (const child of processes) child.kill("SIGKILL")
  while (processes.size > 0) await sleep(20)

  // Drain: one worker of the configuration's main implementation finishes what it can.
  await sleep(Math.round(options.lease * 1.5))
  const drainImpl = name === "reference" ? "reference" : "ours"
  /** @type {{ readonly code: number | null; readonly signal: NodeJS.Signals | null }} */
  const drained = await new Promise((resolve) => {
    const child = spawn(process.execPath, [join(here, "worker.mjs"), "--drain"], {
      env: {
        ...process.env,
        // A lock nobody can break will not be broken by waiting longer: one second per sidecar is enough.
        STRESS_CONFIG: JSON.stringify(
          /** @satisfies {WorkerConfig} */ ({
            ...baseConfig,
            ...timing,
            impl: drainImpl,
            worker: 9999,
            selfKill: { K1: 0, K2a: 0, K2b: 0 },
            lockRetry: { intervalMs: 5, attempts: 200 }
          })
        )
      },
      stdio: ["ignore", "ignore", "pipe"]
    })
    child.stderr?.pipe(createWriteStream(join(runDir, "stderr-drain.log")))
    child.on("exit", (code, signal) => resolve({ code, signal }))
  })
  if (drained.code !== 0) {
    figures.unexpectedExits.push({ slot: "drain", impl: drainImpl, code: drained.code, signal: drained.signal })
  }

  const checked = await checkRun({ rarebitRoot, sessionRoot, sessions, runDir })
  const events = await readJournals(runDir)
  const run = events.filter((event) => event.worker !== 9999)
  const drainEvents = events.filter((event) => event.worker === 9999)
  /** @param {ReadonlyArray<JournalEvent>} list @param {(event: JournalEvent) => unknown} predicate */
  const count = (list, predicate) => list.filter(predicate).length
  /** @param {(event: JournalEvent) => unknown} predicate */
  const byImpl = (predicate) => ({
    ours: count(run, (event) => event.impl === "ours" && predicate(event)),
    reference: count(run, (event) => event.impl === "reference" && predicate(event))
  })
  const settled = count(run, (event) => event.e === "settled")
  const otherErrors = run.concat(drainEvents).filter((event) => event.e === "error")
  const result = {
    configuration: name,
    loadAverage: loadavg().map((load) => Number(load.toFixed(1))),
    cpus: cpus().length,
    workers: options.workers,
    referenceWorkers: name === "mixed" ? options.referenceWorkers : name === "reference" ? options.workers : 0,
    durationS: options.duration,
    leaseMs: options.lease,
    sessions: options.sessions,
    jobs: checked.stats.settledClaims,
    jobsTouched: new Set(events.filter((event) => typeof event.job === "string").map((event) => event.job)).size,
    settles: settled,
    settlesPerSecond: Number((settled / options.duration).toFixed(1)),
    settlesByImpl: byImpl((event) => event.e === "settled"),
    reservations: {
      acquired: count(run, (event) => event.e === "acquired"),
      duplicate: count(run, (event) => event.e === "duplicate"),
      inFlight: count(run, (event) => event.e === "inFlight")
    },
    kills: figures.orchestratorKills + count(run, (event) => event.e === "selfKill"),
    killsBySignal: figures.orchestratorKills,
    killsInside: {
      K1: count(run, (event) => event.e === "selfKill" && event.point === "K1"),
      K2a: count(run, (event) => event.e === "selfKill" && event.point === "K2a"),
      K2b: count(run, (event) => event.e === "selfKill" && event.point === "K2b")
    },
    stalls: figures.sigstops + count(run, (event) => event.e === "stall" || event.e === "lockStall"),
    sessionAppends: figures.sessionAppends,
    takeovers: count(events, (event) => event.e === "acquired" && event.tookOver),
    fencedAttempts: count(events, (event) => event.e === "fenced"),
    locksBroken: count(events, (event) => event.e === "lockBroken"),
    settlementsRecovered: count(events, (event) => event.e === "duplicate" && event.recovered),
    tornClaimErrors: count(events, (event) => event.e === "tornClaim"),
    tornClaims: checked.stats.tornClaims,
    lockTimeouts: byImpl((event) => event.e === "lockTimeout"),
    drainLockTimeouts: count(drainEvents, (event) => event.e === "lockTimeout"),
    drainBlockedSessions: drainEvents.find((event) => event.e === "drained")?.blocked ?? [],
    leftoverLocks: checked.stats.leftoverLocks,
    duplicateJobs: {
      rerunByOurs: checked.stats.duplicateJobsRerunByOurs,
      rerunByReference: checked.stats.duplicateJobsRerunByReference
    },
    pending: checked.pending.length,
    currentReads: checked.readers,
    otherErrors: otherErrors.length,
    otherErrorSamples: [
      ...new Set(otherErrors.map((event) => `${event.impl} ${event.op}: ${event.error} ${event.message ?? ""}`))
    ].slice(0, 5),
    unexpectedExits: figures.unexpectedExits,
    hungWorkers: figures.hung,
    graceS: (options.quick ? 12_000 : 20_000) / 1000,
    violations: checked.violations.length,
    violationSamples: checked.violations.slice(0, 10),
    referenceIssues: checked.referenceIssues.length,
    referenceIssueSamples: checked.referenceIssues.slice(0, 5),
    pendingSamples: checked.pending.slice(0, 5),
    directory: options.keep ? root : undefined
  }
  if (!options.keep) await rm(root, { recursive: true, force: true })
  return result
}

/** @param {Awaited<ReturnType<typeof runConfiguration>>} result */
const print = (result) => {
  /** @param {string} label @param {string | number} value */
  const line = (label, value) => console.log(`  ${label.padEnd(28)} ${value}`)
  console.log(
    `\n== ${result.configuration}: ${result.workers} workers (${result.referenceWorkers} reference), ` +
      `${result.durationS} s, ` +
      `lease ${result.leaseMs} ms, ${result.sessions} Sessions (${result.cpus} CPUs, load average ${
        result.loadAverage.join(" ")
      })`
  )
  line("jobs settled", `${result.jobs} (of ${result.jobsTouched} touched)`)
  line(
    "settles/s",
    `${result.settlesPerSecond} (ours ${result.settlesByImpl.ours}, reference ${result.settlesByImpl.reference})`
  )
  line(
    "reservations",
    `${result.reservations.acquired} acquired, ${result.reservations.duplicate} duplicate, ` +
      `${result.reservations.inFlight} in flight`
  )
  line(
    "kills",
    `${result.kills} (${result.killsBySignal} by signal; ` +
      `in locks K1 ${result.killsInside.K1}, K2a ${result.killsInside.K2a}, K2b ${result.killsInside.K2b})`
  )
  line("stalls past the lease", result.stalls)
  line("Session appends", result.sessionAppends)
  line("takeovers", result.takeovers)
  line("fenced attempts", result.fencedAttempts)
  line("locks broken", result.locksBroken)
  line("settlements recovered", result.settlementsRecovered)
  line("torn claims", `${result.tornClaims} on disk, ${result.tornClaimErrors} reserve errors`)
  line(
    "lock timeouts",
    `ours ${result.lockTimeouts.ours}, reference ${result.lockTimeouts.reference}; drain ${result.drainLockTimeouts}${
      result.drainBlockedSessions.length ? ` (blocked: ${result.drainBlockedSessions.join(", ")})` : ""
    }`
  )
  line("leftover locks", result.leftoverLocks)
  line(
    "duplicate jobs",
    `re-run by ours ${result.duplicateJobs.rerunByOurs}, by the reference ${result.duplicateJobs.rerunByReference}`
  )
  line("jobs left pending", result.pending)
  line("current reads", JSON.stringify(result.currentReads))
  line("other errors", result.otherErrors)
  for (const sample of result.otherErrorSamples) line("", sample)
  if (result.unexpectedExits.length) line("unexpected worker exits", JSON.stringify(result.unexpectedExits))
  if (result.hungWorkers) {
    line("workers still blocked", `${result.hungWorkers} (${result.graceS} s after the deadline; killed)`)
  }
  line("violations", result.violations)
  for (const sample of result.violationSamples) line("", sample)
  if (result.referenceIssues) {
    line("reference issues", result.referenceIssues)
    for (const sample of result.referenceIssueSamples) line("", sample)
  }
  if (result.directory) line("directory", result.directory)
}

const options = parseArgs(process.argv.slice(2))
const command = `npm run stress -- ${process.argv.slice(2).join(" ")}`.trim()
console.log(`rarebit-store stress (${command}) on Node ${process.version}`)
/** @type {Array<Awaited<ReturnType<typeof runConfiguration>>>} */
const results = []
for (const name of options.configs) {
  const result = await runConfiguration(name, options)
  print(result)
  results.push(result)
}
if (options.json) {
  await writeFile(options.json, `${JSON.stringify({ command, node: process.version, results }, null, 2)}\n`)
}
const failed = results.filter((result) =>
  result.configuration !== "reference" &&
  (result.violations > 0 || result.unexpectedExits.length > 0 ||
    result.tornClaims > 0 && result.configuration === "ours")
)
if (failed.length > 0) {
  console.log(`\nFAILED: ${failed.map((result) => result.configuration).join(", ")}`)
  process.exit(1)
}
console.log("\nOK: no violations in any configuration with our workers")
