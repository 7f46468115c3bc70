/**
 * Systematic crash testing: run a program once, then once more per mutating
 * file-system operation with a crash injected exactly there, and check what a
 * SIGKILL and a power cut at that point would leave on disk.
 *
 * The program runs on a fresh copy of an initial `MemoryFileSystem` each time,
 * behind a `FaultFileSystem`. It must be deterministic (same operations in the
 * same order for the same start), which holds under `it.effect`'s `TestClock`,
 * a seeded `Random`, and a store built inside the program on a
 * `TestSecureRandom` (so every run draws the same tokens and temp names); a
 * rerun that diverges from the first run is reported as a defect rather than
 * silently checking the wrong point.
 *
 * A power cut is checked under several losses of the directory operations
 * no directory fsync had made durable (see `MemoryFileSystem.crashImage`):
 * none lost, all lost, each one lost alone, and seeded random subsets. Loss
 * patterns that leave the same files at one point are checked once.
 *
 * @since 0.1.0
 */
import { Effect, FileSystem } from "effect"
import { sha256Hex } from "../protocol/CanonicalJson.js"
import { type FaultOperation, FaultPlan, makeFaultFileSystem } from "./FaultFileSystem.js"
import type { CrashMode, DirectoryLoss, MemoryFileSystemShape, PendingDirectoryOperation } from "./MemoryFileSystem.js"

/**
 * One crash to check: where it happened, what kind it was, and the disk it left.
 *
 * @category models
 * @since 0.1.0
 */
export interface CrashPoint {
  /** The operation the crash replaced; `undefined` for a crash right after the program finished. */
  readonly operation: FaultOperation | undefined
  readonly mode: CrashMode
  /** A power cut's loss of pending directory operations; `"none"` for a process crash. */
  readonly loss: DirectoryLoss
  /** The directory operations the image lost (every pending one for `"all"`). */
  readonly lost: ReadonlyArray<PendingDirectoryOperation>
  /** A fresh file system holding what the crash left; run recovery on it. */
  readonly image: MemoryFileSystemShape
}

/**
 * Which losses of pending directory operations a power cut is checked
 * under, besides none and all.
 *
 * @category models
 * @since 0.1.0
 */
export interface PowerLossPlan {
  /** Each pending operation lost alone. Default true. */
  readonly singles?: boolean | undefined
  /** How many random subsets per crash point (each operation lost with probability ½). Default 2. */
  readonly randomSubsets?: number | undefined
  /** Seeds the random subsets, so a run is repeatable. Default 1. */
  readonly seed?: number | undefined
}

/** A small seeded generator (mulberry32): the subsets must be the same on every run. */
const seeded = (seed: number) => {
  let state = seed >>> 0
  return (): number => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * The losses a power cut at one point is checked under, in order, each with
 * what it loses: none, all, each one alone (when there are several), then
 * the random subsets drawn for `pointSeed`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const powerLosses = (
  pending: ReadonlyArray<PendingDirectoryOperation>,
  plan: PowerLossPlan,
  pointSeed: number
): ReadonlyArray<{ readonly loss: DirectoryLoss; readonly lost: ReadonlyArray<PendingDirectoryOperation> }> => {
  const losses: Array<{ loss: DirectoryLoss; lost: ReadonlyArray<PendingDirectoryOperation> }> = [
    { loss: "none", lost: [] }
  ]
  if (pending.length === 0) return losses
  losses.push({ loss: "all", lost: pending })
  if (pending.length > 1 && plan.singles !== false) {
    for (const operation of pending) losses.push({ loss: { lost: [operation.index] }, lost: [operation] })
  }
  const random = seeded(((plan.seed ?? 1) * 0x9e3779b1) ^ pointSeed)
  for (let subset = 0; subset < (plan.randomSubsets ?? 2); subset++) {
    const lost = pending.filter(() => random() < 0.5)
    losses.push({ loss: { lost: lost.map((operation) => operation.index) }, lost })
  }
  return losses
}

/** What an image holds, to check each distinct one once. */
const fingerprint = (image: MemoryFileSystemShape): string =>
  image.snapshot().map((entry) =>
    `${entry.path}\0${entry.type}\0${entry.mode}\0${
      entry.data === undefined ? entry.target ?? "" : sha256Hex(entry.data)
    }`
  ).join("\n")

/**
 * What `exploreCrashPoints` went through.
 *
 * @category models
 * @since 0.1.0
 */
export interface CrashExploration {
  /** The operation log of the crash-free run. */
  readonly baseline: ReadonlyArray<FaultOperation>
  /** How many crash points were tried: one per mutating operation of the baseline, plus the end. */
  readonly points: number
  /** How many images were handed to `verify` (distinct ones per point and mode). */
  readonly images: number
  /** The file system the crash-free run finished with. */
  readonly completed: MemoryFileSystemShape
}

/**
 * Runs `program` crash-free, then once per mutating operation with a crash
 * there, and calls `verify` for every crash point and mode.
 *
 * **Details**
 *
 * The last point is a crash right after the program returned (`operation` is
 * `undefined`): that is where a missing final fsync shows up under `"power"`.
 * `program` gets the faulty `FileSystem` in place of any other. A failure of
 * the crash-free run is returned as is; failures of crashed runs are expected
 * and ignored. `modes` defaults to both `"process"` and `"power"`; each
 * power cut is checked under the losses `powerLoss` asks for (see
 * `PowerLossPlan`), each distinct image once.
 *
 * @category constructors
 * @since 0.1.0
 */
export const exploreCrashPoints = <A, E, R, B, E2, R2>(options: {
  readonly initial: MemoryFileSystemShape
  readonly program: Effect.Effect<A, E, R>
  readonly verify: (point: CrashPoint) => Effect.Effect<B, E2, R2>
  readonly modes?: ReadonlyArray<CrashMode> | undefined
  readonly powerLoss?: PowerLossPlan | undefined
}): Effect.Effect<CrashExploration, E | E2, Exclude<R, FileSystem.FileSystem> | R2> =>
  Effect.gen(function*() {
    const modes = options.modes ?? ["process", "power"]
    let images = 0
    const verifyAll = Effect.fnUntraced(function*(
      operation: FaultOperation | undefined,
      world: MemoryFileSystemShape,
      pointSeed: number
    ) {
      for (const mode of modes) {
        if (mode === "process") {
          images++
          yield* options.verify({ operation, mode, loss: "none", lost: [], image: world.crashImage("process") })
          continue
        }
        const seen = new Set<string>()
        for (
          const { loss, lost } of powerLosses(world.pendingDirectoryOperations(), options.powerLoss ?? {}, pointSeed)
        ) {
          const image = world.crashImage("power", loss)
          const key = fingerprint(image)
          if (seen.has(key)) continue
          seen.add(key)
          images++
          yield* options.verify({ operation, mode, loss, lost, image })
        }
      }
    })
    const attempt = (plan: FaultPlan) => {
      // crashImage("process") of the initial state is an exact copy without open handles.
      const world = options.initial.crashImage("process")
      const fault = makeFaultFileSystem(world, plan)
      return { world, fault, run: Effect.provideService(options.program, FileSystem.FileSystem, fault) }
    }

    const baseline = attempt(FaultPlan.none)
    yield* baseline.run
    const log = baseline.fault.operations()
    const crashable = log.filter((operation) => operation.mutating)

    for (const expected of crashable) {
      const run = attempt(FaultPlan.crashAt(expected.mutatingIndex!))
      yield* Effect.exit(run.run)
      const hit = run.fault.crashPoint()
      if (hit === undefined || hit.method !== expected.method || hit.path !== expected.path) {
        const got = hit === undefined ? "no crash" : `${hit.method} ${hit.path}`
        return yield* Effect.die(
          new Error(
            `crash point ${expected.mutatingIndex} diverged from the crash-free run: ` +
              `expected ${expected.method} ${expected.path}, got ${got}`
          )
        )
      }
      yield* verifyAll(hit, run.world, expected.mutatingIndex!)
    }
    yield* verifyAll(undefined, baseline.world, crashable.length)
    return { baseline: log, points: crashable.length + 1, images, completed: baseline.world }
  })
