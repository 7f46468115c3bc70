/**
 * Shared watches of the directories that hold watched files.
 *
 * A file that does not exist yet, or that is replaced by a rename, cannot be
 * watched itself: its directory can. Each directory is watched once
 * (`FileSystem.watch`, non-recursive), however many watched files it holds,
 * and its events are handed to the listeners of the entry name they report;
 * events for other names cost one map lookup.
 *
 * A file whose directory does not exist yet is watched from its nearest
 * existing ancestor, for the name of the next missing component; when that
 * appears, or when a watched directory is itself deleted, moved or replaced
 * (reported under its own name), the listener is told to plan again
 * (`WatchPlan`), and the caller re-subscribes.
 *
 * A watch that cannot be had (`FileSystem.watch` fails or dies: no inotify
 * watches left, a file system without events) is reported once through
 * `onUnavailable`, so the caller can fall back to polling. A directory that
 * vanishes between planning and watching is not such a failure: its
 * listeners are told to plan again.
 *
 * A directory replaced at its path (moved away or deleted, and made again)
 * is another inode, which the old watch does not report on: a plan naming
 * the new one gets a watch of its own, even while listeners that have not
 * planned again yet still hold the old one.
 *
 * Everything is scoped: a subscription ends with `close` or with the scope
 * the watchers were made in, and the last subscription of a directory
 * closes its watch.
 *
 * @since 0.1.0
 */
import { Cause, Deferred, Effect, Exit, Scope, Stream } from "effect"
import type { FileSystem } from "effect/FileSystem"
import type { Path } from "effect/Path"
import type { PlatformError } from "effect/PlatformError"
import { fileIdentity } from "../../protocol/internal/FileInfo.js"

/**
 * Where to watch for a file: the directory to watch and the entry name in it
 * that matters (the file's own name, or the next missing component).
 *
 * @category models
 * @since 0.1.0
 */
export interface WatchPlan {
  readonly file: string
  readonly directory: string
  /** The entry of `directory` whose events concern the file. */
  readonly name: string
  /** Whether `directory` is the file's own directory (else an ancestor, waiting for `name` to appear). */
  readonly direct: boolean
  /** Device and inode of `directory` when planned: a replaced directory is another plan. */
  readonly identity: string | undefined
}

/** Whether two plans watch the same directory, for the same name. @internal */
export const samePlan = (a: WatchPlan | undefined, b: WatchPlan): boolean =>
  a !== undefined && a.directory === b.directory && a.name === b.name && a.identity === b.identity

const isGone = (error: PlatformError) => error.reason._tag === "NotFound" || error.reason._tag === "BadResource"

/**
 * Plans the watch of `file`: its directory if that is a directory now, else
 * the nearest ancestor that is. A directory that cannot be examined (no
 * permission) is planned as it is; watching it then fails, and the caller
 * polls.
 *
 * @internal
 */
export const planWatch = (fs: FileSystem, path: Path, file: string): Effect.Effect<WatchPlan> =>
  Effect.gen(function*() {
    let name = path.basename(file)
    let directory = path.dirname(file)
    for (;;) {
      const info = yield* Effect.result(fs.stat(directory))
      const parent = path.dirname(directory)
      if (info._tag === "Success" && info.success.type === "Directory") {
        return { file, directory, name, direct: directory === path.dirname(file), identity: fileIdentity(info.success) }
      }
      const missing = info._tag === "Success" || isGone(info.failure)
      if (!missing || parent === directory) {
        return { file, directory, name, direct: directory === path.dirname(file), identity: undefined }
      }
      name = path.basename(directory)
      directory = parent
    }
  })

/**
 * What a listener is told: the watched entry changed (`"changed"`), or the
 * plan may no longer hold (`"replan"`: the awaited name appeared, the
 * directory itself was deleted or moved, or its watch ended).
 *
 * @category models
 * @since 0.1.0
 */
export type WatchSignal = "changed" | "replan"

/** A listener's hold on a directory watch. @category models @since 0.1.0 */
export interface Subscription {
  /** Stops listening; the directory's watch closes with its last listener. */
  readonly close: Effect.Effect<void>
}

/** @category models @since 0.1.0 */
export interface DirectoryWatchers {
  /**
   * Listens for the events that concern `plan`, and returns once the
   * directory's watch is installed (or has failed, which `onUnavailable`
   * reports). `listener` runs synchronously, on the watch's fiber.
   */
  readonly subscribe: (plan: WatchPlan, listener: (signal: WatchSignal) => void) => Effect.Effect<Subscription>
}

interface Listener {
  readonly plan: WatchPlan
  readonly signal: (signal: WatchSignal) => void
}

interface Watched {
  readonly directory: string
  /** Device and inode of the directory its plan saw: what the watch, on that inode, reports on. */
  readonly identity: string | undefined
  readonly scope: Scope.Closeable
  readonly ready: Deferred.Deferred<void>
  /** Listeners by the entry name they care about. */
  readonly byName: Map<string, Set<Listener>>
  /** Listeners by the directory's own name, which its own deletion or move is reported under. */
  readonly self: Set<Listener>
  subscribers: number
}

/**
 * Makes the shared watchers, living as long as the current scope.
 *
 * `onUnavailable` runs (once) when a directory cannot be watched, with the
 * cause.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeDirectoryWatchers = Effect.fnUntraced(function*(
  fs: FileSystem,
  path: Path,
  onUnavailable: (cause: Cause.Cause<unknown>) => void
) {
  const outer = yield* Effect.scope
  const directories = new Map<string, Watched>()
  let unavailable = false

  const tell = (listeners: Iterable<Listener> | undefined, signal: (listener: Listener) => WatchSignal) => {
    if (listeners === undefined) return
    // A copy: a listener's callback may subscribe or unsubscribe while the others are told.
    // oxlint-disable-next-line unicorn/no-useless-spread
    for (const listener of [...listeners]) listener.signal(signal(listener))
  }

  const dispatch = (watched: Watched, name: string) => {
    tell(watched.byName.get(name), (listener) => (listener.plan.direct ? "changed" : "replan"))
    if (name === path.basename(watched.directory)) tell(watched.self, () => "replan")
  }

  const everyone = (watched: Watched): Array<Listener> => [
    ...new Set([...watched.self, ...[...watched.byName.values()].flatMap((listeners) => [...listeners])])
  ]

  /** The watch of one directory ended on its own: gone (plan again) or unavailable (poll). */
  const ended = (watched: Watched, exit: Exit.Exit<void, PlatformError>) =>
    Effect.suspend(() => {
      if (Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)) return Effect.void
      const failure = Exit.isFailure(exit) ? exit.cause.reasons.find(Cause.isFailReason)?.error : undefined
      const gone = failure !== undefined && isGone(failure)
      if (!gone && !unavailable) {
        unavailable = true
        onUnavailable(
          Exit.isFailure(exit) ? exit.cause : Cause.die(new Error(`the watch of ${watched.directory} ended`))
        )
      }
      // Forgotten, so a new plan for this directory opens a new watch.
      if (directories.get(watched.directory) === watched) directories.delete(watched.directory)
      tell(everyone(watched), () => "replan")
      return Deferred.done(watched.ready, Exit.void)
    })

  const open = (directory: string, identity: string | undefined) =>
    Effect.gen(function*() {
      const scope = yield* Scope.fork(outer, "sequential")
      const watched: Watched = {
        directory,
        identity,
        scope,
        ready: yield* Deferred.make<void>(),
        byName: new Map(),
        self: new Set(),
        subscribers: 0
      }
      directories.set(directory, watched)
      yield* fs.watch(directory, { onReady: () => Deferred.doneUnsafe(watched.ready, Exit.void) }).pipe(
        Stream.runForEach((event) => Effect.sync(() => dispatch(watched, event.path))),
        // A watch that dies (platform-node's fs.watch throws ENOSPC when inotify has no watches left) is unavailable too.
        Effect.onExit((exit) => ended(watched, exit)),
        Effect.forkIn(scope)
      )
      return watched
    })

  const subscribe = (plan: WatchPlan, signal: (signal: WatchSignal) => void) =>
    Effect.gen(function*() {
      const known = directories.get(plan.directory)
      // A directory replaced at its path is another inode: the watch of the old one, still held by other
      // listeners, reports nothing of the new one, so it gets its own watch (and the map, the newest).
      const watched = known !== undefined && known.identity === plan.identity
        ? known
        : yield* open(plan.directory, plan.identity)
      const listener: Listener = { plan, signal }
      const named = watched.byName.get(plan.name) ?? new Set()
      watched.byName.set(plan.name, named)
      named.add(listener)
      watched.self.add(listener)
      watched.subscribers++
      yield* Deferred.await(watched.ready)
      let closed = false
      return {
        close: Effect.suspend(() => {
          if (closed) return Effect.void
          closed = true
          named.delete(listener)
          if (named.size === 0 && watched.byName.get(plan.name) === named) watched.byName.delete(plan.name)
          watched.self.delete(listener)
          if (--watched.subscribers > 0) return Effect.void
          if (directories.get(watched.directory) === watched) directories.delete(watched.directory)
          return Scope.close(watched.scope, Exit.void)
        })
      } satisfies Subscription
    })

  return { subscribe } satisfies DirectoryWatchers
})
