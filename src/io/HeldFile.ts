/**
 * A file held open for reading between uses, for as long as its path still
 * names it: how the caches that poll the same files (Sessions, sidecars)
 * skip the open, `fstat` and close of every poll.
 *
 * Guarantees:
 * - **Identity.** Each use is given a `stat` (or `lstat`) of the path taken
 *   just before. The held file is used only while that shows the device and
 *   inode the held file's own `fstat` showed when it was opened; otherwise
 *   the path is opened anew through `io/RegularFile` (non-blocking, regular
 *   files only) and the file held before is let go. A file system that
 *   reports no inode never has a file reused.
 * - **A swap between the check and the open** (the path renamed over after
 *   its `stat`): the file opened is used as what it is, described by its
 *   own `fstat`, and is not kept; it closes when that use ends.
 * - **Shared, never closed under a use.** Uses in flight share the held
 *   file. A file let go (replaced at its path, `letGo`, or the holder's
 *   scope closed) closes when the last use of it ends.
 * - **Interruption.** An open or a use interrupted anywhere leaves nothing
 *   open but the held file (and that only if it is still the path's).
 * - **Scope end.** When the scope the holder was made in closes (a cache
 *   evicting the entry, or the cache itself ending) the held file closes,
 *   once its last use is done; later uses still work, open the file for
 *   themselves and keep nothing.
 *
 * What the holder never does is read: what a use reads, and whether its
 * answer may be reused, is the caller's.
 *
 * @since 0.1.0
 */
import { Effect, Exit, type FileSystem, type PlatformError, Scope } from "effect"
import { fileIdentity } from "../protocol/internal/FileInfo.js"
import { type FileNotRegular, openRegular } from "./RegularFile.js"

/**
 * What a use is given: the open file, what is known of it, and whether it
 * was opened for this use.
 *
 * @category models
 * @since 0.1.0
 */
export interface HeldUse {
  readonly file: FileSystem.File
  /**
   * The path's `stat` the use was given when the held file was used (it
   * shows the same file); the new file's own `fstat` when it was opened.
   */
  readonly info: FileSystem.File.Info
  readonly opened: boolean
}

/**
 * A file kept open between uses while its path still names it.
 *
 * @category models
 * @since 0.1.0
 */
export interface HeldFile {
  /**
   * Runs `use` with the file at the path, given `pathInfo`, a `stat` (or
   * `lstat`, when symlinks are not followed) of the path taken just before.
   * Fails as `openRegular` fails when the file must be opened and cannot be.
   */
  readonly use: <A, E, R>(
    pathInfo: FileSystem.File.Info,
    use: (held: HeldUse) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | PlatformError.PlatformError | FileNotRegular, R>
  /** Stops holding the file (it closes once its last use ends); the next use opens the path anew. */
  readonly letGo: Effect.Effect<void>
  /** Whether a file is held now. */
  readonly holding: () => boolean
}

/** One open of the file, with the uses in flight on it. */
interface Opened {
  readonly file: FileSystem.File
  /** Device and inode by the file's own `fstat`, when the file system reports them. */
  readonly identity: string | undefined
  readonly scope: Scope.Closeable
  uses: number
  /** Not held any more: closed when `uses` comes back to 0. */
  retired: boolean
}

const closeIfIdle = (opened: Opened): Effect.Effect<void> =>
  opened.retired && opened.uses === 0 ? Scope.close(opened.scope, Exit.void) : Effect.void

const retire = (opened: Opened | undefined): Effect.Effect<void> => {
  if (opened === undefined || opened.retired) return Effect.void
  opened.retired = true
  return closeIfIdle(opened)
}

const endUse = (opened: Opened): Effect.Effect<void> =>
  Effect.suspend(() => {
    opened.uses--
    return closeIfIdle(opened)
  })

/**
 * Makes a holder of the file at `path`, for the current scope: nothing is
 * opened until the first use, and whatever is held closes with the scope.
 *
 * **Details**
 *
 * `followSymlinks` is `openRegular`'s: Sessions follow symlinks (pass a
 * `stat` to `use`), store files refuse them (pass an `lstat`).
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: (
  fs: FileSystem.FileSystem,
  path: string,
  options: { readonly followSymlinks: boolean }
) => Effect.Effect<HeldFile, never, Scope.Scope> = Effect.fnUntraced(function*(fs, path, options) {
  let held: Opened | undefined = undefined
  let ended = false
  const letGo = Effect.suspend(() => {
    const previous = held
    held = undefined
    return retire(previous)
  })
  yield* Effect.addFinalizer(() =>
    Effect.suspend(() => {
      ended = true
      return letGo
    })
  )

  const open = Effect.fnUntraced(function*(identity: string | undefined) {
    const scope = yield* Scope.make()
    const { file, info } = yield* Scope.provide(openRegular(fs, path, { flag: "r", ...options }), scope).pipe(
      Effect.onError(() => Scope.close(scope, Exit.void))
    )
    const fresh: Opened = { file, identity: fileIdentity(info), scope, uses: 1, retired: false }
    // Whatever was held is not the path's file any more.
    yield* letGo
    // Kept only if it is the file the path's stat showed: one swapped in after it is used once, as what it is.
    if (!ended && identity !== undefined && fresh.identity === identity) held = fresh
    else fresh.retired = true
    return { opened: fresh, use: { file, info, opened: true } satisfies HeldUse }
  })

  const acquire = (pathInfo: FileSystem.File.Info) =>
    Effect.suspend(() => {
      const identity = fileIdentity(pathInfo)
      const current = held
      if (current !== undefined && identity !== undefined && current.identity === identity) {
        current.uses++
        return Effect.succeed({ opened: current, use: { file: current.file, info: pathInfo, opened: false } })
      }
      return open(identity)
    })

  const use = <A, E, R>(pathInfo: FileSystem.File.Info, body: (held: HeldUse) => Effect.Effect<A, E, R>) =>
    Effect.acquireUseRelease(acquire(pathInfo), ({ use }) => body(use), ({ opened }) => endUse(opened))

  return { use, letGo, holding: () => held !== undefined } satisfies HeldFile
})
