/**
 * Ctrl-C (SIGINT), SIGTERM and a closed terminal (SIGHUP) end a long
 * `verify` or `jobs` promptly: within two seconds of the signal, with exit
 * 130, 143 or 129 and one line on stderr, no stack trace. The store is large enough that a full scan takes seconds; the
 * signal is sent once the scan has started, seen as a file of the store open
 * in the process (`/proc/<pid>/fd`), not after a fixed sleep.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { spawn } from "node:child_process"
import { mkdir, readdir, readFile, readlink, writeFile } from "node:fs/promises"
import { join } from "node:path"
import { nodeWorld } from "../support/FileSystemSuite.js"
import { entry, jobId, makeRoots, type Roots, summaryReceipt, writeSession } from "../support/Reference.js"
import { CLI, cliIn, REPO, rootFlags, settleWith } from "./CliHarness.js"

const SIDECARS = 1000
const CLAIMS = 1000
const PROMPT_MS = 2000

/**
 * A store of 1,000 copies of one sidecar, holding `receiptsPerSidecar`
 * receipts, and 1,000 claims whose leases ran out.
 */
const makeStore = async (prefix: string, receiptsPerSidecar: number): Promise<Roots> => {
  const store = await makeRoots(prefix)
  const branch = [entry("u1", "user", "a question"), entry("a1", "assistant", "an answer")]
  await writeSession(store.sessionFile, "interrupt", branch)
  for (let job = 1; job <= receiptsPerSidecar; job++) {
    await settleWith("ours", store, store.sessionFile, job, summaryReceipt(branch, "interrupt", { summary: `s${job}` }))
  }
  const sidecar = await readFile(join(store.rarebitRoot, "materializations-v4", "project", "trace.jsonl"))
  for (let directory = 0; directory < SIDECARS / 100; directory++) {
    const folder = join(store.rarebitRoot, "materializations-v4", "bulk", String(directory))
    await mkdir(folder, { recursive: true })
    await Promise.all(
      Array.from({ length: 100 }, (_, index) => writeFile(join(folder, `session-${index}.jsonl`), sidecar))
    )
  }
  const claims = Array.from({ length: CLAIMS }, (_, index) => jobId(1000 + index))
  for (let start = 0; start < claims.length; start += 100) {
    await Promise.all(
      claims.slice(start, start + 100).map((id) =>
        writeFile(
          join(store.rarebitRoot, "jobs-v4", `${id}.json`),
          `${
            JSON.stringify({
              jobId: id,
              state: "active",
              leaseToken: "t",
              claimedAt: new Date().toISOString(),
              leaseMs: 1
            })
          }\n`
        )
      )
    )
  }
  return store
}

/**
 * A scan that outlasts process start by far on any machine: with three
 * receipts a sidecar the executable scanned it in under 100 ms, and a fast
 * machine finished before the signal could be sent.
 */
let roots: Roots

beforeAll(async () => {
  roots = await makeStore("rarebit-cli-interrupt-", 120)
}, 120_000)

afterAll(async () => {
  await roots?.cleanup()
})

/** Whether the process has a file under `directory` open right now. */
const hasOpenUnder = async (pid: number, directory: string): Promise<boolean> => {
  const descriptors = await readdir(`/proc/${pid}/fd`).catch(() => [])
  for (const fd of descriptors) {
    const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => "")
    if (target.startsWith(`${directory}/`)) return true
  }
  return false
}

interface Interrupted {
  readonly code: number | null
  readonly stderr: string
  readonly stdout: string
  /** From the signal to the process closing its output. */
  readonly elapsedMs: number
}

const interrupt = (
  command: string,
  signal: "SIGINT" | "SIGTERM" | "SIGHUP",
  extra: ReadonlyArray<string> = []
): Promise<Interrupted> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, command, ...extra, ...rootFlags(roots)], {
      cwd: REPO,
      env: { ...process.env, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    let exited = false
    let sentAt = 0
    child.stdout.setEncoding("utf8").on("data", (chunk) => (stdout += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk))
    child.on("error", reject)
    child.on("close", (code) => {
      exited = true
      if (sentAt === 0) reject(new Error(`${command} ended before it could be interrupted: ${stdout}${stderr}`))
      else resolve({ code, stdout, stderr, elapsedMs: Date.now() - sentAt })
    })
    const poll = async () => {
      // The close handler sets `exited` while this loop awaits.
      // oxlint-disable-next-line no-unmodified-loop-condition
      while (!exited) {
        if (await hasOpenUnder(child.pid!, roots.rarebitRoot)) {
          sentAt = Date.now()
          child.kill(signal)
          return
        }
        await new Promise((wake) => setTimeout(wake, 2))
      }
    }
    poll().catch(reject)
  })

// The scan is seen started through /proc/<pid>/fd (`hasOpenUnder`).
describe.runIf(process.platform === "linux")("interrupting the executable", () => {
  for (const command of ["verify", "jobs"]) {
    for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143], ["SIGHUP", 129]] as const) {
      it(`${signal} ends ${command} within ${PROMPT_MS} ms with exit ${code} and one line`, async () => {
        const run = await interrupt(command, signal)
        assert.strictEqual(run.code, code, run.stderr)
        assert.isBelow(run.elapsedMs, PROMPT_MS)
        assert.strictEqual(run.stderr, `rarebit-store: interrupted (${signal})\n`)
        assert.strictEqual(run.stdout, "")
      }, 60_000)
    }
  }

  it("under --json the one line is the JSON error", async () => {
    const run = await interrupt("verify", "SIGINT", ["--json"])
    assert.strictEqual(run.code, 130, run.stderr)
    assert.deepStrictEqual(JSON.parse(run.stderr), {
      error: { tag: "Interrupted", message: "interrupted (SIGINT)", hint: null, exitCode: 130 }
    })
    assert.strictEqual(run.stderr.split("\n").length, 2)
  }, 60_000)
})

describe("interrupting an in-process scan on the synchronous file system", () => {
  it.live(
    "timers still fire during a verify over DirectFileSystem, and an interrupt ends it promptly",
    () =>
      Effect.gen(function*() {
        const fiber = yield* Effect.forkChild(
          cliIn(["verify", ...rootFlags(roots)]).pipe(Effect.provide(nodeWorld.layer))
        )
        // A signal is handled by the event loop, like this timer: both need the
        // scan to yield now and then, although each call it makes is synchronous.
        // Had the scan held the loop, this timer would fire only once the scan was over.
        yield* Effect.sleep("100 millis")
        assert.isUndefined(fiber.pollUnsafe(), "the timer fired only after the scan: make the store larger")
        const interruptedFrom = Date.now()
        const exit = yield* Fiber.interrupt(fiber).pipe(Effect.andThen(Fiber.await(fiber)))
        assert.isBelow(Date.now() - interruptedFrom, PROMPT_MS)
        assert.isTrue(Exit.hasInterrupts(exit), "the scan finished before it was interrupted: make the store larger")
      }),
    60_000
  )
})
