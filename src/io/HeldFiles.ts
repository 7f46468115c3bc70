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
 *   keeping the entry. Once the budget has let go of 64 files never used
 *   again after they were opened (more paths read round-robin than files
 *   held), a file opened for a use is held only while the budget holds
 *   fewer than `maxOpenFiles` or its path's working set fits them (it was
 *   got again within the budget's last `maxOpenFiles` gets); otherwise it
 *   closes when that use ends. A set may also cap its count of entries
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
import { type CacheBudget, type Charged, ENTRY_OVERHEAD_BYTES, Ledger, ledgerOf, NEVER_REUSED } from "./CacheBudget.js"
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

/** How a holder opens its path: one object for all the entries of a set, so that each keeps one field for it. */
interface HolderContext {
  readonly fs: FileSystem.FileSystem
  readonly followSymlinks: boolean
}

/**
 * The bits of `Holder.flags`: an entry's six booleans in one field rather
 * than six, a field being 8 bytes of every entry (two entries per polled
 * Session). Each is read and written through a getter and setter of its
 * boolean's name (`defineFlags`), so that `Charged` and the budget's
 * recency lists, which name the link fields they use, read them as fields.
 */
const ENDED = 1
const LIVE = 2
const REUSED = 4
const IN_USED = 8
const IN_HELD = 16
const HELD_REUSED = 32

/** Defines each name on `prototype` as a getter and setter of its bit of the instance's `flags`. */
const defineFlags = (prototype: object, bits: Readonly<Record<string, number>>): void => {
  for (const [name, bit] of Object.entries(bits)) {
    Object.defineProperty(prototype, name, {
      get(this: { flags: number }): boolean {
        return (this.flags & bit) !== 0
      },
      set(this: { flags: number }, value: boolean) {
        this.flags = value ? this.flags | bit : this.flags & ~bit
      },
      configurable: true
    })
  }
}

/**
 * Holds one path's file. A class, not closures made per holder: a cache
 * keeps one per path it knows (a thousand polled Sessions keep two
 * thousand), and each closure with its context would be kept as long.
 * Subclassed by a set's entries, which count the files held over a budget
 * (`onHold`, `onRelease`).
 */
class Holder implements HeldFile {
  private held: Opened | undefined = undefined
  /** The bits above, the holder's and its entry's: only ever a small integer, which V8 keeps unboxed in the field. */
  protected flags = 0

  constructor(private readonly context: HolderContext, readonly path: string) {}

  /** A bit of `flags` (`defineFlags`, below the class). */
  declare private ended: boolean

  /** A file was opened and is held from now on. */
  protected onHold(): Effect.Effect<void> {
    return Effect.void
  }

  /** The held file was let go. */
  protected onRelease(): void {}

  /** Whether to hold a file just opened (the path's file), or use it once and close it. */
  protected mayHold(): boolean {
    return true
  }

  /** The held file is used again. */
  protected onReuse(): void {}

  holding(): boolean {
    return this.held !== undefined
  }

  get letGo(): Effect.Effect<void> {
    return Effect.suspend(() => this.letGoNow())
  }

  private letGoNow(): Effect.Effect<void> {
    const previous = this.held
    if (previous === undefined) return Effect.void
    this.held = undefined
    this.onRelease()
    return retire(previous)
  }

  /** Lets go of the file and keeps none from then on. */
  get end(): Effect.Effect<void> {
    return Effect.suspend(() => {
      this.ended = true
      return this.letGoNow()
    })
  }

  /** Keeps `fresh` if it is the file the path's stat showed: one swapped in after it is used once, as what it is. */
  private keep(fresh: Opened, identity: string | undefined): Effect.Effect<void> {
    if (!this.ended && identity !== undefined && fresh.identity === identity && this.mayHold()) {
      this.held = fresh
      return this.onHold()
    }
    fresh.retired = true
    return Effect.void
  }

  private open(identity: string | undefined) {
    return Effect.flatMap(
      Scope.make(),
      (scope) =>
        Scope.provide(
          openRegular(this.context.fs, this.path, { flag: "r", followSymlinks: this.context.followSymlinks }),
          scope
        ).pipe(
          Effect.onError(() => Scope.close(scope, Exit.void)),
          Effect.flatMap(({ file, info }) => {
            const fresh: Opened = { file, identity: fileIdentity(info), scope, uses: 1, retired: false }
            // Whatever was held is not the path's file any more.
            return Effect.suspend(() => {
              const letGo = this.letGoNow()
              return Effect.as(
                Effect.andThen(letGo, Effect.suspend(() => this.keep(fresh, identity))),
                { opened: fresh, use: { file, info, opened: true } satisfies HeldUse }
              )
            })
          })
        )
    )
  }

  private acquire(pathInfo: FileSystem.File.Info) {
    return Effect.suspend(() => {
      const identity = fileIdentity(pathInfo)
      const current = this.held
      if (current !== undefined && identity !== undefined && current.identity === identity) {
        current.uses++
        this.onReuse()
        return Effect.succeed({ opened: current, use: { file: current.file, info: pathInfo, opened: false } })
      }
      return this.open(identity)
    })
  }

  use<A, E, R>(
    pathInfo: FileSystem.File.Info,
    body: (held: HeldUse) => Effect.Effect<A, E, R>
  ): Effect.Effect<A, E | PlatformError.PlatformError | FileNotRegular, R> {
    return Effect.acquireUseRelease(this.acquire(pathInfo), ({ use }) => body(use), ({ opened }) => endUse(opened))
  }
}

defineFlags(Holder.prototype, { ended: ENDED })

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
  Effect.acquireRelease(
    Effect.sync((): Holder => new Holder({ fs, followSymlinks: options.followSymlinks }, path)),
    (holder) => holder.end
  )

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

/** The bookkeeping a set shares with its entries. */
interface SetCore<S> {
  readonly context: HolderContext
  readonly entries: Map<string, Entry<S>>
  readonly ledger: Ledger
  readonly onDrop: ((entry: HeldEntry<S>) => Effect.Effect<void>) | undefined
  /** The set's own recency list, least recently got first (for its `capacity` and `entries()`). */
  readonly order: { first: Entry<S> | undefined; last: Entry<S> | undefined }
  total: number
}

/**
 * One path's entry: its holder, its state, and its links in the set's and
 * the budget's recency lists. Everything an entry does is a method, so that
 * a kept entry is one object with its links, not a cluster of closures.
 */
class Entry<S> extends Holder implements HeldEntry<S>, Charged {
  charged: number
  usedPrevious: Charged | undefined = undefined
  usedNext: Charged | undefined = undefined
  heldPrevious: Charged | undefined = undefined
  heldNext: Charged | undefined = undefined
  lastGet = 0
  reuseDistance = NEVER_REUSED
  /** Links of the set's own recency list. */
  previousInSet: Entry<S> | undefined = undefined
  nextInSet: Entry<S> | undefined = undefined

  constructor(path: string, public state: S, private readonly core: SetCore<S>) {
    super(core.context, path)
    this.flags = LIVE
    this.charged = ENTRY_OVERHEAD_BYTES + 2 * path.length
  }

  // Bits of `flags` (`defineFlags`, below the class).
  declare live: boolean
  declare reused: boolean
  declare inUsed: boolean
  declare inHeld: boolean
  declare heldReused: boolean

  /** The entry is its own held file; a getter, not a field that would cost every entry a slot. */
  get file(): HeldFile {
    return this
  }

  get key(): string {
    return this.path
  }

  protected override onHold(): Effect.Effect<void> {
    return this.core.ledger.held(this)
  }

  protected override onRelease(): void {
    this.core.ledger.released(this)
  }

  protected override mayHold(): boolean {
    return this.core.ledger.mayHold(this)
  }

  protected override onReuse(): void {
    this.heldReused = true
  }

  /** Makes the entry the set's most recently got. */
  moveToEnd(): void {
    const order = this.core.order
    if (order.last === this) return
    this.unlinkFromSet()
    this.previousInSet = order.last
    if (order.last === undefined) order.first = this
    else order.last.nextInSet = this
    order.last = this
  }

  private unlinkFromSet(): void {
    const order = this.core.order
    const { nextInSet: next, previousInSet: previous } = this
    if (previous === undefined) {
      if (order.first === this) order.first = next
    } else previous.nextInSet = next
    if (next === undefined) {
      if (order.last === this) order.last = previous
    } else next.previousInSet = previous
    this.previousInSet = undefined
    this.nextInSet = undefined
  }

  detach(): void {
    if (!this.live) return
    this.live = false
    const core = this.core
    if (core.entries.get(this.path) === this) core.entries.delete(this.path)
    this.unlinkFromSet()
    core.total -= this.charged
    core.ledger.remove(this)
  }

  // Ending the holder, not only letting go: a use still in flight on a dropped entry keeps nothing.
  get release(): Effect.Effect<void> {
    return Effect.suspend(() => {
      const onDrop = this.core.onDrop
      return onDrop === undefined ? this.end : Effect.andThen(onDrop(this), this.end)
    })
  }

  /** Drops the entry: out of its set and budget at once, then released. */
  get drop(): Effect.Effect<void> {
    return Effect.suspend(() => {
      this.detach()
      return this.release
    })
  }
}

defineFlags(Entry.prototype, { live: LIVE, reused: REUSED, inUsed: IN_USED, inHeld: IN_HELD, heldReused: HELD_REUSED })

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
    const capacity = options.capacity ?? Number.POSITIVE_INFINITY
    const core: SetCore<S> = {
      context: { fs, followSymlinks: options.followSymlinks },
      entries: new Map(),
      ledger: options.budget !== undefined
        ? ledgerOf(options.budget)
        : new Ledger(Number.POSITIVE_INFINITY, capacity),
      onDrop: options.onDrop,
      order: { first: undefined, last: undefined },
      total: 0
    }
    const { entries, ledger, order } = core
    let ended = false

    const get = (path: string): Effect.Effect<HeldEntry<S> | undefined> =>
      Effect.suspend(() => {
        if (ended) return Effect.succeed(undefined)
        const found = entries.get(path)
        if (found !== undefined) {
          found.moveToEnd()
          ledger.touch(found)
          return Effect.succeed(found)
        }
        const made = new Entry<S>(path, options.initial(), core)
        entries.set(path, made)
        made.moveToEnd()
        core.total += made.charged
        ledger.add(made)
        if (entries.size <= capacity) return Effect.succeed(made)
        return Effect.as(order.first!.drop, made)
      })

    const invalidate = (path: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const entry = entries.get(path)
        return entry === undefined ? Effect.void : entry.drop
      })

    const setBytes = (held: HeldEntry<S>, bytes: number): void => {
      const entry = held as Entry<S>
      if (!entry.live) return
      const charged = ENTRY_OVERHEAD_BYTES + 2 * entry.path.length + bytes
      core.total += charged - entry.charged
      ledger.charge(entry, charged)
    }

    function* inOrder(): Generator<HeldEntry<S>, void, undefined> {
      for (let entry = order.first; entry !== undefined; entry = entry.nextInSet) yield entry
    }

    const set: HeldFiles<S> = {
      get,
      invalidate,
      entries: inOrder,
      setBytes,
      fit: (entry) => ledger.fit(entry as Entry<S>),
      bytes: () => core.total
    }
    return Effect.as(
      Effect.addFinalizer(() =>
        Effect.suspend(() => {
          ended = true
          return Effect.forEach([...inOrder()] as Array<Entry<S>>, (entry) => entry.drop, { discard: true })
        })
      ),
      set
    )
  })

export { type CacheBudget, makeBudget } from "./CacheBudget.js"
