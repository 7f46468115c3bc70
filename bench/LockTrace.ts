/**
 * Records when commit locks are taken and given back, from outside the code
 * under test. Importing this module wraps Node's own `fs` and
 * `fs/promises` functions, so it must be imported before either
 * implementation loads: a `*.commit-lock` file coming into existence (a hard
 * link, a rename onto it, an exclusive open) starts an interval, its removal
 * (unlink, or a rename away) ends it. Times are milliseconds of the
 * system's monotonic clock (`monotonicMs`), the same in every process of
 * one machine; `performance.timeOrigin` is not (it rests on the wall clock
 * at process start, to the millisecond).
 *
 * It also counts fsync and fdatasync calls (`syncCalls`), which is where
 * most of a settle's wall time goes on a disk.
 *
 * Today ours takes the lock by `linkSync` and gives it back by `unlinkSync`
 * (`DirectFileSystem`), the reference by `open(…, "wx")` and `unlink` from
 * `node:fs/promises`; the other spellings are wrapped so that a change of
 * mechanism still shows up.
 *
 * @since 0.1.0
 */
import fs from "node:fs"
import fsp from "node:fs/promises"
import { syncBuiltinESMExports } from "node:module"

export interface LockInterval {
  readonly path: string
  readonly acquiredAt: number
  readonly releasedAt: number
}

/** Completed intervals, in the order they ended. Callers may empty it. */
export const lockIntervals: Array<LockInterval> = []

/** Milliseconds of the monotonic clock (`CLOCK_MONOTONIC` on Linux), comparable across processes. */
export const monotonicMs = (): number => Number(process.hrtime.bigint()) / 1e6

const held = new Map<string, number>()
const now = monotonicMs
const isLock = (path: unknown) => String(path).endsWith(".commit-lock")
const acquired = (path: unknown) => {
  if (isLock(path)) held.set(String(path), now())
}
const released = (path: unknown) => {
  if (!isLock(path)) return
  const at = held.get(String(path))
  if (at === undefined) return
  held.delete(String(path))
  lockIntervals.push({ path: String(path), acquiredAt: at, releasedAt: now() })
}
const exclusive = (flags: unknown) =>
  typeof flags === "string"
    ? flags.startsWith("wx") || flags.startsWith("ax")
    : typeof flags === "number" && (flags & fs.constants.O_CREAT) !== 0 && (flags & fs.constants.O_EXCL) !== 0

const mutableFs = fs as unknown as Record<string, unknown>
const mutableFsp = fsp as unknown as Record<string, unknown>

const linkSync = fs.linkSync
mutableFs.linkSync = (existing: fs.PathLike, target: fs.PathLike) => {
  linkSync(existing, target)
  acquired(target)
}
const renameSync = fs.renameSync
mutableFs.renameSync = (from: fs.PathLike, to: fs.PathLike) => {
  renameSync(from, to)
  released(from)
  acquired(to)
}
const openSync = fs.openSync
mutableFs.openSync = (path: fs.PathLike, flags?: fs.OpenMode, mode?: fs.Mode | null) => {
  const fd = openSync(path, flags ?? "r", mode)
  if (exclusive(flags)) acquired(path)
  return fd
}
const unlinkSync = fs.unlinkSync
mutableFs.unlinkSync = (path: fs.PathLike) => {
  unlinkSync(path)
  released(path)
}
const open = fsp.open
mutableFsp.open = async (path: fs.PathLike, flags?: string | number, mode?: fs.Mode) => {
  const handle = await open(path, flags, mode)
  if (exclusive(flags)) acquired(path)
  return handle
}
const link = fsp.link
mutableFsp.link = async (existing: fs.PathLike, target: fs.PathLike) => {
  await link(existing, target)
  acquired(target)
}
const rename = fsp.rename
mutableFsp.rename = async (from: fs.PathLike, to: fs.PathLike) => {
  await rename(from, to)
  released(from)
  acquired(to)
}
const unlink = fsp.unlink
mutableFsp.unlink = async (path: fs.PathLike) => {
  await unlink(path)
  released(path)
}

/** fsync and fdatasync calls made so far (callback, sync and `FileHandle` forms). Callers may reset it. */
export const syncCalls = { count: 0 }
for (const name of ["fsync", "fsyncSync", "fdatasync", "fdatasyncSync"] as const) {
  const original = mutableFs[name] as (...args: Array<unknown>) => unknown
  mutableFs[name] = (...args: Array<unknown>) => {
    syncCalls.count++
    return original(...args)
  }
}
const probe = await fsp.open(process.execPath, "r")
const fileHandle = Object.getPrototypeOf(probe) as Record<"sync" | "datasync", (...args: Array<unknown>) => unknown>
await probe.close()
for (const name of ["sync", "datasync"] as const) {
  const original = fileHandle[name]
  fileHandle[name] = function(this: unknown, ...args: Array<unknown>) {
    syncCalls.count++
    return original.apply(this, args)
  }
}
syncBuiltinESMExports()
