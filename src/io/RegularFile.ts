/**
 * Opening and reading files that must be regular files, without ever
 * blocking or reading without bound, whatever is found at the path.
 *
 * Everything the store and the CLI open (commit locks, claims, sidecars,
 * Sessions, the claims directory for its fsync) goes through here. A FIFO, a
 * socket, a device, a directory or (where the caller forbids one) a symlink
 * at the path is refused with `FileNotRegular`, promptly: the open itself
 * cannot wait for a FIFO peer, and nothing is read from what is refused.
 *
 * How, with the `NonBlockingOpen` capability (our Node file systems and the
 * in-memory one): `open(2)` with `O_NONBLOCK` (plus `O_NOFOLLOW` when
 * symlinks are not followed), then `fstat(2)` of the handle; anything but a
 * regular file is closed at once. The check is on the handle, so no swap of
 * the path between a check and the open can slip anything past it.
 *
 * Without it (a foreign `FileSystem`), a portable fallback: `lstat` (or
 * `stat` when following) refuses what is not a regular file, then the open,
 * then the handle's `fstat` is checked again. It refuses the same files, but
 * a FIFO swapped in between the check and the open can still make that open
 * wait: only the capability closes that window.
 *
 * Where the platform has no `O_NOFOLLOW` (Windows: see `PlatformTraits`), a
 * symlink or junction is refused by identity instead: the path's `lstat`
 * must be a regular file (or a directory, for `openDirectory`), and the
 * opened handle's `fstat` must be that same file (device and inode). A
 * symlink swapped in between the two shows as another file; the open is
 * closed and tried again from the `lstat`, and refused as a symlink if the
 * path keeps changing.
 *
 * `readBounded` never trusts a size `fstat` reports (files grow, and `/proc`
 * reports 0): it reads until end of file or until one byte more than the
 * caller's limit, whichever comes first.
 *
 * @since 0.1.0
 */
import { Effect, Exit, type FileSystem, Option, type PlatformError, Schema, Scope } from "effect"
import { fileIdentity } from "../protocol/internal/FileInfo.js"
import { errnoOf } from "./ErrnoCode.js"
import { nonBlockingOpenOf, platformTraitsOf } from "./NonBlockingOpen.js"

/**
 * A path that must be a regular file is something else.
 *
 * **Details**
 *
 * `type` is the file type found: `FIFO`, `Socket`, `CharacterDevice`,
 * `BlockDevice`, `Directory`, `SymbolicLink` (when symlinks are not
 * followed), or `Unknown`.
 *
 * @category errors
 * @since 0.1.0
 */
export class FileNotRegular extends Schema.TaggedError<FileNotRegular>()("FileNotRegular", {
  path: Schema.String,
  type: Schema.String
}) {
  override get message() {
    return `${this.path} is ${describeType(this.type)}, not a regular file`
  }
}

/**
 * How a file type reads in a sentence: "a FIFO", "a symlink", ...
 *
 * @category formatting
 * @since 0.1.0
 */
export const describeType = (type: string): string => {
  switch (type) {
    case "FIFO":
      return "a FIFO"
    case "Socket":
      return "a socket"
    case "CharacterDevice":
      return "a character device"
    case "BlockDevice":
      return "a block device"
    case "Directory":
      return "a directory"
    case "SymbolicLink":
      return "a symlink"
    case "File":
      return "a regular file"
    default:
      return "a file of unknown type"
  }
}

/**
 * Options of `openRegular`.
 *
 * @category models
 * @since 0.1.0
 */
export interface OpenRegularOptions {
  /** `r` reads; `a+` reads and appends, creating the file (with `mode`) when absent. */
  readonly flag: "r" | "a+"
  readonly mode?: number | undefined
  /** Whether a symlink at the path is followed (Sessions) or refused (store files). */
  readonly followSymlinks: boolean
}

/**
 * An open regular file and what `fstat` said of it when it was opened.
 *
 * @category models
 * @since 0.1.0
 */
export interface OpenedRegular {
  readonly file: FileSystem.File
  readonly info: FileSystem.File.Info
}

/**
 * What an open's failure says about the file: `ENXIO` (a socket, or a FIFO
 * opened for writing without a reader; macOS refuses a socket with
 * `EOPNOTSUPP` instead), `ELOOP` under `O_NOFOLLOW` (a
 * symlink) and `EISDIR` (a directory opened for writing) mean the path is
 * not a regular file; which type it is comes from a `(l)stat`.
 */
const refusalOf = (
  fs: FileSystem.FileSystem,
  path: string,
  followSymlinks: boolean,
  error: PlatformError.PlatformError
): Effect.Effect<never, PlatformError.PlatformError | FileNotRegular> => {
  const code = errnoOf(error)
  if (code === "EISDIR") return Effect.fail(new FileNotRegular({ path, type: "Directory" }))
  if (code !== "ENXIO" && code !== "EOPNOTSUPP" && !(code === "ELOOP" && !followSymlinks)) return Effect.fail(error)
  const found: Effect.Effect<FileSystem.File.Info, PlatformError.PlatformError> = followSymlinks
    ? fs.stat(path)
    : fs.lstat(path)
  return Effect.flatMap(
    Effect.orElseSucceed(found, () => undefined),
    (info): Effect.Effect<never, PlatformError.PlatformError | FileNotRegular> =>
      info === undefined || info.type === "File"
        ? Effect.fail(error)
        : Effect.fail(new FileNotRegular({ path, type: info.type }))
  )
}

/**
 * The handle is not the file an `lstat` of its path found a moment before:
 * something was swapped in between (internal: retried, then a refusal).
 */
class IdentityChanged extends Schema.TaggedError<IdentityChanged>()("IdentityChanged", { path: Schema.String }) {}

/**
 * Checks an open handle: a regular file (and, given `expected`, the very
 * file an `lstat` found), or the refusal (the caller closes what was opened).
 */
const checkRegular = (
  path: string,
  file: FileSystem.File,
  expected?: FileSystem.File.Info
): Effect.Effect<OpenedRegular, PlatformError.PlatformError | FileNotRegular | IdentityChanged> =>
  Effect.flatMap(
    file.stat,
    (info): Effect.Effect<OpenedRegular, FileNotRegular | IdentityChanged> => {
      if (info.type !== "File") return Effect.fail(new FileNotRegular({ path, type: info.type }))
      if (expected !== undefined && fileIdentity(info) !== fileIdentity(expected)) {
        return Effect.fail(new IdentityChanged({ path }))
      }
      return Effect.succeed({ file, info })
    }
  )

/** Whether opens of `fs` must refuse a symlink by identity, having no `O_NOFOLLOW`. */
const needsIdentityCheck = (fs: FileSystem.FileSystem, noFollow: boolean): boolean =>
  noFollow && !platformTraitsOf(fs).noFollowOpen

/**
 * Opens through `open` in a child of the caller's scope, checks the handle,
 * and closes the child at once unless it is a regular file. (Registered in
 * the caller's scope as soon as it exists, so an interruption anywhere
 * leaves nothing open past that scope.)
 */
const openChecked = (
  path: string,
  open: Effect.Effect<FileSystem.File, PlatformError.PlatformError, Scope.Scope>,
  onOpenFailure: (
    error: PlatformError.PlatformError
  ) => Effect.Effect<never, PlatformError.PlatformError | FileNotRegular>,
  expected?: FileSystem.File.Info
): Effect.Effect<OpenedRegular, PlatformError.PlatformError | FileNotRegular | IdentityChanged, Scope.Scope> =>
  Effect.flatMap(Effect.scope, (parent) => {
    const child = Scope.forkUnsafe(parent)
    return Effect.onError(
      Effect.flatMap(
        Effect.catch(Scope.provide(open, child), onOpenFailure),
        (file) => checkRegular(path, file, expected)
      ),
      () => Scope.close(child, Exit.void)
    )
  })

/**
 * Opens a file that must be a regular file, without blocking, for the
 * current scope.
 *
 * **Details**
 *
 * A FIFO, socket, device or directory at the path (or, without
 * `followSymlinks`, a symlink) fails with `FileNotRegular` and leaves
 * nothing open; a missing path fails with the file system's `NotFound`
 * (except with `a+`, which creates the file). The returned `info` is the
 * handle's `fstat`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const openRegular = (
  fs: FileSystem.FileSystem,
  path: string,
  options: OpenRegularOptions
): Effect.Effect<OpenedRegular, PlatformError.PlatformError | FileNotRegular, Scope.Scope> => {
  const open = nonBlockingOpenOf(fs)
  const noFollow = !options.followSymlinks
  if (open !== undefined && !needsIdentityCheck(fs, noFollow)) {
    return Effect.catchTag(
      openChecked(
        path,
        open(path, { flag: options.flag, mode: options.mode, noFollow }),
        (error) => refusalOf(fs, path, options.followSymlinks, error)
      ),
      "IdentityChanged",
      Effect.die
    )
  }
  return openPortably(fs, path, options)
}

/**
 * The fallback for a file system without the non-blocking open: refuse what
 * a `(l)stat` shows is not a regular file, then open, then check the handle.
 * `a+` on a missing path creates exclusively (`ax+`), so it never opens
 * something that appeared in between; a lost race is retried from the check.
 * When symlinks are refused, the handle must be the file the `lstat` found
 * (the only refusal of a symlink where the platform has no `O_NOFOLLOW`).
 */
const openPortably = (
  fs: FileSystem.FileSystem,
  path: string,
  options: OpenRegularOptions
): Effect.Effect<OpenedRegular, PlatformError.PlatformError | FileNotRegular, Scope.Scope> => {
  const noFollow = !options.followSymlinks
  const creates = options.flag === "a+"
  const attempt = (
    retries: number
  ): Effect.Effect<OpenedRegular, PlatformError.PlatformError | FileNotRegular, Scope.Scope> =>
    (options.followSymlinks ? fs.stat(path) : fs.lstat(path)).pipe(
      Effect.map(Option.some),
      Effect.catchIf(
        (error) => creates && error.reason._tag === "NotFound",
        () => Effect.succeed(Option.none<FileSystem.File.Info>())
      ),
      Effect.flatMap((found) => {
        if (Option.isSome(found) && found.value.type !== "File") {
          return Effect.fail(new FileNotRegular({ path, type: found.value.type }))
        }
        const flag = Option.isNone(found) ? "ax+" : options.flag
        return openChecked(
          path,
          fs.open(path, { flag, noFollow, ...(options.mode === undefined ? {} : { mode: options.mode }) }),
          (error) => refusalOf(fs, path, options.followSymlinks, error),
          noFollow ? Option.getOrUndefined(found) : undefined
        ).pipe(
          Effect.catchIf(
            (error) =>
              flag === "ax+" && retries > 0 && error._tag === "PlatformError" && error.reason._tag === "AlreadyExists",
            () => attempt(retries - 1)
          ),
          Effect.catchTag("IdentityChanged", () =>
            retries > 0
              ? attempt(retries - 1)
              : Effect.fail(new FileNotRegular({ path, type: "SymbolicLink" })))
        )
      })
    )
  return attempt(3)
}

/**
 * What `readBounded` found: the whole file, or more than the limit (of which
 * nothing is returned).
 *
 * @category models
 * @since 0.1.0
 */
export type BoundedRead =
  | { readonly _tag: "Read"; readonly bytes: Uint8Array; readonly info: FileSystem.File.Info }
  | { readonly _tag: "TooLarge"; readonly info: FileSystem.File.Info }

/**
 * Reads a regular file of at most `maxBytes` bytes, without blocking and
 * without reading more than `maxBytes + 1` bytes whatever is at the path.
 *
 * @category readers
 * @since 0.1.0
 */
export const readBounded = (
  fs: FileSystem.FileSystem,
  path: string,
  options: { readonly maxBytes: number; readonly followSymlinks: boolean }
): Effect.Effect<BoundedRead, PlatformError.PlatformError | FileNotRegular> => {
  const open = nonBlockingOpenOf(fs)
  // Its own scope holds the handle, so a refused file is closed when that scope
  // ends; no child scope is needed (this runs on every claim and lock read).
  const opened = open !== undefined && !needsIdentityCheck(fs, !options.followSymlinks)
    ? Effect.flatMap(
      Effect.catch(
        open(path, { flag: "r", noFollow: !options.followSymlinks }),
        (error) => refusalOf(fs, path, options.followSymlinks, error)
      ),
      (file) => Effect.catchTag(checkRegular(path, file), "IdentityChanged", Effect.die)
    )
    : openPortably(fs, path, { flag: "r", followSymlinks: options.followSymlinks })
  return Effect.scoped(
    Effect.flatMap(
      opened,
      ({ file, info }) =>
        Effect.map(
          readUpTo(file, options.maxBytes + 1, Number(info.size)),
          (bytes): BoundedRead =>
            bytes.length > options.maxBytes ? { _tag: "TooLarge", info } : { _tag: "Read", bytes, info }
        )
    )
  )
}

/**
 * Reads from the start of a regular file until end of file or `limit`
 * bytes, whichever comes first.
 *
 * **Details**
 *
 * A read of a regular file returns fewer bytes than asked only at end of
 * file, so a short read ends the loop without a second read to see it
 * return nothing. The buffer starts at `sizeHint + 1` bytes (the size a
 * `fstat` gave, and one byte to see the end) and doubles, up to `limit`,
 * only if the file grew past it: a 300-byte claim read under a 64 KiB
 * bound allocates 301 bytes, not 64 KiB.
 *
 * @category readers
 * @since 0.1.0
 */
export const readUpTo = (
  file: FileSystem.File,
  limit: number,
  sizeHint: number = limit
): Effect.Effect<Uint8Array, PlatformError.PlatformError> => {
  let buffer = new Uint8Array(Math.max(1, Math.min(limit, sizeHint + 1)))
  const loop = (filled: number): Effect.Effect<Uint8Array, PlatformError.PlatformError> => {
    if (filled === buffer.length) {
      if (filled >= limit) return Effect.succeed(buffer)
      const larger = new Uint8Array(Math.min(limit, 2 * buffer.length))
      larger.set(buffer)
      buffer = larger
    }
    return Effect.flatMap(
      file.read(buffer.subarray(filled), { position: BigInt(filled) }),
      (count) =>
        count < buffer.length - filled ? Effect.succeed(buffer.subarray(0, filled + count)) : loop(filled + count)
    )
  }
  return loop(0)
}

/**
 * Reads a regular file, already open, from the start to its end: as many
 * bytes as its `fstat` size said, and on until a read returns nothing, so a
 * file that grew meanwhile is read whole, as `readFile` does.
 *
 * @category readers
 * @since 0.1.0
 */
export const readToEnd = (
  file: FileSystem.File,
  info: FileSystem.File.Info
): Effect.Effect<Uint8Array, PlatformError.PlatformError> => {
  let buffer = new Uint8Array(Math.max(Number(info.size), 0) + 1)
  const loop = (filled: number): Effect.Effect<Uint8Array, PlatformError.PlatformError> => {
    if (filled === buffer.length) {
      const grown = new Uint8Array(buffer.length * 2)
      grown.set(buffer)
      buffer = grown
    }
    return Effect.flatMap(
      file.read(buffer.subarray(filled), { position: BigInt(filled) }),
      (count) => (count === 0 ? Effect.succeed(buffer.subarray(0, filled)) : loop(filled + count))
    )
  }
  return loop(0)
}

/**
 * A path that must be a directory is something else (or, since directories
 * are never followed through symlinks here, a symlink).
 *
 * @category errors
 * @since 0.1.0
 */
export class NotDirectory extends Schema.TaggedError<NotDirectory>()("NotDirectory", {
  path: Schema.String,
  type: Schema.String
}) {
  override get message() {
    return `${this.path} is ${describeType(this.type)}, not a directory`
  }
}

/**
 * Opens a directory for the current scope (to `fsync` it, or to `fchmod` it
 * through the handle), refusing a symlink or anything else at the path.
 *
 * **Details**
 *
 * With the non-blocking open this is `open(2)` with `O_DIRECTORY |
 * O_NOFOLLOW | O_NONBLOCK`, then `fstat`: nothing but the directory itself
 * is ever opened. Without it, or where the platform has no `O_NOFOLLOW`
 * (Windows), an `lstat` refuses anything but a directory, then
 * `fs.open(path, { noFollow: true })` and the same `fstat` check, which
 * must also find the directory the `lstat` found (a symlink or junction
 * swapped in between is refused): only a FIFO swapped in between the two
 * can make that open wait.
 *
 * @category constructors
 * @since 0.1.0
 */
export const openDirectory = (
  fs: FileSystem.FileSystem,
  path: string
): Effect.Effect<OpenedRegular, PlatformError.PlatformError | NotDirectory, Scope.Scope> => {
  const open = nonBlockingOpenOf(fs)
  // The `lstat` of the fallback, which the handle must match.
  let expected: FileSystem.File.Info | undefined
  const opened: Effect.Effect<FileSystem.File, PlatformError.PlatformError | NotDirectory, Scope.Scope> =
    open !== undefined && !needsIdentityCheck(fs, true)
      ? open(path, { flag: "r", noFollow: true, directory: true })
      // Without it, an `lstat` first: only a directory is ever opened, unless one is swapped in between.
      : Effect.flatMap(
        fs.lstat(path),
        (info): Effect.Effect<FileSystem.File, PlatformError.PlatformError | NotDirectory, Scope.Scope> => {
          expected = info
          return info.type === "Directory"
            ? fs.open(path, { flag: "r", noFollow: true })
            : Effect.fail(new NotDirectory({ path, type: info.type }))
        }
      )
  return Effect.flatMap(
    Effect.scope,
    (parent) =>
      Effect.flatMap(Scope.fork(parent), (child) =>
        Scope.provide(opened, child).pipe(
          Effect.catchTag(
            "PlatformError",
            (error): Effect.Effect<never, PlatformError.PlatformError | NotDirectory> => {
              const code = errnoOf(error)
              if (code !== "ENOTDIR" && code !== "ELOOP") return Effect.fail(error)
              return Effect.flatMap(
                Effect.orElseSucceed(fs.lstat(path), () => undefined),
                (info): Effect.Effect<never, PlatformError.PlatformError | NotDirectory> =>
                  info === undefined || info.type === "Directory"
                    ? Effect.fail(error)
                    : Effect.fail(new NotDirectory({ path, type: info.type }))
              )
            }
          ),
          Effect.flatMap((file) =>
            Effect.flatMap(file.stat, (info): Effect.Effect<OpenedRegular, NotDirectory> => {
              if (info.type !== "Directory") return Effect.fail(new NotDirectory({ path, type: info.type }))
              // Not the directory the `lstat` found: what the path named then was swapped (a junction, say).
              if (expected !== undefined && fileIdentity(info) !== fileIdentity(expected)) {
                return Effect.fail(new NotDirectory({ path, type: "SymbolicLink" }))
              }
              return Effect.succeed({ file, info })
            })
          ),
          Effect.onError(() => Scope.close(child, Exit.void))
        ))
  )
}
