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

  const open = Effect.fnUntraced(function*(identity: string | undefined) {
    const scope = yield* Scope.make()
    const { file, info } = yield* Scope.provide(openRegular(fs, path, { flag: "r", ...options }), scope).pipe(
      Effect.onError(() => Scope.close(scope, Exit.void))
    )
    const fresh: Opened = { file, identity: fileIdentity(info), scope, uses: 1, retired: false }
    // Whatever was held is not the path's file any more.
    yield* letGo
    // Kept only if it is the file the path's stat showed: one swapped in after it is used once, as what it is.
    if (!ended && identity !== undefined && fresh.identity === identity) {
      held = fresh
      if (hooks !== undefined) yield* hooks.onHold
    } else {
      fresh.retired = true
    }
    return { opened: fresh, use: { file, info, opened: true } satisfies HeldUse }
  })

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
 * What the caches sharing it may keep: bytes of state, and files held open.
 *
 * **Details**
 *
 * Every `HeldFiles` set made with the budget charges its entries to it:
 * each entry costs a fixed overhead plus the bytes its cache says its state
 * keeps (`setBytes`). When the total passes `maxBytes`, the least recently
 * got entries of any of those sets are dropped (`fit`), and their files let
 * go. Once 64 entries were dropped so without ever being got again after
 * they were added (the paths are read round-robin, more of them than fit),
 * the budget admits by frequency from then on: the entry whose charge
 * pushed the total over is dropped itself, unless its path was got more
 * often lately than the least recently got entry's. The entries kept are
 * then reused on every round, and the states of the others die young. At
 * most `maxOpenFiles` files are held over all of them: holding one
 * more lets go of the file of the least recently got entry that holds one
 * (the entry and its state stay; its next use opens the file again).
 *
 * @category models
 * @since 0.1.0
 */
export interface CacheBudget {
  readonly maxBytes: number
  readonly maxOpenFiles: number
  /** Bytes charged now, over every set sharing the budget. */
  readonly bytes: () => number
  /** Files held open now, over every set sharing the budget. */
  readonly openFiles: () => number
  /** Whether the budget has thrashed and admits by frequency now. */
  readonly admitsByFrequency: () => boolean
}

/**
 * Estimated bytes of an entry without its cache's state: the entry, its
 * holder and their closures, and the set's and the budget's map slots.
 * Measured in heap snapshots at about 0.9 KB; the path's characters come on
 * top.
 */
const ENTRY_OVERHEAD_BYTES = 1024

/**
 * Drops of entries never got again after they were kept, after which a
 * budget admits by frequency (see `Ledger.fit`). Least-recently-used
 * eviction serves a working set that fits; a working set read round-robin
 * that does not fit drops every entry before it is read again, and each
 * dropped state is garbage that lived long enough to be promoted.
 */
const THRASHING_DROPS = 64

/**
 * How often each path was got lately, approximately (a count-min sketch:
 * four rows of 4-bit-range counters, the smallest of a path's four cells,
 * never under its true count). Every `10 × width` increments every counter
 * is halved, so that paths no longer read lose their standing. 256 KiB, made
 * only once a budget thrashes.
 */
class FrequencySketch {
  private static readonly WIDTH = 1 << 16
  private readonly counters = new Uint8Array(4 * FrequencySketch.WIDTH)
  private increments = 0

  private static hashes(key: string): readonly [number, number] {
    // FNV-1a, then a Murmur3 finalizer for a second, independent-enough hash (odd, for double hashing).
    let h = 0x811c9dc5
    for (let index = 0; index < key.length; index++) h = Math.imul(h ^ key.charCodeAt(index), 0x01000193)
    let g = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
    g = Math.imul(g ^ (g >>> 13), 0xc2b2ae35)
    return [h >>> 0, ((g ^ (g >>> 16)) | 1) >>> 0]
  }

  increment(key: string): void {
    const [h, g] = FrequencySketch.hashes(key)
    const mask = FrequencySketch.WIDTH - 1
    for (let row = 0; row < 4; row++) {
      const cell = row * FrequencySketch.WIDTH + ((h + row * g) & mask)
      if (this.counters[cell] < 15) this.counters[cell]++
    }
    if (++this.increments >= 10 * FrequencySketch.WIDTH) {
      this.increments = 0
      for (let cell = 0; cell < this.counters.length; cell++) this.counters[cell] >>>= 1
    }
  }

  estimate(key: string): number {
    const [h, g] = FrequencySketch.hashes(key)
    const mask = FrequencySketch.WIDTH - 1
    let least = 15
    for (let row = 0; row < 4; row++) {
      least = Math.min(least, this.counters[row * FrequencySketch.WIDTH + ((h + row * g) & mask)])
    }
    return least
  }
}

/** An entry as its budget sees it. */
interface Charged {
  /** The entry's path: what its budget counts the gets of, once it admits by frequency. */
  readonly key: string
  /** Got again since it was added: a drop of an entry never got again is a sign of thrashing. */
  reused: boolean
  /** Overhead plus the state's bytes. */
  charged: number
  /** Takes the entry out of its set and its budget at once. */
  readonly detach: () => void
  /** What dropping it does after `detach`: the cache's `onDrop`, then letting go of the file. */
  readonly release: Effect.Effect<void>
  readonly letGo: Effect.Effect<void>
}

class Ledger implements CacheBudget {
  /** Least recently got first. */
  private readonly used = new Map<Charged, undefined>()
  /** Entries holding a file, least recently got first. */
  private readonly holding = new Map<Charged, undefined>()
  private total = 0
  /** Entries dropped to fit that were never got again after they were added. */
  private wasted = 0
  /** Made once `wasted` reaches `THRASHING_DROPS`: from then on the budget admits by frequency. */
  private frequencies: FrequencySketch | undefined = undefined

  constructor(readonly maxBytes: number, readonly maxOpenFiles: number) {}

  readonly bytes = (): number => this.total
  readonly openFiles = (): number => this.holding.size
  /** Whether the budget admits by frequency now (it has thrashed). */
  readonly admitsByFrequency = (): boolean => this.frequencies !== undefined

  add(entry: Charged): void {
    this.used.set(entry, undefined)
    this.total += entry.charged
    this.frequencies?.increment(entry.key)
  }

  touch(entry: Charged): void {
    if (!this.used.delete(entry)) return
    this.used.set(entry, undefined)
    entry.reused = true
    if (this.holding.delete(entry)) this.holding.set(entry, undefined)
    this.frequencies?.increment(entry.key)
  }

  remove(entry: Charged): void {
    if (this.used.delete(entry)) this.total -= entry.charged
    this.holding.delete(entry)
  }

  /** Sets what an entry is charged; once it is out of the budget, only the entry's own figure changes. */
  charge(entry: Charged, charged: number): void {
    if (this.used.has(entry)) this.total += charged - entry.charged
    entry.charged = charged
  }

  /**
   * Drops the least recently got entries, never `keep`, until the total
   * fits; once the budget thrashes, drops `keep` instead when its path was
   * not got more often than the least recently got entry's (TinyLFU's
   * admission rule: in a round-robin every path is got equally often, so
   * what is kept stays).
   */
  fit(keep: Charged): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (this.total <= this.maxBytes) return Effect.void
      const frequencies = this.frequencies
      if (frequencies !== undefined && this.used.has(keep)) {
        const victim = this.leastRecentOther(keep)
        if (victim !== undefined && frequencies.estimate(keep.key) <= frequencies.estimate(victim.key)) {
          keep.detach()
          return keep.release
        }
      }
      const dropped: Array<Charged> = []
      for (const entry of this.used.keys()) {
        if (this.total <= this.maxBytes) break
        if (entry === keep) continue
        // Out of its set at once, so that nothing finds it while earlier ones are released.
        entry.detach()
        dropped.push(entry)
        if (!entry.reused) this.wasted++
      }
      if (this.frequencies === undefined && this.wasted >= THRASHING_DROPS) this.startCountingFrequencies()
      return Effect.forEach(dropped, (entry) => entry.release, { discard: true })
    })
  }

  private leastRecentOther(keep: Charged): Charged | undefined {
    for (const entry of this.used.keys()) if (entry !== keep) return entry
    return undefined
  }

  /** Every entry kept now counts as got once, so that a path met for the first time does not outrank them. */
  private startCountingFrequencies(): void {
    const frequencies = new FrequencySketch()
    for (const entry of this.used.keys()) frequencies.increment(entry.key)
    this.frequencies = frequencies
  }

  /** `entry` holds a file now: lets go of the least recently got other files beyond the cap. */
  held(entry: Charged): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (!this.used.has(entry)) return Effect.void
      this.holding.set(entry, undefined)
      if (this.holding.size <= this.maxOpenFiles) return Effect.void
      const released: Array<Charged> = []
      for (const other of this.holding.keys()) {
        if (this.holding.size <= this.maxOpenFiles) break
        if (other === entry) continue
        this.holding.delete(other)
        released.push(other)
      }
      return Effect.forEach(released, (other) => other.letGo, { discard: true })
    })
  }

  released(entry: Charged): void {
    this.holding.delete(entry)
  }
}

/**
 * Makes a budget for `HeldFiles` sets to share.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeBudget = (options: { readonly maxBytes: number; readonly maxOpenFiles: number }): CacheBudget =>
  new Ledger(options.maxBytes, options.maxOpenFiles)

const ledgerOf = (budget: CacheBudget): Ledger => {
  if (!(budget instanceof Ledger)) throw new TypeError("HeldFiles: a budget must come from makeBudget")
  return budget
}

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
