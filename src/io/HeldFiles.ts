/**
 * Files held open for reading between reads, for as long as their paths
 * still name them: how the caches that poll the same files (Sessions,
 * sidecars) skip the open, `fstat` and close of every poll. A `HeldFile`
 * holds one path's file; `HeldFiles` is a bounded set of them keyed by path,
 * each with the state its cache keeps beside it.
 *
 * Guarantees:
 * - **Identity.** Each use is given a `stat` (or `lstat`) of the path taken
 *   just before. The held file is used only while that shows the device and
 *   inode the held file's own `fstat` showed when it was opened; otherwise
 *   the path is opened anew through `io/RegularFile` (non-blocking, regular
 *   files only) and the file held before is let go. A file system that
 *   reports no inode never has a file reused.
 * - **A swap between the check and the open** (the path renamed over after
 *   its `stat`): the file opened is used as what it is, described by its
 *   own `fstat`, and is not kept; it closes when that use ends.
 * - **Shared, never closed under a use.** Uses in flight share the held
 *   file. A file let go (replaced at its path, `letGo`, its entry dropped
 *   from the set, or the scope ended) closes when the last use of it ends.
 * - **Interruption.** An open or a use interrupted anywhere leaves nothing
 *   open but the held file (and that only if it is still the path's).
 * - **Bounded.** Sets share a `CacheBudget`: every entry is charged a fixed
 *   overhead plus the bytes its cache says its state keeps, and when the
 *   total passes the budget's bytes the least recently got entries of any of
 *   its sets are dropped (their files let go). Once the budget is thrashing
 *   (it has dropped 64 entries that were never got again after they were
 *   kept: a round-robin over more paths than fit), it admits by frequency
 *   instead: an entry pushing the total over is itself dropped unless its
 *   path was got more often lately than the least recently got entry's, so
 *   the entries kept keep being reused instead of each being dropped before
 *   its turn comes round again. Files held open are counted
 *   apart, being scarcer than memory: beyond the budget's `maxOpenFiles`,
 *   holding one more file lets go of the least recently got entry's file,
 *   keeping the entry. A set may also cap its count of entries
 *   (`capacity`). A set made without a budget has its own, unbounded in
 *   bytes and holding at most `capacity` files.
 * - **Scope end.** When the scope a holder or a set was made in closes,
 *   every held file is let go (and closes once its last use is done). A
 *   holder still works afterwards (each use opens the file for itself and
 *   keeps nothing); a set answers `get` with `undefined`, so its cache reads
 *   around it.
 *
 * Nothing here reads: what a use reads, and whether its answer may be
 * reused, is the caller's.
 *
 * @since 0.1.0
 */
import { Effect, Exit, type FileSystem, type PlatformError, Scope } from "effect"
import { fileIdentity } from "../protocol/internal/FileInfo.js"
import { type CacheBudget, type Charged, ENTRY_OVERHEAD_BYTES, Ledger, ledgerOf } from "./CacheBudget.js"
import { type FileNotRegular, openRegular } from "./RegularFile.js"

/**
 * What a use is given: the open file, what is known of it, and whether it
 * was opened for this use.
 *
 * @category models
 * @since 0.1.0
 */
export interface HeldUse {
  readonly file: FileSystem.File
  /**
   * The path's `stat` the use was given when the held file was used (it
   * shows the same file); the new file's own `fstat` when it was opened.
   */
  readonly info: FileSystem.File.Info
  readonly opened: boolean
}

/**
 * A file kept open between uses while its path still names it.
 *
 * @category models
 * @since 0.1.0
 */
export interface HeldFile {
  /**
   * Runs `use` with the file at the path, given `pathInfo`, a `stat` (or
   * `lstat`, when symlinks are not followed) of the path taken just before.
   * Fails as `openRegular` fails when the file must be opened and cannot be.
   */
  readonly use: <A, E, R>(
    pathInfo: FileSystem.File.Info,
    use: (held: HeldUse) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | PlatformError.PlatformError | FileNotRegular, R>
  /** Stops holding the file (it closes once its last use ends); the next use opens the path anew. */
  readonly letGo: Effect.Effect<void>
  /** Whether a file is held now. */
  readonly holding: () => boolean
}

/** One open of the file, with the uses in flight on it. */
interface Opened {
  readonly file: FileSystem.File
  /** Device and inode by the file's own `fstat`, when the file system reports them. */
  readonly identity: string | undefined
  readonly scope: Scope.Closeable
  uses: number
  /** Not held any more: closed when `uses` comes back to 0. */
  retired: boolean
}

const closeIfIdle = (opened: Opened): Effect.Effect<void> =>
  opened.retired && opened.uses === 0 ? Scope.close(opened.scope, Exit.void) : Effect.void

const retire = (opened: Opened | undefined): Effect.Effect<void> => {
  if (opened === undefined || opened.retired) return Effect.void
  opened.retired = true
  return closeIfIdle(opened)
}

const endUse = (opened: Opened): Effect.Effect<void> =>
  Effect.suspend(() => {
    opened.uses--
    return closeIfIdle(opened)
  })

/** What a holder tells the set it belongs to, to count the files held over every set of a budget. */
interface HolderHooks {
  /** A file was opened and is held from now on. */
  readonly onHold: Effect.Effect<void>
  /** The held file was let go. */
  readonly onRelease: () => void
}

/** A holder and how to end it: let go of its file, and keep none from then on. */
const holder = (
  fs: FileSystem.FileSystem,
  path: string,
  options: { readonly followSymlinks: boolean },
  hooks?: HolderHooks
): { readonly file: HeldFile; readonly end: Effect.Effect<void> } => {
  let held: Opened | undefined = undefined
  let ended = false
  const letGo = Effect.suspend(() => {
    const previous = held
    if (previous === undefined) return Effect.void
    held = undefined
    hooks?.onRelease()
    return retire(previous)
  })

  /** Keeps `fresh` if it is the file the path's stat showed: one swapped in after it is used once, as what it is. */
  const keep = (fresh: Opened, identity: string | undefined): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (!ended && identity !== undefined && fresh.identity === identity) {
        held = fresh
        return hooks === undefined ? Effect.void : hooks.onHold
      }
      fresh.retired = true
      return Effect.void
    })

  // Combinators rather than a generator function: one made per holder is one
  // more hidden class per held path in the old generation.
  const open = (identity: string | undefined) =>
    Effect.flatMap(Scope.make(), (scope) =>
      Scope.provide(openRegular(fs, path, { flag: "r", ...options }), scope).pipe(
        Effect.onError(() => Scope.close(scope, Exit.void)),
        Effect.flatMap(({ file, info }) => {
          const fresh: Opened = { file, identity: fileIdentity(info), scope, uses: 1, retired: false }
          // Whatever was held is not the path's file any more.
          return Effect.as(
            Effect.andThen(letGo, keep(fresh, identity)),
            { opened: fresh, use: { file, info, opened: true } satisfies HeldUse }
          )
        })
      ))

  const acquire = (pathInfo: FileSystem.File.Info) =>
    Effect.suspend(() => {
      const identity = fileIdentity(pathInfo)
      const current = held
      if (current !== undefined && identity !== undefined && current.identity === identity) {
        current.uses++
        return Effect.succeed({ opened: current, use: { file: current.file, info: pathInfo, opened: false } })
      }
      return open(identity)
    })

  const use = <A, E, R>(pathInfo: FileSystem.File.Info, body: (held: HeldUse) => Effect.Effect<A, E, R>) =>
    Effect.acquireUseRelease(acquire(pathInfo), ({ use }) => body(use), ({ opened }) => endUse(opened))

  const end = Effect.suspend(() => {
    ended = true
    return letGo
  })
  return { file: { use, letGo, holding: () => held !== undefined }, end }
}

/**
 * Makes a holder of the file at `path`, for the current scope: nothing is
 * opened until the first use, and whatever is held is let go with the scope.
 *
 * **Details**
 *
 * `followSymlinks` is `openRegular`'s: Sessions follow symlinks (pass a
 * `stat` to `use`), store files refuse them (pass an `lstat`).
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeFile = (
  fs: FileSystem.FileSystem,
  path: string,
  options: { readonly followSymlinks: boolean }
): Effect.Effect<HeldFile, never, Scope.Scope> =>
  Effect.map(Effect.acquireRelease(Effect.sync(() => holder(fs, path, options)), ({ end }) => end), ({ file }) => file)

/**
 * One path's entry in a `HeldFiles` set: its held file and the state its
 * cache keeps beside it.
 *
 * @category models
 * @since 0.1.0
 */
export interface HeldEntry<S> {
  readonly path: string
  readonly file: HeldFile
  /** The cache's own, to read and replace. */
  state: S
  /** False once the entry was dropped (evicted, invalidated, or the set ended): what is kept in it is lost. */
  readonly live: boolean
}

/**
 * A set of held files keyed by path, bounded by its budget (and, if given,
 * a count), least recently got dropped first.
 *
 * @category models
 * @since 0.1.0
 */
export interface HeldFiles<S> {
  /**
   * The entry of `path`, made the most recently got one (and made, with the
   * initial state and nothing held, when absent, dropping the least recently
   * got beyond capacity); `undefined` once the set's scope has ended.
   */
  readonly get: (path: string) => Effect.Effect<HeldEntry<S> | undefined>
  /** Drops the entry of `path`, if any: for a path that no longer names a file to hold. */
  readonly invalidate: (path: string) => Effect.Effect<void>
  /** The entries, least recently got first. */
  readonly entries: () => IterableIterator<HeldEntry<S>>
  /**
   * Sets the bytes the entry's state keeps (0 for none), charged to the
   * budget with the entry's overhead. No effect once the entry was dropped.
   */
  readonly setBytes: (entry: HeldEntry<S>, bytes: number) => void
  /** Drops least recently got entries (of every set sharing the budget), never `entry`, until the budget fits. */
  readonly fit: (entry: HeldEntry<S>) => Effect.Effect<void>
  /** Bytes charged for this set's entries now, overheads included. */
  readonly bytes: () => number
}

/**
 * Options of a `HeldFiles` set.
 *
 * @category models
 * @since 0.1.0
 */
export interface HeldFilesOptions<S> {
  /** Entries kept at most; by default only the budget bounds them. */
  readonly capacity?: number | undefined
  /**
   * The budget the set shares with others. By default its own: unbounded in
   * bytes, holding at most `capacity` files (unbounded without one).
   */
  readonly budget?: CacheBudget | undefined
  /** As for `makeFile`, for every path of the set. */
  readonly followSymlinks: boolean
  /** The state of a new entry. */
  readonly initial: () => S
  /** Runs when an entry is dropped, before its file is let go (a cache forgets what it kept there). */
  readonly onDrop?: ((entry: HeldEntry<S>) => Effect.Effect<void>) | undefined
}

interface Entry<S> extends HeldEntry<S>, Charged {
  live: boolean
}

/**
 * Makes a set of held files for the current scope; when the scope ends,
 * every entry is dropped.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = <S>(
  fs: FileSystem.FileSystem,
  options: HeldFilesOptions<S>
): Effect.Effect<HeldFiles<S>, never, Scope.Scope> =>
  Effect.suspend(() => {
    // A Map iterates in insertion order: getting an entry moves it to the end.
    const entries = new Map<string, Entry<S>>()
    const capacity = options.capacity ?? Number.POSITIVE_INFINITY
    const ledger = options.budget !== undefined
      ? ledgerOf(options.budget)
      : new Ledger(Number.POSITIVE_INFINITY, capacity)
    let ended = false
    let total = 0
    const followSymlinks = { followSymlinks: options.followSymlinks }

    const drop = (entry: Entry<S>): Effect.Effect<void> =>
      Effect.suspend(() => {
        entry.detach()
        return entry.release
      })

    const makeEntry = (path: string): Entry<S> => {
      const { end, file } = holder(fs, path, followSymlinks, {
        onHold: Effect.suspend(() => ledger.held(entry)),
        onRelease: () => ledger.released(entry)
      })
      const entry: Entry<S> = {
        path,
        file,
        state: options.initial(),
        live: true,
        key: path,
        reused: false,
        charged: ENTRY_OVERHEAD_BYTES + 2 * path.length,
        detach: () => {
          if (!entry.live) return
          entry.live = false
          if (entries.get(path) === entry) entries.delete(path)
          total -= entry.charged
          ledger.remove(entry)
        },
        // Ending the holder, not only letting go: a use still in flight on a dropped entry keeps nothing.
        release: Effect.suspend(() => options.onDrop === undefined ? end : Effect.andThen(options.onDrop(entry), end)),
        letGo: file.letGo
      }
      return entry
    }

    const get = (path: string): Effect.Effect<HeldEntry<S> | undefined> =>
      Effect.suspend(() => {
        if (ended) return Effect.succeed(undefined)
        const found = entries.get(path)
        if (found !== undefined) {
          entries.delete(path)
          entries.set(path, found)
          ledger.touch(found)
          return Effect.succeed(found)
        }
        const made = makeEntry(path)
        entries.set(path, made)
        total += made.charged
        ledger.add(made)
        if (entries.size <= capacity) return Effect.succeed(made)
        return Effect.as(drop(entries.values().next().value!), made)
      })

    const invalidate = (path: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const entry = entries.get(path)
        return entry === undefined ? Effect.void : drop(entry)
      })

    const setBytes = (held: HeldEntry<S>, bytes: number): void => {
      const entry = held as Entry<S>
      if (!entry.live) return
      const charged = ENTRY_OVERHEAD_BYTES + 2 * entry.path.length + bytes
      total += charged - entry.charged
      ledger.charge(entry, charged)
    }

    const set: HeldFiles<S> = {
      get,
      invalidate,
      entries: () => entries.values(),
      setBytes,
      fit: (entry) => ledger.fit(entry as Entry<S>),
      bytes: () => total
    }
    return Effect.as(
      Effect.addFinalizer(() =>
        Effect.suspend(() => {
          ended = true
          return Effect.forEach([...entries.values()], drop, { discard: true })
        })
      ),
      set
    )
  })

export { type CacheBudget, makeBudget } from "./CacheBudget.js"
