/**
 * Owner evidence for commit locks, for the platform this process runs on:
 * `layer` provides the Linux probe (`/proc`), the Darwin probe (macOS), or
 * on any other platform (Windows) one that writes evidence for operators
 * but proves no owner dead.
 *
 * **Linux.**
 * This process's evidence is its pid, hostname, kernel boot id
 * (`/proc/sys/kernel/random/boot_id`), start time in clock ticks
 * (`/proc/self/stat`), PID namespace (`/proc/self/ns/pid`) and time
 * namespace (`/proc/self/ns/time`, absent before Linux 5.6). The rule that
 * judges another owner is `makeLockOwnerProbe`'s (see `store/lock/LockOwner`):
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
 * **Darwin (macOS)** has no `/proc`. This process's evidence is its pid,
 * hostname, `platform: "darwin"`, the boot session id
 * (`sysctl -n kern.bootsessionuuid`, random per boot) and its start time in
 * seconds since the epoch (`ps -o lstart=`, read in UTC and the C locale so
 * every reader sees the same text). Both are read by one short child
 * process each, once per process, when the first commit lock is taken or
 * judged (a few milliseconds on a Linux machine; not paid per settle).
 * Another owner, written in the same boot on the same host, is dead when
 * `kill(pid, 0)` says ESRCH (EPERM means it exists, as another user's).
 * When its pid exists and the lock is at least
 * `DARWIN_START_TIME_AFTER_MS` old, its start time is read with `ps` (tens
 * of milliseconds, so not for a young lock, whose pid cannot plausibly have
 * been reused yet) and a different one proves the pid reused.
 *
 * **Windows** (and any other platform): `kill(pid, 0)` tells whether a pid
 * exists, but nothing cheap names the boot it was counted in, so no lock is
 * proven dead: a crashed writer's lock is removed by
 * `rarebit-store unlock --force`. The evidence written (pid, hostname,
 * platform) tells the operator whose it was.
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
import { LockOwner, type LockOwnerProbe, makeLockOwnerProbe, type OwnerEvidence } from "../store/lock/LockOwner.js"

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

/** A probe made on first use, so that a process that never takes a lock never reads its evidence. */
const onFirstUse = (make: () => LockOwnerProbe): LockOwnerProbe => {
  let probe: LockOwnerProbe | undefined
  const made = (): LockOwnerProbe => (probe ??= make())
  return {
    get current() {
      return made().current
    },
    isProvablyDead: (owner, lockAgeMs) => Effect.suspend(() => made().isProvablyDead(owner, lockAgeMs))
  }
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
export const makeProcessOwnerProbe = (system: ProcessSystem = nodeProcessSystem): LockOwnerProbe =>
  onFirstUse(() => {
    const current = readOwnerEvidence(system)
    return makeLockOwnerProbe(current, (pid) => {
      if (pid === system.pid) return current?.startTicks
      if (!system.processExists(pid)) return "gone"
      return startTicksOf(system, pid)
    })
  })

/**
 * Provides the lock owner probe of the platform this process runs on:
 * `/proc` on Linux, `sysctl`/`kill`/`ps` on macOS, and elsewhere one that
 * proves no owner dead.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer: Layer.Layer<never> = Layer.sync(LockOwner, () => ownerProbeFor(process.platform))

/**
 * What the Darwin probe reads of this process and its kernel; `undefined`
 * for anything that cannot be read. Tests pass a made-up one.
 *
 * @category models
 * @since 0.1.0
 */
export interface DarwinSystem {
  readonly pid: number
  readonly hostname: () => string
  /** `kern.bootsessionuuid`, random per boot. */
  readonly bootSessionId: () => string | undefined
  /** Whether `pid` names a live process (`kill(pid, 0)` is not ESRCH). */
  readonly processExists: (pid: number) => boolean
  /** `ps -o lstart= -p <pid>` run in UTC and the C locale, e.g. `Mon Dec  7 18:04:27 2026`. */
  readonly startTimeText: (pid: number) => string | undefined
}

/**
 * Runs a short command; its standard output, or `undefined` when it fails.
 * `child_process` is loaded here, on first use on macOS, not when this
 * module is: the CLI and the Promise API start without it.
 */
const commandOutput = (file: string, args: ReadonlyArray<string>, env?: NodeJS.ProcessEnv): string | undefined =>
  orUndefined(() =>
    process.getBuiltinModule("node:child_process").execFileSync(file, args, {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 2_000,
      ...(env === undefined ? {} : { env })
    })
  )

/**
 * This Node process on macOS: `sysctl` and `ps` by their absolute paths, so
 * no `PATH` lookup picks another program.
 *
 * @category constructors
 * @since 0.1.0
 */
export const nodeDarwinSystem: DarwinSystem = {
  pid: process.pid,
  hostname,
  bootSessionId: () => commandOutput("/usr/sbin/sysctl", ["-n", "kern.bootsessionuuid"])?.trim(),
  processExists: nodeProcessSystem.processExists,
  startTimeText: (pid) =>
    commandOutput("/bin/ps", ["-o", "lstart=", "-p", String(pid)], { ...process.env, TZ: "UTC", LC_ALL: "C" })?.trim()
}

const BOOT_SESSION_ID = /^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$/
const LSTART = /^[A-Z][a-z]{2} ([A-Z][a-z]{2}) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

/**
 * The seconds since the epoch of a `ps -o lstart=` line printed in UTC and
 * the C locale; `undefined` for anything else.
 *
 * @category parsing
 * @since 0.1.0
 */
export const startSecondsOfLstart = (text: string | undefined): string | undefined => {
  const match = text === undefined ? null : LSTART.exec(text)
  if (match === null) return undefined
  const [, month, day, hours, minutes, seconds, year] = match
  const monthIndex = MONTHS.indexOf(month!)
  if (monthIndex < 0) return undefined
  const ms = Date.UTC(Number(year), monthIndex, Number(day), Number(hours), Number(minutes), Number(seconds))
  return Number.isFinite(ms) ? String(ms / 1000) : undefined
}

/**
 * A lock younger than this whose owner's pid exists is judged alive without
 * reading the pid's start time: `ps` costs tens of milliseconds on macOS,
 * and a pid is reused only after the kernel has handed out the rest of its
 * range (up to 99,999), which takes far longer than this.
 *
 * @category constants
 * @since 0.1.0
 */
export const DARWIN_START_TIME_AFTER_MS = 10_000

/**
 * Reads this process's Darwin owner evidence.
 *
 * @category constructors
 * @since 0.1.0
 */
export const readDarwinOwnerEvidence = (system: DarwinSystem = nodeDarwinSystem): OwnerEvidence | undefined => {
  const host = system.hostname()
  if (host === "") return undefined
  const bootId = matching(BOOT_SESSION_ID, system.bootSessionId())
  const startTicks = startSecondsOfLstart(system.startTimeText(system.pid))
  const evidence: OwnerEvidence = {
    pid: system.pid,
    hostname: host,
    platform: "darwin",
    ...(bootId ? { bootId } : {}),
    ...(startTicks ? { startTicks } : {})
  }
  return fitsLockLine(evidence) ? evidence : undefined
}

/**
 * Makes the Darwin probe for this process (see the module docs); the
 * evidence is read on first use, once.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeDarwinOwnerProbe = (system: DarwinSystem = nodeDarwinSystem): LockOwnerProbe =>
  onFirstUse(() => {
    const current = readDarwinOwnerEvidence(system)
    return makeLockOwnerProbe(current, (pid, lockAgeMs) => {
      if (pid === system.pid) return current?.startTicks
      if (!system.processExists(pid)) return "gone"
      // A lock of unknown age could be old: its start time is worth the look.
      if (lockAgeMs !== undefined && lockAgeMs < DARWIN_START_TIME_AFTER_MS) return undefined
      return startSecondsOfLstart(system.startTimeText(pid))
    })
  })

/**
 * Makes the probe of a platform where no boot can be named (Windows): it
 * writes pid, hostname and `platform` for operators, and proves no owner
 * dead.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeUnprovingOwnerProbe = (
  platform: string,
  system: Pick<ProcessSystem, "pid" | "hostname"> = nodeProcessSystem
): LockOwnerProbe =>
  onFirstUse(() => {
    const host = system.hostname()
    const evidence: OwnerEvidence = { pid: system.pid, hostname: host, platform }
    return makeLockOwnerProbe(host !== "" && fitsLockLine(evidence) ? evidence : undefined, () => undefined)
  })

/**
 * The probe for `platform` (a `process.platform` value).
 *
 * @category constructors
 * @since 0.1.0
 */
export const ownerProbeFor = (platform: string): LockOwnerProbe =>
  platform === "linux"
    ? makeProcessOwnerProbe()
    : platform === "darwin"
    ? makeDarwinOwnerProbe()
    : makeUnprovingOwnerProbe(platform)
