/**
 * The errno code behind a file-system failure (`ENOENT`, `EACCES`, `ELOOP`,
 * ...), where a `PlatformError`'s reason says less than the code does.
 *
 * @since 0.1.0
 */
import type { PlatformError } from "effect/PlatformError"

/**
 * The errno code of the Node-style error a `PlatformError` carries, or
 * `undefined` when it carries none.
 *
 * @category accessors
 * @since 0.1.0
 */
export const errnoOf = (error: PlatformError): string | undefined => {
  const cause = error.reason.cause
  const code = typeof cause === "object" && cause !== null && "code" in cause ? cause.code : undefined
  return typeof code === "string" ? code : undefined
}
