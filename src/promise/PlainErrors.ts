/**
 * The one place where tagged failures become the reference's errors.
 *
 * Plain callers catch by class (`TypeError`, `RangeError`, `Error`) and
 * match message phrases; file-system failures surface as the original Node
 * error (with its `code`), as they do from the reference, including Node's
 * `TypeError` for a path it refuses outright (a NUL byte:
 * `ERR_INVALID_ARG_VALUE`); a caller's hook failure surfaces as whatever the
 * hook threw. Nothing of Effect's (`PlatformError`, `SchemaError`) and no
 * tagged error of the store or the Session reader reaches a plain caller:
 * `referenceErrors` has one entry per tag, and the compiler checks that
 * every failure the store and the reader can report has one.
 *
 * @since 0.1.0
 */
import { isPlatformError, type PlatformError } from "effect/PlatformError"
import { type SessionError, type SessionIo, type SessionTooLarge, toQueryError } from "../session/SessionErrors.js"
import type { ProjectionInputInvalid } from "../state/ArtifactState.js"
import type { ReceiptInvalid, SettleHookFailed, StoreIo } from "../store/Errors.js"
import type { StoreError } from "../store/RarebitStore.js"
import { CREATE_PRIVATE_DIRECTORY } from "../store/write/PrivateDirectory.js"

/** Every tagged failure the Promise API can meet. */
type Ours = StoreError | SessionError | ProjectionInputInvalid

/** The underlying Node error of a platform error, when it has one. */
const nodeErrorOf = (cause: unknown): unknown => {
  if (isPlatformError(cause)) {
    const inner = cause.reason.cause
    if (inner instanceof Error) return inner
  }
  return cause
}

interface NodeSystemError extends Error {
  readonly code?: unknown
  readonly errno?: unknown
  readonly syscall?: unknown
  readonly path?: unknown
}

// A commit lock is written to a private temp file next to it and then linked
// into place; the reference opens the lock file itself. A failure to open
// that temp file (EACCES, ENOENT, ENOTDIR, ...) is the failure the reference
// meets opening the lock, so it is reported on the lock.
const TEMP_WRITES: ReadonlySet<string> = new Set(["acquire commit lock"])
const TEMP_FILE = /\.[0-9a-f]+\.tmp$/

const onTargetInsteadOfTemp = (target: string, error: unknown): unknown => {
  const system = error as NodeSystemError
  if (!(error instanceof Error) || system.syscall !== "open" || typeof system.path !== "string") return error
  if (!TEMP_FILE.test(system.path) || !system.message.includes(`'${system.path}'`)) return error
  const moved: NodeSystemError = Object.assign(new Error(system.message.replace(`'${system.path}'`, `'${target}'`)), {
    errno: system.errno,
    code: system.code,
    syscall: system.syscall,
    path: target
  })
  return moved
}

// A private directory is looked up with lstat before anything is made; the
// reference's recursive mkdir resolves the same path and fails there with
// the same code, naming mkdir.
const asMkdir = (error: unknown): unknown => {
  const system = error as NodeSystemError
  if (!(error instanceof Error) || system.syscall !== "lstat" || typeof system.path !== "string") return error
  const named = `, lstat '${system.path}'`
  if (!system.message.endsWith(named)) return error
  const moved: NodeSystemError = Object.assign(
    new Error(`${system.message.slice(0, -named.length)}, mkdir '${system.path}'`),
    { errno: system.errno, code: system.code, syscall: "mkdir", path: system.path }
  )
  return moved
}

/** The reference's class with our message, tagged (not enumerably) with the condition it stands for. */
const plain = (Class: ErrorConstructor | TypeErrorConstructor | RangeErrorConstructor) => (error: Ours): Error => {
  const converted = new Class(error.message)
  Object.defineProperty(converted, "rarebitTag", { value: error._tag, enumerable: false })
  return converted
}

// The reference's own wording, built as it builds it: a status whose
// string conversion throws makes the reference throw that, and this too.
const receiptInvalid = (error: ReceiptInvalid): Error => {
  const converted = new TypeError(
    `Rarebit ${error.kind} receipt does not match protocol v4 (${error.status}; keys: ${error.keys.join(",")})`
  )
  Object.defineProperty(converted, "rarebitTag", { value: error._tag, enumerable: false })
  return converted
}

const storeIo = (error: StoreIo): unknown => {
  const cause = error.cause
  // A failure of ours as the cause (a sidecar page that cannot be read)
  // is converted like any other of our failures.
  if (isOurs(cause)) return toPlainError(cause)
  if (error.operation === CREATE_PRIVATE_DIRECTORY) return asMkdir(nodeErrorOf(cause))
  return TEMP_WRITES.has(error.operation) ? onTargetInsteadOfTemp(error.path, nodeErrorOf(cause)) : nodeErrorOf(cause)
}

// The reference lets the Node error escape untouched: the original one kept
// inside the `PlatformError` (with its `code`, `errno`, `syscall`), or the
// `PlatformError` itself when there is none.
const sessionIo = (error: SessionIo): unknown => {
  const cause = error.cause
  return isPlatformError(cause) && cause.reason.cause !== undefined ? cause.reason.cause : cause
}

// What Node's `readFile(path, "utf8")` throws for such a file, on Node 20
// and 22 alike. Node gives each coded error a class of its own (a subclass
// of `RangeError` named `RangeError`); this one is a plain `RangeError` with
// the same `name`, `message`, `code` and `String()` rendering.
const sessionTooLarge = (error: SessionTooLarge): RangeError => {
  if (error.reason === "text") return new RangeError("Invalid string length")
  const code = "ERR_FS_FILE_TOO_LARGE"
  const converted = new RangeError(`File size (${error.size}) is greater than 2 GiB`)
  Object.defineProperty(converted, "code", { value: code, enumerable: true, writable: true, configurable: true })
  Object.defineProperty(converted, "toString", {
    value(this: Error) {
      return `${this.name} [${code}]: ${this.message}`
    },
    enumerable: false,
    writable: true,
    configurable: true
  })
  return converted
}

/**
 * What the reference throws for each of our failures, by tag.
 *
 * **Details**
 *
 * Store failures are the reference's `Error`, `TypeError` or `RangeError`
 * with our message (which keeps the reference's phrases), except a receipt
 * that fails validation (the reference's own wording), a file-system
 * failure (the Node error, as the reference meets it) and a hook failure
 * (what the hook threw). Session query failures are the reference's
 * `RarebitQueryError`; a Session too large to read is the `RangeError`
 * Node's `readFile` throws for it.
 */
const referenceErrors: { readonly [Tag in Ours["_tag"]]: (error: Extract<Ours, { readonly _tag: Tag }>) => unknown } = {
  SessionFileRequired: plain(Error),
  SessionOutsideRoot: plain(Error),
  NotRegularFile: plain(Error),
  UnsafeDirectory: plain(Error),
  InvalidJobId: plain(TypeError),
  InvalidLease: plain(TypeError),
  HistoryBoundsInvalid: plain(TypeError),
  ReservationNotAcquired: plain(Error),
  ReceiptTypeUnsupported: plain(TypeError),
  ReceiptInvalid: receiptInvalid,
  ReceiptTooLarge: plain(RangeError),
  HeadTooLarge: plain(RangeError),
  LeaseFenced: plain(Error),
  LockHeld: plain(Error),
  HeadInvalid: plain(Error),
  HistoryUnreadable: plain(Error),
  SettleHookFailed: (error: SettleHookFailed) => error.cause,
  StoreIo: storeIo,
  ProjectionInputInvalid: (error: ProjectionInputInvalid) => new TypeError(error.message),
  SessionInvalid: toQueryError,
  SessionNotFound: toQueryError,
  SessionAmbiguous: toQueryError,
  SessionIo: sessionIo,
  SessionTooLarge: sessionTooLarge,
  SessionRootNotFound: plain(Error)
}

const tagOf = (error: unknown): unknown =>
  typeof error === "object" && error !== null ? (error as { readonly _tag?: unknown })._tag : undefined

const isOurs = (error: unknown): error is Ours => {
  const tag = tagOf(error)
  return typeof tag === "string" && Object.hasOwn(referenceErrors, tag)
}

/**
 * Converts a failure of the Effect API into what the reference would throw.
 *
 * **Details**
 *
 * A `PlatformError` becomes the Node error inside it; anything that is not
 * one of our tagged failures is returned as it is.
 *
 * @category errors
 * @since 0.1.0
 */
export const toPlainError = (error: unknown): unknown => {
  if (isOurs(error)) {
    const convert = referenceErrors[error._tag] as (error: Ours) => unknown
    return convert(error)
  }
  return tagOf(error) === "PlatformError" ? nodeErrorOf(error as PlatformError) : error
}
