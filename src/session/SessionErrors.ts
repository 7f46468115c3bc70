/**
 * The failures of reading a Pi Session, one tagged class per condition.
 *
 * Every class carries the exact message the reference package puts on its
 * `RarebitQueryError`, so the plain API can rethrow through `toQueryError`
 * and callers matching on messages keep working. What the reference throws
 * for each (the raw Node error for `SessionIo`, Node's `RangeError` for
 * `SessionTooLarge`) is the Promise API's one mapping
 * (`promise/PlainErrors`).
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { isPlatformError } from "effect/PlatformError"

/**
 * What made a Session unusable, from a bad reference to a broken entry tree.
 *
 * @category models
 * @since 0.1.0
 */
export const SessionInvalidKind = Schema.Literals([
  "invalid_reference",
  "malformed_json",
  "invalid_header",
  "entry_without_id",
  "duplicate_id",
  "cycle",
  "missing_parent"
])

/**
 * @category models
 * @since 0.1.0
 */
export type SessionInvalidKind = typeof SessionInvalidKind.Type

/**
 * The reference or the Session content breaks the Pi Session rules.
 *
 * **Details**
 *
 * `message` is the reference's message verbatim; `source` is the name the
 * message was built with (the Session path, or "Pi Session"). `line` is set for
 * `malformed_json` (1-based), `entryId` for `duplicate_id`, `cycle` and
 * `missing_parent` (for the last, the parent id that could not be found).
 *
 * @category errors
 * @since 0.1.0
 */
export class SessionInvalid extends Schema.TaggedError<SessionInvalid>()("SessionInvalid", {
  kind: SessionInvalidKind,
  message: Schema.String,
  source: Schema.String,
  line: Schema.optionalKey(Schema.Number),
  entryId: Schema.optionalKey(Schema.String)
}) {
  /** Line `line` (1-based) is neither blank nor JSON. @category constructors @since 0.1.0 */
  static malformedJson(source: string, line: number): SessionInvalid {
    return invalid("malformed_json", source, `contains malformed JSON at line ${line}`, { line })
  }

  /** The first record is not a header with a non-empty string id. @category constructors @since 0.1.0 */
  static invalidHeader(source: string): SessionInvalid {
    return invalid("invalid_header", source, "does not begin with a valid Pi Session header")
  }

  /** An entry of a tree Session has no non-empty string id. @category constructors @since 0.1.0 */
  static entryWithoutId(source: string): SessionInvalid {
    return invalid("entry_without_id", source, "contains a Session entry without an ID")
  }

  /** Two entries of a tree Session share an id. @category constructors @since 0.1.0 */
  static duplicateId(source: string, entryId: string): SessionInvalid {
    return invalid("duplicate_id", source, `contains duplicate Session entry ID ${entryId}`, { entryId })
  }

  /**
   * The walk from the last entry came back to the entry `entryId`: whatever
   * that entry holds as its id, rendered as a template literal renders it,
   * as in the reference's message.
   *
   * @category constructors
   * @since 0.1.0
   */
  static cycle(source: string, entryId: unknown): SessionInvalid {
    return invalid("cycle", source, `contains a cycle at Session entry ${entryId}`, { entryId: `${entryId}` })
  }

  /** No entry has the id `parentId` the walk needs next (rendered as in `cycle`). @category constructors @since 0.1.0 */
  static missingParent(source: string, parentId: unknown): SessionInvalid {
    return invalid("missing_parent", source, `is missing parent Session entry ${parentId}`, { entryId: `${parentId}` })
  }
}

/** The reference's message is always the source, then what is wrong with it. */
const invalid = (
  kind: SessionInvalidKind,
  source: string,
  problem: string,
  at: { readonly line?: number; readonly entryId?: string } = {}
): SessionInvalid => new SessionInvalid({ kind, message: `${source} ${problem}`, source, ...at })

/**
 * No Session matches the reference.
 *
 * **Details**
 *
 * `lookup: "path"` means the reference looked like a path and no regular file
 * exists there; `lookup: "id"` means no Session under the root has that header
 * id.
 *
 * @category errors
 * @since 0.1.0
 */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", {
  reference: Schema.String,
  lookup: Schema.Literals(["path", "id"])
}) {
  override get message() {
    return this.lookup === "path"
      ? `Pi Session file not found: ${this.reference}`
      : `No persisted Pi Session has exact ID ${this.reference}`
  }
}

/**
 * More than one Session file under the root carries the referenced id.
 *
 * @category errors
 * @since 0.1.0
 */
export class SessionAmbiguous extends Schema.TaggedError<SessionAmbiguous>()("SessionAmbiguous", {
  reference: Schema.String,
  files: Schema.Array(Schema.String)
}) {
  /** How many files matched. */
  get count(): number {
    return this.files.length
  }
  override get message() {
    return `Pi Session ID ${this.reference} is ambiguous across ${this.files.length} files; pass an exact path`
  }
}

/**
 * The file system refused an operation while locating or reading a Session.
 *
 * **Details**
 *
 * `cause` is the `PlatformError`; its reason says whether the file was simply
 * gone (`NotFound`), which the native observation reports as `missing`.
 *
 * @category errors
 * @since 0.1.0
 */
export class SessionIo extends Schema.TaggedError<SessionIo>()("SessionIo", {
  path: Schema.String,
  cause: Schema.Defect()
}) {
  override get message() {
    return `Pi Session I/O failed at ${this.path}`
  }
}

/**
 * The Session is larger than the reference can read: `readFile(path, "utf8")`
 * would fail for it, so it is never read whole (see `SessionLimits`).
 *
 * **Details**
 *
 * `reason: "file"`: the file's size (`size`, bytes, as `fstat` reported it
 * when the read began) is over `limit`, the largest file Node reads whole
 * (2 GiB - 1). `reason: "text"`: its UTF-8 decoded text is longer than
 * `limit` UTF-16 code units, the longest string V8 can make; the read gave up
 * as soon as the count passed the limit.
 *
 * @category errors
 * @since 0.1.0
 */
export class SessionTooLarge extends Schema.TaggedError<SessionTooLarge>()("SessionTooLarge", {
  path: Schema.String,
  reason: Schema.Literals(["file", "text"]),
  size: Schema.Number,
  limit: Schema.Number
}) {
  override get message() {
    return this.reason === "file"
      ? `Pi Session ${this.path} is too large to read: ${this.size} bytes, more than ${this.limit}`
      : `Pi Session ${this.path} is too large to read: its text is longer than ${this.limit} UTF-16 code units`
  }
}

/**
 * Any failure of the Session reader.
 *
 * @category errors
 * @since 0.1.0
 */
export type SessionError = SessionInvalid | SessionNotFound | SessionAmbiguous | SessionIo | SessionTooLarge

/**
 * Whether an I/O failure means the file is not there (ENOENT), as opposed to
 * being unreadable for another reason.
 *
 * @category predicates
 * @since 0.1.0
 */
export const isSessionMissing = (error: SessionError): boolean =>
  error._tag === "SessionIo" && isPlatformError(error.cause) && error.cause.reason._tag === "NotFound"

/**
 * The `Error` the reference throws for a Session query failure: plain `Error`
 * class, `name` "RarebitQueryError", the same message.
 *
 * @category conversions
 * @since 0.1.0
 */
export const toQueryError = (error: SessionInvalid | SessionNotFound | SessionAmbiguous): Error => {
  const queryError = new Error(error.message)
  queryError.name = "RarebitQueryError"
  return queryError
}
