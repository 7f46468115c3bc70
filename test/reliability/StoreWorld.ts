/**
 * A small, fixed store world for the crash and fault tests: one Session with
 * two branches' worth of receipts, a store configuration with a short lease
 * and a lock retry that never sleeps (so `TestClock` never has to move while
 * a worker waits), worker identities whose lock evidence can be proven dead,
 * and the bridge from an in-memory file system to the shared on-disk checker
 * and to the reference's readers.
 */
import { assert } from "@effect/vitest"
import { Effect, FileSystem, Path, Random, Result } from "effect"
import { SecureRandom } from "effect/crypto/SecureRandom"
import { createHash } from "node:crypto"
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import type { ReceiptInput } from "../../src/protocol/Receipt.js"
import { inspectCommitLock, removeCommitLock } from "../../src/store/lock/CommitLockRepair.js"
import { LockOwner, type LockOwnerProbe, makeLockOwnerProbe } from "../../src/store/lock/LockOwner.js"
import { make } from "../../src/store/RarebitStore.js"
import { makeStoreConfig, type StoreConfig } from "../../src/store/StoreConfig.js"
import type { Acquired } from "../../src/store/write/Reservation.js"
import type { MemoryFileSystemShape } from "../../src/testing/MemoryFileSystem.js"
import { makeMemoryFileSystem } from "../../src/testing/MemoryFileSystem.js"
import { checkStore, type StoreCheck, type StoreFiles } from "../../stress/invariants.mjs"
import { entry, jobId, sessionText, Store as Ref, summaryReceipt, titleReceipt } from "../support/Reference.js"
import { tokensSeededFromRandom } from "../support/Tokens.js"

export const ROOT = "/w"
export const SESSION_ROOT = "/w/sessions"
export const RAREBIT_ROOT = "/w/rarebit"
export const SESSION_FILE = "/w/sessions/project/trace.jsonl"
export const SIDECAR = "/w/rarebit/materializations-v4/project/trace.jsonl"
export const LOCK = `${SIDECAR}.commit-lock`
export const SESSION_ID = "session-1"
export const LEASE_MS = 60_000
/** When the initial state was written; later phases are offsets from it. */
export const T0 = 1_000_000_000

export const claimPathOf = (job: string): string => `${RAREBIT_ROOT}/jobs-v4/${job}.json`

const olderBranch = [entry("u1", "user", "first question"), entry("a1", "assistant", "first answer")]
const branch = [...olderBranch, entry("u2", "user", "second question"), entry("a2", "assistant", "second answer")]

/** A summary of the Session as it is now: settling it makes a new head. */
export const currentSummary = summaryReceipt(branch, SESSION_ID)
/** A summary of an older cut: valid, but never current, so the previous head is repeated. */
export const staleSummary = summaryReceipt(olderBranch, SESSION_ID)
/** A title: never current, the previous head is repeated. */
export const title = titleReceipt(branch, SESSION_ID)

export const JOB0 = jobId(0xa0)
export const JOB1 = jobId(0xa1)
export const JOB2 = jobId(0xa2)

export const config: StoreConfig = makeStoreConfig({
  rarebitRoot: RAREBIT_ROOT,
  sessionRoot: SESSION_ROOT,
  leaseMs: LEASE_MS,
  // A zero interval never sleeps, so a worker that meets a live lock fails at once
  // with LockHeld instead of waiting on a TestClock nobody moves.
  lockRetry: { intervalMs: 0, attempts: 4 },
  breakDeadLocks: true
})

/** The PID namespace every simulated worker runs in. */
export const WORKER_PID_NAMESPACE = "pid:[4026531836]"

/**
 * The lock evidence of worker `pid` on one simulated host, judged by the
 * store's own rule (`makeLockOwnerProbe`). Workers are numbered in the
 * order they run; every earlier one has crashed, so its pid is gone, our
 * own pid is running with start time `pid`, and the start time of a later
 * pid cannot be read.
 */
export const workerProbe = (pid: number): LockOwnerProbe =>
  makeLockOwnerProbe(
    { pid, hostname: "crash-host", bootId: "boot-1", startTicks: String(pid), pidNamespace: WORKER_PID_NAMESPACE },
    (other) => other < pid ? "gone" : other === pid ? String(pid) : undefined
  )

/** Runs `effect` as worker `pid`, with tokens from a seeded `Random`. */
export const asWorker = (pid: number, seed: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.provideService(LockOwner, workerProbe(pid)), Random.withSeed(seed))

/**
 * A fresh store instance over `fs` (the store keeps the file system it was
 * built with), with its own token stream seeded from `Random`.
 */
export const storeOn = (fs: FileSystem.FileSystem) =>
  Effect.flatMap(
    tokensSeededFromRandom,
    (tokens) =>
      make(config).pipe(Effect.provideService(FileSystem.FileSystem, fs), Effect.provideService(SecureRandom, tokens))
  )

export type Store = Effect.Success<ReturnType<typeof storeOn>>

/** An empty world holding only the Session file. */
export const makeWorld = (): MemoryFileSystemShape =>
  makeMemoryFileSystem({ files: { [SESSION_FILE]: sessionText(SESSION_ID, branch) } })

/** Reserves `job` and expects to acquire it. */
export const acquire = (store: Store, job: string) =>
  Effect.gen(function*() {
    const reservation = yield* store.reserve({ jobId: job, sessionFile: SESSION_FILE })
    assert.strictEqual(reservation._tag, "Acquired", `reserve ${job.slice(-2)}`)
    return reservation as Acquired
  })

/** Reserves and settles `job`. */
export const settleJob = (store: Store, job: string, receipt: ReceiptInput) =>
  Effect.flatMap(acquire(store, job), (reservation) => store.settle(reservation, receipt))

/** How one attempt to finish a job ended. */
export type Completion = "settled" | "duplicate" | "inFlight" | { readonly failed: string }

/** Reserves `job` and, if acquired, settles it; failures are reported, never raised. */
export const completeJob = (store: Store, job: string, receipt: ReceiptInput) =>
  Effect.gen(function*() {
    const reserved = yield* Effect.result(store.reserve({ jobId: job, sessionFile: SESSION_FILE }))
    if (Result.isFailure(reserved)) return { failed: reserved.failure._tag } as Completion
    const reservation = reserved.success
    if (reservation._tag === "Duplicate") return "duplicate" as Completion
    if (reservation._tag === "InFlight") return "inFlight" as Completion
    const settled = yield* Effect.result(store.settle(reservation, receipt))
    return Result.isSuccess(settled) ? "settled" as Completion : { failed: settled.failure._tag } as Completion
  })

/**
 * `rarebit-store unlock --force` on the sidecar's lock: inspect it, then run
 * the product's repair with the key inspected, clearing a crashed breaker's
 * stale break file. Only ever run after a worker failed with `LockHeld`.
 * Callers set the clock past the break's staleness first (every restart
 * happens leases after the crash), so anything but `Removed` is a bug.
 */
export const manualUnlock = (fs: MemoryFileSystemShape) =>
  Effect.gen(function*() {
    const inspected = yield* inspectCommitLock(LOCK)
    assert.isDefined(inspected, "manual unlock: no lock to remove")
    const removal = yield* removeCommitLock(LOCK, inspected!.key, { force: true, clearStaleBreakFile: true })
    assert.deepStrictEqual(removal, { _tag: "Removed" }, "manual unlock")
  }).pipe(Effect.provideService(FileSystem.FileSystem, fs), Effect.provide(Path.layer), Effect.orDie)

/** The files of a world, sorted the way the shared checker wants them. */
export const storeFiles = (fs: MemoryFileSystemShape): StoreFiles => {
  const files = fs.snapshot(RAREBIT_ROOT).filter((entry) => entry.type === "File")
  const claim = /\/jobs-v4\/([a-f0-9]{64})\.json$/
  const sidecars: Array<{ path: string; bytes: Uint8Array }> = []
  const claims: Array<{ path: string; bytes: Uint8Array; jobId: string }> = []
  const locks: Array<{ path: string; bytes: Uint8Array }> = []
  const others: Array<string> = []
  for (const file of files) {
    const bytes = file.data ?? new Uint8Array(0)
    const claimMatch = claim.exec(file.path)
    if (claimMatch !== null) claims.push({ path: file.path, bytes, jobId: claimMatch[1] })
    else if (file.path.endsWith(".commit-lock")) locks.push({ path: file.path, bytes })
    else if (file.path.includes("/materializations-v4/") && file.path.endsWith(".jsonl")) {
      sidecars.push({ path: file.path, bytes })
    } else others.push(file.path)
  }
  return { sidecars, claims, locks, others }
}

/** Runs the shared checker over a world. */
export const check = (fs: MemoryFileSystemShape, options: Partial<StoreFiles> = {}): StoreCheck =>
  checkStore({ ...storeFiles(fs), ...options })

/** Copies every file of a world under a fresh directory on disk, for the reference to read. */
export const dumpToDisk = async (fs: MemoryFileSystemShape): Promise<string> => {
  const root = await mkdtemp(join(tmpdir(), "rarebit-crash-"))
  for (const file of fs.snapshot(ROOT)) {
    if (file.type !== "File") continue
    const target = join(root, file.path.slice(ROOT.length))
    await mkdir(dirname(target), { recursive: true })
    await writeFile(target, file.data ?? new Uint8Array(0))
  }
  return root
}

const stateKey = (fs: MemoryFileSystemShape, jobs: ReadonlyArray<string>): string => {
  const hash = createHash("sha256").update(jobs.join(","))
  for (const file of fs.snapshot(ROOT)) {
    if (file.type !== "File" || file.path.endsWith(".tmp")) continue
    hash.update(`\0${file.path}\0`).update(file.data ?? new Uint8Array(0))
  }
  return hash.digest("hex")
}

const normalize = (value: unknown, root: string): unknown =>
  JSON.parse(JSON.stringify(value ?? null).split(root).join(ROOT))

/**
 * Reads a world with our store and with the reference (over a copy on disk)
 * and asserts both give the same current answer and the same history. For
 * each of `settledJobs`, both must answer `reserve` with the same duplicate.
 */
export const assertSameAsReference = (
  store: Store,
  fs: MemoryFileSystemShape,
  settledJobs: ReadonlyArray<string>,
  label: string,
  seen?: Set<string>
) =>
  Effect.gen(function*() {
    // Many crash points leave the same files (temp files aside, which no reader
    // opens); each distinct state is compared once.
    if (seen !== undefined) {
      const key = stateKey(fs, settledJobs)
      if (seen.has(key)) return
      seen.add(key)
    }
    const current = yield* store.readCurrent({ sessionFile: SESSION_FILE })
    const history = yield* store.readHistory({ sessionFile: SESSION_FILE, limit: 1000 })
    const duplicates: Array<unknown> = []
    for (const job of settledJobs) {
      const reservation = yield* store.reserve({ jobId: job, sessionFile: SESSION_FILE })
      assert.strictEqual(reservation._tag, "Duplicate", `our reserve of a settled job ${label}`)
      duplicates.push(reservation._tag === "Duplicate" ? reservation.record : null)
    }
    const root = yield* Effect.promise(() => dumpToDisk(fs))
    const location = { sessionRoot: join(root, "sessions"), rarebitRoot: join(root, "rarebit") }
    const sessionFile = join(root, "sessions/project/trace.jsonl")
    const theirs = yield* Effect.promise(async () => {
      try {
        const theirDuplicates: Array<unknown> = []
        for (const job of settledJobs) {
          const reservation = await Ref.reserveRarebitJob({ jobId: job, sessionFile, ...location })
          theirDuplicates.push(reservation.duplicate === true ? reservation.record : reservation)
        }
        return {
          current: await Ref.readRarebitCurrent({ sessionFile, ...location }),
          history: await Ref.readRarebitHistory({ sessionFile, ...location, limit: 1000 }),
          duplicates: theirDuplicates
        }
      } finally {
        await rm(root, { recursive: true, force: true })
      }
    })
    assert.deepStrictEqual(normalize(current, root), normalize(theirs.current, root), `current read ${label}`)
    assert.deepStrictEqual(normalize(history, root), normalize(theirs.history, root), `history ${label}`)
    assert.deepStrictEqual(normalize(duplicates, root), normalize(theirs.duplicates, root), `duplicates ${label}`)
  })
