/**
 * The after-run checker of the stress harness: reads every file the workers
 * left under the Rarebit root and checks the protocol's invariants with the
 * shared checker, then reads every Session's sidecar with both
 * implementations' readers, which must agree.
 *
 * Beyond the shared checker it knows who wrote what: each receipt names the
 * lease that wrote it, and the journals name every lease any worker
 * acquired. A receipt of a lease nobody acquired, or of another job, is a
 * violation. A job with two receipts is charged to the implementation that
 * wrote the later one (it ran a job whose receipt was already there), so
 * with reference workers in the mix, the reference's known gaps (no
 * recovery of crashed settlements, claims and locks written in place, locks
 * without owner evidence) are reported apart from our violations.
 */
import { lstat, readdir, readFile } from "node:fs/promises"
import { join } from "node:path"
import * as Ours from "../dist/promise/index.js"
import * as Ref from "../node_modules/@hypercarrier/rarebit/src/rarebit-store.mjs"
import { checkStore, parseSidecar } from "./invariants.mjs"
import { leaseOf } from "./receipts.mjs"

/** @import { FileBytes } from "./invariants.mjs" */
/** @import { Impl } from "./receipts.mjs" */
/** @import { JournalEvent, StressSession } from "./worker.mjs" */

/** @param {string} directory @returns {Promise<Array<string>>} */
const walk = async (directory) => {
  /** @type {Array<string>} */
  const files = []
  let names
  try {
    names = await readdir(directory)
  } catch {
    return files
  }
  for (const name of names) {
    const path = join(directory, name)
    const info = await lstat(path)
    if (info.isDirectory()) files.push(...await walk(path))
    else files.push(path)
  }
  return files
}

/**
 * Every event of every journal in `runDir`.
 * @param {string} runDir
 */
export const readJournals = async (runDir) => {
  /** @type {Array<JournalEvent>} */
  const events = []
  for (const name of await readdir(runDir)) {
    if (!name.startsWith("journal-")) continue
    for (const line of (await readFile(join(runDir, name), "utf8")).split("\n")) {
      if (!line) continue
      try {
        events.push(JSON.parse(line))
      } catch {
        // A worker killed mid-write leaves half a line.
      }
    }
  }
  return events
}

/**
 * The outcome of `f`, with a thrown value described as `Constructor: message`.
 * @template A
 * @param {() => Promise<A>} f
 * @returns {Promise<{ readonly ok: true; readonly value: A } | { readonly ok: false; readonly error: string }>}
 */
const safely = async (f) => {
  try {
    return { ok: true, value: await f() }
  } catch (error) {
    // A primitive reads as its wrapper, as `error?.constructor` would.
    const fields = error === null || error === undefined
      ? undefined
      : /** @type {{ readonly constructor?: { readonly name?: string }; readonly message?: unknown }} */ (error)
    return { ok: false, error: `${fields?.constructor?.name ?? typeof error}: ${fields?.message ?? error}` }
  }
}

/**
 * The request both readers get.
 * @typedef {{ readonly sessionFile: string; readonly rarebitRoot: string; readonly sessionRoot: string }} ReadRequest
 */

/**
 * Every page of a Session's history, following `nextOffset`.
 * @template {{ readonly nextOffset: number | null }} Page
 * @param {{
 *   readonly readRarebitHistory: (
 *     input: ReadRequest & { readonly fromOffset: number; readonly limit: number }
 *   ) => Promise<Page>
 * }} api
 * @param {ReadRequest} input
 */
const historyOf = async (api, input) => {
  const pages = []
  /** @type {number | null} */
  let offset = 0
  for (let guard = 0; offset !== null && guard < 100_000; guard++) {
    /** @type {number} */
    const from = offset
    const page = await safely(() => api.readRarebitHistory({ ...input, fromOffset: from, limit: 1000 }))
    pages.push(page)
    offset = page.ok ? page.value.nextOffset : null
  }
  return pages
}

/**
 * Checks a finished run. Returns `{ violations, referenceIssues, pending,
 * stats, readers }`; `violations` must be empty for our store.
 * @param {{
 *   readonly rarebitRoot: string
 *   readonly sessionRoot: string
 *   readonly sessions: ReadonlyArray<StressSession>
 *   readonly runDir: string
 * }} run
 */
export const checkRun = async ({ rarebitRoot, sessionRoot, sessions, runDir }) => {
  const location = { rarebitRoot, sessionRoot }
  const files = await walk(rarebitRoot)
  const claimPattern = /\/jobs-v4\/([a-f0-9]{64})\.json$/
  /**
   * @type {{
   *   sidecars: Array<FileBytes>
   *   claims: Array<FileBytes & { readonly jobId: string }>
   *   locks: Array<FileBytes>
   *   others: Array<string>
   * }}
   */
  const input = { sidecars: [], claims: [], locks: [], others: [] }
  for (const path of files) {
    const claim = claimPattern.exec(path)
    if (claim !== null) input.claims.push({ path, jobId: claim[1], bytes: await readFile(path) })
    else if (path.endsWith(".commit-lock")) input.locks.push({ path, bytes: await readFile(path) })
    else if (path.includes("/materializations-v4/") && path.endsWith(".jsonl")) {
      input.sidecars.push({ path, bytes: await readFile(path) })
    } else input.others.push(path)
  }

  const events = await readJournals(runDir)
  /**
   * @type {Map<
   *   string | undefined,
   *   { readonly impl: Impl; readonly worker: number | undefined; readonly job: string | undefined }
   * >}
   */
  const leases = new Map()
  /** @type {Map<string, string>} */
  const jobSidecar = new Map()
  const sidecarOf = new Map(
    sessions.map((session) => [session.name, Ref.rarebitMaterializationPath(session.file, location)])
  )
  for (const event of events) {
    if (event.e === "acquired") leases.set(event.token, { impl: event.impl, worker: event.worker, job: event.job })
    const sidecar = event.session === undefined ? undefined : sidecarOf.get(event.session)
    if (typeof event.job === "string" && sidecar !== undefined) jobSidecar.set(event.job, sidecar)
  }

  const checked = checkStore({ ...input, jobSidecar, tokenOf: (record) => leaseOf(record)?.token })
  /** @type {Array<string>} */
  const violations = []
  /** @type {Array<string>} */
  const referenceIssues = []
  const hasReference = events.some((event) => event.impl === "reference")

  // Who wrote every receipt, and who ran a job twice.
  /** @type {Map<string, Array<Impl | "unknown">>} */
  const writers = new Map()
  for (const { bytes, path } of input.sidecars) {
    for (const line of parseSidecar(bytes).lines) {
      if (line.kind !== "receipt") continue
      const lease = leaseOf(line.record)
      const acquired = lease === undefined ? undefined : leases.get(lease.token)
      if (acquired === undefined) {
        // A lease acquired by a worker killed before its journal line is possible only
        // if it could still settle, which it cannot: the line is written first.
        violations.push(`${path}@${line.offset}: receipt of job ${line.record.jobId} names no acquired lease`)
      } else if (acquired.job !== line.record.jobId) {
        violations.push(
          `${path}@${line.offset}: receipt of job ${line.record.jobId} written under a lease of job ${acquired.job}`
        )
      }
      const list = writers.get(line.record.jobId) ?? []
      list.push(lease?.impl ?? "unknown")
      writers.set(line.record.jobId, list)
    }
  }
  const duplicates = { ours: 0, reference: 0 }
  /** @type {Map<string, Impl>} */
  const rerunBy = new Map()
  for (const [job, list] of writers) {
    if (list.length < 2) continue
    const reran = list.slice(1).includes("ours") ? "ours" : "reference"
    duplicates[reran]++
    rerunBy.set(job, reran)
  }
  // Locks without owner evidence are the reference's: nobody may break them.
  const evidenceless = new Set(
    input.locks.filter(({ bytes }) => {
      try {
        const lock = /** @type {unknown} */ (JSON.parse(new TextDecoder().decode(bytes)))
        return typeof lock !== "object" || lock === null || !("owner" in lock) || lock.owner === undefined
      } catch {
        return true
      }
    }).map(({ path }) => path)
  )
  for (const violation of checked.violations) {
    const job = /([a-f0-9]{64})/.exec(violation)?.[1]
    const tornClaim = violation.includes("claim is not a JSON object")
    const referenceLock = violation.endsWith(": lock left behind") &&
      evidenceless.has(violation.slice(0, -": lock left behind".length))
    // Ours links a lock into place whole; the reference opens it and then
    // writes, so a worker of the reference killed or stopped in between
    // leaves it empty or torn (as it leaves claims).
    const tornLock = violation.endsWith(": lock is not a JSON object with a token")
    if (
      (job !== undefined && rerunBy.get(job) === "reference") || (tornClaim && hasReference) ||
      ((referenceLock || tornLock) && hasReference)
    ) {
      referenceIssues.push(violation)
    } else {
      violations.push(violation)
    }
  }

  // Both readers, every Session: the same answers, never a throw from ours.
  const readers = { available: 0, missing: 0, unreadable: 0, disagreements: 0 }
  for (const session of sessions) {
    const request = { sessionFile: session.file, ...location }
    const mine = await safely(() => Ours.readRarebitCurrent(request))
    const theirs = await safely(() => Ref.readRarebitCurrent(request))
    if (!mine.ok) violations.push(`${session.name}: our current read threw ${mine.error}`)
    else readers[mine.value.availability]++
    if (JSON.stringify(mine) !== JSON.stringify(theirs)) {
      readers.disagreements++
      violations.push(`${session.name}: current reads differ`)
    }
    const myHistory = await historyOf(Ours, request)
    const theirHistory = await historyOf(Ref, request)
    if (JSON.stringify(myHistory) !== JSON.stringify(theirHistory)) {
      readers.disagreements++
      violations.push(`${session.name}: history differs`)
    }
  }

  return {
    violations,
    referenceIssues,
    pending: checked.pending,
    stats: {
      ...checked.stats,
      duplicateJobsRerunByOurs: duplicates.ours,
      duplicateJobsRerunByReference: duplicates.reference
    },
    readers
  }
}
