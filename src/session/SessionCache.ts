/**
 * Incremental, cached reads of Pi Sessions for callers that poll.
 *
 * A Pi Session is append-only JSONL, so a Session read again after it grew
 * only needs its new lines parsed. The cache keeps, per resolved Session
 * path, a compact summary of what was parsed so far (a `SessionAccumulator`:
 * header, the selected texts and tree links, never the long tool outputs)
 * plus fingerprints of the bytes it was built from, and on the next read
 * feeds it only the bytes after the last complete line.
 *
 * Guarantees:
 * - A read answers exactly what `readSession` (and the reference's
 *   `readRarebitSession`) would answer for the bytes on disk at read time:
 *   the same projection, or the same `SessionInvalid` with the same line
 *   number. An unterminated last line is parsed but never committed, so a
 *   torn write that is completed later is read again whole.
 * - The cached prefix is reused only when the file has the same identity
 *   (device and inode), did not shrink, and still holds the same bytes at its
 *   head (first 4 KiB) and just before the old end of its last complete line
 *   (8 KiB). A same-size read with a different modification time is parsed
 *   in full. Anything else (a replaced, truncated or rewritten file) is
 *   parsed again from the start.
 * - A stat alone answers when the file has the same identity and size and an
 *   mtime that was already more than 2 s old when the cached bytes were read
 *   (git's "racily clean" rule): any later write would have moved the mtime
 *   past it. Within those 2 s the fingerprints are read again.
 * - Memory is bounded by a `CacheBudget` (`io/HeldFiles`), the cache's own
 *   (`maxBytes`, 32 MiB by default) or one shared with other caches (the
 *   store's, with its sidecar cache): each Session is charged the estimated
 *   bytes of its state, and the least recently read are dropped once the
 *   total passes the budget (a count, `capacity`, may bound them too). Once
 *   the budget thrashes (Sessions read round-robin, more than it holds), a
 *   Session read no more often than the least recently read one is not
 *   kept, so the ones kept are answered from memory on every round (see
 *   `CacheBudget`). A
 *   state larger than the whole budget is not kept. Reads stream the file
 *   through `SessionStream`, so a read holds a constant amount plus one
 *   line, never the whole file.
 * - What a Session keeps is its reduced parse (`SessionAccumulator`) and
 *   its projection; its fingerprints are kept as bytes while the Session is
 *   being written (polls compare them natively), and as their SHA-256 once
 *   it was at rest when read (its mtime more than 2 s old): such a Session
 *   is answered by a `stat` until it changes, and reads its fingerprints
 *   again, hashing them, only then. Either way the bytes compared are read
 *   again from the file.
 * - An idle Session (at rest when read, projecting successfully) that is
 *   observed through `observeEvidence`, as the store's current reads do,
 *   keeps only its `SessionEvidence` (its id and its selection's manifest,
 *   no texts), packed as JSON bytes (`PackedEvidence`), and what a `stat`
 *   is compared with, as one record of the cache's `RecordArena`: outside
 *   the heap, where the entry keeps only the record's handle. Charged ~0.2
 *   KiB plus ~150 bytes per selected message (besides its `HeldFiles`
 *   entry), against its parse's tens of KiB. It is still answered by a
 *   `stat` alone while its identity, size and mtime stay; anything else
 *   about it (a change, or a `read` that wants its projection) parses it
 *   again in full, once, after which it is extended incrementally again
 *   while it is being written.
 * - A Session the reference cannot read whole (`SessionLimits`: a file over
 *   2 GiB - 1, or text longer than V8's longest string) is `SessionTooLarge`,
 *   found without holding it. Appending cannot make it readable again, so a
 *   text verdict is kept with fingerprints of the bytes it rests on: a
 *   grown Session whose prints still match is answered without reading what
 *   was appended; a replaced or truncated one is read afresh.
 * - Each cached Session stays open for reading between reads, up to the
 *   budget's `maxOpenFiles` (64 of the cache's own; beyond that the least
 *   recently read Session's file is closed, its state kept, and opened again
 *   when it must be read), so a poll of a grown Session is one `stat` and
 *   its reads, with no open or close. The handle is used
 *   only while a `stat` of the path shows the same device and inode; a
 *   replaced Session is opened anew and the old handle closed, one swapped
 *   in between the `stat` and the open is read once and not kept, and a
 *   removed one is let go at its next read. Evicted Sessions' handles close
 *   (once a read in flight is done with them), and all of them when the
 *   cache's scope ends (`make` needs a `Scope`; the store's layer provides
 *   it); reads after that go to the uncached reader.
 *
 * **Gotchas**
 *
 * The cache trusts that Sessions are append-only, as Pi writes them. A
 * rewrite in place (same inode) that keeps the size and modification time,
 * or that grows the file, and changes bytes only between the two
 * fingerprints is not seen; nor is a same-size rewrite whose mtime is set
 * back to an old value with `utimes`. A removed Session's disk space is
 * freed only once the cache lets go of it (its next read, its eviction, or
 * the end of the cache's scope). The store's `cacheSessions: false` reads every
 * Session in full for deployments where other programs rewrite them.
 * References that are not an existing regular file (Session ids, missing
 * paths) are passed to the uncached reader unchanged.
 *
 * **Why one module** (past the 600 lines the lint allows, a sixth of them
 * this docblock): every guarantee above is one decision made on one read
 * path, whether the cached state may answer and from which byte on. The
 * identity check, the racily-clean rule, the fingerprints and the
 * too-large verdict all judge the same held file under the same lock;
 * split apart, each would need that path's internals.
 *
 * @since 0.1.0
 */
// oxlint-disable max-lines -- the docblock says why this module stays whole
import { Clock, Effect, FileSystem, Option, Path, Result, Semaphore } from "effect"
import type { PlatformError } from "effect/PlatformError"
import { type CacheBudget, type HeldEntry, makeBudget } from "../io/HeldFiles.js"
import { RecordArena, RecordReader, RecordWriter } from "../io/RecordArena.js"
import type { FileNotRegular } from "../io/RegularFile.js"
import { sha256Hex } from "../protocol/CanonicalJson.js"
import { concatBytes, sameBytes } from "../protocol/internal/Bytes.js"
import { fileIdentity, modifiedMs } from "../protocol/internal/FileInfo.js"
import { SessionAccumulator, type SessionOutcome } from "./SessionAccumulator.js"
import { isSessionMissing, type SessionError, SessionTooLarge } from "./SessionErrors.js"
import {
  evidenceOf,
  type PackedEvidence,
  packEvidence,
  type SessionEvidence,
  unpackEvidence
} from "./SessionEvidence.js"
import { holdSessionFiles } from "./SessionFile.js"
import type { SessionProjection } from "./SessionProjection.js"
import { observationOf, readSession, type SessionObservation, type SessionReaderOptions } from "./SessionReader.js"
import {
  DEFAULT_SESSION_LIMITS,
  fileTooLarge,
  READ_CHUNK_BYTES,
  scanBytes,
  type ScanEnd,
  scanFile,
  type SessionLimits,
  SessionLineScanner
} from "./SessionStream.js"

// The scan reports at least a run's first 64 KiB and last 8 KiB (see
// `CommitListener`), which covers both prints exactly.
const HEAD_PRINT_BYTES = 4 * 1024
const TAIL_PRINT_BYTES = 8 * 1024

/** The bytes the cached prefix was built from, kept to recognise the same prefix later. */
interface Prints {
  /** The first `min(4 KiB, committedEnd)` bytes. */
  readonly head: Uint8Array
  /** The last `min(8 KiB, committedEnd)` bytes before `committedEnd`. */
  readonly tail: Uint8Array
}

/**
 * Bytes kept to be compared later: as they are, or, for a Session at rest,
 * their length and SHA-256 (a Session polled while it is written compares
 * its prints on every poll; one at rest is answered by a `stat`, and reads
 * its prints again only once it changes).
 */
type Print = Uint8Array | { readonly length: number; readonly sha256: string }

/** What the cache keeps of a Session's `Prints`. */
interface KeptPrints {
  readonly head: Print
  readonly tail: Print
}

/** A print of `bytes`: a copy of them, or their digest. */
const printOf = (bytes: Uint8Array, digest: boolean): Print =>
  digest ? { length: bytes.length, sha256: sha256Hex(bytes) } : bytes

const printMatches = (print: Print, bytes: Uint8Array): boolean =>
  print instanceof Uint8Array
    ? sameBytes(bytes, print)
    : bytes.length === print.length && sha256Hex(bytes) === print.sha256

/** Bytes a print keeps alive: the bytes, or a digest's object and 64 hex characters. */
const printBytes = (print: Print | undefined): number =>
  print === undefined ? 0 : print instanceof Uint8Array ? print.length + 96 : 160

const emptyPrints: Prints = { head: new Uint8Array(0), tail: new Uint8Array(0) }

/**
 * Prints after `piece` was committed at offset `committedEnd`. Pieces come
 * in order; a gap between two is allowed only past the head print and
 * before a piece that holds at least the whole tail print.
 */
const extendPrints = (prints: Prints, committedEnd: number, piece: Uint8Array): Prints => {
  if (piece.length === 0) return prints
  // `piece` lies in the scan's reused buffer: what is kept of it is copied (two pieces always are).
  const head = committedEnd >= HEAD_PRINT_BYTES
    ? prints.head
    : concatBytes([prints.head, piece.subarray(0, HEAD_PRINT_BYTES - committedEnd)])
  const tail = piece.length >= TAIL_PRINT_BYTES
    ? piece.slice(piece.length - TAIL_PRINT_BYTES)
    : concatBytes([prints.tail.subarray(Math.max(0, prints.tail.length + piece.length - TAIL_PRINT_BYTES)), piece])
  return { head, tail }
}

/** One Session's cached parse, valid for exactly the file state it records. */
interface CachedSession {
  readonly identity: string
  readonly size: number
  readonly mtimeMs: number
  /** Clock time just before the bytes behind this state were last read or checked. */
  readonly readAt: number
  /** Offset just past the last newline parsed (for a too-large verdict: the last byte the scan read). */
  readonly committedEnd: number
  /** UTF-16 code units of the text before `committedEnd`, for the text limit. */
  readonly committedUnits: number
  /** The parse and its outcome. */
  readonly kept: Parsed
  readonly prints: KeptPrints
  /** Bytes after `committedEnd` at read time, when few enough to keep. */
  readonly trailing: Print | undefined
  readonly bytes: number
}

/** A Session's parse so far, to extend when it grows, and the outcome of the bytes it was built from. */
interface Parsed {
  /** Never fed again once the outcome is `SessionTooLarge`. */
  readonly accumulator: SessionAccumulator
  readonly outcome: SessionOutcome
}

/**
 * What a Session keeps once it was at rest when a store observed it: the
 * handle of one record in the cache's `RecordArena`, outside the heap, with
 * what a `stat` is compared with (size, mtime, the time it was read, its
 * identity) and the evidence its artifact state is projected from, packed.
 * Nothing to extend: a read that needs more, or a change of the file, parses
 * it again in full.
 */
type Resting = number

const isResting = (state: CachedSession | Resting | undefined): state is Resting => typeof state === "number"

/** What a scan of a Session found: where it ended and the prints of the committed prefix, or the too-large verdict. */
interface Scanned {
  readonly end: ScanEnd
  readonly prints: Prints
  readonly tooLarge: SessionTooLarge | undefined
}

/**
 * What the cache keeps for one Session, as its held file's entry's state:
 * set only through `setState`, which charges it to the budget and frees a
 * resting record it replaces. The state itself, with no object around it:
 * a Session at rest keeps only a small integer beside its entry.
 */
type Kept = CachedSession | Resting | undefined

type Entry = HeldEntry<Kept>

/**
 * Serializes refreshes of one Session: made by the first that needs it and
 * forgotten once nothing holds or waits for it (`underLock`), so that the
 * thousands of Sessions a cache keeps at rest keep none.
 */
interface RefreshLock {
  readonly semaphore: Semaphore.Semaphore
  /** Fibers holding or waiting for `semaphore`. */
  users: number
}

/**
 * Counters of how reads were answered.
 *
 * @category models
 * @since 0.1.0
 */
export interface SessionCacheStats {
  /** Parsed from the first byte. */
  readonly full: number
  /** Parsed only past the cached prefix. */
  readonly incremental: number
  /** Same bytes as last time: answered from the cache. */
  readonly unchanged: number
  /**
   * Same inode, size and an mtime already old at the last read: answered
   * from the cache without opening the file (counted in `unchanged` too).
   */
  readonly unopened: number
  /** Not an existing regular file, or I/O failed: read by the uncached reader. */
  readonly uncached: number
  /** Estimated bytes of state kept for the Sessions in the cache now; at most `maxBytes`. */
  readonly retainedBytes: number
  /** Sessions kept at rest now, each as one record outside the heap (`RecordArena`); never more than the cache keeps. */
  readonly resting: number
}

/**
 * Limits of a Session cache.
 *
 * @category models
 * @since 0.1.0
 */
export interface SessionCacheOptions {
  /** Sessions kept at most, the least recently read dropped first; by default only the bytes bound them. */
  readonly capacity?: number | undefined
  /** Estimated bytes of retained state over all Sessions, without a shared `budget`. Default 32 MiB. */
  readonly maxBytes?: number | undefined
  /** Sessions held open at most, without a shared `budget`. Default 64. */
  readonly maxOpenFiles?: number | undefined
  /** A budget shared with other caches (the store shares one with its sidecar cache); overrides the two above. */
  readonly budget?: CacheBudget | undefined
  /** When a Session is too large to read; the reference's limits (`DEFAULT_SESSION_LIMITS`) by default. */
  readonly limits?: SessionLimits | undefined
}

/**
 * A read answered by the cache: the projection and the resolved file.
 *
 * @category models
 * @since 0.1.0
 */
export interface CachedSessionRead extends SessionProjection {
  readonly sessionFile: string
}

/**
 * Incremental Session reads with a bounded cache.
 *
 * @category models
 * @since 0.1.0
 */
export interface SessionCache {
  /**
   * Resolves and reads a Session like `readSession`, without `parsed` and
   * `branch`. Results may share arrays with earlier results: treat them as
   * read-only.
   */
  readonly read: (reference: unknown, options: SessionReaderOptions) => Effect.Effect<CachedSessionRead, SessionError>
  /** What the store observes of a native Session, like `nativeObservation`. */
  readonly observe: (reference: unknown, options: SessionReaderOptions) => Effect.Effect<SessionObservation>
  /**
   * What the artifact-state projection reads of a native Session:
   * `nativeObservation` without the selected texts (`SessionEvidence`). A
   * Session at rest keeps only this from then on, until it changes or is
   * `read`.
   */
  readonly observeEvidence: (reference: unknown, options: SessionReaderOptions) => Effect.Effect<SessionEvidence>
  readonly stats: Effect.Effect<SessionCacheStats>
}

type OpenFile = FileSystem.File

interface Scratch {
  readonly verify: Uint8Array
  readonly head: Uint8Array
}

/** The modification time the cache compares; -1 (never racily clean) when none is reported. */
const mtimeOf = (info: FileSystem.File.Info): number => modifiedMs(info) ?? -1

/**
 * How far an mtime must lie before the read that cached a Session for the
 * cache to trust a later stat alone; covers coarse timestamps (1–2 s on some
 * file systems) and a clock that is a little off.
 */
const RACY_MTIME_MS = 2_000

/**
 * Whether the file provably holds the bytes behind `state` without reading
 * them (git's "racily clean" rule): same inode and size, and the same mtime,
 * which was already old when those bytes were read. A later write sets the
 * mtime to its own time, so it cannot reproduce an mtime from before the
 * read; only a deliberate `utimes` back to the old value can.
 */
const unmovedSince = (state: CachedSession, info: FileSystem.File.Info): boolean =>
  atRest(state.mtimeMs, state.readAt) && fileIdentity(info) === state.identity &&
  Number(info.size) === state.size && mtimeOf(info) === state.mtimeMs

/** Whether a file last modified at `mtimeMs` was at rest when read at `readAt`: no write can reproduce that mtime. */
const atRest = (mtimeMs: number, readAt: number): boolean => mtimeMs >= 0 && mtimeMs + RACY_MTIME_MS < readAt

/**
 * Bytes of a cached state beside its accumulator and prints: the state
 * object, the outcome's projection wrapper, the refresh lock.
 */
const STATE_OVERHEAD_BYTES = 512

/** Bytes of a resting Session's state beside its record: the record's header and handle. */
const RESTING_STATE_BYTES = 96

/** Runs `effect` holding the refresh lock of `entry`, one of `locks`. */
const underLock = <A, E, R>(
  locks: Map<Entry, RefreshLock>,
  entry: Entry,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    let lock = locks.get(entry)
    if (lock === undefined) {
      lock = { semaphore: Semaphore.makeUnsafe(1), users: 0 }
      locks.set(entry, lock)
    }
    const held = lock
    held.users++
    return Effect.ensuring(
      held.semaphore.withPermits(1)(effect),
      Effect.sync(() => {
        if (--held.users === 0) locks.delete(entry)
      })
    )
  })

/**
 * Builds a Session cache over the `FileSystem` and `Path` in context.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function*(options: SessionCacheOptions = {}) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const budget = options.budget ??
    makeBudget({ maxBytes: options.maxBytes ?? 32 * 1024 * 1024, maxOpenFiles: options.maxOpenFiles ?? 64 })
  const limits = options.limits ?? DEFAULT_SESSION_LIMITS
  /**
   * The absolute path of a Session reference: the caller's own string when
   * it already is one, so the entry kept for it shares that string (a
   * poller's list holds it anyway) instead of keeping a copy per Session.
   */
  const resolvedPath = (reference: string): string => {
    const resolved = path.resolve(reference)
    return resolved === reference ? reference : resolved
  }
  const locks = new Map<Entry, RefreshLock>()
  // Each Session's file is let go when it is dropped (evicted, invalidated, or the cache closed), once its last read ends.
  const sessions = yield* holdSessionFiles<Kept>(fs, {
    capacity: options.capacity,
    budget,
    initial: () => undefined,
    // Waits for a refresh in progress to end, so that it cannot put its state back after this (a dropped entry refuses
    // any, see `setState`); frees what it kept.
    onDrop: (entry) =>
      underLock(
        locks,
        entry,
        Effect.sync(() => {
          if (isResting(entry.state)) resting.free(entry.state)
          entry.state = undefined
        })
      )
  })
  // Charged to the budget as it changes, so that a read checks a running total instead of summing every entry.
  const setState = (entry: Entry, state: Kept) => {
    if (!entry.live) {
      // Dropped from the cache: a read still in flight keeps nothing in it, not even the record it made for it (an
      // entry is dropped as soon as it is evicted, and the read may run on until its next step).
      if (isResting(state)) resting.free(state)
      return
    }
    if (isResting(entry.state)) resting.free(entry.state)
    entry.state = state
    sessions.setBytes(
      entry,
      state === undefined ? 0 : isResting(state) ? RESTING_STATE_BYTES + resting.view(state).length : state.bytes
    )
  }
  /** The records of the Sessions at rest (`Resting`), written through one reused buffer. */
  const resting = new RecordArena()
  const restingWriter = new RecordWriter()
  const restingRecord = (state: CachedSession, evidence: PackedEvidence): Uint8Array =>
    restingWriter.start().number(state.size).number(state.mtimeMs).number(state.readAt).string(state.identity).rest(
      evidence
    ).done()
  /** `unmovedSince` for a resting Session. */
  const restingUnmoved = (handle: Resting, info: FileSystem.File.Info): boolean => {
    const record = new RecordReader(resting.view(handle))
    const size = record.number()
    const mtimeMs = record.number()
    const readAt = record.number()
    return atRest(mtimeMs, readAt) && Number(info.size) === size && mtimeOf(info) === mtimeMs &&
      fileIdentity(info) === record.string()
  }
  const restingEvidence = (handle: Resting): SessionEvidence => {
    const record = new RecordReader(resting.view(handle))
    record.number()
    record.number()
    record.number()
    record.string()
    return unpackEvidence(record.rest())
  }
  const counters = { full: 0, incremental: 0, unchanged: 0, unopened: 0, uncached: 0 }
  // Read buffers are reused: fresh large allocations are what makes whole-file reads slow.
  const buffers: Array<Uint8Array> = []
  const takeBuffer = () => buffers.pop() ?? new Uint8Array(READ_CHUNK_BYTES)
  // Space for the verification reads of a poll. Two Sessions may refresh at
  // once, so each refresh takes its own and gives it back.
  const scratchSpaces: Array<Scratch> = []
  const takeScratch = (): Scratch =>
    scratchSpaces.pop() ?? { verify: new Uint8Array(READ_CHUNK_BYTES), head: new Uint8Array(HEAD_PRINT_BYTES) }
  const giveScratch = (scratch: Scratch) => {
    if (scratchSpaces.length < 4) scratchSpaces.push(scratch)
  }
  const giveBuffer = (buffer: Uint8Array) => {
    if (buffer.length === READ_CHUNK_BYTES && buffers.length < 4) buffers.push(buffer)
  }

  /**
   * Reads exactly `length` bytes at `position` into `into` (from its start),
   * or `undefined` if the file is shorter now.
   */
  const readExact = Effect.fnUntraced(function*(file: OpenFile, position: number, length: number, into: Uint8Array) {
    let filled = 0
    while (filled < length) {
      const count = yield* file.read(into.subarray(filled, length), { position: BigInt(position + filled) })
      if (count === 0) return undefined
      filled += count
    }
    return into.subarray(0, length)
  })

  /** A scanner resuming at `from` whose committed bytes extend `prints`. */
  const scannerFor = (accumulator: SessionAccumulator, from: number, units: number, startPrints: Prints) => {
    const track = { prints: startPrints }
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

  /** After the text limit was passed: the verdict, resting on every byte the scan read. */
  const tooLargeScan = (
    scanner: SessionLineScanner,
    track: { readonly prints: Prints },
    verdict: SessionTooLarge
  ): Scanned => {
    scanner.commitRest()
    return {
      end: {
        committedEnd: scanner.committedEnd,
        committedUnits: scanner.committedUnits,
        size: scanner.position,
        trailing: "",
        trailingBytes: undefined
      },
      prints: track.prints,
      tooLarge: verdict
    }
  }

  /**
   * Streams `[from, end)` into the accumulator, committing complete lines.
   * Returns where it ended with the prints, or the too-large verdict.
   */
  const scan = (
    file: OpenFile,
    sessionFile: string,
    accumulator: SessionAccumulator,
    from: number,
    units: number,
    end: number,
    size: number,
    startPrints: Prints
  ): Effect.Effect<Scanned, PlatformError> => {
    const { scanner, track } = scannerFor(accumulator, from, units, startPrints)
    return Effect.acquireUseRelease(
      Effect.sync(takeBuffer),
      (buffer) =>
        scanFile(file, scanner, { path: sessionFile, size, end, buffer }).pipe(
          Effect.map((scanned): Scanned => ({ end: scanned, prints: track.prints, tooLarge: undefined })),
          Effect.catchTag("SessionTooLarge", (verdict) => Effect.sync(() => tooLargeScan(scanner, track, verdict)))
        ),
      (buffer) => Effect.sync(() => giveBuffer(buffer))
    )
  }

  const remember = (
    entry: Entry,
    identity: string | undefined,
    mtimeMs: number,
    readAt: number,
    accumulator: SessionAccumulator,
    scanned: Scanned,
    size: number
  ): SessionOutcome => {
    const { end, prints, tooLarge } = scanned
    const outcome: SessionOutcome = tooLarge !== undefined ? Result.fail(tooLarge) : accumulator.finish(end.trailing)
    // A verdict never feeds its accumulator again: keep an empty one instead of the parsed state.
    const kept = tooLarge !== undefined ? new SessionAccumulator(accumulator.source) : accumulator
    // A Session already at rest when read is answered by a `stat` from now on, until it changes.
    const digest = atRest(mtimeMs, readAt)
    const keptPrints: KeptPrints = { head: printOf(prints.head, digest), tail: printOf(prints.tail, digest) }
    const trailing = end.trailingBytes === undefined ? undefined : printOf(end.trailingBytes, digest)
    const bytes = STATE_OVERHEAD_BYTES + kept.retainedBytes + printBytes(keptPrints.head) +
      printBytes(keptPrints.tail) +
      printBytes(trailing)
    if (identity !== undefined && bytes <= budget.maxBytes) {
      setState(entry, {
        identity,
        // A verdict stands for the whole file, however far the scan got.
        size: tooLarge !== undefined ? size : end.size,
        mtimeMs,
        readAt,
        committedEnd: end.committedEnd,
        committedUnits: end.committedUnits,
        kept: { accumulator: kept, outcome },
        prints: keptPrints,
        trailing,
        bytes
      })
    }
    return outcome
  }

  /** The same state, read again at `readAt`: its prints become digests once the Session is at rest. */
  const readAgain = (state: CachedSession, readAt: number): CachedSession => {
    const { prints, trailing } = state
    if (!atRest(state.mtimeMs, readAt) || !(prints.tail instanceof Uint8Array)) return { ...state, readAt }
    const kept: KeptPrints = { head: printOf(prints.head as Uint8Array, true), tail: printOf(prints.tail, true) }
    const rest = trailing === undefined ? undefined : printOf(trailing as Uint8Array, true)
    const bytes = state.bytes - printBytes(prints.head) - printBytes(prints.tail) - printBytes(trailing) +
      printBytes(kept.head) + printBytes(kept.tail) + printBytes(rest)
    return { ...state, readAt, prints: kept, trailing: rest, bytes }
  }

  /** Reuses the cached prefix if the file provably still starts with it. */
  const tryIncremental = Effect.fnUntraced(function*(
    entry: Entry,
    prior: CachedSession,
    parsed: Parsed,
    file: OpenFile,
    sessionFile: string,
    size: number,
    mtimeMs: number,
    readAt: number,
    scratch: Scratch
  ) {
    const tailLength = prior.prints.tail.length
    const tailStart = prior.committedEnd - tailLength
    const verifyEnd = size - tailStart <= READ_CHUNK_BYTES ? size : prior.committedEnd
    // Scratch space only: everything kept from these bytes is copied out below.
    const verified = yield* readExact(file, tailStart, verifyEnd - tailStart, scratch.verify)
    if (verified === undefined) return undefined
    const tail = verified.subarray(0, tailLength)
    if (!printMatches(prior.prints.tail, tail)) return undefined
    // Within the tail when the tail starts at 0.
    let head = verified.subarray(0, prior.prints.head.length)
    if (tailStart > 0) {
      const read = yield* readExact(file, 0, prior.prints.head.length, scratch.head)
      if (read === undefined || !printMatches(prior.prints.head, read)) return undefined
      head = read
    }
    const verdict = Result.isFailure(parsed.outcome) && parsed.outcome.failure._tag === "SessionTooLarge"
      ? parsed.outcome.failure
      : undefined
    if (verdict !== undefined) {
      // Appended text only adds code units: still too large, without reading what was appended.
      if (size === prior.size && mtimeMs === prior.mtimeMs) counters.unchanged++
      else counters.incremental++
      const outcome: SessionOutcome = size === prior.size ? parsed.outcome : Result.fail(
        new SessionTooLarge({ path: verdict.path, reason: verdict.reason, size, limit: verdict.limit })
      )
      setState(entry, { ...prior, size, mtimeMs, readAt, kept: { accumulator: parsed.accumulator, outcome } })
      return outcome
    }
    const rest = verified.subarray(tailLength)
    if (
      size === prior.size && mtimeMs === prior.mtimeMs && verifyEnd === size && prior.trailing !== undefined &&
      printMatches(prior.trailing, rest)
    ) {
      counters.unchanged++
      setState(entry, readAgain(prior, readAt))
      return parsed.outcome
    }
    counters.incremental++
    const accumulator = parsed.accumulator
    // The scan extends the prints from their bytes: the ones just verified, when only their digests were kept.
    const prints: Prints = {
      head: prior.prints.head instanceof Uint8Array ? prior.prints.head : head.slice(),
      tail: prior.prints.tail instanceof Uint8Array ? prior.prints.tail : tail.slice()
    }
    if (verifyEnd === size) {
      // Everything new is already in memory.
      const { scanner, track } = scannerFor(accumulator, prior.committedEnd, prior.committedUnits, prints)
      const end = scanBytes(scanner, rest)
      const scanned = end !== undefined
        ? { end, prints: track.prints, tooLarge: undefined }
        : tooLargeScan(
          scanner,
          track,
          new SessionTooLarge({ path: sessionFile, reason: "text", size, limit: limits.maxTextUnits })
        )
      return remember(entry, prior.identity, mtimeMs, readAt, accumulator, scanned, size)
    }
    const { committedEnd, committedUnits } = prior
    const scanned = yield* scan(file, sessionFile, accumulator, committedEnd, committedUnits, size, size, prints)
    return remember(entry, prior.identity, mtimeMs, readAt, accumulator, scanned, size)
  })

  /**
   * Reads the Session again through the entry's file: `pathInfo` was stat'ed
   * just before, so the file kept from the last read is used while the path
   * still names it (no open, `fstat` or close), else the path is opened anew.
   * Under the entry's refresh lock.
   */
  const refresh = (entry: Entry, sessionFile: string, pathInfo: FileSystem.File.Info) =>
    Effect.flatMap(Clock.currentTimeMillis, (readAt) => {
      const state = entry.state
      // A resting Session kept nothing to extend: it is parsed again in full.
      const prior = isResting(state) ? undefined : state
      // Cleared first: an interrupted or failed refresh must not leave a half-fed accumulator behind.
      setState(entry, undefined)
      return entry.file.use(pathInfo, ({ file, info }) => refreshFrom(entry, prior, file, info, sessionFile, readAt))
    })

  const refreshFrom = Effect.fnUntraced(function*(
    entry: Entry,
    prior: CachedSession | undefined,
    file: OpenFile,
    info: FileSystem.File.Info,
    sessionFile: string,
    readAt: number
  ) {
    const size = Number(info.size)
    const identity = fileIdentity(info)
    const mtimeMs = mtimeOf(info)
    // Decided by the size alone, before any read, as Node's `readFile` does; not kept, a stat decides it again.
    const tooLarge = fileTooLarge(sessionFile, size, limits)
    if (tooLarge !== undefined) return Result.fail(tooLarge) as SessionOutcome
    if (
      prior !== undefined && identity !== undefined && prior.identity === identity &&
      size >= prior.size && !(size === prior.size && mtimeMs !== prior.mtimeMs)
    ) {
      const parsed = prior.kept
      const outcome = yield* Effect.acquireUseRelease(
        Effect.sync(takeScratch),
        (scratch) => tryIncremental(entry, prior, parsed, file, sessionFile, size, mtimeMs, readAt, scratch),
        (scratch) => Effect.sync(() => giveScratch(scratch))
      )
      if (outcome !== undefined) return outcome
    }
    counters.full++
    const accumulator = new SessionAccumulator(sessionFile)
    // Like `readFile`: the size `fstat` reported, or to the end when it reported none.
    const end = size === 0 ? Number.MAX_SAFE_INTEGER : size
    const scanned = yield* scan(file, sessionFile, accumulator, 0, 0, end, size, emptyPrints)
    return remember(entry, identity, mtimeMs, readAt, accumulator, scanned, size)
  })

  const uncached = (reference: unknown, options: SessionReaderOptions) => {
    counters.uncached++
    return readSession(reference as string, { ...options, limits }).pipe(
      Effect.map(({ branch: _branch, parsed: _parsed, ...projection }): CachedSessionRead => projection),
      Effect.provideService(FileSystem.FileSystem, fs),
      Effect.provideService(Path.Path, path)
    )
  }

  /**
   * Keeps only the evidence of the entry's state if that state rests on a
   * Session already at rest when read (answered by a `stat` until it
   * changes) and projects successfully; says whether it did. Synchronous:
   * no refresh can start or end in between.
   */
  const settleIdle = (entry: Entry): boolean => {
    const state = entry.state
    if (state === undefined || isResting(state) || !atRest(state.mtimeMs, state.readAt)) return false
    const { outcome } = state.kept
    if (Result.isFailure(outcome)) return false
    // Only what `unmovedSince` compares: an idle Session is parsed again in full once it changes, so its prints are never read.
    setState(entry, resting.put(restingRecord(state, packEvidence(evidenceOf(outcome.success)))))
    return true
  }

  // Plain functions rather than `Effect.fn`: this runs on every poll, and a
  // span with its captured call site costs about a tenth of a whole current read.
  /**
   * A read of the Session: its projection, or with `idle` its evidence when
   * the Session is idle (and then only its evidence is kept). The projection
   * of an idle Session is parsed again.
   */
  // `fnUntraced`, not `Effect.gen` in an arrow: its generator function is made
  // once. One made per call gives every read's generator a new hidden class in
  // the old generation, which keeps that read's objects through young
  // collections until a full one.
  const lookup: (
    reference: unknown,
    options: SessionReaderOptions,
    idle: boolean
  ) => Effect.Effect<CachedSessionRead | SessionEvidence, SessionError> = Effect.fnUntraced(
    function*(reference: unknown, options: SessionReaderOptions, idle: boolean) {
      if (typeof reference !== "string" || !reference.trim()) return yield* uncached(reference, options)
      const sessionFile = resolvedPath(reference.trim())
      // `stat` follows symlinks exactly as the reader's resolution does.
      const info = yield* Effect.option(fs.stat(sessionFile))
      if (Option.isNone(info) || info.value.type !== "File") {
        // A Session that was removed or replaced by something else is not held open any longer.
        yield* sessions.invalidate(sessionFile)
        return yield* uncached(reference, options)
      }
      const entry = yield* sessions.get(sessionFile)
      // The cache's scope has ended: read around it.
      if (entry === undefined) return yield* uncached(reference, options)
      const settled = entry.state
      if (isResting(settled)) {
        if (idle && restingUnmoved(settled, info.value)) {
          counters.unchanged++
          counters.unopened++
          return restingEvidence(settled)
        }
      } else if (settled !== undefined && unmovedSince(settled, info.value)) {
        counters.unchanged++
        counters.unopened++
        if (idle && settleIdle(entry)) yield* entry.file.letGo
        const projection = yield* Effect.fromResult(settled.kept.outcome)
        return { sessionFile, ...projection } satisfies CachedSessionRead
      }
      // After a failure the handle is not trusted again.
      const outcome = yield* underLock(
        locks,
        entry,
        refresh(entry, sessionFile, info.value).pipe(
          // An idle Session is answered by a `stat` until it changes: its file is not used again until then.
          Effect.tap(() => idle && settleIdle(entry) ? entry.file.letGo : Effect.void),
          Effect.onError(() => entry.file.letGo)
        )
      ).pipe(
        Effect.map(Option.some),
        Effect.catch((_: PlatformError | FileNotRegular) => Effect.succeedNone)
      )
      // What this read keeps (or the new entry, if it keeps nothing) may push out the least recently read.
      yield* sessions.fit(entry)
      if (Option.isNone(outcome)) return yield* uncached(reference, options)
      const projection = yield* Effect.fromResult(outcome.value)
      return { sessionFile, ...projection } satisfies CachedSessionRead
    }
  )

  const read = (reference: unknown, options: SessionReaderOptions) =>
    lookup(reference, options, false) as Effect.Effect<CachedSessionRead, SessionError>

  const observe = (reference: unknown, options: SessionReaderOptions): Effect.Effect<SessionObservation> =>
    observationOf(read(reference, options))

  const observeEvidence = (reference: unknown, options: SessionReaderOptions): Effect.Effect<SessionEvidence> =>
    Effect.match(lookup(reference, options, true), {
      onFailure: (error): SessionEvidence =>
        isSessionMissing(error) ? { availability: "missing" } : { availability: "unreadable" },
      onSuccess: (answer) => ("availability" in answer ? answer : evidenceOf(answer))
    })

  const stats = Effect.sync((): SessionCacheStats => ({
    ...counters,
    retainedBytes: sessions.bytes(),
    resting: resting.size
  }))

  return { read, observe, observeEvidence, stats } satisfies SessionCache
})
