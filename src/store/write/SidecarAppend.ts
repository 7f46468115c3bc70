/**
 * Appending records to a sidecar, the one way the store writes one.
 *
 * Guarantees, for a caller that holds the sidecar's commit lock (every
 * caller does: nobody else appends meanwhile):
 * - The bytes `build` makes for the offset they will start at land there,
 *   in one write at the end of the file, and are fsynced before the call
 *   returns: what it returns is durable, including the offset.
 * - A torn fragment at the end (a crashed append, ours or the reference's)
 *   is ended with a newline first. Appended straight after it, the new
 *   record would share its line, and readers and the recovery scan would
 *   skip the record; ended, the fragment is an unparsable line of its own,
 *   which readers skip.
 * - The sidecar is created 0600 when missing and is made 0600 through the
 *   open handle (`fchmod`), so a path swapped meanwhile for a symlink never
 *   has its target's mode changed.
 * - The sidecar is opened without following a symlink and without blocking,
 *   and must be a regular file: otherwise nothing is written, and the
 *   failure is a `StoreIo` carrying `FileNotRegular`.
 * - If `build` fails, nothing is appended (a sidecar that was missing is
 *   left created, and empty).
 * - `whileSyncing`, when given, runs once the bytes are written and while
 *   they are being fsynced, with the offset they start at: work that does
 *   not depend on their durability (settle writes its settled claim's temp
 *   file there) overlaps the fsync instead of following it. The append
 *   returns only when both have finished; if either fails, it fails.
 *
 * On a crash, the file ends with the old bytes plus a prefix of the new
 * ones: an unterminated line, which readers ignore.
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import type { File, FileSystem } from "effect/FileSystem"
import { handleChmodOf } from "../../io/NonBlockingOpen.js"
import { openRegular } from "../../io/RegularFile.js"
import { fileIdentity } from "../../protocol/internal/FileInfo.js"
import { type StoreIo, storeIo } from "../Errors.js"

const NEWLINE = 10

/**
 * Appends, in one write, the bytes `build` makes for the offset they will
 * start at, fsyncs, sets the mode to 0600, and returns that offset.
 *
 * @category writers
 * @since 0.1.0
 */
export const appendToSidecar = <E, E2 = never, R = never>(
  fs: FileSystem,
  sidecar: string,
  build: (offset: number) => Effect.Effect<Uint8Array, E>,
  whileSyncing?: (offset: number) => Effect.Effect<void, E2, R>
): Effect.Effect<number, E | E2 | StoreIo, R> => {
  const io = storeIo("append to sidecar", sidecar)
  return Effect.scoped(Effect.gen(function*() {
    const { file, info } = yield* Effect.mapError(
      openRegular(fs, sidecar, { flag: "a+", mode: 0o600, followSymlinks: false }),
      io
    )
    const size = Number(info.size)
    const last = size === 0 ? undefined : yield* Effect.mapError(file.readAlloc(1, { position: BigInt(size - 1) }), io)
    const torn = last !== undefined && Option.getOrUndefined(last)?.[0] !== NEWLINE
    const offset = torn ? size + 1 : size
    const record = yield* build(offset)
    const bytes = torn ? new Uint8Array(record.length + 1) : record
    if (torn) {
      bytes[0] = NEWLINE
      bytes.set(record, 1)
    }
    yield* Effect.mapError(file.writeAll(bytes), io)
    const sync = Effect.mapError(file.sync, io)
    if (whileSyncing === undefined) yield* sync
    else yield* Effect.all([sync, whileSyncing(offset)], { concurrency: 2, discard: true })
    yield* Effect.mapError(setPrivateMode(fs, file, info, sidecar), io)
    return offset
  }))
}

/**
 * Makes an open sidecar 0600, through its handle (`fchmod`). A file system
 * without a handle-level chmod leaves a file that is already 0600 alone,
 * and otherwise changes it by path only while the path still names the
 * file that is open (a swap in the instant between that check and the
 * chmod is the one window it cannot close).
 */
const setPrivateMode = (fs: FileSystem, file: File, info: File.Info, sidecar: string) => {
  const chmod = handleChmodOf(file)
  if (chmod !== undefined) return chmod(0o600)
  if ((info.mode & 0o7777) === 0o600) return Effect.void
  return Effect.flatMap(
    fs.lstat(sidecar),
    (now) => now.type === "File" && fileIdentity(now) === fileIdentity(info) ? fs.chmod(sidecar, 0o600) : Effect.void
  )
}
