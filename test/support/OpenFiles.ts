/**
 * Which files a world has open, the same question in both worlds: the
 * memory model lists its open handles; on the real disk the process's own
 * descriptors are read from `/proc/self/fd` (Linux), where a file that was
 * open when it was removed or renamed over reads as `<path> (deleted)`.
 * Elsewhere the disk world cannot be asked (`canListOpenFiles`), and only
 * the memory world's answer is checked.
 */
import type { FileSystem } from "effect"
import { readdirSync, readlinkSync } from "node:fs"
import type { MemoryFileSystemShape } from "../../src/testing/MemoryFileSystem.js"

const DELETED = " (deleted)"

/** Whether `openPaths` can answer for `fs`: always for the memory model, on the real disk only where `/proc` lists descriptors. */
export const canListOpenFiles = (fs: FileSystem.FileSystem): boolean =>
  typeof (fs as Partial<MemoryFileSystemShape>).openDescriptors === "function" || process.platform === "linux"

/**
 * The paths of every open descriptor, as each was opened (the disk: as it is named now, or was before it was
 * removed).
 */
export const openPaths = (fs: FileSystem.FileSystem): ReadonlyArray<string> => {
  const memory = fs as Partial<MemoryFileSystemShape>
  if (typeof memory.openDescriptors === "function") return memory.openDescriptors().map(({ path }) => path)
  const paths: Array<string> = []
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`)
      paths.push(target.endsWith(DELETED) ? target.slice(0, -DELETED.length) : target)
    } catch {
      // The descriptor that listed the directory is closed by the time it is read.
    }
  }
  return paths
}

/** How many descriptors are open on `path` (or on a file that was at `path` before it was replaced or removed). */
export const openCount = (fs: FileSystem.FileSystem, path: string): number =>
  openPaths(fs).filter((open) => open === path).length
