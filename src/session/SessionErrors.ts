/**
 * The failures of reading a Pi Session, one tagged class per condition.
 *
 * Every class carries the exact message the reference package puts on its
 * `RarebitQueryError`, so the plain API can rethrow through `toQueryError`
 * and callers matching on messages keep working. `SessionIo` is different:
 * the reference lets the raw Node error escape, so `toReferenceError` hands
 * that original error back instead of inventing a query error.
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
}) {}

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
 * Any failure of the Session reader.
 *
 * @category errors
 * @since 0.1.0
 */
export type SessionError = SessionInvalid | SessionNotFound | SessionAmbiguous | SessionIo

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

/**
 * What the reference would throw for this failure.
 *
 * **Details**
 *
 * Query failures become `toQueryError`. For `SessionIo` the reference lets the
 * Node error escape untouched, so this returns the original Node error kept
 * inside the `PlatformError` (with its `code`, `errno`, `syscall`), falling
 * back to the `PlatformError` itself when there is none.
 *
 * @category conversions
 * @since 0.1.0
 */
export const toReferenceError = (error: SessionError): unknown => {
  if (error._tag !== "SessionIo") return toQueryError(error)
  const cause = error.cause
  if (isPlatformError(cause) && cause.reason.cause !== undefined) {
    return cause.reason.cause
  }
  return cause
}
