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
 * What it leaves to its callers: naming the temp file (next to its target,
 * so the link or rename stays within one file system), and the link or
 * rename itself, whose meaning (create or replace) is theirs.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import type { FileSystem } from "effect/FileSystem"
import type { PlatformError } from "effect/PlatformError"
import { platformTraitsOf } from "../io/NonBlockingOpen.js"
import { type NotDirectory, openDirectory } from "../io/RegularFile.js"

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
