/**
 * Locating and reading a Pi Session on disk, over the `FileSystem` and `Path`
 * services.
 *
 * A reference is either a path or an exact Session id. An existing regular
 * file (symlinks followed) always wins. A reference that looks like a path
 * (contains the separator, starts with ".", or ends with ".jsonl") and names no
 * file is not found; anything else is looked up as an id by scanning
 * `sessionRoot` recursively for `*.jsonl` files whose first line is a header
 * with that id. The scan reads at most 16 KiB of each candidate, never follows
 * symlinked directories or files, and treats a missing root as empty.
 *
 * Reading streams the file line by line (`SessionStream`) and decodes it as
 * UTF-8 the way Node's `readFile(path, "utf8")` does: invalid bytes become
 * U+FFFD and a leading BOM is kept (so a BOM before the header makes line 1
 * malformed JSON). A Session that `readFile` could not read whole (over
 * 2 GiB - 1, or longer than V8's longest string once decoded) fails with
 * `SessionTooLarge` instead, without being held: a read keeps the parsed
 * entries and, besides, at most a constant amount plus one line (see
 * `SessionStream`), never the file's bytes or text.
 *
 * Nothing here writes; a file that changes between resolve and read is read as
 * it is at read time, and a file that vanished in between is `SessionIo` with a
 * `NotFound` reason.
 *
 * @since 0.1.0
 */
import { Effect, FileSystem, Option, Path } from "effect"
import type { PlatformError } from "effect/PlatformError"
import type { FileNotRegular } from "../io/RegularFile.js"
import { decodeUtf8 } from "../protocol/internal/Utf8.js"
import type { RarebitSelection } from "./Selector.js"
import {
  isSessionMissing,
  SessionAmbiguous,
  type SessionError,
  SessionInvalid,
  SessionIo,
  SessionNotFound
} from "./SessionErrors.js"
import { openSessionFile } from "./SessionFile.js"
import {
  isSessionHeader,
  type ParsedSession,
  parseLine,
  resolveActiveBranchResult,
  SessionRecords
} from "./SessionParse.js"
import { projectSession, type SessionProjection } from "./SessionProjection.js"
import {
  DEFAULT_SESSION_LIMITS,
  fileTooLarge,
  READ_CHUNK_BYTES,
  scanFile,
  type SessionLimits,
  SessionLineScanner
} from "./SessionStream.js"

/**
 * Where id lookups search.
 *
 * @category models
 * @since 0.1.0
 */
export interface SessionReaderOptions {
  readonly sessionRoot: string
  /** When a Session is too large to read; the reference's limits (`DEFAULT_SESSION_LIMITS`) by default. */
  readonly limits?: SessionLimits | undefined
}

/**
 * A read Session, shaped like the reference's `readRarebitSession` result.
 *
 * @category models
 * @since 0.1.0
 */
export interface SessionRead extends SessionProjection {
  readonly sessionFile: string
  readonly parsed: ParsedSession
  readonly branch: Array<unknown>
}

/**
 * What reading a Session observed of it: available with its selection, or
 * missing or unreadable.
 *
 * It is the artifact-state projection's `NativeObservation` (which accepts
 * looser selections, such as a caller's own) with the reader's full
 * selection.
 *
 * @category models
 * @since 0.1.0
 */
export type SessionObservation =
  | {
    readonly availability: "available"
    readonly sessionId: string
    readonly selection: RarebitSelection & { readonly selectorVersion: string }
  }
  | { readonly availability: "missing" }
  | { readonly availability: "unreadable" }

const HEADER_PROBE_BYTES = 16384

const ioAt = (path: string) => (cause: PlatformError | FileNotRegular) => new SessionIo({ path, cause })

// Mirrors `stat().isFile()` with ENOENT meaning "no": symlinks to files count,
// every other failure (ENOTDIR, EACCES, ELOOP, ...) is an I/O error.
const isRegularFile = Effect.fnUntraced(function*(fs: FileSystem.FileSystem, path: string) {
  return yield* fs.stat(path).pipe(
    Effect.map((info) => info.type === "File"),
    Effect.catchReason("PlatformError", "NotFound", () => Effect.succeed(false)),
    Effect.mapError(ioAt(path))
  )
})

// Whether a candidate file's first line is the header of the Session `id`.
const hasHeaderId = Effect.fnUntraced(function*(fs: FileSystem.FileSystem, file: string, id: string) {
  const bytes = yield* Effect.scoped(
    Effect.flatMap(
      openSessionFile(fs, file),
      ({ file: handle }) => handle.readAlloc(HEADER_PROBE_BYTES, { position: 0n })
    )
  ).pipe(Effect.mapError(ioAt(file)))
  const firstLine = Option.match(bytes, { onNone: () => "", onSome: (chunk) => decodeUtf8(chunk) })
    .split("\n", 1)[0]
    ?.trim()
  if (!firstLine) return false
  const parsed = parseLine(firstLine)
  // `id` is a non-empty string, so a header whose `type` is "session" and whose id is `id` is a valid header.
  return parsed.ok && isSessionHeader(parsed.value) && parsed.value.id === id
})

// Depth-first, in directory listing order, reading each candidate's header as
// soon as it is found, so the first I/O failure is the one the reference meets.
const collectById: (
  fs: FileSystem.FileSystem,
  path: Path.Path,
  directory: string,
  id: string,
  matches: Array<string>
) => Effect.Effect<void, SessionIo> = Effect.fnUntraced(function*(fs, path, directory, id, matches) {
  const entries = yield* fs.readDirectoryEntries(directory).pipe(
    Effect.catchReason("PlatformError", "NotFound", () => Effect.succeed([])),
    Effect.mapError(ioAt(directory))
  )
  for (const entry of entries) {
    const child = path.join(directory, entry.name)
    if (entry.type === "Directory") {
      yield* collectById(fs, path, child, id, matches)
    } else if (entry.type === "File" && entry.name.endsWith(".jsonl")) {
      if (yield* hasHeaderId(fs, child, id)) matches.push(child)
    }
  }
})

/**
 * Resolves a Session reference (a path or an exact Session id) to an absolute
 * file path.
 *
 * **Details**
 *
 * The reference is trimmed first; blank is `SessionInvalid` with kind
 * `invalid_reference`. A relative path resolves against the process's working
 * directory. An id matching several files is `SessionAmbiguous`.
 *
 * @category reading
 * @since 0.1.0
 */
export const resolveSessionFile = Effect.fn("SessionReader.resolveSessionFile")(function*(
  reference: string,
  options: SessionReaderOptions
) {
  if (typeof reference !== "string" || !reference.trim()) {
    return yield* new SessionInvalid({
      kind: "invalid_reference",
      message: "--session requires an exact Pi Session path or ID",
      // Not String(reference): a value whose string conversion throws is
      // still just an invalid reference.
      source: typeof reference === "string" ? reference : typeof reference
    })
  }
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const input = reference.trim()
  const candidate = path.resolve(input)
  if (yield* isRegularFile(fs, candidate)) return candidate
  if (input.includes(path.sep) || input.startsWith(".") || input.endsWith(".jsonl")) {
    return yield* new SessionNotFound({ reference: input, lookup: "path" })
  }
  const matches: Array<string> = []
  yield* collectById(fs, path, path.resolve(options.sessionRoot), input, matches)
  if (matches.length === 0) return yield* new SessionNotFound({ reference: input, lookup: "id" })
  if (matches.length > 1) return yield* new SessionAmbiguous({ reference: input, files: matches })
  return path.resolve(matches[0])
})

/**
 * Resolves, reads, parses and projects one Session.
 *
 * **Details**
 *
 * Parse and branch failures name the resolved file as their `source`. Like
 * the reference's `readFile`, the read takes the size the opened file has
 * (`fstat`) and reads that many bytes (to the end of file when it reports
 * 0).
 *
 * @category reading
 * @since 0.1.0
 */
export const readSession = Effect.fn("SessionReader.readSession")(function*(
  reference: string,
  options: SessionReaderOptions
) {
  const sessionFile = yield* resolveSessionFile(reference, options)
  const fs = yield* FileSystem.FileSystem
  const limits = options.limits ?? DEFAULT_SESSION_LIMITS
  const records = new SessionRecords(sessionFile)
  const scanned = yield* Effect.scoped(Effect.gen(function*() {
    const { file, info } = yield* openSessionFile(fs, sessionFile)
    const size = Number(info.size)
    const tooLarge = fileTooLarge(sessionFile, size, limits)
    if (tooLarge !== undefined) return yield* tooLarge
    return yield* scanFile(file, new SessionLineScanner(records, { maxTextUnits: limits.maxTextUnits }), {
      path: sessionFile,
      size,
      end: size === 0 ? Number.MAX_SAFE_INTEGER : size,
      buffer: new Uint8Array(READ_CHUNK_BYTES),
      // Once a line is malformed the verdict can change only by the text
      // limit, which a file no longer than the limit cannot pass.
      stopWhenSettled: size > 0 && size <= limits.maxTextUnits
    })
  })).pipe(Effect.catchTags({
    PlatformError: (error) => Effect.fail(ioAt(sessionFile)(error)),
    FileNotRegular: (error) => Effect.fail(ioAt(sessionFile)(error))
  }))
  const parsed = yield* Effect.fromResult(records.finish(scanned.trailing))
  const branch = yield* Effect.fromResult(resolveActiveBranchResult(parsed, sessionFile))
  const read: SessionRead = { sessionFile, parsed, branch, ...projectSession(parsed, branch) }
  return read
})

/**
 * What a Session read tells the store: available with its selection,
 * `missing` when the file system reported the file not found (see
 * `isSessionMissing`), otherwise `unreadable`.
 *
 * @category reading
 * @since 0.1.0
 */
export const observationOf = <R>(
  read: Effect.Effect<Pick<SessionProjection, "session" | "selection">, SessionError, R>
): Effect.Effect<SessionObservation, never, R> =>
  Effect.match(read, {
    onFailure: (error): SessionObservation =>
      isSessionMissing(error) ? { availability: "missing" } : { availability: "unreadable" },
    onSuccess: ({ selection, session }): SessionObservation => ({
      availability: "available",
      sessionId: session.id,
      selection: { ...selection, selectorVersion: selection.manifest.selectorVersion }
    })
  })

/**
 * What the store observes of a native Session: `observationOf` a read of it.
 *
 * **Gotchas**
 *
 * A missing absolute path is a path-like reference, so it fails as a query
 * error (`SessionNotFound`) and is reported `unreadable`, not `missing`, as the
 * reference store does. Only a `NotFound` from the file system itself, such as
 * a file deleted between resolve and read, is `missing`.
 *
 * @category reading
 * @since 0.1.0
 */
export const nativeObservation: (
  sessionFile: string,
  options: SessionReaderOptions
) => Effect.Effect<SessionObservation, never, FileSystem.FileSystem | Path.Path> = Effect.fn(
  "SessionReader.nativeObservation"
)(function*(sessionFile: string, options: SessionReaderOptions) {
  return yield* readSession(sessionFile, options)
}, observationOf)
