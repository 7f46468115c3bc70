/**
 * Reading a Pi Session file as lines, in bounded memory, with the verdict of
 * the reference's whole-file read.
 *
 * The reference reads a Session with `readFile(path, "utf8")` and splits the
 * text at "\n". On Node 20 and 22 that read fails for exactly two kinds of
 * file, which the reference store then reports as native `unreadable`:
 * - a file whose size (`fstat`, before anything is read) is over 2 GiB - 1
 *   (Node's `kIoMaxLength`): `RangeError` `ERR_FS_FILE_TOO_LARGE`;
 * - a file whose decoded text is longer than V8's maximum string length
 *   (`buffer.constants.MAX_STRING_LENGTH`, 536,870,888 UTF-16 code units on
 *   64-bit): `RangeError: Invalid string length`. Decoding is WHATWG UTF-8
 *   with replacement, so the length is not the byte count: 3-byte characters
 *   count 1, 4-byte ones 2, each invalid sequence 1 (U+FFFD).
 *
 * **The rule** (`SessionLimits`): a Session read fails with `SessionTooLarge`
 * exactly when that read would fail; otherwise its lines are exactly those of
 * the whole-text decode. Every Session read (the cache, the uncached reader,
 * the Promise API's `readRarebitSession`) goes through `SessionLineScanner`,
 * which applies it.
 *
 * How, without holding the file: UTF-8 cut at a newline byte never cuts a
 * character, and the streaming decode (`Utf8Pieces`) yields the whole-text
 * decode (`decodeUtf8`, the one UTF-8 rule of `protocol/internal/Utf8`)
 * piece by piece (a newline byte always decodes to "\n", right where it
 * is), so each chunk is decoded once, its code units counted as it goes,
 * and the read gives up as soon as the count passes the limit.
 *
 * **Memory** of a scan is bounded by constants and the longest line whose
 * text is needed, never by the file's size: the 64 KiB read buffer; the text
 * of the unfinished line while it spans at most 1 MiB of bytes (past that,
 * only its start offset and its first 64 KiB and last 8 KiB of bytes, and the
 * line is read again from the file once it is complete, and only if its text
 * is still needed); and one complete line at a time: its bytes, its decoded
 * text and what `JSON.parse` makes of it (about 3× its bytes, up to 5× for
 * text that decodes to two-byte strings). A line that the limit rejects is
 * never held. What the caller keeps of earlier lines (the cache's reduced
 * state, `readSession`'s parsed entries) comes on top.
 *
 * A file that changes while it is read is read as the reference would read
 * it: up to the size `fstat` gave when the read began; a long line is read
 * twice, so a rewrite in place between the two reads can mix versions, as
 * the reference's own chunked read can.
 *
 * @since 0.1.0
 */
import { Effect, type FileSystem } from "effect"
import { Buffer, constants as bufferConstants } from "node:buffer"
import { concatBytes } from "../protocol/internal/Bytes.js"
import { decodeUtf8, Utf8Pieces } from "../protocol/internal/Utf8.js"
import { SessionTooLarge } from "./SessionErrors.js"

/**
 * When a Session is too large to read: the limits of the reference's
 * `readFile(path, "utf8")`.
 *
 * @category models
 * @since 0.1.0
 */
export interface SessionLimits {
  /** Longest decoded text, in UTF-16 code units; longer is `SessionTooLarge` with reason "text". */
  readonly maxTextUnits: number
  /** Largest file size in bytes; larger (by `fstat`, before reading) is `SessionTooLarge` with reason "file". */
  readonly maxFileBytes: number
}

/**
 * V8's maximum string length in this process (536,870,888 on 64-bit Node
 * 20 and 22).
 *
 * @category constants
 * @since 0.1.0
 */
export const MAX_SESSION_TEXT_UNITS: number = bufferConstants.MAX_STRING_LENGTH

/**
 * Node's `kIoMaxLength` (2 GiB - 1): the largest file `readFile` reads.
 *
 * @category constants
 * @since 0.1.0
 */
export const MAX_SESSION_FILE_BYTES = 2 ** 31 - 1

/**
 * The reference's limits, which every Session read applies unless told
 * otherwise (tests use smaller ones).
 *
 * @category constants
 * @since 0.1.0
 */
export const DEFAULT_SESSION_LIMITS: SessionLimits = {
  maxTextUnits: MAX_SESSION_TEXT_UNITS,
  maxFileBytes: MAX_SESSION_FILE_BYTES
}

/**
 * Size of a scan's read buffer.
 *
 * @category constants
 * @since 0.1.0
 */
export const READ_CHUNK_BYTES = 64 * 1024

/**
 * How a scanner starts and what it keeps of an unfinished line.
 *
 * @category models
 * @since 0.1.0
 */
export interface SessionScanOptions {
  /** Decoded text longer than this many UTF-16 code units is too large. */
  readonly maxTextUnits: number
  /** Offset of a line start to begin at; 0 by default. */
  readonly from?: number | undefined
  /** Code units of the text before `from`; 0 by default. */
  readonly units?: number | undefined
  /** Where committed bytes are reported, if anywhere. */
  readonly onCommit?: CommitListener | undefined
  /** An unfinished line's text is kept while it spans at most this many bytes (1 MiB); tests make it small. */
  readonly pendingTextBytes?: number | undefined
  /** An unfinished line's first bytes kept, and its whole bytes up to this length (64 KiB). */
  readonly pendingBytesKept?: number | undefined
  /** Of a longer unfinished line, its last bytes kept too (8 KiB). */
  readonly pendingLastBytes?: number | undefined
}

const NEWLINE = 10

// Node's byte search (memchr) on any Uint8Array: `Uint8Array`'s own
// `indexOf`/`lastIndexOf` are 4–15 times slower, which is most of the time
// of finding a huge one-line Session too large.
const searchForward = Buffer.prototype.indexOf as (this: Uint8Array, value: number) => number
const searchBackward = Buffer.prototype.lastIndexOf as (this: Uint8Array, value: number) => number
const firstNewline = (bytes: Uint8Array): number => searchForward.call(bytes, NEWLINE)
const lastNewline = (bytes: Uint8Array): number => searchBackward.call(bytes, NEWLINE)

/**
 * The verdict of the file-size rule for a file of `size` bytes, checked
 * before anything is read, as Node does.
 *
 * @category reading
 * @since 0.1.0
 */
export const fileTooLarge = (path: string, size: number, limits: SessionLimits): SessionTooLarge | undefined =>
  size > limits.maxFileBytes
    ? new SessionTooLarge({ path, reason: "file", size, limit: limits.maxFileBytes })
    : undefined

/**
 * Where the lines of a scan go.
 *
 * @category models
 * @since 0.1.0
 */
export interface SessionLineSink {
  /**
   * Whether later lines can still change the outcome. Once false (a line was
   * malformed) the scan only counts code units, and never reads a long line
   * again to hand it over.
   */
  readonly wantsLines: boolean
  /** Takes the next complete line, without its newline. */
  readonly addLine: (line: string) => void
}

/**
 * A long line's text is needed: decode the bytes `[start, end)` of the file
 * and hand the text to `supply`, then push the rest of the chunk from
 * `consumed` on.
 *
 * @category models
 * @since 0.1.0
 */
export interface LineNeeded {
  readonly _tag: "LineNeeded"
  readonly consumed: number
  readonly start: number
  readonly end: number
}

/**
 * What a push did: took the whole chunk, needs a long line's text, or passed
 * the text limit.
 *
 * @category models
 * @since 0.1.0
 */
export type ScanStep = { readonly _tag: "Consumed" } | LineNeeded | { readonly _tag: "TooLarge" }

const CONSUMED = { _tag: "Consumed" } as const
const TOO_LARGE = { _tag: "TooLarge" } as const

/**
 * Where a finished scan stopped.
 *
 * @category models
 * @since 0.1.0
 */
export interface ScanEnd {
  /** Offset just past the last newline. */
  readonly committedEnd: number
  /** Code units of the text before `committedEnd`. */
  readonly committedUnits: number
  /** Offset just past the last byte read. */
  readonly size: number
  /** The decoded unterminated last line ("" when the text ends with a newline, or the sink wants no more lines). */
  readonly trailing: string
  /** Its bytes, when at most 64 KiB (`pendingBytesKept`). */
  readonly trailingBytes: Uint8Array | undefined
}

/**
 * Receives the committed bytes in file order, each piece with its offset.
 * Only the middle of a line that spanned several pushes may be left out:
 * its first `pendingBytesKept` (64 KiB) and last `pendingLastBytes` (8 KiB)
 * bytes are always among the pieces.
 *
 * @category models
 * @since 0.1.0
 */
export type CommitListener = (bytes: Uint8Array, at: number) => void

/**
 * The line splitter, code-unit counter and limit of a Session scan: push the
 * file's bytes in order, then `finish`. Pure: reading (and reading a long
 * line again) is the driver's, `scanFile` or `scanBytes`.
 *
 * **Details**
 *
 * A scan may start at any line start (`from`) with the code units before it
 * (`units`), which is how the cache resumes a grown Session.
 *
 * @category models
 * @since 0.1.0
 */
export class SessionLineScanner {
  private readonly decoder = new Utf8Pieces()
  /** Offset of the next byte to push. */
  position: number
  /** Code units decoded so far. */
  units: number
  committedEnd: number
  committedUnits: number
  /** Text of the unfinished line; `undefined` once it spans more than 1 MiB. */
  private pendingText: string | undefined = ""
  private pendingLength = 0
  /** The unfinished line's first bytes, at most 64 KiB, as copied pieces. */
  private readonly pendingPieces: Array<Uint8Array> = []
  private pendingKept = 0
  /** Its last bytes past the first 64 KiB, at most 8 KiB. */
  private pendingLast: Uint8Array | undefined = undefined
  /** A long line's text, read again by the driver. */
  private supplied: string | undefined = undefined
  private flushed = false
  readonly maxTextUnits: number
  private readonly onCommit: CommitListener | undefined
  private readonly pendingTextBytes: number
  private readonly pendingBytesKept: number
  private readonly pendingLastBytes: number

  constructor(readonly sink: SessionLineSink, options: SessionScanOptions) {
    this.maxTextUnits = options.maxTextUnits
    this.onCommit = options.onCommit
    this.pendingTextBytes = options.pendingTextBytes ?? 1024 * 1024
    this.pendingBytesKept = options.pendingBytesKept ?? 64 * 1024
    this.pendingLastBytes = options.pendingLastBytes ?? 8 * 1024
    this.position = this.committedEnd = options.from ?? 0
    this.units = this.committedUnits = options.units ?? 0
  }

  /**
   * Takes the next bytes of the file. The scanner copies what it keeps, so
   * the caller may reuse `bytes` afterwards.
   */
  push(bytes: Uint8Array): ScanStep {
    if (this.pendingText === undefined && this.supplied === undefined && this.sink.wantsLines) {
      const newline = firstNewline(bytes)
      if (newline >= 0) {
        if (newline > 0 && !this.absorb(bytes.subarray(0, newline))) return TOO_LARGE
        return { _tag: "LineNeeded", consumed: newline, start: this.committedEnd, end: this.position }
      }
    }
    if (!this.absorb(bytes)) return TOO_LARGE
    return CONSUMED
  }

  /** The text of the bytes `LineNeeded` named. */
  supply(text: string): void {
    this.supplied = text
  }

  /**
   * Ends the scan at the bytes pushed so far: the unterminated rest, or the
   * need to read it again, or the limit passed by the decoder's last units.
   */
  finish(): { readonly _tag: "Done"; readonly end: ScanEnd } | LineNeeded | { readonly _tag: "TooLarge" } {
    if (!this.flushed) {
      this.flushed = true
      // An incomplete character at the very end decodes to U+FFFD now.
      const rest = this.decoder.end()
      this.units += rest.length
      if (this.units > this.maxTextUnits) return TOO_LARGE
      if (this.pendingText !== undefined) this.pendingText += rest
    }
    let trailing = ""
    if (this.pendingLength > 0 && this.sink.wantsLines) {
      if (this.pendingText !== undefined) trailing = this.pendingText
      else if (this.supplied !== undefined) trailing = this.supplied
      else return { _tag: "LineNeeded", consumed: 0, start: this.committedEnd, end: this.position }
    }
    return {
      _tag: "Done",
      end: {
        committedEnd: this.committedEnd,
        committedUnits: this.committedUnits,
        size: this.position,
        trailing,
        trailingBytes: this.pendingLength <= this.pendingBytesKept
          ? concatBytes(this.pendingPieces, this.pendingKept)
          : undefined
      }
    }
  }

  /**
   * Reports everything pushed so far as committed, as if a line ended there:
   * after `TooLarge`, so the cache can fingerprint the bytes its verdict
   * rests on.
   */
  commitRest(): void {
    this.reportPending()
    this.committedEnd = this.position
    this.committedUnits = this.units
    this.resetPending()
  }

  /** Decodes, counts, splits and commits one piece; false when the limit is passed. */
  private absorb(bytes: Uint8Array): boolean {
    const unitsBefore = this.units
    const text = this.decoder.decode(bytes)
    this.units += text.length
    if (this.units > this.maxTextUnits) {
      this.pendingText = undefined
      this.extendPending(bytes, "")
      return false
    }
    const lastByte = lastNewline(bytes)
    if (lastByte < 0) {
      this.extendPending(bytes, text)
      return true
    }
    const firstLine = text.indexOf("\n")
    const lastLine = text.lastIndexOf("\n")
    const sink = this.sink
    if (sink.wantsLines) {
      const first = this.pendingText !== undefined ? this.pendingText + text.slice(0, firstLine) : this.supplied
      if (first === undefined) throw new Error("SessionLineScanner: a long line ended before its text was supplied")
      sink.addLine(first)
      let start = firstLine + 1
      while (start <= lastLine) {
        const newline = text.indexOf("\n", start)
        sink.addLine(text.slice(start, newline))
        start = newline + 1
      }
    }
    const complete = bytes.subarray(0, lastByte + 1)
    if (this.onCommit !== undefined) {
      this.reportPending()
      this.onCommit(complete, this.committedEnd + this.pendingLength)
    }
    this.position = this.committedEnd = this.position + complete.length
    this.committedUnits = unitsBefore + lastLine + 1
    this.resetPending()
    this.extendPending(bytes.subarray(lastByte + 1), text.slice(lastLine + 1))
    return true
  }

  private extendPending(bytes: Uint8Array, text: string): void {
    this.position += bytes.length
    if (bytes.length === 0) return
    this.pendingLength += bytes.length
    if (this.pendingText !== undefined) {
      this.pendingText = this.pendingLength <= this.pendingTextBytes ? this.pendingText + text : undefined
    }
    const room = this.pendingBytesKept - this.pendingKept
    if (room > 0) {
      const kept = bytes.length <= room ? bytes : bytes.subarray(0, room)
      this.pendingPieces.push(kept.slice())
      this.pendingKept += kept.length
    }
    const beyond = bytes.length - Math.max(0, room)
    if (beyond <= 0) return
    const tail = bytes.subarray(bytes.length - Math.min(beyond, this.pendingLastBytes))
    const previous = this.pendingLast
    if (previous === undefined || tail.length === this.pendingLastBytes) {
      this.pendingLast = tail.slice()
    } else {
      const keep = Math.min(previous.length, this.pendingLastBytes - tail.length)
      this.pendingLast = concatBytes([previous.subarray(previous.length - keep), tail], keep + tail.length)
    }
  }

  private reportPending(): void {
    if (this.onCommit === undefined || this.pendingLength === 0) return
    let at = this.committedEnd
    for (const piece of this.pendingPieces) {
      this.onCommit(piece, at)
      at += piece.length
    }
    const last = this.pendingLast
    if (last !== undefined) this.onCommit(last, this.committedEnd + this.pendingLength - last.length)
  }

  private resetPending(): void {
    this.pendingText = ""
    this.pendingLength = 0
    this.pendingPieces.length = 0
    this.pendingKept = 0
    this.pendingLast = undefined
    this.supplied = undefined
  }
}

/**
 * Reads exactly `length` bytes at `position` into `into`, or fewer if the
 * file is shorter now; returns how many.
 */
const readInto = Effect.fnUntraced(function*(file: FileSystem.File, position: number, into: Uint8Array) {
  let filled = 0
  while (filled < into.length) {
    const count = yield* file.read(into.subarray(filled), { position: BigInt(position + filled) })
    if (count === 0) break
    filled += count
  }
  return filled
})

/** The decoded text of the file's bytes `[start, end)`: one long line, read again. */
const readLine = (file: FileSystem.File, start: number, end: number) => {
  const bytes = new Uint8Array(end - start)
  return Effect.map(readInto(file, start, bytes), (filled) => decodeUtf8(bytes.subarray(0, filled)))
}

/**
 * Scans an open Session file from the scanner's position to `end` (or its
 * end of file, if sooner), failing with `SessionTooLarge` (reason "text") as
 * soon as the text limit is passed.
 *
 * **Details**
 *
 * `buffer` is the read buffer, reused across reads (the cache lends its
 * own). With `stopWhenSettled`, the scan ends early once the sink wants no
 * more lines; only sound when the bytes left cannot pass the limit (a byte
 * decodes to at most one code unit). The scanner stays usable after a
 * `SessionTooLarge` (see `commitRest`).
 *
 * @category reading
 * @since 0.1.0
 */
export const scanFile = Effect.fnUntraced(function*(
  file: FileSystem.File,
  scanner: SessionLineScanner,
  options: {
    readonly path: string
    readonly size: number
    readonly end: number
    readonly buffer: Uint8Array
    readonly stopWhenSettled?: boolean | undefined
  }
) {
  const { buffer, end, path, size } = options
  const tooLarge = () => new SessionTooLarge({ path, reason: "text", size, limit: scanner.maxTextUnits })
  while (scanner.position < end) {
    if (options.stopWhenSettled === true && !scanner.sink.wantsLines) {
      const stopped: ScanEnd = {
        committedEnd: scanner.committedEnd,
        committedUnits: scanner.committedUnits,
        size: scanner.position,
        trailing: "",
        trailingBytes: undefined
      }
      return stopped
    }
    const wanted = Math.min(buffer.length, end - scanner.position)
    const count = yield* file.read(buffer.subarray(0, wanted), { position: BigInt(scanner.position) })
    if (count === 0) break
    let chunk = buffer.subarray(0, count)
    for (;;) {
      const step = scanner.push(chunk)
      if (step._tag === "Consumed") break
      if (step._tag === "TooLarge") return yield* tooLarge()
      scanner.supply(yield* readLine(file, step.start, step.end))
      chunk = chunk.subarray(step.consumed)
    }
  }
  for (;;) {
    const step = scanner.finish()
    if (step._tag === "Done") return step.end
    if (step._tag === "TooLarge") return yield* tooLarge()
    scanner.supply(yield* readLine(file, step.start, step.end))
  }
})

/**
 * `scanFile` over bytes already in memory that start at the scanner's
 * position: all of them, pushed `chunkBytes` at a time, then `finish`.
 * `undefined` when the text limit is passed.
 *
 * @category reading
 * @since 0.1.0
 */
export const scanBytes = (
  scanner: SessionLineScanner,
  bytes: Uint8Array,
  chunkBytes: number = bytes.length
): ScanEnd | undefined => {
  const base = scanner.position
  for (let offset = 0; offset < bytes.length; offset += chunkBytes) {
    let chunk = bytes.subarray(offset, offset + chunkBytes)
    for (;;) {
      const step = scanner.push(chunk)
      if (step._tag === "Consumed") break
      if (step._tag === "TooLarge") return undefined
      scanner.supply(decodeUtf8(bytes.subarray(step.start - base, step.end - base)))
      chunk = chunk.subarray(step.consumed)
    }
  }
  for (;;) {
    const step = scanner.finish()
    if (step._tag === "Done") return step.end
    if (step._tag === "TooLarge") return undefined
    scanner.supply(decodeUtf8(bytes.subarray(step.start - base, step.end - base)))
  }
}
