/**
 * What the store's caches and repairs read from a `FileSystem.File.Info`,
 * in one place: which file it is, and when it was last modified.
 *
 * @internal
 */
import { Option } from "effect"
import type { FileSystem } from "effect"

/**
 * Device and inode, the identity a file keeps across renames and appends;
 * `undefined` when the file system reports no inode.
 */
export const fileIdentity = (info: FileSystem.File.Info): string | undefined =>
  // Joined rather than concatenated: a concatenation of 13 characters or more
  // is a rope of two strings in V8, and the caches keep one per polled file.
  Option.match(info.ino, { onNone: () => undefined, onSome: (ino) => [info.dev, ino].join(":") })

/** The modification time in epoch milliseconds, when the file system reports one. */
export const modifiedMs = (info: FileSystem.File.Info): number | undefined =>
  Option.match(info.mtime, { onNone: () => undefined, onSome: (date) => date.getTime() })
