/**
 * The one place where tagged failures become the reference's errors.
 *
 * Plain callers catch by class (`TypeError`, `RangeError`, `Error`) and
 * match message phrases; file-system failures surface as the original Node
 * error (with its `code`), as they do from the reference; a caller's hook
 * failure surfaces as whatever the hook threw.
 *
 * @since 0.1.0
 */
import { isPlatformError } from "effect/PlatformError"
import { type SessionError, toReferenceError } from "../session/SessionErrors.js"

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

/**
 * Converts a failure of the Effect API into what the reference would throw.
 *
 * @category errors
 * @since 0.1.0
 */
export const toPlainError = (error: unknown): unknown => {
  if (typeof error !== "object" || error === null) return error
  const tag = (error as { readonly _tag?: unknown })._tag
  if (tag === "StoreIo") return nodeErrorOf((error as { readonly cause: unknown }).cause)
  if (tag === "SettleHookFailed") return (error as { readonly cause: unknown }).cause
  if (tag === "ProjectionInputInvalid") return new TypeError((error as Error).message)
  if (tag === "PlatformError") return nodeErrorOf(error)
  if (isSessionError(error)) return toReferenceError(error)
  const plainClass = plainClassOf(error)
  if (plainClass === undefined) return error
  const plain = new constructors[plainClass]((error as Error).message)
  Object.defineProperty(plain, "rarebitTag", { value: tag, enumerable: false })
  return plain
}
