/**
 * POSIX errno failures shaped exactly like the ones `NodeFileSystem` produces.
 *
 * The Node layer turns a libuv error into a `PlatformError` whose `SystemError`
 * carries a reason tag derived from the errno code, the `FileSystem` method name,
 * the first argument of the failing call as `pathOrDescriptor`, the libuv
 * syscall, and the original Node exception as `cause`. The fakes in this folder
 * build their failures here so that code under test cannot tell them apart from
 * the real thing by any field it is likely to branch on.
 *
 * @since 0.1.0
 */
import { PlatformError } from "effect"
import { errnoReason as reasonOf } from "../platform/ErrnoReason.js"

/**
 * The errno codes the testing file systems can produce.
 *
 * **Details**
 *
 * `ERR_FS_EISDIR` is not a libuv code: it is what Node's `fs.rm` throws for a
 * directory without `recursive`, and `NodeFileSystem` reports it with reason
 * `"Unknown"`.
 *
 * @category models
 * @since 0.1.0
 */
export type ErrnoCode =
  | "EACCES"
  | "EBADF"
  | "EBUSY"
  | "EEXIST"
  | "EINVAL"
  | "EIO"
  | "EISDIR"
  | "ELOOP"
  | "EMFILE"
  | "ENOENT"
  | "ENOSPC"
  | "ENOTDIR"
  | "ENOTEMPTY"
  | "ENXIO"
  | "EPERM"
  | "EROFS"
  | "ESPIPE"
  | "EXDEV"
  | "ERR_FS_EISDIR"

const table: Record<ErrnoCode, { readonly errno: number; readonly text: string }> = {
  EACCES: { errno: -13, text: "permission denied" },
  EBADF: { errno: -9, text: "bad file descriptor" },
  EBUSY: { errno: -16, text: "resource busy or locked" },
  EEXIST: { errno: -17, text: "file already exists" },
  EINVAL: { errno: -22, text: "invalid argument" },
  EIO: { errno: -5, text: "i/o error" },
  EISDIR: { errno: -21, text: "illegal operation on a directory" },
  ELOOP: { errno: -40, text: "too many symbolic links encountered" },
  EMFILE: { errno: -24, text: "too many open files" },
  ENOENT: { errno: -2, text: "no such file or directory" },
  ENOSPC: { errno: -28, text: "no space left on device" },
  ENOTDIR: { errno: -20, text: "not a directory" },
  ENOTEMPTY: { errno: -39, text: "directory not empty" },
  ENXIO: { errno: -6, text: "no such device or address" },
  EPERM: { errno: -1, text: "operation not permitted" },
  EROFS: { errno: -30, text: "read-only file system" },
  ESPIPE: { errno: -29, text: "invalid seek" },
  EXDEV: { errno: -18, text: "cross-device link not permitted" },
  ERR_FS_EISDIR: { errno: 21, text: "is a directory" }
}

/**
 * The `SystemError` reason `NodeFileSystem` assigns to an errno code.
 *
 * @category constructors
 * @since 0.1.0
 */
export const errnoReason: (code: ErrnoCode) => PlatformError.SystemErrorTag = reasonOf

/**
 * A Node-style errno exception, used as the `cause` of the failures built here.
 *
 * @category models
 * @since 0.1.0
 */
export class ErrnoException extends Error {
  readonly errno: number
  readonly code: ErrnoCode
  readonly syscall: string
  readonly path: string | undefined
  readonly dest: string | undefined
  constructor(code: ErrnoCode, syscall: string, path?: string, dest?: string) {
    const { errno, text } = table[code]
    const message = code === "ERR_FS_EISDIR"
      ? `Path is a directory: ${syscall} returned EISDIR (${text}) ${path ?? ""}`
      : `${code}: ${text}, ${syscall}${path === undefined ? "" : ` '${path}'`}` +
        (dest === undefined ? "" : ` -> '${dest}'`)
    super(message)
    this.name = "Error"
    this.errno = errno
    this.code = code
    this.syscall = syscall
    this.path = path
    this.dest = dest
  }
}

/**
 * Builds the `PlatformError` that `NodeFileSystem` would report for an errno.
 *
 * **Details**
 *
 * `pathOrDescriptor` is what the caller passed first: the path for path-based
 * methods (the link target for `symlink`, the source for `rename` and
 * `copyFile`), the file descriptor for methods of an open `File`. The message
 * of the `cause` only names a path for path-based calls, as libuv does.
 *
 * @category constructors
 * @since 0.1.0
 */
export const errnoError = (options: {
  readonly code: ErrnoCode
  readonly method: string
  readonly syscall: string
  readonly pathOrDescriptor?: string | number | undefined
  readonly dest?: string | undefined
}): PlatformError.PlatformError => {
  const target = options.pathOrDescriptor
  const cause = new ErrnoException(
    options.code,
    options.syscall,
    typeof target === "string" ? target : undefined,
    options.dest
  )
  return PlatformError.systemError({
    _tag: errnoReason(options.code),
    module: "FileSystem",
    method: options.method,
    pathOrDescriptor: target,
    syscall: options.syscall,
    cause
  })
}
