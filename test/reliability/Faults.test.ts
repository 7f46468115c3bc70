/**
 * Fault injection: every mutating step of every store operation fails in turn
 * with EIO, ENOSPC and EACCES, and every write is torn (a prefix lands, then
 * the write fails, or the process dies). After each fault:
 * - the operation either succeeded (the step was best-effort cleanup) or
 *   failed with a typed `StoreIo` carrying the errno, never a defect;
 * - nothing is left that the protocol cannot read back: claims and locks
 *   parse, every head and settled pointer verifies, the current reader does
 *   not fail closed;
 * - the same worker's retry, once the fault clears, and a later worker after
 *   the lease finish the job with exactly one settled claim and one receipt.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, FileSystem, Path } from "effect"
import { TestClock } from "effect/testing"
import {
  type FaultAction,
  type FaultErrno,
  type FaultOperation,
  FaultPlan,
  makeFaultFileSystem
} from "../../src/testing/FaultFileSystem.js"
import type { MemoryFileSystemShape } from "../../src/testing/MemoryFileSystem.js"
import { report } from "../support/TestReport.js"
import { finalJobs, prepare, type Scenario, scenarios } from "./Scenarios.js"
import {
  asWorker,
  check,
  completeJob,
  type Completion,
  JOB2,
  LEASE_MS,
  LOCK,
  manualUnlock,
  SESSION_FILE,
  SIDECAR,
  storeOn,
  title
} from "./StoreWorld.js"

const errnos: ReadonlyArray<FaultErrno> = ["EIO", "ENOSPC", "EACCES"]

/** The `reason._tag` Node gives each errno. */
const reasonOf: Record<FaultErrno, string> = {
  EIO: "Unknown",
  ENOSPC: "Unknown",
  EACCES: "PermissionDenied",
  EPERM: "PermissionDenied",
  EROFS: "Unknown",
  EBUSY: "Busy",
  EMFILE: "Unknown"
}

/**
 * The program's exit must be a success or a typed failure, never a defect.
 * An injected errno must come back as `StoreIo` carrying it; anything else is
 * reported as a problem. Returns the failure's tag, if any.
 */
const typedOutcome = (
  exit: Exit.Exit<unknown, unknown>,
  errno: FaultErrno | undefined,
  at: string,
  tally: Tally
): string | undefined => {
  if (Exit.isSuccess(exit)) {
    tally.succeeded++
    return undefined
  }
  tally.failed++
  const cause = exit.cause
  assert.isFalse(cause.reasons.some(Cause.isDieReason), `${at}: defect ${Cause.pretty(cause)}`)
  const failure = cause.reasons.find(Cause.isFailReason)
  assert.isDefined(failure, `${at}: ${Cause.pretty(cause)}`)
  const error = failure!.error as { readonly _tag?: unknown; readonly cause?: any }
  assert.isString(error._tag, `${at}: untyped failure ${String(error)}`)
  tally.tags[error._tag as string] = (tally.tags[error._tag as string] ?? 0) + 1
  if (errno !== undefined) {
    if (error._tag !== "StoreIo") tally.problems.push(`${at}: failed with ${String(error._tag)}, not StoreIo`)
    else {
      assert.strictEqual(error.cause?._tag, "PlatformError", at)
      assert.strictEqual(error.cause?.reason?._tag, reasonOf[errno], at)
      assert.strictEqual(error.cause?.reason?.cause?.code, errno, at)
    }
  }
  return error._tag as string
}

interface Tally {
  /** Failures by tag. */
  readonly tags: Record<string, number>
  runs: number
  failed: number
  succeeded: number
  /** The same worker's retry found the job in flight (a claim kept for recovery) and a later worker finished it. */
  deferred: number
  repairs: number
  readonly problems: Array<string>
}

/**
 * After a fault: check the state, let the same worker retry with the fault
 * gone, then a later worker past the lease, then the sidecar's next writer,
 * and check that everything finished exactly once.
 */
const afterFault = (scenario: Scenario, world: MemoryFileSystemShape, at: string, tally: Tally, crashed = false) =>
  Effect.gen(function*() {
    const problem = (text: string) => tally.problems.push(`${at}: ${text}`)
    const before = check(world, { deadLocksArePending: true })
    for (const violation of before.violations) problem(`after the fault: ${violation}`)
    const store = yield* storeOn(world)
    const current = yield* store.readCurrent({ sessionFile: SESSION_FILE })
    if (current.availability === "unreadable") problem(`current reader fails closed (${current.diagnostics.reason})`)

    // A crashed worker does not retry; a live one does, as soon as the fault clears.
    if (!crashed) {
      const retry = yield* completeJob(store, scenario.job, scenario.receipt).pipe(asWorker(100, "retry"))
      if (retry === "inFlight") tally.deferred++
      else if (retry !== "settled" && retry !== "duplicate") problem(`same worker's retry: ${JSON.stringify(retry)}`)
    }

    yield* TestClock.setTime(scenario.programAt + 3 * LEASE_MS)
    let later: Completion = yield* completeJob(store, scenario.job, scenario.receipt).pipe(asWorker(300, "later"))
    if (typeof later === "object" && later.failed === "LockHeld") {
      tally.repairs++
      yield* manualUnlock(world)
      later = yield* completeJob(store, scenario.job, scenario.receipt).pipe(asWorker(301, "after-unlock"))
    }
    if (later !== "settled" && later !== "duplicate") problem(`later worker: ${JSON.stringify(later)}`)
    const next = yield* completeJob(store, JOB2, title).pipe(asWorker(302, "next-writer"))
    if (next !== "settled") problem(`next writer: ${JSON.stringify(next)}`)

    const jobs = finalJobs(scenario)
    const after = check(world, { expectedJobs: jobs })
    for (const violation of after.violations) problem(violation)
    for (const pending of after.pending) problem(`left pending: ${pending}`)
    if (after.stats.receipts !== jobs.length) problem(`${after.stats.receipts} receipts instead of ${jobs.length}`)
    const final = yield* store.readCurrent({ sessionFile: SESSION_FILE })
    if (final.availability !== "available" || final.receipt?.jobId !== scenario.finalCurrent) {
      problem(`final current: ${final.availability} ${String(final.receipt?.jobId).slice(-2)}`)
    }
  })

/** Runs a scenario once crash- and fault-free, for its operation log. */
const baselineOf = (
  initial: MemoryFileSystemShape,
  program: Effect.Effect<unknown, unknown, FileSystem.FileSystem | Path.Path>
) =>
  Effect.gen(function*() {
    const fault = makeFaultFileSystem(initial.crashImage("process"), FaultPlan.none)
    yield* Effect.provideService(program, FileSystem.FileSystem, fault)
    return fault.operations()
  })

/**
 * The steps where a fault is known to break exactly-once or the same
 * worker's retry (see docs/reliability.md, "Fault injection"):
 * - `afterAppend`: from the sidecar append to the settled claim's rename.
 *   Settle then fails and deletes the claim although the receipt is in the
 *   sidecar, so the retry runs the job a second time.
 * - `lockRelease`: reading or removing our own lock when releasing it. The
 *   lock stays behind with this live process's evidence, so this process
 *   cannot take it again until it exits; a later process breaks it.
 */
const gapsOf = (log: ReadonlyArray<FaultOperation>) => {
  const appends = log.filter((op) => op.kind === "write" && op.path === SIDECAR).map((op) => op.index)
  const renames = log.filter((op) => op.kind === "rename" && op.path.includes("/jobs-v4/")).map((op) => op.index)
  const afterAppend = new Set<number>()
  for (const append of appends) {
    const rename = renames.find((index) => index > append)
    if (rename === undefined) continue
    for (const op of log) if (op.index > append && op.index <= rename) afterAppend.add(op.index)
  }
  const lockRelease = new Set<number>()
  const meaningful = log.filter((op) => op.kind !== "close")
  // A read of the lock is its open (read-only), the handle's stat and reads: a run of steps on LOCK.
  const readsLock = (op: FaultOperation | undefined) =>
    op?.path === LOCK && ((op.kind === "open" && !op.mutating) || op.kind === "stat" || op.kind === "read")
  meaningful.forEach((op, position) => {
    if (op.kind !== "remove" || op.path !== LOCK) return
    let start = position
    while (readsLock(meaningful[start - 1])) start--
    const read = meaningful.slice(start, position)
    const before = meaningful[start - 1]
    const afterBreakFile = before?.kind === "writeFile" && before.path.includes(".break-")
    if (read.length === 0 || read[0]!.kind !== "open" || afterBreakFile) return
    for (const step of [...read, op]) lockRelease.add(step.index)
  })
  return {
    afterAppend,
    lockRelease,
    isGap: (op: FaultOperation) => afterAppend.has(op.index) || lockRelease.has(op.index)
  }
}

const reportTally = (name: string, tally: Tally) =>
  report(
    "faults",
    `faults · ${name}: ${tally.runs} runs, ${tally.failed} typed failures ${JSON.stringify(tally.tags)}, ` +
      `${tally.succeeded} absorbed, ` +
      `${tally.deferred} left for recovery, ${tally.repairs} manual unlocks, ${tally.problems.length} problems` +
      tally.problems.slice(0, 12).map((problem) => `\n  ${problem}`).join("")
  )

const newTally = (): Tally => ({ tags: {}, runs: 0, failed: 0, succeeded: 0, deferred: 0, repairs: 0, problems: [] })

type Selection = "outside known gaps" | "known gaps"

/** Fails each selected mutating step with each errno, then each selected read with EIO. */
const errnoRuns = (scenario: Scenario, selection: Selection) =>
  Effect.gen(function*() {
    const { initial, program } = yield* prepare(scenario)
    const log = yield* baselineOf(initial, program)
    const { isGap } = gapsOf(log)
    const selected = log.filter((op) => op.kind !== "close" && isGap(op) === (selection === "known gaps"))
    const tally = newTally()
    for (const step of selected) {
      for (const errno of step.mutating ? errnos : ["EIO" as const]) {
        const at = `${errno} at #${step.index} ${step.method} ${step.path}`
        const world = initial.crashImage("process")
        const fault = makeFaultFileSystem(world, {
          rules: [{ index: step.index, action: { _tag: "Fail", error: errno } }]
        })
        const exit = yield* Effect.exit(Effect.provideService(program, FileSystem.FileSystem, fault))
        assert.isTrue(fault.operations().some((op) => op.fault !== undefined), `${at}: fault injected`)
        tally.runs++
        typedOutcome(exit, step.mutating ? errno : undefined, at, tally)
        yield* afterFault(scenario, world, at, tally)
      }
    }
    return tally
  })

/** Tears each selected write (a prefix lands, then EIO or a SIGKILL). */
const tornRuns = (scenario: Scenario, selection: Selection) =>
  Effect.gen(function*() {
    const { initial, program } = yield* prepare(scenario)
    const log = yield* baselineOf(initial, program)
    const { afterAppend } = gapsOf(log)
    const receiptBytes =
      new TextEncoder().encode(JSON.stringify({ ...(scenario.receipt as object), jobId: scenario.job }))
        .length + 1
    const tally = newTally()
    for (const write of log.filter((op) => op.kind === "write")) {
      for (const then of ["fail", "crash"] as const) {
        // A prefix of the first line, and (sidecar appends) the whole receipt plus part of the head.
        const whole = write.path === SIDECAR ? [receiptBytes + 10] : []
        for (const bytes of [0, 1, 40, 200, ...whole]) {
          // A live worker whose receipt landed whole deletes the claim (a known gap).
          const gap = then === "fail" &&
            (afterAppend.has(write.index) || (write.path === SIDECAR && bytes > receiptBytes))
          if (gap !== (selection === "known gaps")) continue
          const at = `torn write (${bytes} bytes, then ${then}) at #${write.index} ${write.method} ${write.path}`
          const world = initial.crashImage("process")
          // TornWrite's `then` is a string saying what follows the tear, so the action is no thenable.
          // oxlint-disable-next-line unicorn/no-thenable
          const action: FaultAction = { _tag: "TornWrite", bytes, then }
          const fault = makeFaultFileSystem(world, { rules: [{ index: write.index, action }] })
          const exit = yield* Effect.exit(Effect.provideService(program, FileSystem.FileSystem, fault))
          tally.runs++
          if (then === "fail") {
            typedOutcome(exit, "EIO", at, tally)
            yield* afterFault(scenario, world, at, tally)
          } else {
            assert.isTrue(fault.crashed, `${at}: crashed`)
            // What a SIGKILL leaves: every completed write, the torn prefix too.
            yield* afterFault(scenario, world.crashImage("process"), at, tally, true)
          }
        }
      }
    }
    return tally
  })

describe("I/O faults", () => {
  for (const scenario of scenarios) {
    it.effect(`${scenario.name}: every step fails (EIO, ENOSPC, EACCES; reads EIO)`, () =>
      Effect.gen(function*() {
        const tally = yield* errnoRuns(scenario, "outside known gaps")
        reportTally(`${scenario.name} (errno)`, tally)
        assert.deepStrictEqual(tally.problems, [])
        assert.isAbove(tally.runs, 0)
      }).pipe(Effect.provide(Path.layer)))

    it.effect(`${scenario.name}: every write is torn`, () =>
      Effect.gen(function*() {
        const tally = yield* tornRuns(scenario, "outside known gaps")
        reportTally(`${scenario.name} (torn)`, tally)
        assert.deepStrictEqual(tally.problems, [])
        assert.isAbove(tally.runs, 0)
      }).pipe(Effect.provide(Path.layer)))
  }
})

/**
 * Faults after the receipt may have reached the sidecar, or in the lock
 * release: the store finishes such a settlement instead of deleting its
 * claim (so a retry never appends a second receipt), and a later waiter of
 * this process takes back a lock whose release failed.
 */
describe("I/O faults after the append and in the lock release", () => {
  for (const scenario of scenarios.filter((scenario) => scenario.settles)) {
    it.effect(`${scenario.name}: a fault after the append, or in the lock release`, () =>
      Effect.gen(function*() {
        const tally = yield* errnoRuns(scenario, "known gaps")
        reportTally(`${scenario.name} (known gaps)`, tally)
        assert.isAbove(tally.runs, 0)
        assert.deepStrictEqual(tally.problems, [])
      }).pipe(Effect.provide(Path.layer)))
  }
  it.effect("settle: a torn append that landed the whole receipt", () =>
    Effect.gen(function*() {
      const tally = yield* tornRuns(
        scenarios.find((scenario) => scenario.name.startsWith("settle a summary (new"))!,
        "known gaps"
      )
      reportTally("settle (torn, whole receipt)", tally)
      assert.isAbove(tally.runs, 0)
      assert.deepStrictEqual(tally.problems, [])
    }).pipe(Effect.provide(Path.layer)))
})
