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
import { existsSync, readFileSync, readlinkSync } from "node:fs"
import { lstat, mkdir, readdir, readFile, writeFile } from "node:fs/promises"
import { hostname } from "node:os"
import { dirname, join, relative } from "node:path"
import { runCli as runCliEffect } from "../../src/cli/Cli.js"
import * as ProcessOwner from "../../src/platform/ProcessOwner.js"
import * as Ours from "../../src/promise/index.js"
import type { Receipt } from "../../src/protocol/Receipt.js"
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

/** The owner evidence of the test process itself, read the way the store reads its own. */
export const liveOwnerEvidence = () => {
  const boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()
  const stat = readFileSync("/proc/self/stat", "utf8")
  const startTicks = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]
  const pidNamespace = readlinkSync("/proc/self/ns/pid")
  const timeNamespace = existsSync("/proc/self/ns/time") ? readlinkSync("/proc/self/ns/time") : undefined
  return {
    pid: process.pid,
    hostname: hostname(),
    bootId: boot,
    startTicks,
    pidNamespace,
    ...(timeNamespace ? { timeNamespace } : {})
  }
}

/** Owner evidence of a process that has exited: a child that ran `true`. */
export const deadOwnerEvidence = async () => {
  const child = spawn("true")
  const pid = child.pid!
  await new Promise((resolve) => child.on("exit", resolve))
  return { ...liveOwnerEvidence(), pid, startTicks: "1" }
}

/** A lock line as the reference writes it (no evidence) or as ours does. */
export const writeLock = async (
  lockPath: string,
  token: string,
  claimedAtMs: number,
  owner?: Record<string, unknown>
): Promise<void> => {
  await mkdir(dirname(lockPath), { recursive: true })
  const record = { token, claimedAt: new Date(claimedAtMs).toISOString(), ...(owner ? { owner } : {}) }
  await writeFile(lockPath, `${JSON.stringify(record)}\n`, { mode: 0o600 })
}

export const readText = (path: string) => readFile(path, "utf8")

export { Ours }
