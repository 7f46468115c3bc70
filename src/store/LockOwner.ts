/**
 * Evidence about which process holds a commit lock, and whether it is gone.
 *
 * A lock file carries `{token, claimedAt}` (all the reference reads) plus,
 * when written by us, an `owner` record naming the host, the boot, the pid
 * and the process start time. Only that evidence can prove a lock's owner
 * dead: a lock without it, or from another host or boot we cannot inspect,
 * is never broken automatically. The default reference has no evidence and
 * proves nothing dead, so tests and other platforms stay conservative; the
 * Node layer provides the `/proc`-backed probe.
 *
 * @since 0.1.0
 */
import { Context, Effect } from "effect"

/** The owner record written into lock files. @category models @since 0.1.0 */
export interface OwnerEvidence {
  readonly pid: number
  readonly hostname: string
  /** Kernel boot id: a pid is meaningful only within one boot. */
  readonly bootId?: string
  /** Process start time in clock ticks since boot, which tells pid reuse apart. */
  readonly startTicks?: string
}

/**
 * Produces this process's evidence and judges another owner's liveness.
 *
 * @category services
 * @since 0.1.0
 */
export interface LockOwnerProbe {
  readonly current: OwnerEvidence | undefined
  /** `true` only when the owner is certainly not running any more. */
  readonly isProvablyDead: (owner: OwnerEvidence) => Effect.Effect<boolean>
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

/** Reads owner evidence from a parsed lock file, if it has well-formed evidence. @category parsing @since 0.1.0 */
export const ownerEvidenceOf = (lock: unknown): OwnerEvidence | undefined => {
  if (typeof lock !== "object" || lock === null) return undefined
  const owner = (lock as { readonly owner?: unknown }).owner
  if (typeof owner !== "object" || owner === null) return undefined
  const { bootId, hostname, pid, startTicks } = owner as Record<string, unknown>
  if (!Number.isSafeInteger(pid) || (pid as number) <= 0 || typeof hostname !== "string" || hostname === "") {
    return undefined
  }
  return {
    pid: pid as number,
    hostname,
    ...(typeof bootId === "string" ? { bootId } : {}),
    ...(typeof startTicks === "string" ? { startTicks } : {})
  }
}
