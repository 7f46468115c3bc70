/**
 * Child processes for the rows that measure whole processes or keep
 * workers alive between rounds.
 *
 * @since 0.1.0
 */
import { type ChildProcessByStdio, execFileSync, spawn } from "node:child_process"
import { accessSync, closeSync, constants, openSync, readFileSync, realpathSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { delimiter, join } from "node:path"
import type { Readable, Writable } from "node:stream"
import { pathToFileURL } from "node:url"
import { siblingScript } from "./Harness.js"

/** What one process run cost, seen from outside. */
export interface ProcessCost {
  readonly wallMs: number
  readonly peakRssMiB: number
  readonly cpuMs: number
}

let runs = 0

/**
 * Runs `node <args>` to completion and measures it: wall time from spawn to
 * exit, and (through the `PeakRss` preload) its peak RSS and CPU time.
 * stdout goes to `stdoutFile` or nowhere; a non-zero exit is an error
 * unless listed in `okCodes`.
 */
export const timedProcess = (
  args: ReadonlyArray<string>,
  options: { readonly stdoutFile?: string; readonly okCodes?: ReadonlyArray<number> } = {}
): Promise<ProcessCost> =>
  new Promise((resolve, reject) => {
    const resourceFile = join(tmpdir(), `rarebit-bench-${process.pid}-${runs++}.json`)
    const stdout = options.stdoutFile === undefined ? "ignore" : openSync(options.stdoutFile, "w")
    const start = performance.now()
    const child = spawn(process.execPath, ["--import", pathToFileURL(siblingScript("PeakRss.js")).href, ...args], {
      stdio: ["ignore", stdout, "inherit"],
      env: { ...process.env, BENCH_RESOURCE_FILE: resourceFile }
    })
    child.on("error", reject)
    child.on("exit", (code, signal) => {
      const wallMs = performance.now() - start
      if (typeof stdout === "number") closeSync(stdout)
      try {
        if (!(options.okCodes ?? [0]).includes(code ?? -1)) {
          throw new Error(`node ${args.join(" ")} exited with ${code ?? signal}`)
        }
        const usage = JSON.parse(readFileSync(resourceFile, "utf8")) as { peakRssMiB: number; cpuMs: number }
        resolve({ wallMs, ...usage })
      } catch (error) {
        reject(error)
      } finally {
        rmSync(resourceFile, { force: true })
      }
    })
  })

/**
 * A long-lived child speaking in lines: the script is started with `args`,
 * says it is ready once warmed up (`ready()` expects the line `ready`), then
 * answers each line written to its stdin (`request`, a JSON line; `send`, a
 * line as it is) with one line on stdout.
 */
export class LineChild {
  private readonly child: ChildProcessByStdio<Writable, Readable, null>
  private buffer = ""
  private readonly waiting: Array<{ resolve: (line: string) => void; reject: (error: Error) => void }> = []
  private readonly lines: Array<string> = []
  private exited: Error | undefined
  /** Settles when the child exits: resolved on exit code 0, rejected otherwise. */
  readonly done: Promise<void>

  constructor(script: string, args: ReadonlyArray<string>) {
    this.child = spawn(process.execPath, [siblingScript(script), ...args], { stdio: ["pipe", "pipe", "inherit"] })
    this.child.stdout.setEncoding("utf8")
    this.child.stdout.on("data", (chunk: string) => {
      this.buffer += chunk
      let newline: number
      while ((newline = this.buffer.indexOf("\n")) >= 0) {
        const line = this.buffer.slice(0, newline)
        this.buffer = this.buffer.slice(newline + 1)
        const waiter = this.waiting.shift()
        if (waiter === undefined) this.lines.push(line)
        else waiter.resolve(line)
      }
    })
    this.done = new Promise((resolve, reject) =>
      this.child.on("exit", (code, signal) => {
        this.exited = new Error(`${script} exited with ${code ?? signal}`)
        for (const waiter of this.waiting.splice(0)) waiter.reject(this.exited)
        if (code === 0) resolve()
        else reject(this.exited)
      })
    )
    // Awaiting `done` is optional: a failed exit also fails the pending `next`.
    this.done.catch(() => undefined)
  }

  get pid(): number | undefined {
    return this.child.pid
  }

  /** The next line the child prints. */
  next(): Promise<string> {
    const line = this.lines.shift()
    if (line !== undefined) return Promise.resolve(line)
    if (this.exited !== undefined) return Promise.reject(this.exited)
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }))
  }

  async ready(): Promise<void> {
    const line = await this.next()
    if (line !== "ready") throw new Error(`expected "ready", got ${line.slice(0, 200)}`)
  }

  /** Writes one line, as it is, to the child's stdin. */
  send(line: string): void {
    this.child.stdin.write(`${line}\n`)
  }

  /** The next line the child prints, parsed as JSON. */
  async nextJson<A>(): Promise<A> {
    return JSON.parse(await this.next()) as A
  }

  async request<A>(message: unknown): Promise<A> {
    this.child.stdin.write(`${JSON.stringify(message)}\n`)
    return JSON.parse(await this.next()) as A
  }

  /** Closes stdin (the child's cue to exit) and waits for it to exit. */
  close(): Promise<void> {
    if (this.exited !== undefined) return Promise.resolve()
    return new Promise((resolve) => {
      this.child.once("exit", () => resolve())
      this.child.stdin.end()
    })
  }
}

/** The short hash of the checked-out commit, with "+changes" when the tree differs from it. */
export const commitOf = (root: string): string => {
  try {
    const hash = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: root, encoding: "utf8" }).trim()
    const dirty =
      execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: root, encoding: "utf8" })
        .trim() !== ""
    return dirty ? `${hash}+changes` : hash
  } catch {
    return "unknown"
  }
}

/**
 * The system's Node: the first `node` on PATH outside any `node_modules`
 * (npm puts the devDependency's Node first while a script runs), with its
 * resolved path, so a caller can tell whether it is the one running.
 */
export const systemNode = ():
  | { readonly path: string; readonly realPath: string; readonly version: string }
  | undefined =>
{
  for (const directory of (process.env.PATH ?? "").split(delimiter)) {
    if (directory === "" || directory.split(/[\\/]/).includes("node_modules")) continue
    const candidate = join(directory, "node")
    try {
      accessSync(candidate, constants.X_OK)
      const realPath = realpathSync(candidate)
      if (realPath.split(/[\\/]/).includes("node_modules")) continue
      return { path: candidate, realPath, version: execFileSync(candidate, ["--version"], { encoding: "utf8" }).trim() }
    } catch {
      continue
    }
  }
  return undefined
}
