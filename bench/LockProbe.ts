/**
 * How long settle holds the commit lock, measured from outside the code
 * under test: before either implementation is loaded, Node's own `fs`
 * functions are wrapped so that the moment a `*.commit-lock` file comes into
 * existence (our hard link, the reference's exclusive open) and the moment
 * its removal completes are recorded. Both implementations then settle jobs
 * one after another, with no contention.
 *
 * Usage: LockProbe.js <ours|reference> <sessionRoot> <rarebitRoot> <sessionFile> <series> <count> <receiptFile>
 * Prints `{ holdMs: [...], settleMs: [...] }`.
 *
 * @since 0.1.0
 */
import fs from "node:fs"
import fsp from "node:fs/promises"
import { syncBuiltinESMExports } from "node:module"

const isLock = (path: unknown) => String(path).endsWith(".commit-lock")
let acquiredAt: number | undefined
const holds: Array<number> = []
const acquired = () => {
  acquiredAt = performance.now()
}
const released = () => {
  if (acquiredAt !== undefined) holds.push(performance.now() - acquiredAt)
  acquiredAt = undefined
}

// Ours: the lock appears by `link(temp, lock)` and goes by `unlink(lock)`,
// both made synchronously by the direct file system the Promise API runs on.
const linkSync = fs.linkSync
;(fs as { linkSync: unknown }).linkSync = (existing: fs.PathLike, target: fs.PathLike) => {
  linkSync(existing, target)
  if (isLock(target)) acquired()
}
const unlinkSync = fs.unlinkSync
;(fs as { unlinkSync: unknown }).unlinkSync = (path: fs.PathLike) => {
  unlinkSync(path)
  if (isLock(path)) released()
}
// The reference: `open(lock, "wx")` and `unlink(lock)` from `node:fs/promises`.
const open = fsp.open
;(fsp as { open: unknown }).open = async (path: fs.PathLike, flags?: string, mode?: number) => {
  const handle = await open(path, flags, mode)
  if (isLock(path) && flags === "wx") acquired()
  return handle
}
const unlink = fsp.unlink
;(fsp as { unlink: unknown }).unlink = async (path: fs.PathLike) => {
  await unlink(path)
  if (isLock(path)) released()
}
syncBuiltinESMExports()

const { jobIdOf } = await import("./Fixtures.js")
const { loadStore } = await import("./Implementations.js")
const [side, sessionRoot, rarebitRoot, sessionFile, series, count, receiptFile] = process.argv.slice(2)
const store = await loadStore(side as "ours" | "reference")
const receipt = JSON.parse(fs.readFileSync(receiptFile, "utf8")) as Record<string, unknown>
const location = { sessionRoot, rarebitRoot, sessionFile }

const settles: Array<number> = []
const settleHolds: Array<number> = []
for (let index = 0; index < Number(count); index++) {
  const reservation = await store.reserveRarebitJob({ ...location, jobId: jobIdOf(series, index) })
  holds.length = 0
  const start = performance.now()
  await store.settleRarebitJob(reservation, receipt)
  settles.push(performance.now() - start)
  if (holds.length !== 1) throw new Error(`expected one lock hold in settle, saw ${holds.length}`)
  settleHolds.push(holds[0])
}
process.stdout.write(`${JSON.stringify({ holdMs: settleHolds, settleMs: settles })}\n`)
