/**
 * One Session as the Session cache keeps it (`CachedSession`), and how a
 * read of the open file brings it up to date: parsing only what was
 * appended when the file provably still starts with the parsed prefix, and
 * the whole file otherwise.
 *
 * Guarantees: the outcome is exactly what a full parse of the bytes read
 * would answer (`SessionAccumulator`, fed through `SessionStream`). The
 * parsed prefix is reused only when the file has the same identity, did not
 * shrink, is not the same size with another mtime, and still holds the
 * head and tail prints (`SessionPrints`) of that prefix, read again now.
 * A too-large verdict on text is kept with the prints of the bytes it rests
 * on: appending cannot make the text shorter. Nothing here keeps the file
 * open or mutates a state another read holds: the cache takes a state out
 * before its parse is extended, and puts back the new one. The same
 * extension runs on an open file (`refreshSession`) or on bytes read in one
 * call (`extendFromWindow`), which the cache uses where the file system's
 * calls return at once.
 *
 * @since 0.1.0
 */
import { Effect, type FileSystem, Result } from "effect"
import type { PlatformError } from "effect/PlatformError"
import { sameBytes } from "../protocol/internal/Bytes.js"
import { fileIdentity, modifiedMs } from "../protocol/internal/FileInfo.js"
import { SessionAccumulator, type SessionOutcome } from "./SessionAccumulator.js"
import { SessionTooLarge } from "./SessionErrors.js"
import type { AvailableEvidence } from "./SessionEvidence.js"
import { emptyPrints, extendPrints, HEAD_PRINT_BYTES, type Prints } from "./SessionPrints.js"
import {
  fileTooLarge,
  READ_CHUNK_BYTES,
  scanBytes,
  type ScanEnd,
  scanFile,
  type SessionLimits,
  SessionLineScanner
} from "./SessionStream.js"

/**
 * Where a Session's parse stands, to extend it as the Session grows.
 *
 * @category models
 * @since 0.1.0
 */
export interface ParsedPrefix {
  /** Never fed again once the outcome is `SessionTooLarge`. */
  readonly accumulator: SessionAccumulator
  /** Offset just past the last newline parsed (for a too-large verdict: the last byte the scan read). */
  readonly committedEnd: number
  /** UTF-16 code units of the text before `committedEnd`, for the text limit. */
  readonly committedUnits: number
  readonly prints: Prints
  /** Bytes after `committedEnd` at read time, when few enough to keep. */
  readonly trailing: Uint8Array | undefined
}

/**
 * One Session as the cache keeps it, valid for exactly the file state it
 * records (identity, size, mtime), read at `readAt`.
 *
 * **Details**
 *
 * Its `answer` is either the outcome of its parse with the parsed prefix to
 * extend, or, for an idle Session (at rest when read, observed by a store's
 * current read), only the evidence its artifact state is projected from:
 * such a Session is answered by a `stat` until it changes, and then parsed
 * again in full.
 *
 * @category models
 * @since 0.1.0
 */
export interface CachedSession {
  readonly identity: string
  readonly size: number
  readonly mtimeMs: number
  /** Clock time just before the bytes behind this state were last read or checked. */
  readonly readAt: number
  readonly answer:
    | { readonly outcome: SessionOutcome; readonly prefix: ParsedPrefix }
    | { readonly evidence: AvailableEvidence }
  /** Estimated bytes this state keeps alive. */
  readonly bytes: number
}

/**
 * How far an mtime must lie before the read that cached a Session for the
 * cache to trust a later stat alone; covers coarse timestamps (1–2 s on some
 * file systems) and a clock that is a little off.
 */
const RACY_MTIME_MS = 2_000

/** The object, the outcome's projection wrapper, the answer. */
const STATE_OVERHEAD_BYTES = 512

/** The evidence's objects per selected message, and its lists and strings besides. */
const EVIDENCE_BYTES_PER_MESSAGE = 400
const EVIDENCE_OVERHEAD_BYTES = 512

/**
 * The modification time the cache compares; -1 (never racily clean) when
 * none is reported.
 *
 * @category models
 * @since 0.1.0
 */
export const mtimeOf = (info: FileSystem.File.Info): number => modifiedMs(info) ?? -1

/**
 * Whether a file last modified at `mtimeMs` was at rest when read at
 * `readAt`: no later write can reproduce that mtime.
 *
 * @category models
 * @since 0.1.0
 */
export const atRest = (mtimeMs: number, readAt: number): boolean => mtimeMs >= 0 && mtimeMs + RACY_MTIME_MS < readAt

/**
 * Whether the file provably holds the bytes behind `state` without reading
 * them (git's "racily clean" rule): same inode and size, and the same mtime,
 * which was already old when those bytes were read. A later write sets the
 * mtime to its own time, so it cannot reproduce an mtime from before the
 * read; only a deliberate `utimes` back to the old value can.
 *
 * @category models
 * @since 0.1.0
 */
export const unmovedSince = (state: CachedSession, info: FileSystem.File.Info): boolean =>
  atRest(state.mtimeMs, state.readAt) && fileIdentity(info) === state.identity &&
  Number(info.size) === state.size && mtimeOf(info) === state.mtimeMs

/**
 * The idle form of `state`: only its evidence, answered by a `stat` until
 * the Session changes.
 *
 * @category constructors
 * @since 0.1.0
 */
export const idleState = (state: CachedSession, evidence: AvailableEvidence): CachedSession => ({
  identity: state.identity,
  size: state.size,
  mtimeMs: state.mtimeMs,
  readAt: state.readAt,
  answer: { evidence },
  bytes: STATE_OVERHEAD_BYTES + EVIDENCE_OVERHEAD_BYTES +
    EVIDENCE_BYTES_PER_MESSAGE * evidence.selection.occurrences.length
})

/** How a refresh answered: from the first byte, past the cached prefix, or from bytes that had not changed. */
export type RefreshKind = "full" | "incremental" | "unchanged"

/**
 * What a refresh found: the outcome, the state to keep for it (none when
 * the file's identity is unknown or nothing can be reused), and how.
 *
 * @category models
 * @since 0.1.0
 */
export interface Refreshed {
  readonly outcome: SessionOutcome
  readonly state: CachedSession | undefined
  readonly kind: RefreshKind
}

/** What a scan of a Session found: where it ended and the prints of its committed prefix, or the verdict. */
interface Scanned {
  readonly end: ScanEnd
  readonly prints: Prints
  readonly tooLarge: SessionTooLarge | undefined
}

/** What a read of a Session file saw: its `fstat`, and when. */
export interface FileFacts {
  readonly sessionFile: string
  readonly identity: string | undefined
  readonly size: number
  readonly mtimeMs: number
  readonly readAt: number
}

/** One read of an open Session file: the file, what its `fstat` said, when. */
interface FileRead extends FileFacts {
  readonly file: FileSystem.File
}

/** Read buffers are reused: fresh 64 KiB allocations per poll are what makes reads slow. */
const buffers: Array<Uint8Array> = []
const takeBuffer = () => buffers.pop() ?? new Uint8Array(READ_CHUNK_BYTES)
const giveBuffer = (buffer: Uint8Array) => {
  if (buffers.length < 4) buffers.push(buffer)
}
const withBuffer = <A, E>(use: (buffer: Uint8Array) => Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.acquireUseRelease(Effect.sync(takeBuffer), use, (buffer) => Effect.sync(() => giveBuffer(buffer)))

/**
 * Reads exactly `length` bytes at `position` into `into` (from its start),
 * or `undefined` if the file is shorter now.
 */
const readExact = Effect.fnUntraced(function*(
  file: FileSystem.File,
  position: number,
  length: number,
  into: Uint8Array
) {
  let filled = 0
  while (filled < length) {
    const count = yield* file.read(into.subarray(filled, length), { position: BigInt(position + filled) })
    if (count === 0) return undefined
    filled += count
  }
  return into.subarray(0, length)
})

/** A scanner resuming at `from` whose committed bytes extend `prints`. */
const scannerFor = (
  limits: SessionLimits,
  accumulator: SessionAccumulator,
  from: number,
  units: number,
  prints: Prints
) => {
  const track = { prints }
  const scanner = new SessionLineScanner(accumulator, {
    maxTextUnits: limits.maxTextUnits,
    from,
    units,
    onCommit: (bytes, at) => {
      track.prints = extendPrints(track.prints, at, bytes)
    }
  })
  return { scanner, track }
}

/**
 * After the text limit was passed: the verdict, resting on every byte the
 * scan read (committing them extends the tracked prints, so they are read
 * after).
 */
const tooLargeScan = (
  scanner: SessionLineScanner,
  track: { readonly prints: Prints },
  verdict: SessionTooLarge
): Scanned => {
  scanner.commitRest()
  const end = {
    committedEnd: scanner.committedEnd,
    committedUnits: scanner.committedUnits,
    size: scanner.position,
    trailing: "",
    trailingBytes: undefined
  }
  return { end, prints: track.prints, tooLarge: verdict }
}

/** Streams `[from, end)` of the file into the accumulator, committing complete lines. */
const scan = (
  limits: SessionLimits,
  read: FileRead,
  accumulator: SessionAccumulator,
  from: { readonly end: number; readonly units: number; readonly prints: Prints },
  end: number
): Effect.Effect<Scanned, PlatformError> => {
  const { scanner, track } = scannerFor(limits, accumulator, from.end, from.units, from.prints)
  return withBuffer((buffer) =>
    scanFile(read.file, scanner, { path: read.sessionFile, size: read.size, end, buffer }).pipe(
      Effect.map((scanned): Scanned => ({ end: scanned, prints: track.prints, tooLarge: undefined })),
      Effect.catchTag("SessionTooLarge", (verdict) => Effect.sync(() => tooLargeScan(scanner, track, verdict)))
    )
  )
}

/** The outcome of a scan, and the state that keeps it. */
const remember = (read: FileFacts, accumulator: SessionAccumulator, scanned: Scanned, kind: RefreshKind): Refreshed => {
  const { end, prints, tooLarge } = scanned
  const outcome: SessionOutcome = tooLarge !== undefined ? Result.fail(tooLarge) : accumulator.finish(end.trailing)
  if (read.identity === undefined) return { outcome, state: undefined, kind }
  // A verdict never feeds its accumulator again: keep an empty one instead of the parsed state.
  const kept = tooLarge !== undefined ? new SessionAccumulator(accumulator.source) : accumulator
  const trailing = end.trailingBytes
  const prefix: ParsedPrefix = {
    accumulator: kept,
    committedEnd: end.committedEnd,
    committedUnits: end.committedUnits,
    prints,
    trailing
  }
  const state: CachedSession = {
    identity: read.identity,
    // A verdict stands for the whole file, however far the scan got.
    size: tooLarge !== undefined ? read.size : end.size,
    mtimeMs: read.mtimeMs,
    readAt: read.readAt,
    answer: { outcome, prefix },
    bytes: STATE_OVERHEAD_BYTES + kept.retainedBytes + prints.head.length + prints.tail.length +
      (trailing?.length ?? 0)
  }
  return { outcome, state, kind }
}

/** The verdict on text, carried to the grown file without reading what was appended. */
const stillTooLarge = (
  prior: CachedSession,
  verdict: SessionTooLarge,
  outcome: SessionOutcome,
  read: FileFacts
): Refreshed => {
  const unchanged = read.size === prior.size && read.mtimeMs === prior.mtimeMs
  const next: SessionOutcome = read.size === prior.size
    ? outcome
    : Result.fail(
      new SessionTooLarge({ path: verdict.path, reason: verdict.reason, size: read.size, limit: verdict.limit })
    )
  const state: CachedSession = {
    ...prior,
    size: read.size,
    mtimeMs: read.mtimeMs,
    readAt: read.readAt,
    answer: { outcome: next, prefix: (prior.answer as { readonly prefix: ParsedPrefix }).prefix }
  }
  return { outcome: next, state, kind: unchanged ? "unchanged" : "incremental" }
}

/** Where the bytes read again to extend `prefix` start: its tail print. */
const tailStartOf = (prefix: ParsedPrefix): number => prefix.committedEnd - prefix.prints.tail.length

/** Whether `window`, read from the prefix's tail print on, still starts with that print. */
const tailPrintHolds = (prefix: ParsedPrefix, window: Uint8Array): boolean =>
  sameBytes(window.subarray(0, prefix.prints.tail.length), prefix.prints.tail)

/** Whether `head`, the file's first bytes, is the head print (not read, nor needed, when the tail print starts the file). */
const headPrintHolds = (prefix: ParsedPrefix, head: Uint8Array | undefined): boolean =>
  tailStartOf(prefix) === 0 || (head !== undefined && sameBytes(head, prefix.prints.head))

/** A too-large verdict, carried to the grown file; `undefined` when the outcome is no such verdict. */
const carriedVerdict = (prior: CachedSession, outcome: SessionOutcome, read: FileFacts): Refreshed | undefined =>
  Result.isFailure(outcome) && outcome.failure._tag === "SessionTooLarge"
    ? stillTooLarge(prior, outcome.failure, outcome, read)
    : undefined

/** Extends `prior`, whose prints hold, with `rest`: every byte after its committed prefix, to the end of the file. */
const extendWith = (
  limits: SessionLimits,
  read: FileFacts,
  prior: CachedSession,
  outcome: SessionOutcome,
  prefix: ParsedPrefix,
  rest: Uint8Array
): Refreshed => {
  const verdict = carriedVerdict(prior, outcome, read)
  if (verdict !== undefined) return verdict
  if (
    read.size === prior.size && read.mtimeMs === prior.mtimeMs && prefix.trailing !== undefined &&
    sameBytes(prefix.trailing, rest)
  ) {
    return { outcome, state: { ...prior, readAt: read.readAt }, kind: "unchanged" }
  }
  const { accumulator, committedEnd, committedUnits, prints } = prefix
  const { scanner, track } = scannerFor(limits, accumulator, committedEnd, committedUnits, prints)
  const end = scanBytes(scanner, rest)
  const scanned = end !== undefined
    ? { end, prints: track.prints, tooLarge: undefined }
    : tooLargeScan(
      scanner,
      track,
      new SessionTooLarge({ path: read.sessionFile, reason: "text", size: read.size, limit: limits.maxTextUnits })
    )
  return remember(read, accumulator, scanned, "incremental")
}

/** Reuses the parsed prefix if the file provably still starts with it; `undefined` if it does not. */
const extend = Effect.fnUntraced(function*(
  limits: SessionLimits,
  read: FileRead,
  prior: CachedSession,
  outcome: SessionOutcome,
  prefix: ParsedPrefix,
  verifyBuffer: Uint8Array
) {
  const { prints } = prefix
  const tailStart = tailStartOf(prefix)
  const verifyEnd = read.size - tailStart <= READ_CHUNK_BYTES ? read.size : prefix.committedEnd
  // Scratch space only: everything kept from these bytes is copied out by the scan.
  const verified = yield* readExact(read.file, tailStart, verifyEnd - tailStart, verifyBuffer)
  if (verified === undefined || !tailPrintHolds(prefix, verified)) return undefined
  const head = tailStart > 0
    ? yield* readExact(read.file, 0, prints.head.length, new Uint8Array(HEAD_PRINT_BYTES))
    : undefined
  if (!headPrintHolds(prefix, head)) return undefined
  if (verifyEnd === read.size) {
    return extendWith(limits, read, prior, outcome, prefix, verified.subarray(prints.tail.length))
  }
  const verdict = carriedVerdict(prior, outcome, read)
  if (verdict !== undefined) return verdict
  const { accumulator, committedEnd, committedUnits } = prefix
  const from = { end: committedEnd, units: committedUnits, prints }
  return remember(read, accumulator, yield* scan(limits, read, accumulator, from, read.size), "incremental")
})

/** Whether `prior` may be extended to the file `read` sees. */
const extendable = (prior: CachedSession, read: FileFacts): boolean =>
  read.identity !== undefined && prior.identity === read.identity && read.size >= prior.size &&
  !(read.size === prior.size && read.mtimeMs !== prior.mtimeMs)

/**
 * What to read of the file to extend `prior` without an open handle: the
 * bytes from `from` to the end (at most `limit` of them), and its first
 * `head` bytes. `undefined` when `prior` keeps no parsed prefix.
 *
 * @category models
 * @since 0.1.0
 */
export const windowOf = (
  prior: CachedSession
): { readonly from: number; readonly limit: number; readonly head: number } | undefined => {
  if (!("prefix" in prior.answer)) return undefined
  const { prefix } = prior.answer
  const from = tailStartOf(prefix)
  return { from, limit: READ_CHUNK_BYTES, head: from === 0 ? 0 : prefix.prints.head.length }
}

/**
 * `refreshSession`'s answer when it extends `prior`, from bytes already
 * read: `window`, the file's bytes from `windowOf(prior).from` to its end
 * (as `facts` saw it), and `head`, its first bytes. `undefined` when the
 * prefix cannot be extended (another file, a rewrite, bytes that no longer
 * match), and then the Session is read in full.
 *
 * @category constructors
 * @since 0.1.0
 */
export const extendFromWindow = (
  limits: SessionLimits,
  facts: FileFacts,
  prior: CachedSession,
  window: Uint8Array,
  head: Uint8Array | undefined
): Refreshed | undefined => {
  if (!("prefix" in prior.answer) || fileTooLarge(facts.sessionFile, facts.size, limits) !== undefined) {
    return undefined
  }
  const { outcome, prefix } = prior.answer
  if (!extendable(prior, facts) || window.length !== facts.size - tailStartOf(prefix)) return undefined
  if (!tailPrintHolds(prefix, window) || !headPrintHolds(prefix, head)) return undefined
  return extendWith(limits, facts, prior, outcome, prefix, window.subarray(prefix.prints.tail.length))
}

/**
 * Reads the open Session `file` (its `fstat` is `info`) at `readAt`,
 * extending `prior` when the file still starts with what it parsed, else
 * from the first byte.
 *
 * @category constructors
 * @since 0.1.0
 */
export const refreshSession = Effect.fnUntraced(function*(
  limits: SessionLimits,
  file: FileSystem.File,
  info: FileSystem.File.Info,
  sessionFile: string,
  prior: CachedSession | undefined,
  readAt: number
) {
  const read: FileRead = {
    file,
    sessionFile,
    identity: fileIdentity(info),
    size: Number(info.size),
    mtimeMs: mtimeOf(info),
    readAt
  }
  // Decided by the size alone, before any read, as Node's `readFile` does; not kept, a stat decides it again.
  const tooLarge = fileTooLarge(sessionFile, read.size, limits)
  if (tooLarge !== undefined) return { outcome: Result.fail(tooLarge), state: undefined, kind: "full" } as Refreshed
  if (prior !== undefined && "prefix" in prior.answer && extendable(prior, read)) {
    const { outcome, prefix } = prior.answer
    const extended = yield* withBuffer((buffer) => extend(limits, read, prior, outcome, prefix, buffer))
    if (extended !== undefined) return extended
  }
  const accumulator = new SessionAccumulator(sessionFile)
  // Like `readFile`: the size `fstat` reported, or to the end when it reported none.
  const end = read.size === 0 ? Number.MAX_SAFE_INTEGER : read.size
  const scanned = yield* scan(limits, read, accumulator, { end: 0, units: 0, prints: emptyPrints }, end)
  return remember(read, accumulator, scanned, "full")
})
