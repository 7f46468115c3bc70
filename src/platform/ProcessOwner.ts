/**
 * Owner evidence for commit locks on Linux, read from `/proc`.
 *
 * This process's evidence is its pid, hostname, kernel boot id
 * (`/proc/sys/kernel/random/boot_id`), start time in clock ticks
 * (`/proc/self/stat`), PID namespace (`/proc/self/ns/pid`) and time
 * namespace (`/proc/self/ns/time`, absent before Linux 5.6). The rule that
 * judges another owner is `makeLockOwnerProbe`'s (see `store/LockOwner`):
 * provably dead only when host, boot, PID namespace and time namespace all
 * equal ours and the pid is gone or reused here; everything else counts as
 * alive.
 *
 * Why these and not others:
 * - The PID namespace is what scopes a pid, and its inode number names it
 *   uniquely among the namespaces alive on this kernel (a number reused
 *   after a namespace died only ever matches a lock whose owner died with
 *   it).
 * - The time namespace shifts the boot time that start ticks count from
 *   (`unshare --time --boottime`), so the same process shows other start
 *   ticks to a reader in another time namespace.
 * - The `/proc` we read must be mounted for our own PID namespace: after
 *   `unshare --pid` without `--mount-proc`, `/proc/<pid>` would describe
 *   another process than our pid names. Our `NSpid` line in
 *   `/proc/self/status` has a single entry equal to our pid exactly when it
 *   is; otherwise we record no PID namespace, so nobody (ourselves
 *   included) can prove such a lock dead.
 * - The user and mount namespaces do not change what a pid names, so they
 *   are not recorded.
 * - A container id read from `/proc/self/cgroup` is not evidence: under
 *   cgroup namespaces (the default with cgroup v2) every container sees its
 *   own cgroup as `/`, the path format belongs to each runtime, and it is
 *   the PID namespace, not the cgroup, that scopes pids.
 *
 * Every value read is checked against its expected shape and dropped
 * otherwise, and evidence that would not fit a lock line of
 * `MAX_LOCK_LINE_BYTES` is not written at all, so a lock line stays small
 * whatever the host reports.
 *
 * @since 0.1.0
 */
import { Effect, Layer } from "effect"
import { readFileSync, readlinkSync } from "node:fs"
import { hostname } from "node:os"
import { encodeLockLine, MAX_LOCK_LINE_BYTES } from "../protocol/CommitLockFile.js"
import { isoTimestampOf } from "../protocol/internal/IsoTimestamp.js"
import { LockOwner, type LockOwnerProbe, makeLockOwnerProbe, type OwnerEvidence } from "../store/LockOwner.js"

/**
 * What the probe reads of this process and its kernel; `undefined` for
 * anything that cannot be read. Tests pass a made-up one.
 *
 * @category models
 * @since 0.1.0
 */
export interface ProcessSystem {
  readonly pid: number
  readonly hostname: () => string
  readonly readText: (path: string) => string | undefined
  readonly readLink: (path: string) => string | undefined
  /** Whether `pid` names a process in our PID namespace (`kill(pid, 0)` is not ESRCH). */
  readonly processExists: (pid: number) => boolean
}

const orUndefined = <A>(read: () => A): A | undefined => {
  try {
    return read()
  } catch {
    return undefined
  }
}

/**
 * This Node process and its `/proc`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const nodeProcessSystem: ProcessSystem = {
  pid: process.pid,
  hostname,
  readText: (path) => orUndefined(() => readFileSync(path, "utf8")),
  readLink: (path) => orUndefined(() => readlinkSync(path)),
  processExists: (pid) => {
    try {
      process.kill(pid, 0)
      return true
    } catch (error) {
      return (error as NodeJS.ErrnoException).code !== "ESRCH"
    }
  }
}

const BOOT_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const TICKS = /^\d{1,20}$/
const PID_NAMESPACE = /^pid:\[\d{1,20}\]$/
const TIME_NAMESPACE = /^time:\[\d{1,20}\]$/

const matching = (pattern: RegExp, value: string | undefined): string | undefined =>
  value !== undefined && pattern.test(value) ? value : undefined

/** The start time field of `/proc/<pid>/stat`, in clock ticks since boot. */
const startTicksOf = (system: ProcessSystem, pid: number | "self"): string | undefined => {
  const stat = system.readText(`/proc/${pid}/stat`)
  if (stat === undefined) return undefined
  // The command name (field 2) is parenthesized and may contain spaces, so
  // fields are counted from the last ')'.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return matching(TICKS, fields[19])
}

/** Whether `/proc` is mounted for our own PID namespace (see the module docs). */
const procIsOurs = (system: ProcessSystem): boolean => {
  const status = system.readText("/proc/self/status")
  const line = status?.split("\n").find((text) => text.startsWith("NSpid:"))
  const pids = line?.slice("NSpid:".length).trim().split(/\s+/)
  return pids !== undefined && pids.length === 1 && pids[0] === String(system.pid)
}

/** The longest `claimedAt` a lock can carry: the last instant a JS `Date` represents. */
const LONGEST_CLAIMED_AT = isoTimestampOf(8.64e15)

/** Whether a lock line with this evidence fits `MAX_LOCK_LINE_BYTES`, whatever its token and time. */
const fitsLockLine = (owner: OwnerEvidence): boolean =>
  new TextEncoder().encode(encodeLockLine({ token: "0".repeat(48), claimedAt: LONGEST_CLAIMED_AT, owner })).length <=
    MAX_LOCK_LINE_BYTES

/**
 * Reads this process's owner evidence.
 *
 * @category constructors
 * @since 0.1.0
 */
export const readOwnerEvidence = (system: ProcessSystem = nodeProcessSystem): OwnerEvidence | undefined => {
  const host = system.hostname()
  if (host === "") return undefined
  const bootId = matching(BOOT_ID, system.readText("/proc/sys/kernel/random/boot_id")?.trim())
  const startTicks = startTicksOf(system, "self")
  const pidNamespace = procIsOurs(system) ? matching(PID_NAMESPACE, system.readLink("/proc/self/ns/pid")) : undefined
  const timeNamespace = matching(TIME_NAMESPACE, system.readLink("/proc/self/ns/time"))
  const evidence: OwnerEvidence = {
    pid: system.pid,
    hostname: host,
    ...(bootId ? { bootId } : {}),
    ...(startTicks ? { startTicks } : {}),
    ...(pidNamespace ? { pidNamespace } : {}),
    ...(timeNamespace ? { timeNamespace } : {})
  }
  return fitsLockLine(evidence) ? evidence : undefined
}

/**
 * Makes the probe for this process.
 *
 * **Details**
 *
 * The evidence is read from `/proc` the first time the probe is used (a
 * commit lock taken or judged), once, not when the probe is made: the
 * layer is built with the store, and a process that only reads never takes
 * a lock.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeProcessOwnerProbe = (system: ProcessSystem = nodeProcessSystem): LockOwnerProbe => {
  let probe: LockOwnerProbe | undefined
  const made = (): LockOwnerProbe => {
    if (probe !== undefined) return probe
    const current = readOwnerEvidence(system)
    probe = makeLockOwnerProbe(current, (pid) => {
      if (pid === system.pid) return current?.startTicks
      if (!system.processExists(pid)) return "gone"
      return startTicksOf(system, pid)
    })
    return probe
  }
  return {
    get current() {
      return made().current
    },
    isProvablyDead: (owner) => Effect.suspend(() => made().isProvablyDead(owner))
  }
}

/**
 * Provides the `/proc`-backed lock owner probe.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer: Layer.Layer<never> = Layer.sync(LockOwner, () => makeProcessOwnerProbe())
