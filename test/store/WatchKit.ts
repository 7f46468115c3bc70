/**
 * Driving a watch in tests, the same way on both worlds: the watch runs in a
 * fiber of the test's scope with a clock that announces every wait, and the
 * test takes its reads one by one. While the test waits for a read, the
 * driver moves the `TestClock` past each wait the watch announces (the
 * debounce; and with `polls`, the polling intervals too), so time only moves
 * through `TestClock` and only when the watch is waiting for it. On the real
 * disk the events themselves arrive when the kernel reports them.
 */
import { assert } from "@effect/vitest"
import { Effect, Fiber, type FileSystem, PlatformError, Queue, Stream, Tracer } from "effect"
import { TestClock } from "effect/testing"
import {
  dependenciesOf,
  observe,
  type WatchedCurrent,
  type WatchObservation,
  type WatchOptions,
  type WatchSessionsOptions,
  watchSessionsSpecs,
  watchSpec
} from "../../src/store/watch/CurrentWatch.js"
import type { MemoryFileSystemShape } from "../../src/testing/MemoryFileSystem.js"
import { jobId, summaryReceipt } from "../support/Receipts.js"
import { acquired, type Kit, makeSleepProbe } from "./StoreKit.js"

/** The debounce the tests run with; the driver passes any wait up to this without being asked. */
export const DEBOUNCE_MS = 5

export interface WatchDriver {
  /** The next read the watch made, emitted or not. */
  readonly next: Effect.Effect<WatchObservation>
  /** The next emitted state; the reads passed on the way must all be unemitted. */
  readonly nextEmitted: Effect.Effect<WatchedCurrent>
  /** Passes the next `count` waits the watch announces, failing the test if it reads meanwhile; returns them. */
  readonly passWaits: (count: number) => Effect.Effect<ReadonlyArray<number>>
  /** Every wait the watch announced so far, in milliseconds. */
  readonly waits: ReadonlyArray<number>
  readonly fiber: Fiber.Fiber<void, unknown>
}

export interface DriveOptions {
  /** Also pass the polling waits (any length) while a read is awaited. */
  readonly polls?: boolean
  /** The tracer the watch runs with. */
  readonly tracer?: Tracer.Tracer
}

/** Runs `observations` in a fiber of the current scope and returns its driver. */
export const drive = <E>(observations: Stream.Stream<WatchObservation, E>, options: DriveOptions = {}) =>
  Effect.gen(function*() {
    const probe = yield* makeSleepProbe
    const reads = yield* Queue.unbounded<WatchObservation>()
    const run = probe.instrument(Stream.runForEach(observations, (observation) => Queue.offer(reads, observation)))
    const fiber: Fiber.Fiber<void, unknown> =
      yield* (options.tracer === undefined ? run : Effect.withTracer(run, options.tracer))
        .pipe(Effect.forkScoped)
    const waits: Array<number> = []
    const next = Effect.gen(function*() {
      for (;;) {
        const got = yield* Effect.raceFirst(
          Effect.map(Queue.take(reads), (read) => ({ _tag: "read", read }) as const),
          Effect.raceFirst(
            Effect.map(probe.next, (ms) => ({ _tag: "wait", ms }) as const),
            Effect.map(Fiber.await(fiber), (exit) => ({ _tag: "ended", exit }) as const)
          )
        )
        if (got._tag === "read") return got.read
        if (got._tag === "ended") return assert.fail(`the watch ended: ${String(got.exit)}`)
        waits.push(got.ms)
        if (got.ms <= DEBOUNCE_MS || options.polls === true) yield* TestClock.adjust(got.ms)
      }
    })
    const nextEmitted = Effect.gen(function*() {
      for (;;) {
        const read = yield* next
        if (read.emitted !== undefined) return read.emitted
        assert.strictEqual(read.decision === "identical" || read.decision === "baseline", true, read.decision)
      }
    })
    const passWaits = (count: number) =>
      Effect.gen(function*() {
        const passed: Array<number> = []
        while (passed.length < count) {
          const got = yield* Effect.raceFirst(
            Effect.map(Queue.take(reads), (read) => ({ _tag: "read", read }) as const),
            Effect.map(probe.next, (ms) => ({ _tag: "wait", ms }) as const)
          )
          if (got._tag === "read") return assert.fail(`read while idle: ${got.read.decision}`)
          waits.push(got.ms)
          passed.push(got.ms)
          yield* TestClock.adjust(got.ms)
        }
        return passed
      })
    return { next, nextEmitted, passWaits, waits, fiber } satisfies WatchDriver
  })

/** The reads of `watch(options)` on a kit's store. */
export const watchReads = (
  kit: Kit,
  options: Omit<WatchOptions, "sessionFile"> & { readonly sessionFile?: string } = {}
) =>
  observe(
    dependenciesOf(kit.store, kit.fs, kit.path),
    [watchSpec({ sessionFile: kit.sessionFile, debounce: `${DEBOUNCE_MS} millis`, ...options })],
    { debounce: `${DEBOUNCE_MS} millis`, ...options },
    true
  )

/** The reads of `watchSessions(options)` on a kit's store. */
export const watchSessionsReads = (kit: Kit, options: WatchSessionsOptions) =>
  observe(
    dependenciesOf(kit.store, kit.fs, kit.path),
    watchSessionsSpecs(options),
    { debounce: `${DEBOUNCE_MS} millis`, ...options },
    options.initial !== false
  )

/** Reserves job `n` and settles a Summary receipt numbered `n`; returns the settled receipt. */
export const settleJob = (kit: Kit, n: number, sessionFile = kit.sessionFile) =>
  Effect.gen(function*() {
    const reservation = acquired(yield* kit.store.reserve({ jobId: jobId(n), sessionFile }))
    return yield* kit.store.settle(reservation, summaryReceipt(kit.branch, kit.sessionId, { summary: `summary ${n}` }))
  })

/** The summary text of an emitted state, or `null`. */
export const summaryOf = (state: WatchedCurrent): string | null =>
  state.current.receipt?.status === "ok" ? state.current.receipt.summary : null

/**
 * A view of `inner` whose `watch` keeps count: the watches made (by path)
 * and those still open, on either world.
 */
export const countingWatches = (inner: FileSystem.FileSystem) => {
  const made: Array<string> = []
  let open = 0
  const fs: FileSystem.FileSystem = {
    ...inner,
    watch: (path, options) =>
      Stream.suspend(() => {
        made.push(path)
        open++
        return inner.watch(path, options).pipe(Stream.ensuring(Effect.sync(() => void open--)))
      })
  }
  return { fs, made: (): ReadonlyArray<string> => made, open: () => open }
}

/**
 * A view of `inner` whose `watch` cannot be had: it fails as a file system
 * without events would, or dies as platform-node's does when inotify has no
 * watches left (its `fs.watch` throws inside a synchronous step).
 */
export const withoutWatch = (inner: FileSystem.FileSystem, how: "fail" | "die"): FileSystem.FileSystem => ({
  ...inner,
  watch: (path) =>
    how === "die"
      ? Stream.die(new Error("ENOSPC: System limit for number of file watchers reached"))
      : Stream.fail(PlatformError.systemError({
        _tag: "Unknown",
        module: "FileSystem",
        method: "watch",
        pathOrDescriptor: path,
        description: "no file-system events here"
      }))
})

/** Open watchers of the memory world; `undefined` on the real disk. */
export const memoryWatchers = (fs: FileSystem.FileSystem) => {
  const memory = fs as Partial<MemoryFileSystemShape>
  return typeof memory.openWatchers === "function" ? memory.openWatchers() : undefined
}

/** A tracer that keeps every span, to read their attributes after the fact. */
export const spanRecorder = () => {
  const spans: Array<Tracer.NativeSpan> = []
  const tracer = Tracer.make({
    span: (options) => {
      const span = new Tracer.NativeSpan(options)
      spans.push(span)
      return span
    }
  })
  return { tracer, spans: (): ReadonlyArray<Tracer.NativeSpan> => spans }
}
