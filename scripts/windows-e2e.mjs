/**
 * The store's full cycle on Windows Node, run by `scripts/windows-e2e.sh`
 * with a Windows `node.exe` (under Wine on this project's Linux machines).
 *
 *   node.exe scripts/windows-e2e.mjs <results file>
 *
 * Against the built package (`dist/`), on a fresh store in a Windows temp
 * directory: reserve, a watch that sees the settle, settle, current and
 * history through two spellings (case) of one Session path, duplicate,
 * release, the CLI's `verify`, a polling watch, and then the removal of
 * the Session's folder. Each step appends one JSON line
 * `{ step, ok, detail }` to the results file (a Wine process cannot write to
 * a Unix pipe, so nothing is reported on stdout); the last line is
 * `{ step: "done" }`. The runner asserts on that file.
 */
import { spawnSync } from "node:child_process"
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const results = process.argv[2]
if (results === undefined) throw new Error("usage: node windows-e2e.mjs <results file>")
const project = resolve(dirname(fileURLToPath(import.meta.url)), "..")
/** @param {string} file */
const dist = (file) => pathToFileURL(join(project, "dist", file)).href

/** @param {string} step @param {boolean} ok @param {unknown} detail */
const report = (step, ok, detail) => appendFileSync(results, `${JSON.stringify({ step, ok, detail })}\n`)
let failed = 0
/** Runs one step; a throw or a false check is a failed step, and the run goes on. */
/**
 * @template A
 * @param {string} name
 * @param {() => Promise<A>} body
 * @returns {Promise<A | undefined>}
 */
const step = async (name, body) => {
  try {
    const detail = await body()
    report(name, true, detail)
    return detail
  } catch (error) {
    failed++
    report(name, false, error instanceof Error ? `${error.name}: ${error.message}` : String(error))
    return undefined
  }
}
/** @param {boolean} condition @param {string} message */
const check = (condition, message) => {
  if (!condition) throw new Error(message)
}

writeFileSync(results, "")
// Diagnostics the runner may pass through Wine's environment (e.g. RAREBIT_STORE_CACHE_MAX_BYTES=0).
report("environment", true, { cacheMaxBytes: process.env.RAREBIT_STORE_CACHE_MAX_BYTES ?? "default" })
report("platform", process.platform === "win32", `${process.version} ${process.platform} ${process.arch}`)

const plain = await import(dist("promise/index.js"))
const { Receipts } = await import(dist("testing/index.js"))

const base = mkdtempSync(join(tmpdir(), "rarebit-e2e-"))
const sessionRoot = join(base, "sessions")
const rarebitRoot = join(base, "rarebit")
const sessionDir = join(sessionRoot, "Project")
// One Session, two spellings: what Pi wrote and an all-capitals one.
const spellingA = join(sessionDir, "Trace.jsonl")
const spellingB = join(sessionRoot, "PROJECT", "TRACE.JSONL")
const location = { sessionRoot, rarebitRoot }
/** @param {number} n */
const jobId = (n) => n.toString(16).padStart(64, "0")

const branch = [
  { id: "u1", type: "message", message: { role: "user", content: "hello from windows" } },
  { id: "a1", type: "message", message: { role: "assistant", content: "hi", stopReason: "stop" } }
]
mkdirSync(sessionDir, { recursive: true })
writeFileSync(
  spellingA,
  [{ type: "session", id: "s-win" }, ...branch].map((line) => JSON.stringify(line)).join("\n") + "\n"
)
report("setup", true, { base })

const receipt = Receipts.summaryReceipt(branch, {
  sessionId: "s-win",
  observedAt: new Date().toISOString(),
  summary: "windows"
})

const reservation = await step("reserve", async () => {
  const reserved = await plain.reserveRarebitJob({ ...location, sessionFile: spellingA, jobId: jobId(1) })
  check(reserved.acquired === true, `not acquired: ${JSON.stringify(reserved)}`)
  return reserved
})

// Watches started before the settle, one per spelling: each must see it.
const watchAbort = new AbortController()
const watchTimer = setTimeout(() => watchAbort.abort(), 20_000)
/** @param {string} sessionFile */
const watchUntilAvailable = async (sessionFile) => {
  /** @type {Array<string>} */
  const seen = []
  for await (
    const current of plain.watchRarebitCurrent({ ...location, sessionFile }, { signal: watchAbort.signal })
  ) {
    seen.push(current.availability)
    if (current.availability === "available") return seen
  }
  return seen
}
const watched = { A: watchUntilAvailable(spellingA), B: watchUntilAvailable(spellingB) }
// Let the watches take their first reads before the settle.
await new Promise((resolve) => setTimeout(resolve, 1_000))

await step("settle", async () => {
  check(reservation !== undefined, "no reservation")
  const settled = await plain.settleRarebitJob(reservation, receipt)
  check(settled.jobId === jobId(1), `settled ${settled.jobId}`)
  return { path: settled.path }
})

for (const name of /** @type {const} */ (["A", "B"])) {
  await step(`watch sees the settle (spelling ${name})`, async () => {
    const seen = await watched[name]
    check(seen.at(-1) === "available", `saw ${JSON.stringify(seen)}`)
    return seen
  })
}
clearTimeout(watchTimer)
watchAbort.abort()

for (const [name, sessionFile] of [["A", spellingA], ["B", spellingB]]) {
  await step(`readRarebitCurrent (spelling ${name})`, async () => {
    const current = await plain.readRarebitCurrent({ ...location, sessionFile })
    check(current.availability === "available", `availability ${current.availability}`)
    check(current.receipt.jobId === jobId(1), `jobId ${current.receipt.jobId}`)
    return current.artifactState.syncState
  })
  await step(`readRarebitHistory (spelling ${name})`, async () => {
    const history = await plain.readRarebitHistory({ ...location, sessionFile })
    const ids = history.records.map((/** @type {any} */ item) => item.record.jobId)
    check(ids.length === 1 && ids[0] === jobId(1), `records ${JSON.stringify(ids)}`)
    return ids.length
  })
}

await step("duplicate (spelling B)", async () => {
  const again = await plain.reserveRarebitJob({ ...location, sessionFile: spellingB, jobId: jobId(1) })
  check(again.acquired === false && again.duplicate === true, JSON.stringify(again))
  return "duplicate"
})

await step("release", async () => {
  const first = await plain.reserveRarebitJob({ ...location, sessionFile: spellingA, jobId: jobId(2) })
  check(first.acquired === true, `first reserve ${JSON.stringify(first)}`)
  const held = await plain.reserveRarebitJob({ ...location, sessionFile: spellingA, jobId: jobId(2) })
  check(held.acquired === false && held.duplicate !== true, `while held ${JSON.stringify(held)}`)
  await plain.releaseRarebitJob(first)
  const after = await plain.reserveRarebitJob({ ...location, sessionFile: spellingA, jobId: jobId(2) })
  check(after.acquired === true, `after release ${JSON.stringify(after)}`)
  await plain.releaseRarebitJob(after)
  return "released and reserved again"
})

await step("CLI verify", async () => {
  const cli = join(project, "dist", "cli", "main.js")
  const run = spawnSync(
    process.execPath,
    [cli, "verify", "--root", rarebitRoot, "--session-root", sessionRoot, "--json"],
    { encoding: "utf8", timeout: 60_000 }
  )
  check(run.status === 0, `exit ${run.status}: ${run.stderr || run.stdout}`)
  return run.stdout.trim().slice(0, 300)
})

await step("polling watch, then the Session's folder can be deleted", async () => {
  const abort = new AbortController()
  const timer = setTimeout(() => abort.abort(), 30_000)
  const seen = []
  try {
    for await (
      const current of plain.watchRarebitCurrent(
        { ...location, sessionFile: spellingA },
        { signal: abort.signal, mode: "poll", pollIntervalMs: 50, maxPollIntervalMs: 100 }
      )
    ) {
      seen.push(current.availability)
      if (seen.length === 1) {
        // A change for the poll to find: the Session grows by one entry.
        appendFileSync(
          spellingA,
          `${JSON.stringify({ id: "u2", type: "message", message: { role: "user", content: "more" } })}\n`
        )
      } else {
        break
      }
    }
  } finally {
    clearTimeout(timer)
  }
  check(seen.length === 2, `poll saw ${JSON.stringify(seen)}`)
  // The store may still hold files of this Session in its caches: Pi must be able to remove the folder anyway.
  try {
    rmSync(sessionDir, { recursive: true })
  } catch (error) {
    const left = existsSync(sessionDir) ? readdirSync(sessionDir) : []
    const message = error instanceof Error ? error.message : String(error)
    throw new Error(`poll saw ${JSON.stringify(seen)}; ${message}; left: ${JSON.stringify(left)}`, { cause: error })
  }
  check(!existsSync(sessionDir), "the folder is still there")
  return seen
})

report("done", failed === 0, { failed })
process.exit(failed === 0 ? 0 : 1)
