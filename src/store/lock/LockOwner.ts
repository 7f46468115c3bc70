/**
 * Evidence about which process holds a commit lock, and whether it is gone.
 *
 * A lock file carries `{token, claimedAt}` (all the reference reads) plus,
 * when written by us, an `owner` record: the pid, and what makes that pid
 * mean one process — the kernel boot it was handed out in, the PID
 * namespace it is counted in, the time namespace its start time is counted
 * in, and that start time (which tells a reused pid apart). The hostname
 * rides along for operators.
 *
 * A pid alone names no process: two containers sharing a volume (pods,
 * `unshare --pid`) each have their own pid 1, 2, 3…, and a pid of one may
 * name a live, a gone or an unrelated process in the other. So an owner is
 * provably dead only when its evidence was written in this reader's own
 * context — same host, same boot, same PID namespace, same time namespace —
 * and its pid is now gone there or belongs to a process that started at
 * another time. Anything else proves nothing and counts as alive, so a live
 * owner's lock is never broken:
 * - evidence from another host, boot, PID namespace or time namespace;
 * - evidence without a boot id or a PID namespace: written by an older
 *   version of this store, or where `/proc` could not name the namespace.
 *   This is deliberate: such a lock could come from any namespace, and a
 *   lock left behind is an inconvenience (`rarebit-store unlock --force`)
 *   where a broken live lock is two writers in one sidecar;
 * - a reader that cannot name its own context (no `/proc`, or a `/proc`
 *   mounted for another PID namespace).
 *
 * A lock from an earlier boot is not proven dead either: another machine
 * sharing the volume, under the same hostname (containers often do), has
 * another boot id too. Equal boot ids, random per kernel boot, are what
 * tie the evidence to this very kernel.
 *
 * Evidence is tagged by the platform that wrote it (`platform`; absent means
 * Linux, as older versions of this store wrote it), and evidence of one
 * platform never matches a reader on another: a Linux container and its
 * macOS host sharing a directory (Docker Desktop) count pids in different
 * kernels. What ties a pid to one kernel differs by platform:
 * - Linux: the boot id and the PID namespace (both required), and the time
 *   namespace;
 * - Darwin (macOS): the boot session id (`kern.bootsessionuuid`), which is
 *   required; macOS has no PID namespaces;
 * - any other platform (Windows): nothing cheap names a boot, so its
 *   evidence is for operators only and its locks are removed only by
 *   `rarebit-store unlock --force`.
 * Evidence of a platform this version does not know is never judged.
 *
 * The default reference has no evidence and proves nothing dead, so tests
 * and other platforms stay conservative; the Node layer provides the probe
 * of the platform it runs on (`platform/ProcessOwner`), built on
 * `makeLockOwnerProbe` here.
 *
 * @since 0.1.0
 */
import { Context, Effect } from "effect"
import { isObjectRecord } from "../../protocol/internal/JsonShape.js"

/** The owner record written into lock files. @category models @since 0.1.0 */
export interface OwnerEvidence {
  readonly pid: number
  readonly hostname: string
  /** The platform that wrote the evidence (`"darwin"`, `"win32"`); absent on Linux. */
  readonly platform?: string
  /** Kernel boot id (Darwin: the boot session id): a pid is meaningful only within one boot. */
  readonly bootId?: string
  /**
   * Process start time, which tells pid reuse apart: on Linux in clock ticks
   * since boot, on Darwin in seconds since the epoch.
   */
  readonly startTicks?: string
  /** The PID namespace the pid counts in, as `/proc/self/ns/pid` names it: `pid:[<inode>]`. */
  readonly pidNamespace?: string
  /** The time namespace `startTicks` counts in (its boot time can be shifted): `time:[<inode>]`. */
  readonly timeNamespace?: string
}

/**
 * Produces this process's evidence and judges another owner's liveness.
 *
 * @category services
 * @since 0.1.0
 */
export interface LockOwnerProbe {
  readonly current: OwnerEvidence | undefined
  /**
   * `true` only when the owner is certainly not running any more.
   * `lockAgeMs`, how old the lock is when known, lets a probe skip costly
   * looks (a pid reused within seconds is implausible).
   */
  readonly isProvablyDead: (owner: OwnerEvidence, lockAgeMs?: number) => Effect.Effect<boolean>
}

/**
 * The probe in use. Defaults to one with no evidence that proves nothing dead.
 *
 * @category services
 * @since 0.1.0
 */
export const LockOwner = Context.Reference<LockOwnerProbe>("rarebit-store/store/LockOwner", {
  defaultValue: () => ({ current: undefined, isProvablyDead: () => Effect.succeed(false) })
})

const OPTIONAL_FIELDS = ["platform", "bootId", "startTicks", "pidNamespace", "timeNamespace"] as const

/**
 * Reads owner evidence from a parsed lock file, if it has well-formed
 * evidence: a positive integer pid, a non-empty hostname, and every other
 * field it has a string. Malformed evidence is no evidence: it proves
 * nothing, rather than being judged on the fields that happen to parse.
 *
 * @category parsing
 * @since 0.1.0
 */
export const ownerEvidenceOf = (lock: unknown): OwnerEvidence | undefined => {
  const owner = isObjectRecord(lock) ? lock.owner : undefined
  if (!isObjectRecord(owner)) return undefined
  const { hostname, pid } = owner
  if (
    typeof pid !== "number" || !Number.isSafeInteger(pid) || pid <= 0 || typeof hostname !== "string" || hostname === ""
  ) {
    return undefined
  }
  const evidence: { -readonly [K in keyof OwnerEvidence]: OwnerEvidence[K] } = { pid, hostname }
  for (const field of OPTIONAL_FIELDS) {
    const value = owner[field]
    if (value === undefined) continue
    if (typeof value !== "string") return undefined
    evidence[field] = value
  }
  return evidence
}

/**
 * The fields that say in which context a pid was counted; evidence compares
 * to a reader's only when all of them are equal (absent equals only absent).
 *
 * @category models
 * @since 0.1.0
 */
export type OwnerContextField = "platform" | "hostname" | "bootId" | "pidNamespace" | "timeNamespace"

const CONTEXT_FIELDS: ReadonlyArray<OwnerContextField> = [
  "platform",
  "hostname",
  "bootId",
  "pidNamespace",
  "timeNamespace"
]

/**
 * The platform that wrote `evidence`: `"linux"` when it names none (the
 * Linux probe, and every older version of this store, write no tag).
 *
 * @category accessors
 * @since 0.1.0
 */
export const platformOf = (evidence: OwnerEvidence): string => evidence.platform ?? "linux"

/**
 * What ties a pid to one kernel (and PID namespace) on each platform whose
 * evidence can prove an owner dead; a platform not listed has no such
 * evidence.
 */
const REQUIRED_CONTEXT: Readonly<Record<string, ReadonlyArray<OwnerContextField>>> = {
  linux: ["bootId", "pidNamespace"],
  darwin: ["bootId"]
}

const requiredContext = (evidence: OwnerEvidence): ReadonlyArray<OwnerContextField> | undefined =>
  Object.hasOwn(REQUIRED_CONTEXT, platformOf(evidence)) ? REQUIRED_CONTEXT[platformOf(evidence)] : undefined

/**
 * Why an owner's evidence cannot be judged from here.
 *
 * - `ReaderUnidentified`: this process cannot name its own boot or PID
 *   namespace (or runs on a platform without such evidence), so it proves
 *   nothing about anyone.
 * - `OwnerUnidentified`: the evidence lacks `missing` (an older version of
 *   this store, or a writer whose `/proc` could not name its namespace).
 * - `OtherContext`: written on another platform or host, in another boot, or
 *   in another PID or time namespace; `owner` and `reader` are the differing values.
 *
 * @category models
 * @since 0.1.0
 */
export type OwnerContextMismatch =
  | { readonly _tag: "ReaderUnidentified" }
  | { readonly _tag: "OwnerUnidentified"; readonly missing: ReadonlyArray<OwnerContextField> }
  | {
    readonly _tag: "OtherContext"
    readonly field: OwnerContextField
    readonly owner: string | undefined
    readonly reader: string | undefined
  }

/**
 * Whether `owner` was written in `reader`'s context, so that its pid names
 * a process `reader` can look at; `undefined` when it was.
 *
 * @category predicates
 * @since 0.1.0
 */
export const ownerContextMismatch = (
  reader: OwnerEvidence | undefined,
  owner: OwnerEvidence
): OwnerContextMismatch | undefined => {
  const required = reader === undefined ? undefined : requiredContext(reader)
  if (reader === undefined || required === undefined || required.some((field) => reader[field] === undefined)) {
    return { _tag: "ReaderUnidentified" }
  }
  if (platformOf(owner) !== platformOf(reader)) {
    return { _tag: "OtherContext", field: "platform", owner: platformOf(owner), reader: platformOf(reader) }
  }
  const missing = required.filter((field) => owner[field] === undefined)
  if (missing.length > 0) return { _tag: "OwnerUnidentified", missing }
  const field = CONTEXT_FIELDS.find((name) => owner[name] !== reader[name])
  return field === undefined ? undefined : { _tag: "OtherContext", field, owner: owner[field], reader: reader[field] }
}

/**
 * Whether `owner` is exactly this process's own evidence, written in a
 * context that identifies it (boot and PID namespace known).
 *
 * **Details**
 *
 * Such a lock was written by this very process (same pid and start time, in
 * the same boot and namespaces), so if this process does not hold its token,
 * nobody does. The same pid and start time counted in another PID namespace
 * is another process.
 *
 * @category predicates
 * @since 0.1.0
 */
export const isOwnEvidence = (self: OwnerEvidence | undefined, owner: OwnerEvidence): boolean =>
  self !== undefined && ownerContextMismatch(self, owner) === undefined && owner.pid === self.pid &&
  owner.startTicks === self.startTicks

/**
 * What a reader sees of a pid in its own PID namespace: `"gone"` (no such
 * process), its start ticks, or `undefined` when it exists but its start
 * time cannot be read.
 *
 * @category models
 * @since 0.1.0
 */
export type ProcessLookup = (pid: number, lockAgeMs: number | undefined) => "gone" | string | undefined

/**
 * Makes a probe that writes `current` as evidence and proves an owner dead
 * by the rule above, looking pids up with `lookup`.
 *
 * **Details**
 *
 * `lookup` must answer for the PID namespace `current.pidNamespace` names
 * (and in its time namespace): the Node probe reads `/proc` only when that
 * `/proc` belongs to its own namespace. Tests pass a table of processes.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeLockOwnerProbe = (current: OwnerEvidence | undefined, lookup: ProcessLookup): LockOwnerProbe => ({
  current,
  isProvablyDead: (owner, lockAgeMs) =>
    Effect.sync(() => {
      if (ownerContextMismatch(current, owner) !== undefined) return false
      const seen = lookup(owner.pid, lockAgeMs)
      if (seen === "gone") return true
      // Same pid, another start time: the owner ended and its pid was reused.
      return seen !== undefined && owner.startTicks !== undefined && seen !== owner.startTicks
    })
})
