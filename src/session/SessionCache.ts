/**
 * Incremental, cached reads of Pi Sessions for callers that poll.
 *
 * A Pi Session is append-only JSONL, so a Session read again after it grew
 * only needs its new lines parsed. The cache keeps, per resolved Session
 * path, one `CachedSession` (`SessionRefresh`): a compact summary of what
 * was parsed so far (a `SessionAccumulator`: header, the selected texts and
 * tree links, never the long tool outputs) with fingerprints of the bytes
 * it was built from, and on the next read feeds it only the bytes after the
 * last complete line.
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
 *   (8 KiB), read again now. A same-size read with a different modification
 *   time is parsed in full. Anything else (a replaced, truncated or
 *   rewritten file) is parsed again from the start.
 * - A stat alone answers when the file has the same identity and size and an
 *   mtime that was already more than 2 s old when the cached bytes were read
 *   (git's "racily clean" rule): any later write would have moved the mtime
 *   past it. Within those 2 s the fingerprints are read again.
 * - An idle Session (at rest when read, projecting successfully) observed
 *   through `observeEvidence`, as the store's current reads do, keeps only
 *   its `SessionEvidence` (its id and its selection's manifest, no texts):
 *   it is answered by a `stat` until it changes; anything else about it (a
 *   change, or a `read` that wants its projection) parses it again in full.
 * - Memory is bounded by a `ByteCache` (`maxBytes`, 32 MiB by default, or
 *   one shared with the store's sidecar cache): each Session is charged the
 *   estimated bytes of its state, and the least recently read are dropped
 *   once the total passes the bound; a state larger than the whole bound is
 *   not kept. Reads stream the file through `SessionStream`, so a read holds
 *   a constant amount plus one line, never the whole file.
 * - No file is held open between reads: each read that must look at the
 *   bytes opens the Session, reads, and closes it before it answers, so a
 *   Session's folder can always be removed (Windows refuses while a handle
 *   is open).
 * - A Session the reference cannot read whole (`SessionLimits`: a file over
 *   2 GiB - 1, or text longer than V8's longest string) is `SessionTooLarge`,
 *   found without holding it. Appending cannot make it readable again, so a
 *   text verdict is kept with fingerprints of the bytes it rests on.
 * - Two reads of one Session at once never share a parse in progress: a
 *   read takes the Session's state out of the cache before it extends it,
 *   so the other parses from the start, and each puts back what it read.
 *
 * **Gotchas**
 *
 * The cache trusts that Sessions are append-only, as Pi writes them. A
 * rewrite in place (same inode) that keeps the size and modification time,
 * or that grows the file, and changes bytes only between the two
 * fingerprints is not seen; nor is a same-size rewrite whose mtime is set
 * back to an old value with `utimes`. The store's `cacheSessions: false`
 * reads every Session in full for deployments where other programs rewrite
 * them. References that are not an existing regular file (Session ids,
 * missing paths) are passed to the uncached reader unchanged.
 *
 * @since 0.1.0
 */
import { Clock, Effect, FileSystem, Option, Path, Result } from "effect"
import type { PlatformError } from "effect/PlatformError"
import { ByteCache } from "../io/ByteCache.js"
import { smallRegularReadOf } from "../io/NonBlockingOpen.js"
import type { FileNotRegular } from "../io/RegularFile.js"
import { isSessionMissing, type SessionError } from "./SessionErrors.js"
import { evidenceOf, type SessionEvidence } from "./SessionEvidence.js"
import { openSessionFile } from "./SessionFile.js"
import type { SessionProjection } from "./SessionProjection.js"
import { observationOf, readSession, type SessionObservation, type SessionReaderOptions } from "./SessionReader.js"
import {
  atRest,
  type CachedSession,
  extendFromWindow,
  idleState,
  type Refreshed,
  refreshSession,
  unmovedSince,
  windowOf
} from "./SessionRefresh.js"
import { DEFAULT_SESSION_LIMITS, type SessionLimits } from "./SessionStream.js"

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
  /** Sessions kept idle now (their evidence only); never more than the cache keeps. */
  readonly idle: number
}

/**
 * Limits of a Session cache.
 *
 * @category models
 * @since 0.1.0
 */
export interface SessionCacheOptions {
  /** Estimated bytes of retained state over all Sessions, without a shared `cache`. Default 32 MiB. */
  readonly maxBytes?: number | undefined
  /** A cache shared with other caches (the store shares one with its sidecar cache); overrides `maxBytes`. */
  readonly cache?: ByteCache | undefined
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

/** What a lookup answers: a projection, or (for `observeEvidence` of an idle Session) only its evidence. */
type Answer = CachedSessionRead | SessionEvidence

/**
 * Builds a Session cache over the `FileSystem` and `Path` in context.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function*(options: SessionCacheOptions = {}) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const sessions = (options.cache ?? new ByteCache(options.maxBytes ?? 32 * 1024 * 1024)).section<CachedSession>()
  const limits = options.limits ?? DEFAULT_SESSION_LIMITS
  const counters = { full: 0, incremental: 0, unchanged: 0, unopened: 0, uncached: 0 }

  /**
   * The absolute path of a Session reference: the caller's own string when
   * it already is one, so the key kept for it shares that string.
   */
  const resolvedPath = (reference: string): string => {
    const resolved = path.resolve(reference)
    return resolved === reference ? reference : resolved
  }

  const uncached = (reference: unknown, options: SessionReaderOptions) => {
    counters.uncached++
    return readSession(reference as string, { ...options, limits }).pipe(
      Effect.map(({ branch: _branch, parsed: _parsed, ...projection }): CachedSessionRead => projection),
      Effect.provideService(FileSystem.FileSystem, fs),
      Effect.provideService(Path.Path, path)
    )
  }

  /**
   * Keeps `state` for the Session, or, when the caller wants evidence and
   * the Session was at rest when read and projects, only its evidence (it is
   * answered by a `stat` until it changes). Returns that evidence, if kept.
   *
   * A full cache takes it even so when this read took it out (`returning`),
   * or when it is being written: a Session read again and again while it
   * grows is what the incremental parse is for. A Session at rest is one of
   * many a poller sweeps over, and takes its turn to be admitted.
   */
  const keep = (sessionFile: string, state: CachedSession, wantsEvidence: boolean, returning = false) => {
    const outcome = "outcome" in state.answer ? state.answer.outcome : undefined
    const atRestNow = atRest(state.mtimeMs, state.readAt)
    if (wantsEvidence && outcome !== undefined && Result.isSuccess(outcome) && atRestNow) {
      const evidence = evidenceOf(outcome.success)
      const idle = idleState(state, evidence)
      sessions.set(sessionFile, idle, idle.bytes, returning)
      return evidence
    }
    sessions.set(sessionFile, state, state.bytes, returning || !atRestNow)
    return undefined
  }

  // On a file system whose calls return at once, a Session that grew by a
  // little is extended from one call that opens, stats, reads its new end and
  // head print, and closes: without a scope and a handle's effects, which
  // were more than half of a growing poll.
  const readSmall = smallRegularReadOf(fs)
  const extendAtOnce = (sessionFile: string, prior: CachedSession, readAt: number): Refreshed | undefined => {
    const window = windowOf(prior)
    if (readSmall === undefined || window === undefined) return undefined
    const read = readSmall(sessionFile, { ...window, noFollow: false })
    if (read === undefined) return undefined
    const facts = { sessionFile, identity: read.identity, size: read.size, mtimeMs: read.mtimeMs, readAt }
    return extendFromWindow(limits, facts, prior, read.bytes, read.head)
  }

  /** Reads the Session anew (opened for this read only), extending `prior` when it may. */
  const refresh = (sessionFile: string, prior: CachedSession | undefined) =>
    Effect.flatMap(Clock.currentTimeMillis, (readAt) => {
      const extended = prior === undefined ? undefined : extendAtOnce(sessionFile, prior, readAt)
      if (extended !== undefined) return Effect.succeed(extended)
      return Effect.scoped(Effect.flatMap(
        openSessionFile(fs, sessionFile),
        ({ file, info }) => refreshSession(limits, file, info, sessionFile, prior, readAt)
      ))
    })

  /** The answer of a state that still stands for the file, if it has one for this caller. */
  const answerOf = (sessionFile: string, state: CachedSession, wantsEvidence: boolean) => {
    if ("evidence" in state.answer) return wantsEvidence ? Effect.succeed<Answer>(state.answer.evidence) : undefined
    const { outcome } = state.answer
    const evidence = wantsEvidence ? keep(sessionFile, state, true) : undefined
    if (evidence !== undefined) return Effect.succeed<Answer>(evidence)
    return Effect.map(Effect.fromResult(outcome), (projection): Answer => ({ sessionFile, ...projection }))
  }

  // `fnUntraced`, not `Effect.gen` in an arrow, nor `Effect.fn`: this runs
  // on every poll, and a span with its captured call site costs about a
  // tenth of a whole current read.
  const lookup: (
    reference: unknown,
    options: SessionReaderOptions,
    wantsEvidence: boolean
  ) => Effect.Effect<Answer, SessionError> = Effect.fnUntraced(
    function*(reference: unknown, options: SessionReaderOptions, wantsEvidence: boolean) {
      if (typeof reference !== "string" || !reference.trim()) return yield* uncached(reference, options)
      const sessionFile = resolvedPath(reference.trim())
      const prior = sessions.get(sessionFile)
      // A Session that was being written at its last read is never answered by a `stat` alone
      // (`unmovedSince` needs it at rest), so it goes straight to its open, which checks the same.
      const statFirst = prior === undefined || atRest(prior.mtimeMs, prior.readAt)
      // `stat` follows symlinks exactly as the reader's resolution does.
      const info = statFirst ? yield* Effect.option(fs.stat(sessionFile)) : Option.none()
      if (statFirst && (Option.isNone(info) || info.value.type !== "File")) {
        sessions.delete(sessionFile)
        return yield* uncached(reference, options)
      }
      if (prior !== undefined && Option.isSome(info) && unmovedSince(prior, info.value)) {
        const answer = answerOf(sessionFile, prior, wantsEvidence)
        if (answer !== undefined) {
          counters.unchanged++
          counters.unopened++
          return yield* answer
        }
      }
      // Taken out while it is read: a failed or interrupted read leaves nothing behind, and a read of the same
      // Session at the same time parses on its own instead of feeding this one's parse.
      sessions.delete(sessionFile)
      const refreshed = yield* refresh(sessionFile, prior).pipe(
        Effect.map(Option.some),
        Effect.catch((_: PlatformError | FileNotRegular) => Effect.succeedNone)
      )
      if (Option.isNone(refreshed)) return yield* uncached(reference, options)
      const { kind, outcome, state } = refreshed.value
      counters[kind]++
      const evidence = state === undefined ? undefined : keep(sessionFile, state, wantsEvidence, prior !== undefined)
      if (evidence !== undefined) return evidence
      const projection = yield* Effect.fromResult(outcome)
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
    idle: [...sessions.values()].filter((state) => "evidence" in state.answer).length
  }))

  return { read, observe, observeEvidence, stats } satisfies SessionCache
})
