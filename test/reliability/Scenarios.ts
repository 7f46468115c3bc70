/**
 * The store operations the reliability tests break: each one starts from a
 * fixed state built by an earlier worker (10) and runs as worker 100, so a
 * crash or a fault can be injected at any step and a later worker (300)
 * can finish the job.
 */
import { assert } from "@effect/vitest"
import { Effect, Exit, FileSystem, type Path, type Scope } from "effect"
import { TestClock } from "effect/testing"
import type { ReceiptInput } from "../../src/protocol/Receipt.js"
import type { Acquired } from "../../src/store/write/Reservation.js"
import { type FaultFileSystemShape, makeFaultFileSystem } from "../../src/testing/FaultFileSystem.js"
import type { DirectoryLoss, MemoryFileSystemShape } from "../../src/testing/MemoryFileSystem.js"
import {
  acquire,
  asWorker,
  currentSummary,
  JOB0,
  JOB1,
  JOB2,
  LEASE_MS,
  LOCK,
  makeWorld,
  SESSION_FILE,
  settleJob,
  staleSummary,
  type Store,
  storeOn,
  T0,
  title,
  WORKER_PID_NAMESPACE
} from "./StoreWorld.js"

export interface Scenario {
  readonly name: string
  /** Builds the initial state as worker 10 at `T0`; returns the reservation the program uses, if any. */
  /** Runs in a scope of its own: stores it builds let go of their files when it ends. */
  readonly setup: (
    world: MemoryFileSystemShape
  ) => Effect.Effect<Acquired | undefined, unknown, Path.Path | Scope.Scope>
  readonly programAt: number
  /** What worker 100 does, crashed at every step. */
  readonly program: (store: Store, reservation: Acquired | undefined) => Effect.Effect<unknown, unknown>
  /** The job the program works on, and its receipt (the restart settles the same one). */
  readonly job: string
  readonly receipt: ReceiptInput
  /** The job whose receipt must be current once everything is finished. */
  readonly finalCurrent: string
  /** How many crash points the enumeration must find: mutating steps of the crash-free run, plus the end. */
  readonly expectedPoints: number
  /** The root starts empty: no job 0 and no directories. */
  readonly unseeded?: boolean
  /** Whether the program settles (appends a receipt and writes a settled claim); its settle returns last. */
  readonly settles: boolean
  /** Whether the job is settled once the program returned (a settle, or a reserve answering `Duplicate`). */
  readonly settledWhenDone?: boolean
  /** The setup ends in a power cut losing these directory operations, rather than with everything on disk. */
  readonly powerCut?: DirectoryLoss
  /** What the crash-free program must return. */
  readonly expect?: (result: unknown) => void
}

/** Job 0 settled with the current summary: there is a previous receipt and head. */
const seeded = (world: MemoryFileSystemShape) =>
  Effect.gen(function*() {
    const store = yield* storeOn(world)
    yield* settleJob(store, JOB0, currentSummary)
    return store
  }).pipe(asWorker(10, "setup"))

const seededWithClaim = (world: MemoryFileSystemShape) =>
  Effect.flatMap(seeded(world), (store) => acquire(store, JOB1).pipe(asWorker(10, "setup-claim")))

const settleWith = (receipt: ReceiptInput) => (store: Store, reservation: Acquired | undefined) =>
  store.settle(reservation!, receipt)

const deadOwnerLock = JSON.stringify({
  token: "d".repeat(48),
  claimedAt: new Date(T0).toISOString(),
  owner: { pid: 10, hostname: "crash-host", bootId: "boot-1", startTicks: "10", pidNamespace: WORKER_PID_NAMESPACE }
}) + "\n"

/** Writes a whole file and fsyncs it, as a lock writer does before linking it into place. */
const writeDurably = (world: MemoryFileSystemShape, path: string, content: string) =>
  Effect.scoped(Effect.gen(function*() {
    const file = yield* world.open(path, { flag: "wx", mode: 0o600 })
    yield* file.writeAll(new TextEncoder().encode(content))
    yield* file.sync
  }))

/**
 * The jobs that must each end with one settled claim and one receipt: the seed, the scenario's, and the next
 * writer's.
 */
export const finalJobs = (scenario: Scenario): ReadonlyArray<string> =>
  scenario.unseeded === true ? [scenario.job, JOB2] : [JOB0, scenario.job, JOB2]

/** Worker 10 settles and dies between its fsynced append and the settled claim's rename, holding the lock. */
const crashBeforeSettledClaim = (world: MemoryFileSystemShape) =>
  Effect.gen(function*() {
    const reservation = yield* seededWithClaim(world)
    const fault = makeFaultFileSystem(world, {
      rules: [{ kind: "rename", path: "/jobs-v4/", action: { _tag: "Crash" } }]
    })
    const store = yield* storeOn(fault)
    const exit = yield* Effect.exit(store.settle(reservation, currentSummary).pipe(asWorker(10, "doomed")))
    assert.isTrue(Exit.isFailure(exit) && fault.crashed, "the setup settle crashed")
    return undefined
  })

/** After that crash, once the lease has passed: a takeover reserve finds the receipt and settles the claim. */
const takeoverRecoversSettlement = {
  settles: false,
  setup: crashBeforeSettledClaim,
  programAt: T0 + LEASE_MS + 1_000,
  program: (store) => store.reserve({ jobId: JOB1, sessionFile: SESSION_FILE }),
  settledWhenDone: true,
  expect: (reservation) =>
    assert.strictEqual((reservation as { _tag: string })._tag, "Duplicate", "the takeover recovers the settlement"),
  job: JOB1,
  receipt: currentSummary,
  finalCurrent: JOB1
} satisfies Partial<Scenario>

export const scenarios: ReadonlyArray<Scenario> = [
  {
    name: "first reserve on an empty root",
    settles: false,
    unseeded: true,
    setup: () => Effect.succeed(undefined),
    programAt: T0 + 1_000,
    program: (store) => acquire(store, JOB1),
    job: JOB1,
    receipt: currentSummary,
    finalCurrent: JOB1,
    // The root and three private directories created, each by one mkdir with
    // mode 0700 (jobs-v4, materializations-v4, the Session's mirrored folder)
    // and an fsync of its parent, then the exclusive claim: temp open, write,
    // fsync, link, temp removal.
    expectedPoints: 14
  },
  {
    name: "reserve",
    settles: false,
    setup: (world) => Effect.as(seeded(world), undefined),
    programAt: T0 + 1_000,
    program: (store) => acquire(store, JOB1),
    job: JOB1,
    receipt: currentSummary,
    finalCurrent: JOB1,
    // The exclusive claim: temp open, write, fsync, link, temp removal. The private
    // directories already exist with mode 0700, so reserve only lstats them.
    expectedPoints: 6
  },
  {
    name: "takeover, then settle",
    settles: true,
    setup: (world) => Effect.as(seededWithClaim(world), undefined),
    programAt: T0 + LEASE_MS + 1_000,
    program: (store) => settleJob(store, JOB1, currentSummary),
    job: JOB1,
    receipt: currentSummary,
    finalCurrent: JOB1,
    // Reserve finds the claim by reading it (no failed create), then lock 7, claim replace 4
    // (temp open, write, fsync, rename: no directory fsync, settle makes it durable); then settle 17.
    expectedPoints: 29
  },
  {
    name: "settle a summary (new head)",
    settles: true,
    setup: seededWithClaim,
    programAt: T0 + 1_000,
    program: settleWith(currentSummary),
    job: JOB1,
    receipt: currentSummary,
    finalCurrent: JOB1,
    // Settle: the claims directory fsync (the active claim durable before the receipt), lock 7 (temp open,
    // write, fsync, link, temp removal, release, directory fsync), append 4 (open, write, fsync, chmod),
    // settled claim 5 (temp open, write, fsync, rename, directory fsync).
    expectedPoints: 18
  },
  {
    name: "settle a summary (repeated head)",
    settles: true,
    setup: seededWithClaim,
    programAt: T0 + 1_000,
    program: settleWith(staleSummary),
    job: JOB1,
    receipt: staleSummary,
    finalCurrent: JOB0,
    // As with a new head: the repeated head goes out in the same single write.
    expectedPoints: 18
  },
  {
    name: "settle a title",
    settles: true,
    setup: seededWithClaim,
    programAt: T0 + 1_000,
    program: settleWith(title),
    job: JOB1,
    receipt: title,
    finalCurrent: JOB0,
    // As with a summary.
    expectedPoints: 18
  },
  {
    name: "release",
    settles: false,
    setup: seededWithClaim,
    programAt: T0 + 1_000,
    program: (store, reservation) => store.release(reservation!),
    job: JOB1,
    receipt: currentSummary,
    finalCurrent: JOB1,
    // Lock 7 plus the claim removal.
    expectedPoints: 9
  },
  {
    name: "break a dead owner's lock, then settle",
    settles: true,
    setup: (world) => Effect.tap(seededWithClaim(world), () => writeDurably(world, LOCK, deadOwnerLock)),
    programAt: T0 + 1_000,
    program: settleWith(currentSummary),
    job: JOB1,
    receipt: currentSummary,
    finalCurrent: JOB1,
    // Settle 17, plus a failed link, the break file, the dead lock's removal, the break file's removal and a
    // second link.
    expectedPoints: 22
  },
  {
    name: "recover a crashed settlement (after breaking its lock)",
    // Worker 10 dies between the fsynced append and the settled claim, holding the lock.
    ...takeoverRecoversSettlement,
    // Reserve without a new claim (it reads the existing one): lock 7 + 4 to break the dead one, settled claim 5.
    expectedPoints: 17
  },
  {
    name: "first reserve and settle on an empty root",
    settles: true,
    unseeded: true,
    setup: () => Effect.succeed(undefined),
    programAt: T0 + 1_000,
    program: (store) => settleJob(store, JOB1, currentSummary),
    job: JOB1,
    receipt: currentSummary,
    finalCurrent: JOB1,
    // Reserve on an empty root 13 (the directories, each followed by an fsync of its parent); settle: the
    // claims directory fsync, lock 7, append 4 creating the sidecar, its directory's fsync, settled claim 5.
    expectedPoints: 32
  },
  {
    name: "reserve, then settle",
    settles: true,
    setup: (world) => Effect.as(seeded(world), undefined),
    programAt: T0 + 1_000,
    program: (store) => settleJob(store, JOB1, currentSummary),
    job: JOB1,
    receipt: currentSummary,
    finalCurrent: JOB1,
    // Reserve 5, then settle 17.
    expectedPoints: 23
  },
  {
    name: "recover a settlement after a power cut, crashed again",
    // Worker 10 reserves and settles; the power fails between the fsynced append and the settled claim,
    // losing every directory operation not yet made durable.
    ...takeoverRecoversSettlement,
    powerCut: "all",
    // The lock was lost with the power: lock 7 and the settled claim 5.
    expectedPoints: 13
  }
]

/**
 * Builds a scenario's initial world (the TestClock is left at `T0`) and the
 * program worker 100 runs on whatever `FileSystem` it is given.
 */
export const prepare = (scenario: Scenario) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(T0)
    const world = makeWorld()
    const reservation = yield* Effect.scoped(scenario.setup(world))
    // How many mutating operations the program had made when its settle returned: a crash at or after
    // that one comes after the return.
    let settleReturnedAfter: number | undefined
    const program = Effect.scoped(Effect.gen(function*() {
      yield* TestClock.setTime(scenario.programAt)
      const fs = yield* FileSystem.FileSystem
      const store = yield* storeOn(fs)
      const result = yield* scenario.program(store, reservation)
      if ((scenario.settles || scenario.settledWhenDone === true) && "operations" in fs) {
        settleReturnedAfter = (fs as FaultFileSystemShape).operations().filter((op) => op.mutating).length
      }
      return result
    })).pipe(asWorker(100, "program"))
    // A copy without open handles (and, after a power cut, without what it lost), so every run starts
    // from the same bytes.
    const initial = scenario.powerCut === undefined
      ? world.crashImage("process")
      : world.crashImage("power", scenario.powerCut)
    return { initial, program, settleReturnedAfter: () => settleReturnedAfter }
  })
