/**
 * How the store writes the small files that must appear whole (job claims
 * and commit locks): a private temp file, written and fsynced, then linked
 * into place (an exclusive create) or renamed over the old file (a
 * replacement), and the directory fsync that makes a rename or an unlink
 * durable.
 *
 * Guarantees:
 * - A temp file is created exclusively (`wx`: `O_CREAT | O_EXCL`), which
 *   never follows a symlink and never opens anything already at the path,
 *   a FIFO included: it fails with `AlreadyExists`. Only a file the write
 *   created is removed when a later step fails.
 * - When `writeDurableTemp` returns, the content is on disk (fsynced), so a
 *   link or rename of the temp file never exposes a partial file, even after
 *   a power cut.
 * - A directory is fsynced through a handle that must be a directory, opened
 *   without following a symlink and without blocking (`io/RegularFile`).
 *   On a platform that cannot fsync a directory (Windows: opening one for
 *   a flush fails `EPERM`; see `PlatformTraits`), the directory fsync is
 *   skipped and succeeds: NTFS journals its metadata, so a rename or unlink
 *   there is as durable as the platform makes it, and an operation never
 *   fails after it has committed for want of a call Windows cannot make.
 *
 * - An exclusive create (`installExclusive`) is a hard link of the temp
 *   file. Where the file system has no hard links (FAT, exFAT, some SMB
 *   shares: `link` fails `EPERM`, `ENOTSUP`, `ENOSYS`, `EXDEV`, or `EISDIR`
 *   as libuv reports FAT's answer), it falls back to an exclusive create
 *   (`wx`, as the reference creates its files) of an empty placeholder at
 *   the target, then a rename of the whole temp file over it. A reader sees
 *   nothing, an empty file, or the whole content, never part of it; the
 *   empty file is what a reader of the reference's files can see too, and
 *   the store reads it as a torn claim (in flight until its lease has
 *   passed) or a lock with no owner evidence. A crash between the two steps
 *   leaves that empty file.
 *
 * What it leaves to its callers: naming the temp file (next to its target,
 * so the link or rename stays within one file system), and the link or
 * rename itself, whose meaning (create or replace) is theirs.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import type { FileSystem } from "effect/FileSystem"
import type { PlatformError } from "effect/PlatformError"
import { errnoOf } from "../../io/ErrnoCode.js"
import { platformTraitsOf } from "../../io/NonBlockingOpen.js"
import { type NotDirectory, openDirectory } from "../../io/RegularFile.js"

const encoder = new TextEncoder()

/**
 * Writes `content` to a fresh private file and fsyncs it, so it can be
 * linked or renamed into place whole.
 *
 * @internal
 */
export const writeDurableTemp = Effect.fnUntraced(function*(fs: FileSystem, tempPath: string, content: string) {
  yield* Effect.scoped(Effect.gen(function*() {
    const file = yield* fs.open(tempPath, { flag: "wx", mode: 0o600 })
    yield* Effect.gen(function*() {
      yield* file.writeAll(encoder.encode(content))
      yield* file.sync
    }).pipe(Effect.onError(() => Effect.ignore(removeIfPresent(fs, tempPath))))
  }))
})

/**
 * Removes `path`; a file already gone is not an error.
 *
 * @internal
 */
export const removeIfPresent = (fs: FileSystem, path: string): Effect.Effect<void, PlatformError> =>
  fs.remove(path).pipe(Effect.catchReason("PlatformError", "NotFound", () => Effect.void))

/**
 * Fsyncs a directory so a rename or unlink in it is durable. The directory
 * is opened without following a symlink and without blocking, and must be
 * one. Where the platform cannot fsync a directory, nothing is done.
 *
 * @internal
 */
export const syncDirectory = (fs: FileSystem, directory: string): Effect.Effect<void, PlatformError | NotDirectory> =>
  platformTraitsOf(fs).directorySync
    ? Effect.scoped(Effect.flatMap(openDirectory(fs, directory), ({ file }) => file.sync))
    : Effect.void

// What `link` fails with where the file system has no hard links.
const LINK_UNSUPPORTED: ReadonlySet<unknown> = new Set(["EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS", "EXDEV", "EISDIR"])

/**
 * Puts the fsynced temp file at `targetPath` only if nothing is there:
 * `true` when it did, `false` when something already was. The temp file
 * stays for the caller to remove either way (a rename of the fallback
 * consumes it). See the module documentation for the fallback where hard
 * links are unsupported.
 *
 * @internal
 */
export const installExclusive = (
  fs: FileSystem,
  tempPath: string,
  targetPath: string
): Effect.Effect<boolean, PlatformError> =>
  fs.link(tempPath, targetPath).pipe(
    Effect.as(true),
    Effect.catchReason("PlatformError", "AlreadyExists", () => Effect.succeed(false)),
    Effect.catchIf(
      (error) => LINK_UNSUPPORTED.has(errnoOf(error)),
      () => placeholderThenRename(fs, tempPath, targetPath)
    )
  )

const placeholderThenRename = (fs: FileSystem, tempPath: string, targetPath: string) =>
  Effect.scoped(fs.open(targetPath, { flag: "wx", mode: 0o600 })).pipe(
    Effect.as(true),
    Effect.catchReason("PlatformError", "AlreadyExists", () => Effect.succeed(false)),
    Effect.flatMap((created) =>
      created
        ? fs.rename(tempPath, targetPath).pipe(
          // Nothing whole replaced our empty placeholder: take it away again.
          Effect.onError(() => Effect.ignore(removeIfPresent(fs, targetPath))),
          Effect.as(true)
        )
        : Effect.succeed(false)
    )
  )
