/**
 * Two writers in two processes on one Session: one runs our built plain API
 * (`dist/promise/index.js`), the other the reference store. Each settles its
 * own jobs and a shared list of identical jobs, at the same time, through
 * the real commit lock and job claims. Afterwards every job is settled
 * exactly once with a pointer that verifies, the sidecar alternates receipt
 * and head lines (no interleaved appends), no lock or temp file is left, and
 * both implementations read the same current receipt, history and claims.
 */
import { afterEach, assert, beforeEach, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { readdir, readFile, writeFile } from "node:fs/promises"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import {
  entry,
  jobId,
  makeRoots,
  referenceStorePath,
  type Roots,
  summaryReceipt,
  writeSession
} from "../support/Reference.js"
import { historyPages, ours, reference, sha256 } from "./Interop.js"

const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..")
const builtPromiseApi = join(projectRoot, "dist", "promise", "index.js")

const WORKER = `
import { readFile } from "node:fs/promises"
import { join } from "node:path"
const config = JSON.parse(await readFile(process.argv[2], "utf8"))
const store = await import(config.moduleUrl)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
// Reads the claim directly (a torn read counts as none) so the two workers can
// hand a job over in a fixed order without asking either store.
const claimState = async (jobId) => {
  try {
    return JSON.parse(await readFile(join(config.rarebitRoot, "jobs-v4", jobId + ".json"), "utf8")).state
  } catch {
    return undefined
  }
}
// Bounded, so a hand-over that never happens fails the test's assertions instead of hanging it.
const waitForClaim = async (jobId, state) => {
  for (const until = Date.now() + 10000; Date.now() < until && (await claimState(jobId)) !== state;) await sleep(1)
}
process.stdout.write("ready\\n")
await new Promise((resolve) => process.stdin.once("data", resolve))
const location = { sessionFile: config.sessionFile, sessionRoot: config.sessionRoot, rarebitRoot: config.rarebitRoot }
const results = []
for (const job of config.jobs) {
  let outcome = null
  let inFlight = 0
  const errors = []
  // The other worker holds this job's claim: reserve only once it is there, so this worker takes it over.
  if (job.takeOver) await waitForClaim(job.jobId, "active")
  for (let attempt = 0; attempt < 20000 && outcome === null; attempt++) {
    let reservation
    try {
      reservation = await store.reserveRarebitJob({ ...location, jobId: job.jobId, ...(config.leaseMs ? { leaseMs: config.leaseMs } : {}) })
    } catch (error) {
      errors.push("reserve: " + error.constructor.name + ": " + error.message)
      await sleep(1)
      continue
    }
    if (reservation.acquired) {
      // Outlasts the lease until the other worker has taken the claim over and settled it.
      if (job.hold) await waitForClaim(job.jobId, "settled")
      // Stands for deriving the receipt; with a short lease the claim may expire meanwhile.
      else if (config.deriveMs && !job.takeOver) await sleep(Math.floor(Math.random() * (config.deriveMs + 1)))
      try {
        await store.settleRarebitJob(reservation, job.receipt)
        outcome = "settled"
      } catch (error) {
        errors.push("settle: " + error.constructor.name + ": " + error.message)
        await store.releaseRarebitJob(reservation).catch((e) => errors.push("release: " + e.message))
      }
    } else if (reservation.duplicate) {
      outcome = "duplicate"
    } else {
      inFlight++
      await sleep(1)
    }
  }
  results.push({ jobId: job.jobId, outcome: outcome ?? "gave up", inFlight, errors })
}
process.stdout.write(JSON.stringify(results) + "\\n")
`

interface JobResult {
  readonly jobId: string
  readonly outcome: "settled" | "duplicate" | "gave up"
  readonly inFlight: number
  readonly errors: ReadonlyArray<string>
}

interface Worker {
  readonly ready: Promise<void>
  readonly go: () => void
  readonly done: Promise<Array<JobResult>>
}

const startWorker = (script: string, configPath: string): Worker => {
  const child = spawn(process.execPath, [script, configPath], { stdio: ["pipe", "pipe", "pipe"] })
  let stdout = ""
  let stderr = ""
  let markReady: () => void = () => {}
  const ready = new Promise<void>((resolveReady) => (markReady = resolveReady))
  child.stdout.on("data", (chunk) => {
    stdout += chunk
    if (stdout.startsWith("ready\n")) markReady()
  })
  child.stderr.on("data", (chunk) => (stderr += chunk))
  const done = new Promise<Array<JobResult>>((resolveDone, rejectDone) => {
    child.on("error", rejectDone)
    child.on("close", (code) => {
      if (code !== 0) return rejectDone(new Error(`worker exited with ${code}: ${stderr}`))
      resolveDone(JSON.parse(stdout.slice("ready\n".length)))
    })
  })
  return { ready, go: () => child.stdin.end("go\n"), done }
}

const branch = [entry("u1", "user", "shared request"), entry("a1", "assistant", "answer")]

describe("TwoWriters", { concurrent: false }, () => {
  let roots: Roots
  beforeEach(async () => {
    roots = await makeRoots("rarebit-two-writers-")
  })
  afterEach(async () => {
    await roots?.cleanup()
  })

  const receiptOf = (n: number) => summaryReceipt(branch, "s", { summary: `job ${n}` })
  const job = (n: number) => ({ jobId: jobId(n), receipt: receiptOf(n) })
  /** `hold`: keep the claim past its lease until the other worker settled it; `takeOver`: be that other worker. */
  type Job = ReturnType<typeof job> & { readonly hold?: boolean; readonly takeOver?: boolean }

  /** Starts both workers, releases them together, and returns their results (ours first). */
  const runWriters = async (
    oursJobs: ReadonlyArray<Job>,
    referenceJobs: ReadonlyArray<Job>,
    lease?: { readonly leaseMs: number; readonly deriveMs: number }
  ) => {
    assert.isTrue(existsSync(builtPromiseApi), `${builtPromiseApi} is missing: run \`npm run build\` first`)
    await writeSession(roots.sessionFile, "s", branch)
    const script = join(roots.root, "worker.mjs")
    await writeFile(script, WORKER)
    const configs = [
      { name: "ours", moduleUrl: pathToFileURL(builtPromiseApi).href, jobs: oursJobs },
      { name: "reference", moduleUrl: pathToFileURL(referenceStorePath).href, jobs: referenceJobs }
    ]
    const workers: Array<Worker> = []
    for (const config of configs) {
      const path = join(roots.root, `${config.name}.json`)
      await writeFile(path, JSON.stringify({ ...config, ...roots.location, sessionFile: roots.sessionFile, ...lease }))
      workers.push(startWorker(script, path))
    }
    await Promise.all(workers.map((worker) => worker.ready))
    for (const worker of workers) worker.go()
    const [oursResults, referenceResults] = await Promise.all(workers.map((worker) => worker.done))
    return { oursResults, referenceResults }
  }

  const outcome = (results: ReadonlyArray<JobResult>, id: string) => results.find((r) => r.jobId === id)?.outcome

  /**
   * What must hold however the two interleaved: each own job settled by its
   * worker, each shared job settled by exactly one of them (the other saw a
   * duplicate), and the files agree with that.
   */
  const verify = async (
    results: { oursResults: Array<JobResult>; referenceResults: Array<JobResult> },
    jobs: { shared: ReadonlyArray<Job>; oursOnly: ReadonlyArray<Job>; referenceOnly: ReadonlyArray<Job> }
  ) => {
    const { oursResults, referenceResults } = results
    for (const result of [...oursResults, ...referenceResults]) {
      assert.include(["settled", "duplicate"], result.outcome, result.jobId)
    }
    for (const { jobId: id } of jobs.oursOnly) assert.strictEqual(outcome(oursResults, id), "settled")
    for (const { jobId: id } of jobs.referenceOnly) assert.strictEqual(outcome(referenceResults, id), "settled")
    for (const { jobId: id } of jobs.shared) {
      const pair = [outcome(oursResults, id), outcome(referenceResults, id)].sort()
      assert.deepStrictEqual(pair, ["duplicate", "settled"], `shared job ${id} settled exactly once`)
    }

    // The sidecar: strictly receipt, head, receipt, head… and every job's receipt exactly once.
    const sidecar = reference.rarebitMaterializationPath(roots.sessionFile, roots.location)
    const bytes = await readFile(sidecar)
    assert.strictEqual(bytes.at(-1), 10)
    const lines = bytes.subarray(0, -1).toString("utf8").split("\n").map((line) => JSON.parse(line))
    lines.forEach((line, index) => assert.strictEqual(line.type, index % 2 === 0 ? "rarebit_summary" : "rarebit_head"))
    const allJobs = [...jobs.shared, ...jobs.oursOnly, ...jobs.referenceOnly]
    assert.strictEqual(lines.length, allJobs.length * 2)
    assert.deepStrictEqual(
      lines.filter((line) => line.type === "rarebit_summary").map((line) => line.jobId).sort(),
      allJobs.map((item) => item.jobId).sort()
    )

    // Every claim is settled and its pointer verifies against the sidecar.
    const jobsDir = join(roots.rarebitRoot, "jobs-v4")
    assert.deepStrictEqual((await readdir(jobsDir)).sort(), allJobs.map((item) => `${item.jobId}.json`).sort())
    for (const item of allJobs) {
      const claim = JSON.parse(await readFile(join(jobsDir, `${item.jobId}.json`), "utf8"))
      assert.strictEqual(claim.state, "settled")
      const { receiptHash, receiptLength, receiptOffset } = claim.receiptRef
      const range = bytes.subarray(receiptOffset, receiptOffset + receiptLength)
      assert.strictEqual(sha256(range), receiptHash)
      assert.deepStrictEqual(JSON.parse(range.toString("utf8")), { ...item.receipt, jobId: item.jobId })
    }

    // No lock, temp or break file is left next to the sidecar.
    assert.deepStrictEqual(await readdir(dirname(sidecar)), ["trace.jsonl"])

    // Both implementations read the same current receipt, history and claims.
    const base = { sessionFile: roots.sessionFile, ...roots.location }
    const current = await ours.readRarebitCurrent(base)
    assert.strictEqual(current.availability, "available")
    assert.deepStrictEqual(current, await reference.readRarebitCurrent(base))
    for (const limit of [7, 1000]) {
      assert.deepStrictEqual(await historyPages(ours, base, 0, limit), await historyPages(reference, base, 0, limit))
    }
    for (const item of allJobs) {
      const mine = await ours.reserveRarebitJob({ ...base, jobId: item.jobId })
      const theirs = await reference.reserveRarebitJob({ ...base, jobId: item.jobId })
      assert.strictEqual(mine.duplicate, true)
      assert.deepStrictEqual(mine, theirs)
    }
  }

  it("our store and the reference's, in two processes, settle distinct and identical jobs once each", async () => {
    const shared = Array.from({ length: 15 }, (_, i) => job(100 + i))
    const sharedSameOrder = Array.from({ length: 8 }, (_, i) => job(400 + i))
    const oursOnly = Array.from({ length: 15 }, (_, i) => job(200 + i))
    const referenceOnly = Array.from({ length: 15 }, (_, i) => job(300 + i))
    // The first shared jobs come in opposite orders, so each worker wins some of them and the
    // two collide in the middle; each worker's own jobs are interleaved with them. The last
    // shared jobs come in the same order, so the workers race for each one.
    const interleave = (own: ReadonlyArray<Job>, order: ReadonlyArray<Job>) => [
      ...own.flatMap((item, i) => [order[i], item]),
      ...sharedSameOrder
    ]
    const results = await runWriters(interleave(oursOnly, shared), interleave(referenceOnly, [...shared].reverse()))
    // With a ten-minute lease nobody is ever fenced: no settle or reserve fails.
    for (const result of [...results.oursResults, ...results.referenceResults]) {
      assert.deepStrictEqual(result.errors, [], `errors for ${result.jobId}`)
    }
    await verify(results, { shared: [...shared, ...sharedSameOrder], oursOnly, referenceOnly })
  })

  it("with leases of a few milliseconds, takeovers fence across the two implementations", async () => {
    const fenced = "settle: Error: Rarebit reservation lease was fenced by a newer worker"
    // Two hand-overs in a fixed order, one each way, so each implementation is fenced by the
    // other at least once however the rest interleaves: ours holds `oursFenced` past its lease
    // until the reference took it over and settled it, then the reference holds `referenceFenced`
    // until ours did the same.
    const oursFenced = job(800)
    const referenceFenced = job(801)
    const shared = Array.from({ length: 12 }, (_, i) => job(500 + i))
    const oursOnly = Array.from({ length: 4 }, (_, i) => job(600 + i))
    const referenceOnly = Array.from({ length: 4 }, (_, i) => job(700 + i))
    // Ours is slower per call, so the reference starts with its own jobs and catches up with
    // ours on the shared ones; deriving outlasts the lease, so the one behind may take over.
    const results = await runWriters(
      [{ ...oursFenced, hold: true }, { ...referenceFenced, takeOver: true }, ...shared, ...oursOnly],
      [{ ...oursFenced, takeOver: true }, { ...referenceFenced, hold: true }, ...referenceOnly, ...shared],
      { leaseMs: 3, deriveMs: 8 }
    )
    // A worker whose lease ran out is fenced and retries; nothing else may fail.
    for (const result of [...results.oursResults, ...results.referenceResults]) {
      for (const error of result.errors) assert.strictEqual(error, fenced, result.jobId)
    }
    const resultOf = (list: ReadonlyArray<JobResult>, id: string) => list.find((result) => result.jobId === id)
    for (
      const [holder, taker, id] of [
        [results.oursResults, results.referenceResults, oursFenced.jobId],
        [results.referenceResults, results.oursResults, referenceFenced.jobId]
      ] as const
    ) {
      // The holder's settle came after the takeover: fenced once, then a duplicate of the taker's receipt.
      assert.deepStrictEqual(resultOf(holder, id), { jobId: id, outcome: "duplicate", inFlight: 0, errors: [fenced] })
      assert.strictEqual(resultOf(taker, id)?.outcome, "settled", id)
      assert.deepStrictEqual(resultOf(taker, id)?.errors, [], id)
    }
    await verify(results, { shared: [...shared, oursFenced, referenceFenced], oursOnly, referenceOnly })
  })
})
