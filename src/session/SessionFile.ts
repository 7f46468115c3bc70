/**
 * How a Pi Session file is opened: the one place the Session reader and
 * the Session cache open one (each for one read; nothing is held open).
 *
 * A Session is named by the user, so, as in the reference, a symlink to a
 * Session is followed. What is opened must still be a regular file: a FIFO,
 * a socket, a device or a directory at the path (or at the end of its
 * symlinks) is refused with `FileNotRegular` without blocking and without
 * reading a byte of it (`io/RegularFile`); the readers report that Session
 * as `unreadable`.
 *
 * @since 0.1.0
 */
import type { Effect, FileSystem, PlatformError, Scope } from "effect"
import { type FileNotRegular, type OpenedRegular, openRegular } from "../io/RegularFile.js"

/**
 * Opens a Session file for reading for the current scope, following
 * symlinks, refusing anything but a regular file. `info` is the handle's
 * `fstat`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const openSessionFile = (
  fs: FileSystem.FileSystem,
  path: string
): Effect.Effect<OpenedRegular, PlatformError.PlatformError | FileNotRegular, Scope.Scope> =>
  openRegular(fs, path, { flag: "r", followSymlinks: true })
