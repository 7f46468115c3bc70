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

/** @import { Impl } from "./receipts.mjs" */

/**
 * Chances of each in-lock crash point per settle.
 * @typedef {{ readonly K1: number; readonly K2a: number; readonly K2b: number }} KillChances
 */

/**
 * A Session under contention; `name` is how journals and jobs refer to it.
 * @typedef {{ readonly name: string; readonly file: string }} StressSession
 */

/**
 * What the orchestrator passes in `STRESS_CONFIG`. A spare learns `worker`,
 * `start` and `deadline` when it is put to work; the drain worker gets them here.
 * @typedef {{
 *   readonly impl: Impl
 *   readonly runDir: string
 *   readonly rarebitRoot: string
 *   readonly sessionRoot: string
 *   readonly sessions: ReadonlyArray<StressSession>
 *   readonly leaseMs: number
 *   readonly jobEveryMs: number
 *   readonly stallP: number
 *   readonly lockStallP: number
 *   readonly titleP: number
 *   readonly selfKill: KillChances
 *   readonly worker?: number
 *   readonly start?: number
 *   readonly deadline?: number
 *   readonly lockRetry?: { readonly intervalMs: number; readonly attempts: number }
 * }} WorkerConfig
 */

/**
 * What the orchestrator sends a spare to put it to work.
 * @typedef {{ readonly slot: number; readonly start: number; readonly deadline: number }} Assignment
 */

/**
 * How a store call failed, as far as the checker cares.
 * @typedef {"fenced" | "lockTimeout" | "tornClaim" | "error"} Failure
 */

/**
 * What a worker does, one journal line each; which fields an event carries
 * depends on `e`.
 * @typedef {{
 *   readonly e:
 *     | "acquired" | "duplicate" | "inFlight" | "settled" | "released" | "stall" | "lockStall"
 *     | "selfKill" | "lockBroken" | "touchedLock" | "drained" | Failure
 *   readonly job?: string
 *   readonly session?: string
 *   readonly k?: number
 *   readonly token?: string
 *   readonly tookOver?: boolean
 *   readonly recovered?: boolean
 *   readonly kind?: "summary" | "title"
 *   readonly point?: keyof KillChances
 *   readonly op?: "reserve" | "settle" | "touchLock"
 *   readonly error?: string
 *   readonly message?: string
 *   readonly reason?: string
 *   readonly path?: string
 *   readonly jobs?: number
 *   readonly blocked?: ReadonlyArray<string>
 * }} WorkerEvent
 */

/**
 * One line of a journal: when, which implementation, worker slot (absent
 * before a spare is put to work) and process, then the event.
 * @typedef {{ readonly t: number; readonly impl: Impl; readonly worker?: number; readonly pid: number }
 *   & WorkerEvent} JournalEvent
 */

const configText = process.env.STRESS_CONFIG
if (configText === undefined) throw new Error("STRESS_CONFIG is not set: stress/run.mjs starts the workers")
/** @type {WorkerConfig} */
const config = JSON.parse(configText)
const drain = process.argv.includes("--drain")
const impl = config.impl
// A spare process loads everything first and learns its slot, start and deadline when
// it is put to work, so that replacing a killed worker costs no start-up time.
let worker = config.worker
let journalPath = join(config.runDir, `journal-${impl}-${worker ?? "spare"}-${process.pid}.jsonl`)

/** @param {WorkerEvent} event */
const log = (event) =>
  appendFileSync(journalPath, `${JSON.stringify({ t: Date.now(), impl, worker, pid: process.pid, ...event })}\n`)

/** @param {number} p */
const chance = (p) => p > 0 && Math.random() < p
/** @param {number} ms @returns {Promise<void>} */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** @param {keyof KillChances} point */
const selfKill = (point) => {
  log({ e: "selfKill", point })
  process.kill(process.pid, "SIGKILL")
}

/** @param {string} path */
const isClaim = (path) => /\/jobs-v4\/[a-f0-9]{64}\.json$/.test(path)
/** @param {string} path */
const isClaimTemp = (path) => /\/jobs-v4\/[a-f0-9]{64}\.json\.[a-f0-9]+\.tmp$/.test(path)
/** @param {string} path */
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

/**
 * A receipt of the stress kit's, for the Session as it was read.
 * @typedef {NonNullable<Awaited<ReturnType<typeof receiptFor>>>} StressReceipt
 */

/**
 * What a reserve came to. An acquired reservation carries its own settle
 * and release, so each store keeps its own reservation type.
 * @typedef {{
 *   readonly tag: "acquired"
 *   readonly token: string
 *   readonly tookOver: boolean
 *   readonly settle: (receipt: StressReceipt, hook: () => Promise<void>) => Promise<unknown>
 *   readonly release: () => Promise<void>
 * } | {
 *   readonly tag: "duplicate" | "inFlight"
 *   readonly recovered: boolean
 * }} Reserved
 */

/**
 * @typedef {{
 *   readonly reserve: (jobId: string, sessionFile: string) => Promise<Reserved>
 *   readonly errorName: (error: unknown) => string
 *   readonly isFenced: (error: unknown) => boolean
 *   readonly isLockTimeout: (error: unknown) => boolean
 *   readonly isTornClaim: (error: unknown) => boolean
 * }} StoreAdapter
 */

/**
 * The fields of a thrown value the adapters read, or `undefined` for `null`
 * and `undefined` (a primitive reads as its wrapper, as `?.` would).
 * @param {unknown} error
 */
const fieldsOf = (error) =>
  error === null || error === undefined
    ? undefined
    : /** @type {{ readonly _tag?: unknown; readonly name?: unknown; readonly message?: unknown }} */ (error)

/**
 * What the journal says a failure was: its message, or the thrown value itself when it has none.
 * @param {unknown} error
 */
const messageOf = (error) => String(fieldsOf(error)?.message ?? error)

/** @returns {Promise<StoreAdapter>} */
const oursAdapter = async () => {
  const { Effect, FileSystem, Layer, ManagedRuntime, Path } = await import("effect")
  const DirectFileSystem = await import("../dist/platform/DirectFileSystem.js")
  const NonBlockingOpen = await import("../dist/io/NonBlockingOpen.js")
  const { RarebitStore } = await import("../dist/store/RarebitStore.js")
  const NodeStore = await import("../dist/platform/NodeStore.js")

  /**
   * @param {string} path
   * @param {{ readonly flag?: string | undefined } | undefined} options
   */
  const beforeOpen = (path, options) => {
    if (isSidecar(path) && options?.flag === "a+") seen.appended = true
    if (isClaimTemp(path) && seen.appended && chance(kills.K2a)) selfKill("K2a")
  }
  /**
   * Counts what the store does and crashes this process at the chosen steps.
   * The store opens sidecars, claims and locks through the non-blocking open
   * (`src/io/NonBlockingOpen.ts`), so that is counted like `open`.
   * @param {import("effect").FileSystem.FileSystem} fs
   * @returns {import("effect").FileSystem.FileSystem}
   */
  const counting = (fs) => {
    const nonBlockingOpen = NonBlockingOpen.nonBlockingOpenOf(fs)
    /** @type {Partial<import("../dist/io/NonBlockingOpen.js").NonBlockingOpenCapable>} */
    const counted = nonBlockingOpen === undefined ? {} : {
      [NonBlockingOpen.NonBlockingOpenTypeId]: (path, options) =>
        Effect.suspend(() => {
          beforeOpen(path, options)
          return nonBlockingOpen(path, options)
        })
    }
    return {
      ...fs,
      ...counted,
      open: (path, options) =>
        Effect.suspend(() => {
          beforeOpen(path, options)
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
    }
  }
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
  /**
   * @template A, E
   * @param {(
   *   store: import("../dist/store/RarebitStore.js").RarebitStore["Service"]
   * ) => import("effect").Effect.Effect<A, E>} f
   */
  const run = (f) => runtime.runPromise(RarebitStore.use(f))
  const location = { rarebitRoot: config.rarebitRoot, sessionRoot: config.sessionRoot }

  return {
    reserve: async (jobId, sessionFile) => {
      resetSeen()
      const reservation = await run((store) =>
        store.reserve({ jobId, sessionFile, ...location, leaseMs: config.leaseMs })
      )
      if (reservation._tag !== "Acquired") {
        const tag = reservation._tag === "Duplicate" ? "duplicate" : "inFlight"
        return { tag, recovered: tag === "duplicate" && seen.claimRenames > 0 }
      }
      return {
        tag: "acquired",
        token: reservation.leaseToken,
        tookOver: seen.claimRenames > 0,
        settle: (receipt, hook) => {
          resetSeen()
          // The stress kit's receipts come from the reference's own builders; settle decodes them.
          const input = /** @type {import("../dist/protocol/Receipt.js").ReceiptInput} */ (receipt)
          return run((store) =>
            store.settle(reservation, input, { hooks: { afterLeaseValidated: Effect.promise(hook) } })
          )
        },
        release: () => run((store) => store.release(reservation))
      }
    },
    errorName: (error) => String(fieldsOf(error)?._tag ?? fieldsOf(error)?.name ?? error),
    isFenced: (error) => fieldsOf(error)?._tag === "LeaseFenced",
    isLockTimeout: (error) => fieldsOf(error)?._tag === "LockHeld",
    isTornClaim: () => false
  }
}

/**
 * The reference's reservation, as far as the worker reads it.
 * @typedef {{ readonly acquired: true; readonly leaseToken: string }
 *   | { readonly acquired: false; readonly duplicate?: true }} ReferenceReservation
 */

/** @returns {Promise<StoreAdapter>} */
const referenceAdapter = async () => {
  // The reference imports `open` from node:fs/promises; wrapping it there lets this
  // worker crash at the same steps as ours and see its takeovers.
  const requireBuiltin = createRequire(import.meta.url)
  /** @type {{ open: typeof import("node:fs/promises").open }} */
  const fsp = requireBuiltin("node:fs/promises")
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
      /** @type {ReferenceReservation} */
      const reservation = await Ref.reserveRarebitJob({ jobId, sessionFile, ...location, leaseMs: config.leaseMs })
      if (!reservation.acquired) return { tag: reservation.duplicate ? "duplicate" : "inFlight", recovered: false }
      return {
        tag: "acquired",
        token: reservation.leaseToken,
        // A reserve rewrites a claim in place ("w") only when it takes the job over.
        tookOver: seen.claimWrites > 0,
        settle: (receipt, hook) => {
          resetSeen()
          return Ref.settleRarebitJob({ ...reservation, hooks: { afterLeaseValidated: hook } }, receipt)
        },
        release: () => Ref.releaseRarebitJob(reservation)
      }
    },
    errorName: (error) => String(fieldsOf(error)?.name ?? error),
    isFenced: (error) => /fenced by a newer worker/.test(String(fieldsOf(error)?.message)),
    isLockTimeout: (error) => /commit lock is held/.test(String(fieldsOf(error)?.message)),
    isTornClaim: (error) => error instanceof SyntaxError
  }
}

const store = impl === "ours" ? await oursAdapter() : await referenceAdapter()

// ---- one job ------------------------------------------------------------------

/** @param {StressSession} session @param {number} k */
const jobIdOf = (session, k) => createHash("sha256").update(`${session.name}:${k}`).digest("hex")

/** @param {unknown} error @returns {Failure} */
const classify = (error) =>
  store.isFenced(error)
    ? "fenced"
    : store.isLockTimeout(error)
    ? "lockTimeout"
    : store.isTornClaim(error)
    ? "tornClaim"
    : "error"

/**
 * Reserves a job and, if acquired, settles it. Returns what happened.
 * @param {StressSession} session
 * @param {number} k
 * @param {{ readonly mayStall: boolean; readonly signatureWorker: number }} options
 */
const work = async (session, k, { mayStall, signatureWorker }) => {
  const jobId = jobIdOf(session, k)
  /** @type {Reserved} */
  let reserved
  try {
    reserved = await store.reserve(jobId, session.file)
  } catch (error) {
    log({
      e: classify(error),
      op: "reserve",
      job: jobId,
      session: session.name,
      k,
      error: store.errorName(error),
      message: messageOf(error).slice(0, 200)
    })
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
  const receipt = await receiptFor(
    session.file,
    config.sessionRoot,
    kind,
    `${impl}:${signatureWorker}:${reserved.token}`
  )
  if (receipt === undefined) {
    await reserved.release().catch(() => undefined)
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
    await reserved.settle(receipt, hook)
    log({ e: "settled", job: jobId, session: session.name, token: reserved.token, kind })
    return "settled"
  } catch (error) {
    log({
      e: classify(error),
      op: "settle",
      job: jobId,
      session: session.name,
      error: store.errorName(error),
      message: messageOf(error).slice(0, 200)
    })
    await reserved.release().catch(() => undefined)
    return "failed"
  }
}

// ---- main -----------------------------------------------------------------------

const sessions = config.sessions

if (!drain) {
  /** @type {Assignment} */
  const assignment = await new Promise((resolve) => {
    process.once("message", resolve)
    if (process.send === undefined) throw new Error("a stress worker needs the IPC channel stress/run.mjs opens")
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
/** @type {Map<string, { readonly name: string; readonly k: number }>} */
const jobs = new Map()
for (const name of readdirSync(config.runDir)) {
  if (!name.startsWith("journal-")) continue
  for (const line of readFileSync(join(config.runDir, name), "utf8").split("\n")) {
    if (!line) continue
    /** @type {JournalEvent} */
    let event
    try {
      event = JSON.parse(line)
    } catch {
      continue
    }
    if (
      typeof event.job === "string" && typeof event.session === "string" && typeof event.k === "number" &&
      Number.isInteger(event.k)
    ) {
      jobs.set(event.job, { name: event.session, k: event.k })
    }
  }
}
const byName = new Map(sessions.map((session) => [session.name, session]))
/** @type {Set<string>} */
const blocked = new Set()
for (const { k, name } of jobs.values()) {
  const session = byName.get(name)
  if (session === undefined || blocked.has(name)) continue
  const outcome = await work(session, k, { mayStall: false, signatureWorker: 9999 })
  if (outcome === "failed") {
    // A sidecar whose lock cannot be taken will not take it for the next job either.
    const last = readFileSync(journalPath, "utf8").trim().split("\n").at(-1)
    if (last && /** @type {JournalEvent} */ (JSON.parse(last)).e === "lockTimeout") blocked.add(name)
  }
}

/**
 * Takes and releases a sidecar's commit lock, through the store's own calls.
 * Our release takes the lock only for a claim its lease still owns, so the
 * lease must be a real one: a fresh job is reserved, then given back.
 * @param {string} sessionFile
 */
const touchLock = async (sessionFile) => {
  const reserved = await store.reserve(randomBytes(32).toString("hex"), sessionFile)
  if (reserved.tag !== "acquired") throw new Error(`a fresh job was ${reserved.tag}`)
  await reserved.release()
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
