/**
 * A commit lock held from another PID namespace on the same host, for real:
 * the holder runs our built store (`dist/`) under `unshare --user --pid
 * --fork --mount-proc`, where its pid is tiny and may name a live or gone
 * process of the root namespace, and stops inside the locked section. A
 * waiter in the root namespace must give up with `LockHeld` instead of
 * breaking the lock, `rarebit-store unlock` must refuse it, and the holder
 * must then settle as if nobody had been there.
 *
 * Skipped only where this machine cannot create the namespaces (no `unshare`,
 * or unprivileged user namespaces disabled); the reason goes to
 * `test-reports/pid-namespace.txt`, shown at the end of the run.
 */
import { afterEach, assert, beforeEach, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { spawn, spawnSync } from "node:child_process"
import { readFileSync, readlinkSync } from "node:fs"
import { readFile, writeFile } from "node:fs/promises"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import * as NodeStore from "../../src/platform/NodeStore.js"
import { RarebitStore } from "../../src/store/RarebitStore.js"
import type { Acquired } from "../../src/store/write/Reservation.js"
import { cli, REPO, rootFlags } from "../cli/CliHarness.js"
import { entry, jobId, makeRoots, type Roots, Store, summaryReceipt, writeSession } from "../support/Reference.js"
import { report } from "../support/TestReport.js"

/** A new user, PID and mount namespace (with its own /proc); the holder dies with `unshare`. */
const UNSHARE = ["--user", "--pid", "--fork", "--mount-proc", "--kill-child"]

/** Why this machine cannot run the test, or `undefined` when it can. */
const unshareUnavailable = (): string | undefined => {
  const probe = spawnSync("unshare", [...UNSHARE, "true"], { encoding: "utf8", timeout: 10_000 })
  if (probe.error !== undefined) return `\`unshare\` cannot be run here (${probe.error.message})`
  if (probe.status !== 0) {
    return `\`unshare ${UNSHARE.join(" ")} true\` failed (exit ${probe.status}): ${probe.stderr.trim()}`
  }
  return undefined
}

const unavailable = unshareUnavailable()
if (unavailable !== undefined) {
  report("pid-namespace", `PidNamespace: skipped, a second PID namespace is not available: ${unavailable}`)
}

/**
 * Takes the commit lock through the built Promise API, reports the lock file
 * it holds, and stays inside the locked section until told to go on.
 */
const HOLDER = `
const config = JSON.parse(process.argv[2])
const store = await import(config.moduleUrl)
const { readFileSync, readlinkSync } = await import("node:fs")
const location = { sessionFile: config.sessionFile, sessionRoot: config.sessionRoot, rarebitRoot: config.rarebitRoot }
let released = false
const go = new Promise((resolve) => process.stdin.once("data", () => resolve(released = true)))
// The test went away without letting it go on: leave, and take the lock's namespace with it.
process.stdin.once("end", () => released || process.exit(3))
const reservation = await store.reserveRarebitJob({ ...location, jobId: config.jobId })
if (!reservation.acquired) throw new Error("holder: job not acquired")
reservation.hooks = {
  afterLeaseValidated: async () => {
    process.stdout.write(JSON.stringify({
      locked: readFileSync(config.lockPath, "utf8"),
      pid: process.pid,
      pidNamespace: readlinkSync("/proc/self/ns/pid")
    }) + "\\n")
    await go
  }
}
const settled = await store.settleRarebitJob(reservation, config.receipt)
process.stdout.write(JSON.stringify({ settled }) + "\\n")
`

interface Holder {
  /** The holder's first report, once it is inside the locked section. */
  readonly locked: Promise<{ readonly locked: string; readonly pid: number; readonly pidNamespace: string }>
  readonly go: () => void
  readonly done: Promise<
    { readonly code: number | null; readonly lines: ReadonlyArray<string>; readonly stderr: string }
  >
  readonly kill: () => void
}

const startHolder = (script: string, config: Record<string, unknown>): Holder => {
  const child = spawn("unshare", [...UNSHARE, process.execPath, script, JSON.stringify(config)], {
    cwd: REPO,
    stdio: ["pipe", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  let reportLocked: (line: string) => void = () => {}
  const firstLine = new Promise<string>((resolve) => (reportLocked = resolve))
  child.stdout.setEncoding("utf8").on("data", (chunk) => {
    stdout += chunk
    const end = stdout.indexOf("\n")
    if (end >= 0) reportLocked(stdout.slice(0, end))
  })
  child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk))
  const done = new Promise<{ code: number | null; lines: Array<string>; stderr: string }>((resolve, reject) => {
    child.on("error", reject)
    child.on("close", (code) => resolve({ code, lines: stdout.split("\n").filter((line) => line !== ""), stderr }))
  })
  const locked = Promise.race([
    firstLine.then((line) => JSON.parse(line)),
    done.then(({ code, stderr }) => {
      throw new Error(`the holder exited (${code}) before taking the lock: ${stderr}`)
    })
  ])
  return {
    locked,
    go: () => child.stdin.end("go\n"),
    done,
    kill: () => {
      child.stdin.destroy()
      child.kill("SIGKILL")
    }
  }
}

const branch = [entry("u1", "user", "a question"), entry("a1", "assistant", "an answer")]

describe.skipIf(unavailable !== undefined)("a commit lock held from another PID namespace", () => {
  let roots: Roots
  let holder: Holder | undefined
  beforeEach(async () => {
    roots = await makeRoots("rarebit-pidns-")
    await writeSession(roots.sessionFile, "pidns-session", branch)
  })
  afterEach(async () => {
    holder?.kill()
    holder = undefined
    await roots?.cleanup()
  })

  it.live(
    "is never broken by a waiter of the root namespace, nor removed by unlock, and its holder settles",
    () =>
      Effect.gen(function*() {
        const lockPath = `${Store.rarebitMaterializationPath(roots.sessionFile, roots.location)}.commit-lock`
        const script = join(roots.root, "holder.mjs")
        yield* Effect.promise(() => writeFile(script, HOLDER))
        const started = startHolder(script, {
          moduleUrl: pathToFileURL(join(REPO, "dist", "promise", "index.js")).href,
          ...roots.location,
          sessionFile: roots.sessionFile,
          lockPath,
          jobId: jobId(1),
          receipt: summaryReceipt(branch, "pidns-session", { summary: "held across namespaces" })
        })
        holder = started
        const inside = yield* Effect.promise(() => started.locked)
        const heldLock = inside.locked
        assert.notStrictEqual(
          inside.pidNamespace,
          readlinkSync("/proc/self/ns/pid"),
          "the holder runs in another PID namespace"
        )

        // A waiter of the root namespace, with a short retry (20 attempts, 5 ms apart).
        const waiterStore = NodeStore.layer({
          ...roots.location,
          lockRetry: { intervalMs: 5, attempts: 20 }
        })
        const waiter = yield* Effect.gen(function*() {
          const store = yield* RarebitStore
          const reservation = yield* store.reserve({ jobId: jobId(2), sessionFile: roots.sessionFile })
          assert.strictEqual(reservation._tag, "Acquired")
          const exit = yield* Effect.exit(
            store.settle(reservation as Acquired, summaryReceipt(branch, "pidns-session"))
          )
          return { reservation: reservation as Acquired, exit }
        }).pipe(Effect.provide(waiterStore))
        const outcome = Exit.isSuccess(waiter.exit)
          ? "settled (the live lock was broken)"
          : (waiter.exit.cause.reasons.find((reason) => reason._tag === "Fail") as
            | { error?: { _tag?: string } }
            | undefined)
            ?.error?._tag
        assert.strictEqual(outcome, "LockHeld", "the waiter gives up")
        assert.strictEqual(yield* Effect.promise(() => readFile(lockPath, "utf8")), heldLock, "the lock is untouched")

        // The operator's repair without --force refuses it too (the CLI, run in
        // this process of the root namespace).
        const refused = yield* cli(["unlock", "--session", roots.sessionFile, ...rootFlags(roots)])
        assert.strictEqual(refused.code, 5, refused.stdout + refused.stderr)
        assert.match(refused.stderr, /another PID namespace/)
        assert.include(refused.stderr, JSON.parse(heldLock).owner.pidNamespace)
        assert.strictEqual(yield* Effect.promise(() => readFile(lockPath, "utf8")), heldLock, "unlock left it")

        // The evidence names the holder's namespace, which is what kept it safe.
        const owner = JSON.parse(heldLock).owner
        assert.strictEqual(owner.pid, inside.pid)
        assert.strictEqual(owner.pidNamespace, inside.pidNamespace)

        // The holder finishes its settlement as if nobody had been there.
        started.go()
        const finished = yield* Effect.promise(() => started.done)
        assert.strictEqual(finished.code, 0, finished.stderr)
        assert.isDefined(JSON.parse(finished.lines.at(-1)!).settled)
        const claim = JSON.parse(readFileSync(join(roots.rarebitRoot, "jobs-v4", `${jobId(1)}.json`), "utf8"))
        assert.strictEqual(claim.state, "settled")

        // With the lock released, the waiter's job settles.
        yield* Effect.gen(function*() {
          const store = yield* RarebitStore
          yield* store.settle(waiter.reservation, summaryReceipt(branch, "pidns-session"))
        }).pipe(Effect.provide(waiterStore))
        const current = yield* Effect.promise(() =>
          Store.readRarebitCurrent({ sessionFile: roots.sessionFile, ...roots.location })
        )
        assert.strictEqual(current.availability, "available")
      }),
    60_000
  )
})
