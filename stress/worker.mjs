/**
 * One stress worker process: reserves colliding jobs on a few Sessions,
 * derives receipts and settles them, with our store (the Effect API over a
 * counting file system) or the reference's Promise API, until the deadline.
 *
 * It injects its own crashes where a scheduler's SIGKILL rarely lands:
 * - `K1`: inside the commit lock, right after the lease was validated;
 * - `K2a`: after the sidecar append, before the settled claim is written;
 * - `K2b`: while the settled claim is written (ours: temp file written,
 *   before the rename; the reference: claim truncated, before its write);
 * and it stalls past its lease between reserve and settle, or inside the
 * lock. Everything it does goes to a journal (one JSON line per event,
 * written synchronously, so a SIGKILL loses at most the event in progress).
 *
 * Configuration comes in `STRESS_CONFIG` (JSON); `--drain` finishes every
 * job named in the journals instead, past every lease, then takes each
 * sidecar's lock once.
 */
import { createHash, randomBytes } from "node:crypto"
import { appendFileSync, readdirSync, readFileSync } from "node:fs"
import { createRequire, syncBuiltinESMExports } from "node:module"
import { join } from "node:path"
import { receiptFor } from "./receipts.mjs"

const config = JSON.parse(process.env.STRESS_CONFIG)
const drain = process.argv.includes("--drain")
const impl = config.impl
// A spare process loads everything first and learns its slot, start and deadline when
// it is put to work, so that replacing a killed worker costs no start-up time.
let worker = config.worker
let journalPath = join(config.runDir, `journal-${impl}-${worker ?? "spare"}-${process.pid}.jsonl`)

const log = (event) => appendFileSync(journalPath, `${JSON.stringify({ t: Date.now(), impl, worker, pid: process.pid, ...event })}\n`)

const chance = (p) => p > 0 && Math.random() < p
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const selfKill = (point) => {
  log({ e: "selfKill", point })
  process.kill(process.pid, "SIGKILL")
}

const isClaim = (path) => /\/jobs-v4\/[a-f0-9]{64}\.json$/.test(path)
const isClaimTemp = (path) => /\/jobs-v4\/[a-f0-9]{64}\.json\.[a-f0-9]+\.tmp$/.test(path)
const isSidecar = (path) => path.includes("/materializations-v4/") && path.endsWith(".jsonl")

const kills = drain ? { K1: 0, K2a: 0, K2b: 0 } : config.selfKill
/** Per-call observations of the file system, reset at the start of each store call. */
const seen = { appended: false, claimRenames: 0, claimWrites: 0, breaking: false }
const resetSeen = () => {
  seen.appended = false
  seen.claimRenames = 0
  seen.claimWrites = 0
}

// ---- the two stores behind one shape ----------------------------------------

const oursAdapter = async () => {
  const { Effect, FileSystem, Layer, ManagedRuntime, Path } = await import("effect")
  const DirectFileSystem = await import("../dist/platform/DirectFileSystem.js")
  const { RarebitStore } = await import("../dist/store/RarebitStore.js")
  const NodeStore = await import("../dist/platform/NodeStore.js")

  // Counts what the store does and crashes this process at the chosen steps.
  const counting = (fs) => ({
    ...fs,
    open: (path, options) =>
      Effect.suspend(() => {
        if (isSidecar(path) && options?.flag === "a+") seen.appended = true
        if (isClaimTemp(path) && seen.appended && chance(kills.K2a)) selfKill("K2a")
        return fs.open(path, options)
      }),
    rename: (from, to) =>
      Effect.suspend(() => {
        if (isClaim(to) && seen.appended && chance(kills.K2b)) selfKill("K2b")
        return Effect.tap(fs.rename(from, to), () =>
          Effect.sync(() => {
            if (isClaim(to)) {
              seen.claimRenames++
              seen.appended = false
            }
          }))
      }),
    writeFile: (path, data, options) =>
      Effect.tap(fs.writeFile(path, data, options), () =>
        Effect.sync(() => {
          if (path.includes(".commit-lock.break-")) seen.breaking = true
        })),
    remove: (path, options) =>
      Effect.tap(fs.remove(path, options), () =>
        Effect.sync(() => {
          if (path.endsWith(".commit-lock") && seen.breaking) log({ e: "lockBroken", path })
          if (path.includes(".commit-lock.break-")) seen.breaking = false
        }))
  })
  const files = Layer.effect(
    FileSystem.FileSystem,
    Effect.gen(function*() {
      return counting(yield* FileSystem.FileSystem)
    })
  ).pipe(
    Layer.provide(DirectFileSystem.layer)
  )
  const layer = RarebitStore.layer({
    rarebitRoot: config.rarebitRoot,
    sessionRoot: config.sessionRoot,
    leaseMs: config.leaseMs,
    ...(config.lockRetry ? { lockRetry: config.lockRetry } : {})
  }).pipe(
    // Tokens for the store, and the /proc owner probe its lock operations read.
    Layer.provideMerge(NodeStore.tokenAndOwnerLayer),
    Layer.provide(Layer.merge(files, Path.layer))
  )
  const runtime = ManagedRuntime.make(layer)
  const run = (f) => runtime.runPromise(RarebitStore.use(f))
  const location = { rarebitRoot: config.rarebitRoot, sessionRoot: config.sessionRoot }

  return {
    reserve: async (jobId, sessionFile) => {
      resetSeen()
      const reservation = await run((store) =>
        store.reserve({ jobId, sessionFile, ...location, leaseMs: config.leaseMs })
      )
      const tag = reservation._tag === "Acquired" ? "acquired" : reservation._tag === "Duplicate" ? "duplicate" : "inFlight"
      return {
        tag,
        reservation,
        token: reservation.leaseToken,
        tookOver: tag === "acquired" && seen.claimRenames > 0,
        recovered: tag === "duplicate" && seen.claimRenames > 0
      }
    },
    settle: (reservation, receipt, hook) => {
      resetSeen()
      return run((store) =>
        store.settle(reservation, receipt, { hooks: { afterLeaseValidated: Effect.promise(hook) } })
      )
    },
    release: (reservation) => run((store) => store.release(reservation)),
    errorName: (error) => error?._tag ?? error?.name ?? String(error),
    isFenced: (error) => error?._tag === "LeaseFenced",
    isLockTimeout: (error) => error?._tag === "LockHeld",
    isTornClaim: () => false
  }
}

const referenceAdapter = async () => {
  // The reference imports `open` from node:fs/promises; wrapping it there lets this
  // worker crash at the same steps as ours and see its takeovers.
  const require = createRequire(import.meta.url)
  const fsp = require("node:fs/promises")
  const original = fsp.open
  fsp.open = async (path, flags, mode) => {
    const file = String(path)
    if (isSidecar(file) && flags === "a+") seen.appended = true
    const claimWrite = isClaim(file) && flags === "w"
    if (claimWrite) seen.claimWrites++
    if (claimWrite && seen.appended && chance(kills.K2a)) selfKill("K2a")
    const handle = await original(path, flags, mode)
    // The claim is truncated now and not yet written: the reference's torn-claim window.
    if (claimWrite && seen.appended && chance(kills.K2b)) selfKill("K2b")
    if (claimWrite) seen.appended = false
    return handle
  }
  syncBuiltinESMExports()
  const Ref = await import("../node_modules/@hypercarrier/rarebit/src/rarebit-store.mjs")
  const location = { rarebitRoot: config.rarebitRoot, sessionRoot: config.sessionRoot }
  return {
    reserve: async (jobId, sessionFile) => {
      resetSeen()
      const reservation = await Ref.reserveRarebitJob({ jobId, sessionFile, ...location, leaseMs: config.leaseMs })
      const tag = reservation.acquired ? "acquired" : reservation.duplicate ? "duplicate" : "inFlight"
      // A reserve rewrites a claim in place ("w") only when it takes the job over.
      return {
        tag,
        reservation,
        token: reservation.leaseToken,
        tookOver: tag === "acquired" && seen.claimWrites > 0,
        recovered: false
      }
    },
    settle: (reservation, receipt, hook) => {
      resetSeen()
      return Ref.settleRarebitJob({ ...reservation, hooks: { afterLeaseValidated: hook } }, receipt)
    },
    release: (reservation) => Ref.releaseRarebitJob(reservation),
    errorName: (error) => error?.name ?? String(error),
    isFenced: (error) => /fenced by a newer worker/.test(String(error?.message)),
    isLockTimeout: (error) => /commit lock is held/.test(String(error?.message)),
    isTornClaim: (error) => error instanceof SyntaxError
  }
}

const store = impl === "ours" ? await oursAdapter() : await referenceAdapter()

// ---- one job ------------------------------------------------------------------

const jobIdOf = (session, k) => createHash("sha256").update(`${session.name}:${k}`).digest("hex")

const classify = (error) =>
  store.isFenced(error)
    ? "fenced"
    : store.isLockTimeout(error)
    ? "lockTimeout"
    : store.isTornClaim(error)
    ? "tornClaim"
    : "error"

/** Reserves a job and, if acquired, settles it. Returns what happened. */
const work = async (session, k, { mayStall, signatureWorker }) => {
  const jobId = jobIdOf(session, k)
  let reserved
  try {
    reserved = await store.reserve(jobId, session.file)
  } catch (error) {
    log({ e: classify(error), op: "reserve", job: jobId, session: session.name, k, error: store.errorName(error), message: String(error?.message ?? error).slice(0, 200) })
    return "failed"
  }
  if (reserved.tag !== "acquired") {
    log({ e: reserved.tag, job: jobId, session: session.name, k, recovered: reserved.recovered })
    return reserved.tag
  }
  log({ e: "acquired", job: jobId, session: session.name, k, token: reserved.token, tookOver: reserved.tookOver })
  if (mayStall && chance(config.stallP)) {
    log({ e: "stall", job: jobId })
    await sleep(Math.round(config.leaseMs * 1.6))
  }
  const kind = chance(config.titleP) ? "title" : "summary"
  const receipt = await receiptFor(session.file, config.sessionRoot, kind, `${impl}:${signatureWorker}:${reserved.token}`)
  if (receipt === undefined) {
    await store.release(reserved.reservation).catch(() => undefined)
    log({ e: "released", job: jobId, reason: "session unreadable" })
    return "released"
  }
  const hook = async () => {
    if (chance(kills.K1)) selfKill("K1")
    if (mayStall && chance(config.lockStallP)) {
      log({ e: "lockStall", job: jobId })
      await sleep(Math.round(config.leaseMs * 1.5))
    }
  }
  try {
    await store.settle(reserved.reservation, receipt, hook)
    log({ e: "settled", job: jobId, session: session.name, token: reserved.token, kind })
    return "settled"
  } catch (error) {
    log({ e: classify(error), op: "settle", job: jobId, session: session.name, error: store.errorName(error), message: String(error?.message ?? error).slice(0, 200) })
    await store.release(reserved.reservation).catch(() => undefined)
    return "failed"
  }
}

// ---- main -----------------------------------------------------------------------

const sessions = config.sessions

if (!drain) {
  const assignment = await new Promise((resolve) => {
    process.once("message", resolve)
    process.send({ ready: true })
  })
  worker = assignment.slot
  journalPath = join(config.runDir, `journal-${impl}-${worker}-${process.pid}.jsonl`)
  // Nothing keeps this process on its parent: a SIGKILLed orchestrator must not leave workers behind.
  process.channel?.unref()
  const { start, deadline } = assignment
  while (Date.now() < deadline) {
    const session = sessions[Math.floor(Math.random() * sessions.length)]
    // The job frontier advances with time; most picks land on its newest jobs, so
    // workers collide, and some go back further, to jobs killed workers left behind.
    const frontier = 1 + Math.floor((Date.now() - start) / config.jobEveryMs)
    const k = chance(0.1)
      ? Math.floor(Math.random() * frontier)
      : Math.max(0, frontier - 1 - Math.floor(Math.random() ** 3 * Math.min(frontier, 8)))
    await work(session, k, { mayStall: true, signatureWorker: worker })
  }
  process.exit(0)
}

// Drain: every job any worker touched, finished by one worker of this implementation.
const jobs = new Map()
for (const name of readdirSync(config.runDir)) {
  if (!name.startsWith("journal-")) continue
  for (const line of readFileSync(join(config.runDir, name), "utf8").split("\n")) {
    if (!line) continue
    let event
    try {
      event = JSON.parse(line)
    } catch {
      continue
    }
    if (typeof event.job === "string" && typeof event.session === "string" && Number.isInteger(event.k)) {
      jobs.set(event.job, { name: event.session, k: event.k })
    }
  }
}
const byName = new Map(sessions.map((session) => [session.name, session]))
const blocked = new Set()
for (const { k, name } of jobs.values()) {
  const session = byName.get(name)
  if (session === undefined || blocked.has(name)) continue
  const outcome = await work(session, k, { mayStall: false, signatureWorker: 9999 })
  if (outcome === "failed") {
    // A sidecar whose lock cannot be taken will not take it for the next job either.
    const last = readFileSync(journalPath, "utf8").trim().split("\n").at(-1)
    if (last && JSON.parse(last).e === "lockTimeout") blocked.add(name)
  }
}

/**
 * Takes and releases a sidecar's commit lock, through the store's own calls.
 * Our release takes the lock only for a claim its lease still owns, so the
 * lease must be a real one: a fresh job is reserved, then given back.
 */
const touchLock = async (sessionFile) => {
  const reserved = await store.reserve(randomBytes(32).toString("hex"), sessionFile)
  if (reserved.tag !== "acquired") throw new Error(`a fresh job was ${reserved.tag}`)
  await store.release(reserved.reservation)
}
for (const session of sessions) {
  if (blocked.has(session.name)) continue
  try {
    await touchLock(session.file)
    log({ e: "touchedLock", session: session.name })
  } catch (error) {
    log({ e: classify(error), op: "touchLock", session: session.name, error: store.errorName(error) })
  }
}
log({ e: "drained", jobs: jobs.size, blocked: [...blocked] })
process.exit(0)
