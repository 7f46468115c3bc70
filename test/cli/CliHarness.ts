/**
 * Runs `rarebit-store` as a user would, and builds the temporary stores the
 * CLI tests look at, with sidecars written by the reference store and by
 * ours.
 *
 * Three ways to run it. In-process, the `runCli` entry of `src/cli/Cli.ts`
 * with the console captured: `cliIn` on the file system of the test's world
 * (the in-memory one, or the disk), `cli` over Node's services for stores
 * the reference wrote on disk. Both spare a process start (about a second of
 * loading Effect) per call, and are where command logic is tested. `runCli`
 * spawns the built executable (`node dist/cli/main.js`), for what only a
 * process shows: its exit code, colors on a terminal or not, signals, a
 * closed pipe, the version of the package it was installed from. It runs
 * `dist/` as built; the run's global setup fails when that is older than
 * `src/` (`test/support/GlobalSetup.ts`).
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Console, Effect, type FileSystem, Layer, type Path, Stdio, Terminal } from "effect"
import { ChildProcessSpawner } from "effect/process"
import { TestConsole } from "effect/testing"
import { spawn } from "node:child_process"
import { lstat, mkdir, readdir, readFile, writeFile } from "node:fs/promises"
import { dirname, join, relative } from "node:path"
import { runCli as runCliEffect } from "../../src/cli/Cli.js"
import * as ProcessOwner from "../../src/platform/ProcessOwner.js"
import * as Ours from "../../src/promise/index.js"
import type { Receipt } from "../../src/protocol/Receipt.js"
import type { OwnerEvidence } from "../../src/store/lock/LockOwner.js"
import { jobId, type Roots, Store } from "../support/Reference.js"

export const REPO = new URL("../../", import.meta.url).pathname.replace(/\/$/, "")
export const CLI = join(REPO, "dist", "cli", "main.js")

export interface CliRun {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs the CLI with `args`, without colors, and collects its output. */
export const runCli = (args: ReadonlyArray<string>, env: Record<string, string> = {}): Promise<CliRun> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: REPO,
      env: { ...process.env, NO_COLOR: "1", ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (chunk) => (stdout += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk))
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, stdout, stderr }))
  })

/** The CLI's other services, for runs on a test world: no terminal, no stdin, no child processes. */
export const cliTestServices = Layer.mergeAll(
  Stdio.layerTest({}),
  Layer.succeed(
    Terminal.Terminal,
    Terminal.make({
      columns: Effect.succeed(80),
      rows: Effect.succeed(24),
      size: Effect.die("no terminal in CLI tests"),
      readInput: Effect.die("no terminal in CLI tests"),
      readLine: Effect.die("no terminal in CLI tests"),
      display: () => Effect.void
    })
  ),
  Layer.succeed(
    ChildProcessSpawner.ChildProcessSpawner,
    ChildProcessSpawner.make(() => Effect.die("no child processes in CLI tests"))
  )
)

/** Runs the CLI in-process on `args` with a `TestConsole` of its own, and reads back what it printed. */
const captured = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const console = yield* TestConsole.make
    const code = yield* runCliEffect(args).pipe(Effect.provideService(Console.Console, console))
    // The CLI prints one value per call, each a line.
    const text = (lines: ReadonlyArray<unknown>) => lines.map((line) => `${String(line)}\n`).join("")
    return { code, stdout: text(yield* console.logLines), stderr: text(yield* console.errorLines) } satisfies CliRun
  })

/**
 * Runs the CLI in-process on `args` over the `FileSystem` and `Path` of the
 * environment (a test world), capturing what it prints; the result has the
 * shape of a spawned run.
 */
export const cliIn = (
  args: ReadonlyArray<string>
): Effect.Effect<CliRun, never, FileSystem.FileSystem | Path.Path> =>
  captured(args).pipe(Effect.provide(cliTestServices))

/**
 * Runs the CLI in-process on `args` over Node's services, capturing what it
 * prints; the result has the shape of a spawned run.
 */
export const cli = (args: ReadonlyArray<string>): Effect.Effect<CliRun> =>
  captured(args).pipe(Effect.provide(Layer.merge(NodeServices.layer, ProcessOwner.layer)))

/** The global flags that point the CLI at a temporary store. */
export const rootFlags = (roots: Roots): Array<string> => [
  "--root",
  roots.rarebitRoot,
  "--session-root",
  roots.sessionRoot
]

/** A stack trace line, which a user mistake must never print. */
export const STACK_LINE = /^\s+at\s/m

export type Implementation = "reference" | "ours"

/** Reserves and settles one job with either implementation. */
export const settleWith = async (
  implementation: Implementation,
  roots: Roots,
  sessionFile: string,
  job: number,
  receipt: Receipt
): Promise<Record<string, unknown>> => {
  const api = implementation === "reference" ? Store : Ours
  const reservation = await api.reserveRarebitJob({ jobId: jobId(job), sessionFile, ...roots.location })
  if (!reservation.acquired) throw new Error(`job ${job} was not acquired`)
  return api.settleRarebitJob(reservation, receipt)
}

/** Every file and directory under `root` with its size and modification time. */
export const snapshotTree = async (root: string): Promise<Record<string, string>> => {
  const tree: Record<string, string> = {}
  const visit = async (directory: string) => {
    for (const entry of await readdir(directory, { withFileTypes: true }).catch(() => [])) {
      const child = join(directory, entry.name)
      const info = await lstat(child)
      tree[relative(root, child)] = `${entry.isDirectory() ? "d" : info.size}:${info.mtimeMs}`
      if (entry.isDirectory()) await visit(child)
    }
  }
  await visit(root)
  return tree
}

/** The owner evidence of the test process itself: what this platform's probe writes into a lock it takes. */
export const liveOwnerEvidence = (): OwnerEvidence => {
  const own = ProcessOwner.ownerProbeFor(process.platform).current
  if (own === undefined) throw new Error(`no owner evidence on ${process.platform}`)
  return own
}

/** Owner evidence of a process that has exited: a child Node that did nothing. */
export const deadOwnerEvidence = async () => {
  const child = spawn(process.execPath, ["-e", ""])
  const pid = child.pid!
  await new Promise((resolve) => child.on("exit", resolve))
  return { ...liveOwnerEvidence(), pid, startTicks: "1" }
}

/** A lock line as the reference writes it (no evidence) or as ours does. */
export const writeLock = async (
  lockPath: string,
  token: string,
  claimedAtMs: number,
  owner?: OwnerEvidence | Readonly<Record<string, unknown>>
): Promise<void> => {
  await mkdir(dirname(lockPath), { recursive: true })
  const record = { token, claimedAt: new Date(claimedAtMs).toISOString(), ...(owner ? { owner } : {}) }
  await writeFile(lockPath, `${JSON.stringify(record)}\n`, { mode: 0o600 })
}

export const readText = (path: string) => readFile(path, "utf8")

export { Ours }

/** A CLI process whose stdout is handed out line by line (for commands that follow). */
export interface SpawnedCli {
  readonly lines: AsyncIterator<string>
  readonly closed: Promise<{ readonly code: number | null; readonly stderr: string }>
  readonly signal: (signal: NodeJS.Signals) => void
  readonly closeStdout: () => void
}

/** Spawns the CLI with `args`, without colors, and hands out its stdout line by line. */
export const spawnCliLines = (args: ReadonlyArray<string>): SpawnedCli => {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: REPO,
    env: { ...process.env, NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let stderr = ""
  child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk))
  const closed = new Promise<{ code: number | null; stderr: string }>((resolve) =>
    child.on("close", (code) => resolve({ code, stderr }))
  )
  const pending: Array<string> = []
  const waiting: Array<(line: string) => void> = []
  let partial = ""
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    partial += chunk
    for (let newline = partial.indexOf("\n"); newline >= 0; newline = partial.indexOf("\n")) {
      const line = partial.slice(0, newline)
      partial = partial.slice(newline + 1)
      const waiter = waiting.shift()
      if (waiter) waiter(line)
      else pending.push(line)
    }
  })
  const lines: AsyncIterator<string> = {
    next: () =>
      pending.length > 0
        ? Promise.resolve({ done: false, value: pending.shift()! })
        : Promise.race([
          new Promise<IteratorResult<string>>((resolve) => waiting.push((value) => resolve({ done: false, value }))),
          closed.then((end): IteratorResult<string> => {
            throw new Error(`the CLI exited with ${end.code}: ${end.stderr}`)
          })
        ])
  }
  return { lines, closed, signal: (signal) => child.kill(signal), closeStdout: () => child.stdout.destroy() }
}
