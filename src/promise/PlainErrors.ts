/**
 * The one place where tagged failures become the reference's errors.
 *
 * Plain callers catch by class (`TypeError`, `RangeError`, `Error`) and
 * match message phrases; file-system failures surface as the original Node
 * error (with its `code`), as they do from the reference, including Node's
 * `TypeError` for a path it refuses outright (a NUL byte:
 * `ERR_INVALID_ARG_VALUE`); a caller's hook failure surfaces as whatever the
 * hook threw. Nothing of Effect's (`PlatformError`, `SchemaError`) and no
 * tagged error of ours reaches a plain caller.
 *
 * @since 0.1.0
 */
import { isPlatformError } from "effect/PlatformError"
import { type SessionError, toReferenceError } from "../session/SessionErrors.js"
import { CREATE_PRIVATE_DIRECTORY } from "../store/PrivateDirectory.js"

const sessionTags: ReadonlySet<unknown> = new Set([
  "SessionInvalid",
  "SessionNotFound",
  "SessionAmbiguous",
  "SessionIo",
  "SessionTooLarge"
])

const isSessionError = (error: object): error is SessionError =>
  sessionTags.has((error as { readonly _tag?: unknown })._tag)

const constructors = { Error, TypeError, RangeError } as const

const plainClassOf = (error: object): keyof typeof constructors | undefined => {
  const plainClass = (error as { readonly plainClass?: unknown }).plainClass
  return typeof plainClass === "string" && plainClass in constructors
    ? plainClass as keyof typeof constructors
    : undefined
}

/** The underlying Node error of a platform error, when it has one. */
const nodeErrorOf = (cause: unknown): unknown => {
  if (isPlatformError(cause)) {
    const inner = (cause.reason as { readonly cause?: unknown }).cause
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

/**
 * Converts a failure of the Effect API into what the reference would throw.
 *
 * @category errors
 * @since 0.1.0
 */
export const toPlainError = (error: unknown): unknown => {
  if (typeof error !== "object" || error === null) return error
  const tag = (error as { readonly _tag?: unknown })._tag
  if (tag === "StoreIo") {
    const cause = (error as { readonly cause: unknown }).cause
    // A failure of ours as the cause (a sidecar page that cannot be read)
    // is converted like any other of our failures.
    const ours = !isPlatformError(cause) && typeof cause === "object" && cause !== null && plainClassOf(cause) !== undefined
    if (ours) return toPlainError(cause)
    const { operation, path } = error as { readonly operation: string; readonly path: string }
    if (operation === CREATE_PRIVATE_DIRECTORY) return asMkdir(nodeErrorOf(cause))
    return TEMP_WRITES.has(operation) ? onTargetInsteadOfTemp(path, nodeErrorOf(cause)) : nodeErrorOf(cause)
  }
  if (tag === "SettleHookFailed") return (error as { readonly cause: unknown }).cause
  if (tag === "ProjectionInputInvalid") return new TypeError((error as Error).message)
  if (tag === "ReceiptInvalid") {
    // The reference's own wording, built as it builds it: a status whose
    // string conversion throws makes the reference throw that, and this too.
    const { kind, keys, status } = error as { readonly kind: string; readonly status: unknown; readonly keys: ReadonlyArray<string> }
    const plain = new TypeError(`Rarebit ${kind} receipt does not match protocol v4 (${status}; keys: ${keys.join(",")})`)
    Object.defineProperty(plain, "rarebitTag", { value: tag, enumerable: false })
    return plain
  }
  if (tag === "PlatformError") return nodeErrorOf(error)
  if (isSessionError(error)) return toReferenceError(error)
  const plainClass = plainClassOf(error)
  if (plainClass === undefined) return error
  const plain = new constructors[plainClass]((error as Error).message)
  Object.defineProperty(plain, "rarebitTag", { value: tag, enumerable: false })
  return plain
}
