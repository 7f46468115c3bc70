/**
 * The budget the held-file caches share: bytes of cached state and files
 * held open, over every `HeldFiles` set made with it (the Session cache and
 * the sidecar cache of one store). Least recently got entries are dropped
 * past the bytes, and once that thrashes (a round-robin over more paths
 * than fit) entries are admitted by how often their paths are got.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"

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
 * most `maxOpenFiles` files are held over all of them (none when it is 0): holding one
 * more lets go of the file of the least recently got entry that holds one
 * (the entry and its state stay; its next use opens the file again).
 * Once that has let go of 64 files never used again after they were
 * opened, only paths whose working set fits the open files have theirs
 * held (see `Ledger.mayHold`).
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
 * Estimated bytes of an entry without its cache's state: the entry (its
 * holder, its links in the recency lists) and its set's map slot. Measured
 * in heap snapshots at about 260 bytes, 210 since its six booleans share
 * one field and its file system and options one object
 * (`test/io/HeldMemory.test.ts` bounds it); the path's characters come on
 * top.
 */
export const ENTRY_OVERHEAD_BYTES = 320

/**
 * The `reuseDistance` of an entry not got again yet: farther than any count
 * of open files. A small integer rather than `Infinity`, because one double
 * ever stored in the field makes V8 box it in a heap number of its own in
 * every entry (16 bytes each, two entries per polled Session).
 */
export const NEVER_REUSED = 2 ** 30

/**
 * Drops of entries never got again after they were kept, after which a
 * budget admits by frequency (see `Ledger.fit`). Least-recently-used
 * eviction serves a working set that fits; a working set read round-robin
 * that does not fit drops every entry before it is read again, and each
 * dropped state is garbage that lived long enough to be promoted.
 */
const THRASHING_DROPS = 64

/**
 * Held files let go without ever being used again after they were opened,
 * after which a budget holds a newly opened file only for a path whose
 * reuse distance fits its open files (see `Ledger.mayHold`).
 */
const THRASHING_HOLDS = 64

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

/** An entry as its budget sees it. @internal */
export interface Charged {
  /** The entry's path: what its budget counts the gets of, once it admits by frequency. */
  readonly key: string
  /** Got again since it was added: a drop of an entry never got again is a sign of thrashing. */
  reused: boolean
  /** Overhead plus the state's bytes. */
  charged: number
  /** Takes the entry out of its set and its budget at once. */
  detach(): void
  /** What dropping it does after `detach`: the cache's `onDrop`, then letting go of the file. */
  readonly release: Effect.Effect<void>
  readonly letGo: Effect.Effect<void>
  /**
   * The budget's links through its recency lists: of every entry (`used`)
   * and of those holding a file (`held`).
   *
   * **Details**
   *
   * The lists are linked through the entries themselves rather than kept as
   * `Map`s in insertion order: a get that moves an entry to the end of a
   * Map deletes and appends a table slot, and every few hundred of those
   * the table (tens of KB at a thousand entries) is rebuilt. Relinking only
   * rewrites pointers between entries that already exist.
   */
  usedPrevious: Charged | undefined
  usedNext: Charged | undefined
  inUsed: boolean
  heldPrevious: Charged | undefined
  heldNext: Charged | undefined
  inHeld: boolean
  /** The budget's count of gets at the entry's last get. */
  lastGet: number
  /** Gets of the budget between the entry's last two gets (over every set); `NEVER_REUSED` until it is got again. */
  reuseDistance: number
  /** Whether the file it holds was used again since it was opened. */
  heldReused: boolean
}

/** Which of an entry's fields link it into one recency list. */
interface LinkFields {
  readonly previous: "usedPrevious" | "heldPrevious"
  readonly next: "usedNext" | "heldNext"
  readonly linked: "inUsed" | "inHeld"
}

/** A recency list of entries, least recently got first, through one set of their link fields. */
class RecencyList {
  first: Charged | undefined = undefined
  last: Charged | undefined = undefined
  size = 0

  constructor(private readonly fields: LinkFields) {}

  has(entry: Charged): boolean {
    return entry[this.fields.linked]
  }

  /** The entry after `entry`, read before `entry` is taken out. */
  after(entry: Charged): Charged | undefined {
    return entry[this.fields.next]
  }

  /** Appends `entry` as the most recently got, moving it there if it is in the list already. */
  append(entry: Charged): void {
    const { linked, next, previous } = this.fields
    if (entry[linked]) {
      if (this.last === entry) return
      this.remove(entry)
    }
    entry[previous] = this.last
    entry[next] = undefined
    entry[linked] = true
    if (this.last === undefined) this.first = entry
    else this.last[next] = entry
    this.last = entry
    this.size++
  }

  /** Takes `entry` out; false if it was not in the list. */
  remove(entry: Charged): boolean {
    const { linked, next, previous } = this.fields
    if (!entry[linked]) return false
    const before = entry[previous]
    const after = entry[next]
    if (before === undefined) this.first = after
    else before[next] = after
    if (after === undefined) this.last = before
    else after[previous] = before
    entry[previous] = undefined
    entry[next] = undefined
    entry[linked] = false
    this.size--
    return true
  }
}

/** The bookkeeping behind a `CacheBudget`, for `HeldFiles`. @internal */
export class Ledger implements CacheBudget {
  /** Least recently got first. */
  private readonly used = new RecencyList({ previous: "usedPrevious", next: "usedNext", linked: "inUsed" })
  /** Entries holding a file, least recently got first. */
  private readonly holding = new RecencyList({ previous: "heldPrevious", next: "heldNext", linked: "inHeld" })
  private total = 0
  /** Entries dropped to fit that were never got again after they were added. */
  private wasted = 0
  /** Made once `wasted` reaches `THRASHING_DROPS`: from then on the budget admits by frequency. */
  private frequencies: FrequencySketch | undefined = undefined
  /** Gets over every set, the clock of `reuseDistance`. */
  private gets = 0
  /** Held files let go that were never used again after they were opened. */
  private wastedHolds = 0

  constructor(readonly maxBytes: number, readonly maxOpenFiles: number) {}

  readonly bytes = (): number => this.total
  readonly openFiles = (): number => this.holding.size
  /** Whether the budget admits by frequency now (it has thrashed). */
  readonly admitsByFrequency = (): boolean => this.frequencies !== undefined

  add(entry: Charged): void {
    entry.lastGet = ++this.gets
    entry.reuseDistance = NEVER_REUSED
    this.used.append(entry)
    this.total += entry.charged
    this.frequencies?.increment(entry.key)
  }

  touch(entry: Charged): void {
    if (!this.used.has(entry)) return
    const now = ++this.gets
    entry.reuseDistance = now - entry.lastGet
    entry.lastGet = now
    this.used.append(entry)
    entry.reused = true
    if (this.holding.has(entry)) this.holding.append(entry)
    this.frequencies?.increment(entry.key)
  }

  remove(entry: Charged): void {
    if (this.used.remove(entry)) this.total -= entry.charged
    this.holding.remove(entry)
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
      let entry = this.used.first
      while (entry !== undefined && this.total > this.maxBytes) {
        const next = this.used.after(entry)
        if (entry !== keep) {
          // Out of its set at once, so that nothing finds it while earlier ones are released.
          entry.detach()
          dropped.push(entry)
          if (!entry.reused) this.wasted++
        }
        entry = next
      }
      if (this.frequencies === undefined && this.wasted >= THRASHING_DROPS) this.startCountingFrequencies()
      return Effect.forEach(dropped, (entry) => entry.release, { discard: true })
    })
  }

  private leastRecentOther(keep: Charged): Charged | undefined {
    const first = this.used.first
    return first === keep ? this.used.after(first) : first
  }

  /** Every entry kept now counts as got once, so that a path met for the first time does not outrank them. */
  private startCountingFrequencies(): void {
    const frequencies = new FrequencySketch()
    for (let entry = this.used.first; entry !== undefined; entry = this.used.after(entry)) {
      frequencies.increment(entry.key)
    }
    this.frequencies = frequencies
  }

  /**
   * Whether a file just opened for `entry` should be held.
   *
   * **Details**
   *
   * Never when `maxOpenFiles` is 0 (each use opens and closes its file).
   * Otherwise always, until the budget has let go of `THRASHING_HOLDS` files that were
   * never used again after they were opened: the paths are read round-robin,
   * more of them than there are files to hold, and each file held only
   * pushes out one that would have been used, to be pushed out itself before
   * its turn comes round. From then on a file is held only while fewer than
   * `maxOpenFiles` are, or for a path got again within the budget's last
   * `maxOpenFiles` gets, whose working set fits: the others are opened and
   * closed by each use, as they would be anyway, without the holding (an
   * open file, its scope and finalizers, kept across the reads in between,
   * long enough to be promoted by the young collections of those reads).
   */
  mayHold(entry: Charged): boolean {
    if (this.maxOpenFiles === 0) return false
    if (this.wastedHolds < THRASHING_HOLDS) return true
    return this.holding.size < this.maxOpenFiles || entry.reuseDistance <= this.maxOpenFiles
  }

  /** `entry` holds a file now: lets go of the least recently got other files beyond the cap. */
  held(entry: Charged): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (!this.used.has(entry)) return Effect.void
      entry.heldReused = false
      this.holding.append(entry)
      if (this.holding.size <= this.maxOpenFiles) return Effect.void
      const released: Array<Charged> = []
      let other = this.holding.first
      while (other !== undefined && this.holding.size > this.maxOpenFiles) {
        const next = this.holding.after(other)
        if (other !== entry) {
          this.holding.remove(other)
          released.push(other)
          if (!other.heldReused) this.wastedHolds++
        }
        other = next
      }
      return Effect.forEach(released, (other) => other.letGo, { discard: true })
    })
  }

  released(entry: Charged): void {
    this.holding.remove(entry)
  }
}

export const makeBudget = (options: { readonly maxBytes: number; readonly maxOpenFiles: number }): CacheBudget =>
  new Ledger(options.maxBytes, options.maxOpenFiles)

/** The ledger of a budget made by `makeBudget`. @internal */
export const ledgerOf = (budget: CacheBudget): Ledger => {
  if (!(budget instanceof Ledger)) throw new TypeError("HeldFiles: a budget must come from makeBudget")
  return budget
}
