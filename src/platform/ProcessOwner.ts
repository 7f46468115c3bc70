/**
 * Owner evidence for commit locks on Linux, read from `/proc`.
 *
 * A lock's owner is provably dead only when the lock was written on this
 * host (same hostname) and either during an earlier boot (another kernel
 * boot id), or during this boot by a pid that is gone or now belongs to a
 * process that started at another time (pid reuse). Anything we cannot prove — another host, another boot with no
 * way to compare, a platform without `/proc` — counts as alive, so a live
 * owner's lock is never removed. The rule rests on hostnames naming one
 * machine among those sharing a rarebit root: two machines (or containers
 * on two machines) with one hostname and one root must not run the store.
 *
 * @since 0.1.0
 */
import { readFileSync } from "node:fs"
import { hostname } from "node:os"
import { Effect, Layer } from "effect"
import { LockOwner, type LockOwnerProbe, type OwnerEvidence } from "../store/LockOwner.js"

const readText = (path: string): string | undefined => {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return undefined
  }
}

/** The start time field of `/proc/<pid>/stat`, in clock ticks since boot. */
const startTicksOf = (pid: number | "self"): string | undefined => {
  const stat = readText(`/proc/${pid}/stat`)
  if (stat === undefined) return undefined
  // The command name (field 2) is parenthesized and may contain spaces, so
  // fields are counted from the last ')'.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return fields[19]
}

const processExists = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "ESRCH"
  }
}

/**
 * Makes the probe for this process.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeProcessOwnerProbe = (): LockOwnerProbe => {
  const bootId = readText("/proc/sys/kernel/random/boot_id")?.trim()
  const startTicks = startTicksOf("self")
  const current: OwnerEvidence = {
    pid: process.pid,
    hostname: hostname(),
    ...(bootId ? { bootId } : {}),
    ...(startTicks ? { startTicks } : {})
  }
  const isProvablyDead = (owner: OwnerEvidence): boolean => {
    if (owner.hostname !== current.hostname) return false
    if (owner.bootId === undefined || current.bootId === undefined) return false
    // Written on this host during an earlier boot: that process ended with it.
    if (owner.bootId !== current.bootId) return true
    if (owner.pid === process.pid) return owner.startTicks !== undefined && owner.startTicks !== current.startTicks
    if (!processExists(owner.pid)) return true
    const ticks = startTicksOf(owner.pid)
    return owner.startTicks !== undefined && ticks !== undefined && ticks !== owner.startTicks
  }
  return { current, isProvablyDead: (owner) => Effect.sync(() => isProvablyDead(owner)) }
}

/**
 * Provides the `/proc`-backed lock owner probe.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer: Layer.Layer<never> = Layer.sync(LockOwner, makeProcessOwnerProbe)
