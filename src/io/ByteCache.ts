/**
 * A plain byte-bounded cache: what the store's read caches (Sessions and
 * sidecars) keep between reads, together, under one bound.
 *
 * Entries live in one `Map` in the order they were last used: a hit deletes
 * and sets its key again, so the first key is always the least recently
 * used, and an entry that pushes the total past `maxBytes` evicts from the
 * front until the total fits (Effect's own `Cache` evicts the same way, by
 * the insertion order of its `MutableHashMap`).
 *
 * Once the cache is full, a key it does not hold is admitted only one time
 * in `FULL_ADMIT_EVERY`, unless its owner asks (`evenWhenFull`: a value it
 * took out to update, or one it will surely read again soon). A poller sweeping more Sessions than fit
 * would otherwise evict each entry just before reading it again: every read
 * a miss, and the whole budget rewritten each sweep, which V8 pays for in
 * its old generation. With the rule most entries stay and answer, and a new
 * set of Sessions still takes the cache over, a sixteenth of its misses at a
 * time (a deterministic form of the bimodal insertion policy).
 *
 * Each entry is charged the
 * bytes its owner estimates for its value, plus a fixed overhead and its
 * key; a value larger than the whole bound is not kept, and `maxBytes: 0`
 * keeps nothing.
 *
 * The caches that share one get a typed `CacheSection` each, keyed by path:
 * each entry is tagged with its section, so a Session and a sidecar at the
 * same path never answer for each other (the later one replaces the other).
 * Keys are the callers' own strings, never copies: a poller's list of
 * Sessions already holds them. Nothing here touches
 * a file or holds one open: whether a kept value may still answer is for
 * its owner to check, every time.
 *
 * @since 0.1.0
 */

/**
 * Bytes charged per entry beside its value and its key (charged twice its
 * length, UTF-16, although a key shared with the caller costs nothing more):
 * the `Map` slot and the entry object.
 *
 * @category constants
 * @since 0.1.0
 */
export const ENTRY_OVERHEAD_BYTES = 96

/**
 * Of the keys a full cache does not hold, it admits one in this many.
 *
 * @category constants
 * @since 0.1.0
 */
export const FULL_ADMIT_EVERY = 16

interface Entry {
  readonly value: unknown
  readonly bytes: number
  readonly section: SectionTotals
}

interface SectionTotals {
  entries: number
  bytes: number
}

/**
 * One cache's share of a `ByteCache`: its values, keyed by path.
 *
 * @category models
 * @since 0.1.0
 */
export interface CacheSection<V> {
  /** The value kept for `key`, now the most recently used; `undefined` if none. */
  readonly get: (key: string) => V | undefined
  /**
   * Keeps `value` for `key`, charged `bytes` (plus the entry's overhead),
   * evicting the least recently used entries of every section until the
   * total fits. A value that cannot fit at all is not kept (and any value
   * kept for `key` before is gone). When the cache is full and does not hold
   * `key`, the value is kept only one time in `FULL_ADMIT_EVERY`, unless
   * `evenWhenFull`.
   */
  readonly set: (key: string, value: V, bytes: number, evenWhenFull?: boolean) => void
  readonly delete: (key: string) => void
  /** The values this section keeps now, least recently used first. */
  readonly values: () => IterableIterator<V>
  /** Entries this section keeps now. */
  readonly size: () => number
  /** Bytes charged for this section's entries now. */
  readonly bytes: () => number
}

/**
 * A byte-bounded LRU cache shared by sections.
 *
 * @category models
 * @since 0.1.0
 */
export class ByteCache {
  private readonly entries = new Map<string, Entry>()
  private total = 0
  private refusals = 0

  /**
   * `fullAdmitEvery`: of the keys a full cache does not hold, how many it
   * refuses per one it admits (`FULL_ADMIT_EVERY`; 1 is plain LRU).
   */
  constructor(readonly maxBytes: number, readonly fullAdmitEvery: number = FULL_ADMIT_EVERY) {}

  /** Bytes charged for every entry now; at most `maxBytes`. */
  get bytes(): number {
    return this.total
  }

  /** Entries kept now, over all sections. */
  get size(): number {
    return this.entries.size
  }

  /** A section of this cache, whose entries the other sections never see. */
  section<V>(): CacheSection<V> {
    const totals: SectionTotals = { entries: 0, bytes: 0 }
    return {
      get: (key) => this.get(key, totals) as V | undefined,
      set: (key, value, bytes, evenWhenFull) => this.set(key, value, bytes, totals, evenWhenFull === true),
      delete: (key) => {
        if (this.entries.get(key)?.section === totals) this.delete(key)
      },
      values: () => this.valuesOf(totals) as IterableIterator<V>,
      size: () => totals.entries,
      bytes: () => totals.bytes
    }
  }

  private *valuesOf(section: SectionTotals): IterableIterator<unknown> {
    for (const entry of this.entries.values()) if (entry.section === section) yield entry.value
  }

  private get(key: string, section: SectionTotals): unknown {
    const entry = this.entries.get(key)
    if (entry === undefined || entry.section !== section) return undefined
    // Moved to the back: the front is always the least recently used.
    this.entries.delete(key)
    this.entries.set(key, entry)
    return entry.value
  }

  private set(key: string, value: unknown, valueBytes: number, section: SectionTotals, evenWhenFull: boolean): void {
    const held = this.entries.has(key)
    this.delete(key)
    const bytes = valueBytes + ENTRY_OVERHEAD_BYTES + 2 * key.length
    if (bytes > this.maxBytes) return
    if (!held && !evenWhenFull && this.total + bytes > this.maxBytes && ++this.refusals % this.fullAdmitEvery !== 0) {
      return
    }
    this.entries.set(key, { value, bytes, section })
    this.total += bytes
    section.entries++
    section.bytes += bytes
    for (const oldest of this.entries.keys()) {
      if (this.total <= this.maxBytes) break
      this.delete(oldest)
    }
  }

  private delete(key: string): void {
    const entry = this.entries.get(key)
    if (entry === undefined) return
    this.entries.delete(key)
    this.total -= entry.bytes
    entry.section.entries--
    entry.section.bytes -= entry.bytes
  }
}
