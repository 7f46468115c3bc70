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
 * the entry that owns it; its bytes live in one buffer shared by every
 * record of the arena.
 *
 * Guarantees:
 * - A handle names its record from `put` until `free`, and is reused only
 *   after that. `view` is a view of the record's bytes, valid until the next
 *   `put` (which may move records to compact or grow the buffer): read it
 *   at once, never keep it.
 * - Freed space is reclaimed when a `put` finds no room at the end: the
 *   records in use move together into a buffer of 1.5–3 times their bytes
 *   (16 KiB at least), smaller than the old one when enough was freed.
 *
 * @since 0.1.0
 */

/** Bytes before each record's own: its handle (or `FREED`) and its length. */
const HEADER_BYTES = 8
const FREED = -1
const INITIAL_BYTES = 16 * 1024

/**
 * An arena of byte records.
 *
 * @category models
 * @since 0.1.0
 */
export class RecordArena {
  private buffer = new Uint8Array(INITIAL_BYTES)
  private header = new DataView(this.buffer.buffer)
  /** Offset of each handle's record header; `FREED` for a handle not in use. */
  private offsets = new Int32Array(64)
  /** Handles not in use, below `handles`. */
  private readonly freeHandles: Array<number> = []
  /** Handles ever given out (the next new one). */
  private handles = 0
  /** End of the last record. */
  private end = 0
  /** Bytes of records in use, headers included. */
  private live = 0

  /** Records in use now. */
  get size(): number {
    return this.handles - this.freeHandles.length
  }

  /** Bytes the arena keeps outside the heap now (its buffer). */
  get bytes(): number {
    return this.buffer.byteLength
  }

  /** Keeps a copy of `record`; returns its handle. */
  put(record: Uint8Array): number {
    const needed = HEADER_BYTES + record.length
    if (this.end + needed > this.buffer.length) this.makeRoom(needed)
    const handle = this.freeHandles.pop() ?? this.newHandle()
    const at = this.end
    this.header.setInt32(at, handle)
    this.header.setInt32(at + 4, record.length)
    this.buffer.set(record, at + HEADER_BYTES)
    this.offsets[handle] = at
    this.end += needed
    this.live += needed
    return handle
  }

  /** The bytes of `handle`'s record, until the next `put`. */
  view(handle: number): Uint8Array {
    const at = this.offsetOf(handle)
    return this.buffer.subarray(at + HEADER_BYTES, at + HEADER_BYTES + this.header.getInt32(at + 4))
  }

  /** Lets `handle`'s record go; the handle may be given out again. */
  free(handle: number): void {
    const at = this.offsetOf(handle)
    this.header.setInt32(at, FREED)
    this.offsets[handle] = FREED
    this.live -= HEADER_BYTES + this.header.getInt32(at + 4)
    this.freeHandles.push(handle)
  }

  private offsetOf(handle: number): number {
    const at = handle >= 0 && handle < this.handles ? this.offsets[handle] : FREED
    // A defect of the caller's, never a state of the disk: handles are the arena's own.
    if (at === FREED) throw new RangeError(`RecordArena: handle ${handle} is not in use`)
    return at
  }

  private newHandle(): number {
    if (this.handles === this.offsets.length) {
      const grown = new Int32Array(this.offsets.length * 2)
      grown.set(this.offsets)
      this.offsets = grown
    }
    return this.handles++
  }

  /**
   * Room for `needed` more bytes at `end`: the records in use move together
   * into a new buffer at least half again as large as they and the new
   * record need (smaller than the old one once enough was freed).
   */
  private makeRoom(needed: number): void {
    const wanted = this.live + needed
    let size = INITIAL_BYTES
    while (size < wanted + (wanted >> 1)) size *= 2
    this.moveTo(new Uint8Array(size))
  }

  /** Copies the records in use, in order and together, into `target`, which becomes the buffer. */
  private moveTo(target: Uint8Array<ArrayBuffer>): void {
    const source = this.buffer
    const sourceHeader = this.header
    let written = 0
    for (let at = 0; at < this.end;) {
      const handle = sourceHeader.getInt32(at)
      const length = HEADER_BYTES + sourceHeader.getInt32(at + 4)
      if (handle !== FREED) {
        target.set(source.subarray(at, at + length), written)
        this.offsets[handle] = written
        written += length
      }
      at += length
    }
    this.buffer = target
    this.header = new DataView(target.buffer)
    this.end = written
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
