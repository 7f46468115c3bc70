/**
 * Small byte records kept outside the JavaScript heap, each named by a
 * small-integer handle: how the caches keep what they know of a thousand
 * files at rest without a thousand clusters of objects on the heap.
 *
 * **Why**
 *
 * Everything a cache keeps passes through V8's young generation once as the
 * cache fills, and V8 grows that generation when the bytes surviving its
 * collections outgrow it: a poller's peak memory is decided by how many
 * bytes of objects its caches keep, not by how many bytes of facts. A
 * record here costs the heap nothing but its handle, an integer stored in
 * the entry that owns it; its bytes live in buffers shared by many
 * records.
 *
 * Guarantees:
 * - A handle names its record from `put` until `free`, and is reused only
 *   after that. `view` is a view of the record's bytes, valid until the next
 *   `put` (which may move records to compact or grow the buffer): read it
 *   at once, never keep it.
 * - Freed space is reclaimed when a `put` finds no room: the records of a
 *   chunk with enough freed move together in place, and a chunk left empty
 *   is let go. The arena holds at most its records' bytes, a quarter of
 *   each chunk, and one chunk being filled.
 *
 * @since 0.1.0
 */

/** Bytes before each record's own: its handle (or `FREED`) and its length. */
const HEADER_BYTES = 8
const FREED = -1
/** Bytes of a chunk; a record longer than that gets a chunk of its own size. */
const CHUNK_BYTES = 64 * 1024

/** One buffer of records, laid end to end from its start. */
interface Chunk {
  readonly bytes: Uint8Array
  readonly header: DataView
  /** End of its last record. */
  end: number
  /** Bytes of its records in use, headers included. */
  live: number
}

const makeChunk = (size: number): Chunk => {
  const bytes = new Uint8Array(size)
  return { bytes, header: new DataView(bytes.buffer), end: 0, live: 0 }
}

/**
 * An arena of byte records.
 *
 * **Details**
 *
 * Records live in chunks of 64 KiB (a longer record in a chunk of its
 * own). A chunk never moves or grows: records freed in it are reclaimed by
 * moving its records together in place once a record finds no room at the
 * end of any chunk, and a chunk left empty is let go. So the arena never
 * holds a grown buffer beside the one it replaced: replaced buffers would be
 * garbage in the old generation, their memory resident until a full
 * collection, at the very time a poller's memory peaks.
 *
 * @category models
 * @since 0.1.0
 */
export class RecordArena {
  private readonly chunks: Array<Chunk | undefined> = []
  /** The chunk records are appended to. */
  private open: Chunk | undefined = undefined
  private openIndex = -1
  /** Chunk of each handle's record; `FREED` for a handle not in use. */
  private chunkOf = new Int32Array(64).fill(FREED)
  /** Offset of each handle's record header in its chunk. */
  private offsetOf = new Int32Array(64)
  /** Handles not in use, below `handles`. */
  private readonly freeHandles: Array<number> = []
  /** Handles ever given out (the next new one). */
  private handles = 0
  private chunkBytes = 0

  /** Records in use now. */
  get size(): number {
    return this.handles - this.freeHandles.length
  }

  /** Bytes the arena keeps outside the heap now (its chunks). */
  get bytes(): number {
    return this.chunkBytes
  }

  /** Keeps a copy of `record`; returns its handle. */
  put(record: Uint8Array): number {
    const needed = HEADER_BYTES + record.length
    const index = this.chunkWithRoom(needed)
    const chunk = this.chunks[index]!
    const handle = this.freeHandles.pop() ?? this.newHandle()
    const at = chunk.end
    chunk.header.setInt32(at, handle)
    chunk.header.setInt32(at + 4, record.length)
    chunk.bytes.set(record, at + HEADER_BYTES)
    chunk.end += needed
    chunk.live += needed
    this.chunkOf[handle] = index
    this.offsetOf[handle] = at
    return handle
  }

  /** The bytes of `handle`'s record, until the next `put`. */
  view(handle: number): Uint8Array {
    const chunk = this.chunkFor(handle)
    const at = this.offsetOf[handle]
    return chunk.bytes.subarray(at + HEADER_BYTES, at + HEADER_BYTES + chunk.header.getInt32(at + 4))
  }

  /** Lets `handle`'s record go; the handle may be given out again. */
  free(handle: number): void {
    const chunk = this.chunkFor(handle)
    const index = this.chunkOf[handle]
    const at = this.offsetOf[handle]
    chunk.header.setInt32(at, FREED)
    chunk.live -= HEADER_BYTES + chunk.header.getInt32(at + 4)
    this.chunkOf[handle] = FREED
    this.freeHandles.push(handle)
    if (chunk.live === 0 && chunk !== this.open) {
      this.chunks[index] = undefined
      this.chunkBytes -= chunk.bytes.length
    }
  }

  private chunkFor(handle: number): Chunk {
    const index = handle >= 0 && handle < this.handles ? this.chunkOf[handle] : FREED
    // A defect of the caller's, never a state of the disk: handles are the arena's own.
    if (index === FREED) throw new RangeError(`RecordArena: handle ${handle} is not in use`)
    return this.chunks[index]!
  }

  private newHandle(): number {
    if (this.handles === this.chunkOf.length) {
      const chunkOf = new Int32Array(this.chunkOf.length * 2).fill(FREED)
      chunkOf.set(this.chunkOf)
      const offsetOf = new Int32Array(this.offsetOf.length * 2)
      offsetOf.set(this.offsetOf)
      this.chunkOf = chunkOf
      this.offsetOf = offsetOf
    }
    return this.handles++
  }

  /**
   * The index of a chunk with `needed` bytes free at its end: the open one,
   * else one with that much (and a quarter of it at least) freed,
   * compacted, else a new one.
   */
  private chunkWithRoom(needed: number): number {
    const open = this.open
    if (open !== undefined && open.end + needed <= open.bytes.length) return this.openIndex
    if (needed <= CHUNK_BYTES) {
      // At least a quarter of a chunk, so that each compaction makes room for many records, not one.
      const reclaim = Math.max(needed, CHUNK_BYTES / 4)
      for (let index = 0; index < this.chunks.length; index++) {
        const chunk = this.chunks[index]
        if (chunk !== undefined && chunk.bytes.length === CHUNK_BYTES && CHUNK_BYTES - chunk.live >= reclaim) {
          this.compact(chunk)
          return this.openAt(index, chunk)
        }
      }
    }
    const made = makeChunk(Math.max(CHUNK_BYTES, needed))
    this.chunkBytes += made.bytes.length
    let index = this.chunks.indexOf(undefined)
    if (index === -1) index = this.chunks.push(undefined) - 1
    this.chunks[index] = made
    // A record that needs a chunk of its own leaves the open chunk open.
    return needed > CHUNK_BYTES ? index : this.openAt(index, made)
  }

  private openAt(index: number, chunk: Chunk): number {
    const previous = this.open
    this.open = chunk
    this.openIndex = index
    // The chunk left may have emptied while it was open.
    if (previous !== undefined && previous !== chunk && previous.live === 0) {
      this.chunks[this.chunks.indexOf(previous)] = undefined
      this.chunkBytes -= previous.bytes.length
    }
    return index
  }

  /** Moves the records in use of `chunk` together at its start, in order (each moves only toward the start). */
  private compact(chunk: Chunk): void {
    const { bytes, header } = chunk
    let written = 0
    for (let at = 0; at < chunk.end;) {
      const handle = header.getInt32(at)
      const length = HEADER_BYTES + header.getInt32(at + 4)
      if (handle !== FREED) {
        if (written !== at) bytes.copyWithin(written, at, at + length)
        this.offsetOf[handle] = written
        written += length
      }
      at += length
    }
    chunk.end = written
  }
}

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/**
 * Builds one record from numbers and strings, in a buffer reused between
 * records (so a record costs no allocation but its copy into the arena).
 *
 * @category constructors
 * @since 0.1.0
 */
export class RecordWriter {
  private bytes = new Uint8Array(1024)
  private view = new DataView(this.bytes.buffer)
  private at = 0

  /** Starts a new record. */
  start(): this {
    this.at = 0
    return this
  }

  number(value: number): this {
    this.reserve(8)
    this.view.setFloat64(this.at, value)
    this.at += 8
    return this
  }

  /** A string, UTF-8 with its length in bytes before it. */
  string(value: string): this {
    this.reserve(4 + 3 * value.length)
    const { written } = encoder.encodeInto(value, this.bytes.subarray(this.at + 4))
    this.view.setUint32(this.at, written)
    this.at += 4 + written
    return this
  }

  /** Bytes as they are, to the end of the record. */
  rest(value: Uint8Array): this {
    this.reserve(value.length)
    this.bytes.set(value, this.at)
    this.at += value.length
    return this
  }

  /** The record written since `start`, until the next `start`. */
  done(): Uint8Array {
    return this.bytes.subarray(0, this.at)
  }

  private reserve(more: number): void {
    if (this.at + more <= this.bytes.length) return
    let size = this.bytes.length * 2
    while (size < this.at + more) size *= 2
    const grown = new Uint8Array(size)
    grown.set(this.bytes.subarray(0, this.at))
    this.bytes = grown
    this.view = new DataView(grown.buffer)
  }
}

/**
 * Reads a record's fields in the order a `RecordWriter` wrote them.
 *
 * @category constructors
 * @since 0.1.0
 */
export class RecordReader {
  private readonly view: DataView
  private at = 0

  constructor(private readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  }

  number(): number {
    const value = this.view.getFloat64(this.at)
    this.at += 8
    return value
  }

  string(): string {
    const length = this.view.getUint32(this.at)
    const value = decoder.decode(this.bytes.subarray(this.at + 4, this.at + 4 + length))
    this.at += 4 + length
    return value
  }

  /** The bytes left, as a view (valid as long as the record's). */
  rest(): Uint8Array {
    const value = this.bytes.subarray(this.at)
    this.at = this.bytes.length
    return value
  }
}
