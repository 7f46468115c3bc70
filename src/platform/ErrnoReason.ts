/**
 * How Node's errno codes map to `PlatformError` reasons, the way
 * `@effect/platform-node` maps them. Shared by the direct file system (real
 * errors) and the testing kit (simulated ones), so the two cannot drift.
 *
 * @since 0.1.0
 */
import type { PlatformError } from "effect"

/**
 * The `SystemError` reason for an errno code: `ENOENT` is `NotFound`,
 * `EACCES`/`EPERM` are `PermissionDenied`, `EEXIST` is `AlreadyExists`,
 * `EISDIR`/`ENOTDIR`/`ELOOP` are `BadResource`, `EBUSY` is `Busy`, and
 * everything else (`EIO`, `ENOSPC`, `ENOTEMPTY`, `EINVAL`, `EBADF`, ...) is
 * `Unknown`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const errnoReason = (code: string): PlatformError.SystemErrorTag => {
  switch (code) {
    case "ENOENT":
      return "NotFound"
    case "EACCES":
    case "EPERM":
      return "PermissionDenied"
    case "EEXIST":
      return "AlreadyExists"
    case "EISDIR":
    case "ENOTDIR":
    case "ELOOP":
      return "BadResource"
    case "EBUSY":
      return "Busy"
    default:
      return "Unknown"
  }
}
