/**
 * Live current state: a `Stream` of current reads that emits when what a
 * read reports may have changed, instead of every caller polling.
 *
 * What a watch guarantees, per Session:
 * - It emits the current read once at start, then again after a change:
 *   a new head in the sidecar, the sidecar appearing, being replaced or
 *   removed, and (unless the caller passes `native`) the Session growing or
 *   changing.
 * - Two reads are the same state when they agree on availability,
 *   `diagnostics.reason`, the head (offset, length, hash: the receipt is
 *   the one the hash names) and the artifact state. A state equal to the
 *   last one emitted is not emitted again, so a torn tail a crashed writer
 *   left (only `diagnostics.tornTail` and `tailOffset` move) or an append
 *   that leaves the head where it was emits nothing.
 * - `epoch` names the sidecar file a state was read from: it goes up
 *   whenever the file at the sidecar path is another one than at the last
 *   emission (it appeared, was replaced by a rename, or was removed), or
 *   when the same file's head went backwards (it was rewritten in place,
 *   which the protocol never does). Within an epoch heads only move
 *   forward, so a consumer never sees a state older than one it has seen
 *   without being told that the sidecar is a new one.
 * - Bursts are coalesced: an event starts a short wait (`debounce`), then
 *   one read; events during the read cause one more read after it. A slow
 *   consumer is never queued for: the stream reads when it is pulled, so it
 *   hands out the latest state.
 *
 * How changes are seen: by `FileSystem.watch` on the directories that hold
 * the sidecar and the Session (shared between Sessions, see
 * `DirectoryWatchers`), so a file that does not exist yet, or is replaced by
 * a rename, is seen too. Directories that appear are followed down, and the
 * way is planned again each time a new watch stands, until the plan holds:
 * a directory made between a plan and its watch (another process's mkdir
 * chain running ahead) is found by that plan, where no event reports it.
 * Where the file system gives no watch (the watch fails or dies) the stream
 * polls instead: it compares each file's `lstat` (identity, size,
 * modification time) every `pollInterval`, doubling the interval up to
 * `maxPollInterval` while nothing changes and going back to `pollInterval`
 * after a change; `mode: "poll"` asks for that from the
 * start (for network file systems, whose events do not cover other hosts'
 * writes). The mode in use is the span attribute `rarebit.watch.mode`.
 *
 * A read that could not read the sidecar (`sidecar_unreadable`: no
 * permission, too many open files, an I/O error) is emitted like any state,
 * then read again after `pollInterval`, doubling up to `maxPollInterval`,
 * until it reads: no file may change to announce that it would now.
 *
 * Resources: every watch and timer belongs to the stream's scope, and
 * interrupting its consumer closes them. Reads go through the store's
 * caches, which keep what they read open until the store's scope ends, as
 * for `readCurrent`.
 *
 * @since 0.1.0
 */
import { type Cause, Clock, Duration, Effect, Exit, Queue, Result, Scope, Stream } from "effect"
import type { FileSystem } from "effect/FileSystem"
import type { Path } from "effect/Path"
import { fileIdentity, modifiedMs } from "../../protocol/internal/FileInfo.js"
import type { ProjectionInput, ProjectionInputInvalid } from "../../state/ArtifactState.js"
import type { PathError } from "../MirroredPath.js"
import type { CurrentRead, ReadCurrentOptions } from "../read/StoreReads.js"
import type { LocationOverrides } from "../StoreConfig.js"
import {
  type DirectoryWatchers,
  makeDirectoryWatchers,
  planWatch,
  samePlan,
  type Subscription,
  type WatchPlan,
  type WatchSignal
} from "./DirectoryWatchers.js"
import { decide, type Decision, type Emitted } from "./WatchDecision.js"

export { decide, type Decision, stateKey } from "./WatchDecision.js"

/**
 * How a watch notices changes, and how often it looks when it must poll.
 *
 * @category models
 * @since 0.1.0
 */
export interface WatchTuning {
  /** The wait after an event before reading, so a burst of writes is read once. Default 5 ms. */
  readonly debounce?: Duration.Input | undefined
  /**
   * `"auto"` (default): file-system events, falling back to polling where
   * they cannot be had. `"poll"`: poll from the start, e.g. on a network
   * file system, where events do not report other hosts' writes.
   */
  readonly mode?: "auto" | "poll" | undefined
  /** The polling interval after a change. Default 100 ms. */
  readonly pollInterval?: Duration.Input | undefined
  /** The longest polling interval, reached by doubling while nothing changes. Default 2 s. */
  readonly maxPollInterval?: Duration.Input | undefined
  /**
   * How often a watch on events confirms by `stat` that no change went
   * unreported (events can be dropped or coalesced). Default 1 s.
   */
  readonly confirmInterval?: Duration.Input | undefined
}

/**
 * Options of `watch`: those of `readCurrent`, and the tuning.
 *
 * **Details**
 *
 * With `native` passed, the Session is not read, so it is not watched
 * either: only the sidecar is.
 *
 * @category models
 * @since 0.1.0
 */
export interface WatchOptions extends ReadCurrentOptions, WatchTuning {}

/**
 * Options of `watchSessions`.
 *
 * @category models
 * @since 0.1.0
 */
export interface WatchSessionsOptions extends LocationOverrides, WatchTuning {
  /** The Session JSONL files to watch; each is read (and its Session watched) as by `readCurrent`. */
  readonly sessionFiles: Iterable<string>
  readonly expectation?: ProjectionInput["expectation"]
  readonly deadlineExpired?: boolean | undefined
  /** Emit every Session's current read at start (default); `false` emits only later changes. */
  readonly initial?: boolean | undefined
}

/**
 * One emitted state of a watched Session.
 *
 * **Details**
 *
 * `current` is exactly what `readCurrent` returns. `epoch` is the sidecar
 * file it was read from, numbered from 0: it goes up when the file at the
 * sidecar path is another one than at the previous emission (created,
 * replaced, removed, or rewritten in place); within one epoch, heads only
 * move forward. `sequence` counts this Session's emissions from 0.
 *
 * A wrapper rather than fields added to `current`, so `current` keeps the
 * shape every reader of `readCurrent` (and the reference's
 * `readRarebitCurrent`) knows.
 *
 * @category models
 * @since 0.1.0
 */
export interface WatchedCurrent {
  readonly sessionFile: string
  readonly current: CurrentRead
  readonly epoch: number
  readonly sequence: number
}

/**
 * How a watch notices changes right now.
 *
 * @category models
 * @since 0.1.0
 */
export type WatchMode = "events" | "poll"

/**
 * Every read a watch made, emitted or not, and why: what the tests observe
 * to tell "not emitted" from "not read yet".
 *
 * @internal
 */
export interface WatchObservation {
  readonly sessionFile: string
  readonly current: CurrentRead
  readonly emitted: WatchedCurrent | undefined
  readonly decision: Decision
  readonly mode: WatchMode
}

/** What `watch` and `watchSessions` need from the store. @internal */
export interface WatchDependencies {
  readonly fs: FileSystem
  readonly path: Path
  readonly sidecarPath: (sessionFile: string, overrides: LocationOverrides) => Effect.Effect<string, PathError>
  readonly readCurrent: (options: ReadCurrentOptions) => Effect.Effect<CurrentRead, PathError | ProjectionInputInvalid>
}

interface Settings {
  readonly debounce: Duration.Duration
  readonly forcePoll: boolean
  readonly pollInterval: number
  readonly maxPollInterval: number
  readonly confirmInterval: number
}

const millisOf = (input: Duration.Input | undefined, fallback: Duration.Input) =>
  Duration.toMillis(Duration.fromInputUnsafe(input ?? fallback))

/**
 * How often a watch on events confirms by `stat` that no change went
 * unreported, by default.
 *
 * @category constants
 * @since 0.1.0
 */
export const DEFAULT_CONFIRM_INTERVAL_MS = 1_000

const settingsOf = (tuning: WatchTuning): Settings => {
  const pollInterval = Math.max(1, millisOf(tuning.pollInterval, "100 millis"))
  return {
    debounce: Duration.fromInputUnsafe(tuning.debounce ?? "5 millis"),
    forcePoll: tuning.mode === "poll",
    pollInterval,
    maxPollInterval: Math.max(pollInterval, millisOf(tuning.maxPollInterval, "2 seconds")),
    confirmInterval: Math.max(1, millisOf(tuning.confirmInterval, Duration.millis(DEFAULT_CONFIRM_INTERVAL_MS)))
  }
}

/** One watched Session and what the watch remembers of it. */
interface Tracked {
  readonly sessionFile: string
  readonly read: ReadCurrentOptions
  readonly sidecar: string
  /** The sidecar, then the Session's paths (itself and, for a symlink, its target) unless `native` was passed. */
  readonly targets: ReadonlyArray<string>
  readonly plans: Array<WatchPlan | undefined>
  readonly subscriptions: Array<Subscription | undefined>
  readonly listener: (signal: WatchSignal) => void
  dirty: boolean
  replan: boolean
  /** The last read could not read the sidecar (I/O, not data): read again later even without an event. */
  retry: boolean
  last: Emitted | undefined
  /** Identity, size and modification time of the targets when last read (or polled): what a confirmation compares. */
  stamp: string | undefined
}

interface Spec {
  readonly sessionFile: string
  readonly read: ReadCurrentOptions
  readonly watchSession: boolean
  readonly location: LocationOverrides
}

/** The Sessions of `specs`, each with the paths to watch and a listener that wakes the stream. */
const trackSpecs = Effect.fnUntraced(function*(
  deps: WatchDependencies,
  specs: ReadonlyArray<Spec>,
  wake: Queue.Queue<void>
) {
  const { fs, path } = deps
  const tracked: Array<Tracked> = []
  for (const spec of specs) {
    const sidecar = yield* deps.sidecarPath(spec.sessionFile, spec.location)
    const targets = [sidecar]
    if (spec.watchSession) {
      const sessionPath = path.resolve(spec.sessionFile)
      targets.push(sessionPath)
      // A symlinked Session is written where it points: watch there too.
      const real = yield* Effect.orElseSucceed(fs.realPath(sessionPath), () => sessionPath)
      if (real !== sessionPath) targets.push(real)
    }
    const entry: Tracked = {
      sessionFile: spec.sessionFile,
      read: spec.read,
      sidecar,
      targets,
      plans: targets.map(() => undefined),
      subscriptions: targets.map(() => undefined),
      listener: (signal) => {
        entry.dirty = true
        if (signal === "replan") entry.replan = true
        Queue.offerUnsafe(wake, undefined)
      },
      dirty: false,
      replan: false,
      retry: false,
      last: undefined,
      stamp: undefined
    }
    tracked.push(entry)
  }
  return tracked
})

/** How a watch looks at its files: `lstat` stamps, and reads that know which sidecar file they read. */
const samplerOf = (deps: WatchDependencies) => {
  const { fs } = deps

  /** The sidecar's device and inode; `null` when nothing is there, `undefined` when that cannot be told. */
  const identityOf = (file: string) =>
    fs.lstat(file).pipe(
      Effect.map((info): string | null | undefined => fileIdentity(info) ?? "unknown"),
      Effect.catch((error) => Effect.succeed(error.reason._tag === "NotFound" ? null : undefined))
    )

  /** A read and the sidecar file it came from, read again if the file was swapped during it. */
  const readTracked = (entry: Tracked) =>
    Effect.gen(function*() {
      for (let attempt = 0;; attempt++) {
        const before = yield* identityOf(entry.sidecar)
        const current = yield* deps.readCurrent(entry.read)
        const after = yield* identityOf(entry.sidecar)
        // A swap mid-read leaves the read's file unknown; the swap's own event reads again anyway.
        if (before === after || attempt === 2) return { current, identity: after }
      }
    })

  const stampOf = (file: string, follow: boolean) =>
    (follow ? fs.stat(file) : fs.lstat(file)).pipe(
      Effect.map((info) => `${fileIdentity(info)}:${info.size}:${modifiedMs(info)}`),
      Effect.catch((error) => Effect.succeed(error.reason._tag))
    )

  const stampTracked = (entry: Tracked) =>
    Effect.map(
      Effect.forEach(entry.targets, (file, index) => stampOf(file, index > 0)),
      (stamps) => stamps.join("|")
    )

  return { readTracked, stampTracked }
}

/** Reads `entry` and decides whether to emit the read, remembering the decision. */
const observeEntry = (
  readTracked: ReturnType<typeof samplerOf>["readTracked"],
  entry: Tracked,
  mode: WatchMode,
  emitFirst: boolean
) =>
  Effect.map(readTracked(entry), ({ current, identity }): WatchObservation => {
    const { decision, emitted, last } = decide(entry.last, identity, current, emitFirst)
    entry.last = last
    // A failed read (EMFILE, EIO, ...) may pass without any file changing: no event would ever correct it.
    entry.retry = current.diagnostics.reason === "sidecar_unreadable"
    return {
      sessionFile: entry.sessionFile,
      current,
      decision,
      mode,
      emitted: emitted && last !== undefined
        ? { sessionFile: entry.sessionFile, current, epoch: last.epoch, sequence: last.sequence }
        : undefined
    }
  })

/** Marks every Session whose files moved without an event as due, to be planned and read again. */
const confirmEntries = (
  tracked: ReadonlyArray<Tracked>,
  stampTracked: ReturnType<typeof samplerOf>["stampTracked"]
) =>
  Effect.forEach(tracked, (entry) =>
    Effect.map(stampTracked(entry), (stamp) => {
      if (stamp === entry.stamp) return
      entry.dirty = true
      entry.replan = true
    }), { discard: true })

/**
 * The stream of every read a watch makes over `specs`, emitted or not.
 *
 * **Details**
 *
 * With events, the wait for one is bounded by `confirmInterval`: when it
 * passes, every Session's files are stamped again (`lstat`: identity,
 * size, modification time) and a Session whose stamp moved since its last
 * read is planned and read again. Events are hints: FSEvents coalesces
 * them and drops some when a watch opens or closes, a
 * `ReadDirectoryChangesW` buffer overflows, some mounts deliver none, and
 * a change made between planning a watch and its installation is reported
 * by no event. Each of these is seen within `confirmInterval` plus the
 * debounce and one read.
 *
 * @internal
 */
export const observe = (
  deps: WatchDependencies,
  specs: ReadonlyArray<Spec>,
  tuning: WatchTuning,
  emitFirst: boolean
): Stream.Stream<WatchObservation, PathError | ProjectionInputInvalid> =>
  Stream.unwrap(Effect.gen(function*() {
    const { fs, path } = deps
    const settings = settingsOf(tuning)
    const wake = yield* Queue.sliding<void>(1)
    let mode: WatchMode = settings.forcePoll ? "poll" : "events"
    let unavailable: Cause.Cause<unknown> | undefined
    const watchersScope = yield* Scope.fork(yield* Effect.scope, "sequential")
    const watchers: DirectoryWatchers = yield* makeDirectoryWatchers(fs, path, (cause) => {
      unavailable = cause
      Queue.offerUnsafe(wake, undefined)
    }).pipe(Scope.provide(watchersScope))
    const tracked = yield* trackSpecs(deps, specs, wake)
    const { readTracked, stampTracked } = samplerOf(deps)

    const annotateMode = Effect.suspend(() => Effect.annotateCurrentSpan("rarebit.watch.mode", mode))

    /**
     * Watches what `entry`'s files now need; closes watches it no longer
     * needs. Each new watch is followed by planning again, until a plan made
     * with its watch already standing still holds: a directory made between
     * a plan (that saw it missing) and its watch (installed after) is
     * reported by no watch, and a mkdir chain racing ahead of the watch
     * would otherwise leave it waiting, for good, for a name already there.
     */
    const replan = (entry: Tracked) =>
      Effect.gen(function*() {
        entry.replan = false
        for (let index = 0; index < entry.targets.length; index++) {
          for (;;) {
            const plan = yield* planWatch(fs, path, entry.targets[index])
            if (samePlan(entry.plans[index], plan)) break
            yield* entry.subscriptions[index]?.close ?? Effect.void
            entry.plans[index] = plan
            entry.subscriptions[index] = yield* watchers.subscribe(plan, entry.listener)
          }
        }
      })

    const toPolling = Effect.gen(function*() {
      mode = "poll"
      yield* Scope.close(watchersScope, Exit.void)
      for (const entry of tracked) {
        entry.subscriptions.fill(undefined)
        // Unknown, so the first poll reads every Session: changes since the watch failed were not seen.
        entry.stamp = undefined
      }
      yield* annotateMode
      if (unavailable !== undefined) {
        yield* Effect.logDebug("RarebitStore.watch: file-system events unavailable, polling", unavailable)
      }
    })

    const observeOne = (entry: Tracked) => observeEntry(readTracked, entry, mode, emitFirst)

    /** Stamped before the read, so a change during it is seen by the next poll or confirmation. */
    const stampAndObserve = (entry: Tracked) =>
      Effect.andThen(
        Effect.tap(stampTracked(entry), (stamp) => Effect.sync(() => (entry.stamp = stamp))),
        observeOne(entry)
      )

    // Events first; a watch that cannot be had turns the whole stream to polling.
    if (mode === "events") {
      for (const entry of tracked) {
        yield* replan(entry)
        if (unavailable !== undefined) break
      }
      if (unavailable !== undefined) yield* toPolling
    }
    yield* annotateMode

    let first = true
    let pollDelay = settings.pollInterval
    let retryDelay = settings.pollInterval
    let confirmAt = 0
    let retryAt: number | undefined

    /** Waits for an event, a confirmation or a retry, whichever comes first, and marks what is due. */
    const awaitEvent = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      if (!tracked.some((entry) => entry.retry)) {
        retryAt = undefined
        retryDelay = settings.pollInterval
      } else {
        // Unreadable sidecars are read again after `pollInterval`, doubling up to `maxPollInterval`.
        retryAt ??= now + retryDelay
      }
      const deadline = Math.min(confirmAt, retryAt ?? Number.POSITIVE_INFINITY)
      yield* Effect.timeoutOption(Queue.take(wake), Duration.millis(Math.max(0, deadline - now)))
      // Checked whether or not an event came: a steady stream of events for
      // one Session must not put off the confirmation of the others.
      const at = yield* Clock.currentTimeMillis
      if (retryAt !== undefined && at >= retryAt) {
        for (const entry of tracked) if (entry.retry) entry.dirty = true
        retryDelay = Math.min(retryDelay * 2, settings.maxPollInterval)
        retryAt = undefined
      }
      if (at >= confirmAt) {
        yield* confirmEntries(tracked, stampTracked)
        confirmAt = at + settings.confirmInterval
      }
    })

    const next: Effect.Effect<ReadonlyArray<WatchObservation>, PathError | ProjectionInputInvalid> = Effect.gen(
      function*() {
        if (first) {
          first = false
          confirmAt = (yield* Clock.currentTimeMillis) + settings.confirmInterval
          return yield* Effect.forEach(tracked, stampAndObserve)
        }
        for (;;) {
          if (mode === "events" && unavailable !== undefined) yield* toPolling
          if (mode === "events") {
            yield* awaitEvent
            if (!tracked.some((entry) => entry.dirty) && unavailable === undefined) continue
            yield* Effect.sleep(settings.debounce)
            // Events during the wait are covered by the read below.
            yield* Queue.clear(wake)
            if (unavailable !== undefined) continue
            const due = tracked.filter((entry) => entry.dirty)
            for (const entry of due) {
              entry.dirty = false
              if (entry.replan) yield* replan(entry)
            }
            if (due.length === 0) continue
            return yield* Effect.forEach(due, stampAndObserve)
          }
          yield* Effect.sleep(Duration.millis(pollDelay))
          const changed: Array<Tracked> = []
          for (const entry of tracked) {
            const stamp = yield* stampTracked(entry)
            if (stamp === entry.stamp && !entry.retry) continue
            entry.stamp = stamp
            changed.push(entry)
          }
          pollDelay = changed.length > 0 ? settings.pollInterval : Math.min(pollDelay * 2, settings.maxPollInterval)
          if (changed.length === 0) continue
          return yield* Effect.forEach(changed, observeOne)
        }
      }
    )
    return Stream.fromEffectRepeat(next).pipe(Stream.flattenIterable)
  }))

/** The emitted states among `observations`. @internal */
export const emitted = (observations: Stream.Stream<WatchObservation, PathError | ProjectionInputInvalid>) =>
  Stream.filterMap(
    observations,
    (observation) => observation.emitted === undefined ? Result.failVoid : Result.succeed(observation.emitted)
  )

/** The spec of `watch`'s one Session. @internal */
export const watchSpec = (options: WatchOptions): Spec => {
  const {
    confirmInterval: _confirm,
    debounce: _debounce,
    maxPollInterval: _max,
    mode: _mode,
    pollInterval: _poll,
    ...read
  } = options
  return {
    sessionFile: options.sessionFile,
    read,
    watchSession: options.native == null,
    location: options
  }
}

/** The specs of `watchSessions`' Sessions, each once. @internal */
export const watchSessionsSpecs = (options: WatchSessionsOptions): ReadonlyArray<Spec> =>
  [...new Set(options.sessionFiles)].map((sessionFile) => ({
    sessionFile,
    read: {
      sessionFile,
      expectation: options.expectation,
      deadlineExpired: options.deadlineExpired,
      rarebitRoot: options.rarebitRoot,
      sessionRoot: options.sessionRoot,
      allowExternalSession: options.allowExternalSession
    },
    watchSession: true,
    location: options
  }))

/**
 * What a watch needs, taken from a store: its path rule and its current read.
 *
 * @internal
 */
export const dependenciesOf = (
  store: {
    readonly materializationPath: WatchDependencies["sidecarPath"]
    readonly readCurrent: WatchDependencies["readCurrent"]
  },
  fs: FileSystem,
  path: Path
): WatchDependencies => ({ fs, path, sidecarPath: store.materializationPath, readCurrent: store.readCurrent })

/**
 * `RarebitStore.watch`: one Session's states.
 *
 * @internal
 */
export const watch = (deps: WatchDependencies, options: WatchOptions) =>
  emitted(observe(deps, [watchSpec(options)], options, true)).pipe(
    Stream.withSpan("RarebitStore.watch", { attributes: { "rarebit.watch.sessions": 1 } })
  )

/**
 * `RarebitStore.watchSessions`: the states of many Sessions, in one stream.
 *
 * @internal
 */
export const watchSessions = (deps: WatchDependencies, options: WatchSessionsOptions) =>
  Stream.suspend(() => {
    const specs = watchSessionsSpecs(options)
    return emitted(observe(deps, specs, options, options.initial !== false)).pipe(
      Stream.withSpan("RarebitStore.watchSessions", { attributes: { "rarebit.watch.sessions": specs.length } })
    )
  })
