/**
 * Optional capabilities a `FileSystem` (and the files it opens) can carry,
 * for opening files that may be hostile: a FIFO, a socket, a device or a
 * symlink planted where the store expects a small regular file.
 *
 * Effect's `FileSystem.open` cannot say "never wait": on Linux an `open(2)`
 * of a FIFO without a peer blocks until one appears, and Node sends such an
 * open to libuv's pool, where it blocks a pool thread for good. The
 * capabilities below are properties under `Symbol.for` keys on the objects
 * themselves, so they travel through every wrapper that spreads the object
 * (as `FileSystem.make` does) and need no service of their own:
 *
 * - {@link NonBlockingOpenTypeId} on a `FileSystem`: `open(2)` with
 *   `O_NONBLOCK` (never waits for a FIFO peer or a device), `O_NOFOLLOW`
 *   when asked, `O_DIRECTORY` when asked.
 * - {@link HandleChmodTypeId} on a `File`: `fchmod(2)` of the open handle,
 *   so a mode change lands on the file that was opened and checked, never on
 *   whatever the path names a moment later.
 * - {@link ProcessUidTypeId} on a `FileSystem`: the user id the file system
 *   acts as, so directory ownership can be checked against it.
 * - {@link SmallRegularReadTypeId} on a `FileSystem` whose calls return at
 *   once: a small regular file, or its last bytes, in one synchronous call,
 *   for the audit, which reads tens of thousands of them, and for a poll's
 *   confirmation of an unchanged sidecar. Only the direct layer
 *   of `DirectFileSystem` has it; `FaultFileSystem` hides it, so that every
 *   open and read meets its fault points.
 *
 * - {@link PlatformTraitsTypeId} on a `FileSystem`: what its platform can
 *   do that POSIX code takes for granted (`O_NOFOLLOW`, a directory fsync,
 *   permission bits that mean privacy, `\` as a separator). Windows has none
 *   of them; see {@link PlatformTraits}.
 *
 * The first three are implemented by `DirectFileSystem` (both its layers),
 * `MemoryFileSystem`, and forwarded by `FaultFileSystem`. A file system
 * without them still works: `RegularFile` falls back to portable checks and
 * says what that cannot guarantee.
 *
 * @since 0.1.0
 */
import type { Effect, FileSystem, PlatformError, Scope } from "effect"

/**
 * The key of the non-blocking open on a `FileSystem`.
 *
 * @category type ids
 * @since 0.1.0
 */
export const NonBlockingOpenTypeId: unique symbol = Symbol.for("rarebit-store/io/NonBlockingOpen")

/**
 * The key of the handle-level chmod on a `File`.
 *
 * @category type ids
 * @since 0.1.0
 */
export const HandleChmodTypeId: unique symbol = Symbol.for("rarebit-store/io/HandleChmod")

/**
 * The key of the user id a `FileSystem` acts as.
 *
 * @category type ids
 * @since 0.1.0
 */
export const ProcessUidTypeId: unique symbol = Symbol.for("rarebit-store/io/ProcessUid")

/**
 * Options of a non-blocking open.
 *
 * @category models
 * @since 0.1.0
 */
export interface NonBlockingOpenOptions {
  readonly flag: FileSystem.OpenFlag
  /** The mode a created file gets (before the umask). */
  readonly mode?: number | undefined
  /** `O_NOFOLLOW`: a final symlink fails the open (`ELOOP`) instead of being followed. */
  readonly noFollow: boolean
  /** `O_DIRECTORY`: anything but a directory fails the open (`ENOTDIR`). */
  readonly directory?: boolean | undefined
}

/**
 * `open(2)` with `O_NONBLOCK`: returns at once for a FIFO (read side, or
 * read-write) and fails with `ENXIO` where a blocking open would wait (a
 * FIFO opened write-only without a reader) or cannot open at all (a socket).
 * The handle is closed when the scope ends.
 *
 * @category models
 * @since 0.1.0
 */
export type NonBlockingOpen = (
  path: string,
  options: NonBlockingOpenOptions
) => Effect.Effect<FileSystem.File, PlatformError.PlatformError, Scope.Scope>

/**
 * `fchmod(2)` of an open handle.
 *
 * @category models
 * @since 0.1.0
 */
export type HandleChmod = (mode: number) => Effect.Effect<void, PlatformError.PlatformError>

/**
 * The key of the synchronous read of a small regular file on a `FileSystem`.
 *
 * @category type ids
 * @since 0.1.0
 */
export const SmallRegularReadTypeId: unique symbol = Symbol.for("rarebit-store/io/SmallRegularRead")

/**
 * Reads a small regular file, or the end of one, in one synchronous call,
 * with the same refusals as `RegularFile.openRegular`: `open(2)` with
 * `O_NONBLOCK` (and `O_NOFOLLOW` when asked), then `fstat(2)` of the handle.
 *
 * **Details**
 *
 * Returns what `fstat` saw (size, the file's identity as `fileIdentity`
 * spells it, mtime) and the bytes from `from` (0 by default) to end of
 * file, but never more than that size plus one byte: a file that changed
 * while it was read shows as bytes of another length than `size - from`.
 * With `head`, also the file's first `head` bytes (fewer if it is shorter).
 * The handle is closed before it returns. Returns `undefined` for anything
 * else — not a regular file, more than `limit` bytes from `from`, shorter
 * than `from`, or any error — and then the caller takes its ordinary path,
 * which opens the file again and reports what it finds.
 *
 * @category models
 * @since 0.1.0
 */
export type SmallRegularRead = (path: string, options: SmallRegularReadOptions) => SmallRegularBytes | undefined

/**
 * What a `SmallRegularRead` reads.
 *
 * @category models
 * @since 0.1.0
 */
export interface SmallRegularReadOptions {
  /** The most bytes to read from `from` on. */
  readonly limit: number
  /** Refuse a symlink at the path instead of following it. */
  readonly noFollow: boolean
  readonly from?: number | undefined
  readonly head?: number | undefined
}

/**
 * What a `SmallRegularRead` found.
 *
 * @category models
 * @since 0.1.0
 */
export interface SmallRegularBytes {
  readonly size: number
  readonly identity: string
  readonly mtimeMs: number
  /** From `from` to end of file, at most one byte past `size`. */
  readonly bytes: Uint8Array
  /** The first `head` bytes, when asked for. */
  readonly head: Uint8Array | undefined
}

/**
 * A `FileSystem` that carries the synchronous small-file read.
 *
 * @category models
 * @since 0.1.0
 */
export interface SmallRegularReadCapable {
  readonly [SmallRegularReadTypeId]: SmallRegularRead
}

/**
 * The synchronous small-file read of `fs`, if it has one.
 *
 * @category getters
 * @since 0.1.0
 */
export const smallRegularReadOf = (fs: FileSystem.FileSystem): SmallRegularRead | undefined =>
  (fs as Partial<SmallRegularReadCapable>)[SmallRegularReadTypeId]

/**
 * A `FileSystem` that carries the non-blocking open.
 *
 * @category models
 * @since 0.1.0
 */
export interface NonBlockingOpenCapable {
  readonly [NonBlockingOpenTypeId]: NonBlockingOpen
}

/**
 * A `File` that carries the handle-level chmod.
 *
 * @category models
 * @since 0.1.0
 */
export interface HandleChmodCapable {
  readonly [HandleChmodTypeId]: HandleChmod
}

/**
 * A `FileSystem` that says which user it acts as.
 *
 * @category models
 * @since 0.1.0
 */
export interface ProcessUidCapable {
  readonly [ProcessUidTypeId]: () => number | undefined
}

/**
 * The non-blocking open of `fs`, if it has one.
 *
 * @category getters
 * @since 0.1.0
 */
export const nonBlockingOpenOf = (fs: FileSystem.FileSystem): NonBlockingOpen | undefined =>
  (fs as Partial<NonBlockingOpenCapable>)[NonBlockingOpenTypeId]

/**
 * The handle-level chmod of `file`, if it has one.
 *
 * @category getters
 * @since 0.1.0
 */
export const handleChmodOf = (file: FileSystem.File): HandleChmod | undefined =>
  (file as Partial<HandleChmodCapable>)[HandleChmodTypeId]

/**
 * The user id `fs` acts as: its own answer if it has one, else the Node
 * process's (`process.getuid`), else `undefined` (ownership cannot be
 * checked, e.g. on Windows).
 *
 * @category getters
 * @since 0.1.0
 */
export const processUidOf = (fs: FileSystem.FileSystem): number | undefined => {
  const own = (fs as Partial<ProcessUidCapable>)[ProcessUidTypeId]
  if (own !== undefined) return own()
  const getuid = (globalThis as { readonly process?: { readonly getuid?: () => number } }).process?.getuid
  return typeof getuid === "function" ? getuid() : undefined
}

/**
 * The key of the platform traits of a `FileSystem`.
 *
 * @category type ids
 * @since 0.1.0
 */
export const PlatformTraitsTypeId: unique symbol = Symbol.for("rarebit-store/io/PlatformTraits")

/**
 * What the platform under a `FileSystem` can do that POSIX code assumes.
 *
 * **Details**
 *
 * On Windows (libuv) none of them holds: `O_NOFOLLOW`, `O_NONBLOCK` and
 * `O_DIRECTORY` are undefined, so an open follows a symlink or a junction;
 * a directory handle cannot be fsynced (`EPERM`); modes are derived from
 * the read-only attribute (0666 or 0444, directories included), so `chmod`
 * cannot make anything private and `fchmod` of a directory fails `EPERM`;
 * a path may use `\` as well as `/`.
 *
 * @category models
 * @since 0.1.0
 */
export interface PlatformTraits {
  /** An open with `noFollow` fails on a final symlink (`O_NOFOLLOW` exists). */
  readonly noFollowOpen: boolean
  /** A directory can be opened and fsynced, to make a rename or unlink in it durable. */
  readonly directorySync: boolean
  /** Permission bits are POSIX modes: 0700 keeps other users out, and `chmod` can make it so. */
  readonly posixModes: boolean
  /** `\` separates path components as `/` does. */
  readonly backslashSeparator: boolean
}

/**
 * Linux, macOS and the other POSIX systems.
 *
 * @category constants
 * @since 0.1.0
 */
export const POSIX_TRAITS: PlatformTraits = {
  noFollowOpen: true,
  directorySync: true,
  posixModes: true,
  backslashSeparator: false
}

/**
 * Windows, as Node's libuv presents it.
 *
 * @category constants
 * @since 0.1.0
 */
export const WIN32_TRAITS: PlatformTraits = {
  noFollowOpen: false,
  directorySync: false,
  posixModes: false,
  backslashSeparator: true
}

/**
 * A `FileSystem` that says what its platform can do.
 *
 * @category models
 * @since 0.1.0
 */
export interface PlatformTraitsCapable {
  readonly [PlatformTraitsTypeId]: PlatformTraits
}

const hostPlatform = (globalThis as { readonly process?: { readonly platform?: string } }).process?.platform

/**
 * The traits of the host this code runs on: Windows' under win32, POSIX's
 * elsewhere.
 *
 * @category constants
 * @since 0.1.0
 */
export const HOST_TRAITS: PlatformTraits = hostPlatform === "win32" ? WIN32_TRAITS : POSIX_TRAITS

/**
 * The platform traits of `fs`: its own answer if it has one, else the
 * host's (a foreign file system is taken to be the host's).
 *
 * @category getters
 * @since 0.1.0
 */
export const platformTraitsOf = (fs: FileSystem.FileSystem): PlatformTraits =>
  (fs as Partial<PlatformTraitsCapable>)[PlatformTraitsTypeId] ?? HOST_TRAITS
