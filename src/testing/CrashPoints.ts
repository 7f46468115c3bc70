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
 * @since 0.1.0
 */
import { Effect, FileSystem } from "effect"
import { type FaultOperation, FaultPlan, makeFaultFileSystem } from "./FaultFileSystem.js"
import type { CrashMode, MemoryFileSystemShape } from "./MemoryFileSystem.js"

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
  /** A fresh file system holding what the crash left; run recovery on it. */
  readonly image: MemoryFileSystemShape
}

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
 * and ignored. `modes` defaults to both `"process"` and `"power"`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const exploreCrashPoints = <A, E, R, B, E2, R2>(options: {
  readonly initial: MemoryFileSystemShape
  readonly program: Effect.Effect<A, E, R>
  readonly verify: (point: CrashPoint) => Effect.Effect<B, E2, R2>
  readonly modes?: ReadonlyArray<CrashMode> | undefined
}): Effect.Effect<CrashExploration, E | E2, Exclude<R, FileSystem.FileSystem> | R2> =>
  Effect.gen(function*() {
    const modes = options.modes ?? ["process", "power"]
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
      for (const mode of modes) {
        yield* options.verify({ operation: hit, mode, image: run.world.crashImage(mode) })
      }
    }
    for (const mode of modes) {
      yield* options.verify({ operation: undefined, mode, image: baseline.world.crashImage(mode) })
    }
    return { baseline: log, points: crashable.length + 1, completed: baseline.world }
  })
