/**
 * `rarebit-store unlock --session <path|id> [--force] [--token <prefix>]`:
 * the explicit repair the protocol asks for when a crashed writer leaves a
 * `.commit-lock` behind.
 *
 * It shows the lock's evidence, then removes it only when the owner is
 * provably gone (our owner evidence, written on this process's own platform
 * and host, in its boot, PID and time namespace, pid gone or reused there) or when told
 * `--force`; otherwise it refuses (exit 5), saying why the owner may be
 * alive — a lock taken in another PID namespace (a container or `unshare
 * --pid` sharing the volume) names a pid this process cannot look at. Removal
 * goes through `removeCommitLock`: the per-token break file is created
 * exclusively, the lock is read again, and it is removed only if it still
 * holds the token that was inspected, so a lock taken meanwhile by another
 * writer is never removed. `--token` pins the lock an operator inspected in
 * an earlier run. This and `demo` are the only commands that write.
 *
 * The owner is judged by the `LockOwner` probe in the environment: the
 * executable provides the one of the platform it runs on
 * (`ProcessOwner.layer`); without one, no owner is provably gone.
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import { Command, Flag } from "effect/cli"
import {
  inspectCommitLock,
  keyMatches,
  type LockRemoval,
  type LockReport,
  removeCommitLock
} from "../store/lock/CommitLockRepair.js"
import { LockOwner, ownerContextMismatch, type OwnerEvidence } from "../store/lock/LockOwner.js"
import { cliFailure, ExitCode, toCliFailure } from "./CliFailure.js"
import { globals, requireStore, resolveSession, sessionFlag } from "./GlobalOptions.js"
import { displayText, formatDuration, printJson, printLines, type Style, style } from "./Output.js"

/**
 * What `unlock` did.
 *
 * @category models
 * @since 0.1.0
 */
export type UnlockAction = "none" | "removed" | "already_gone" | "refused" | "changed" | "break_in_progress"

/**
 * The JSON shape of `unlock --json`.
 *
 * @category models
 * @since 0.1.0
 */
export interface UnlockReport {
  readonly lockPath: string
  readonly lock: LockReport | null
  readonly action: UnlockAction
  readonly detail: string
}

const short = (value: string | undefined) => value === undefined ? "none" : `${value.slice(0, 8)}…`

/** Why the owner of `lock` may be alive, as seen by a reader with evidence `reader`. */
const whyMayBeAlive = (reader: OwnerEvidence | undefined, lock: LockReport): string => {
  const owner = lock.owner
  if (owner === null) return "the lock carries no owner evidence (written by the reference implementation, or torn)"
  const mismatch = ownerContextMismatch(reader, owner)
  if (mismatch === undefined) return `pid ${owner.pid} is a running process here`
  switch (mismatch._tag) {
    case "ReaderUnidentified":
      return "this process cannot name its own boot and PID namespace (no /proc, a /proc of another PID " +
        "namespace, or a platform such as Windows where no boot id can be read), so it can prove no owner gone"
    case "OwnerUnidentified": {
      const missing = mismatch.missing.map((field) => field === "bootId" ? "boot" : "PID namespace").join(" or ")
      if (owner.platform === "darwin") {
        return `the evidence does not name its boot (sysctl could not read it), so pid ${owner.pid} may be a ` +
          "process of another boot"
      }
      return `the evidence does not name its ${missing} (written by an older rarebit-store, or where /proc ` +
        `could not name it), so pid ${owner.pid} may be a process of another namespace`
    }
    case "OtherContext":
      switch (mismatch.field) {
        case "platform":
          return `it was taken on ${mismatch.owner} and this process runs on ${mismatch.reader}: ` +
            `pid ${owner.pid} is counted by another kernel (a container sharing this volume with its host)`
        case "pidNamespace":
          return `it was taken in another PID namespace (${mismatch.owner}; this process is in ${mismatch.reader}), ` +
            `where pid ${owner.pid} names a process this one cannot look at: a container or 'unshare --pid' ` +
            "sharing this volume"
        case "timeNamespace":
          return `it was taken in another time namespace (${mismatch.owner ?? "none"}; this process is in ` +
            `${mismatch.reader ?? "none"}), where process start times read differently`
        case "bootId":
          return `it was taken during another boot (${short(mismatch.owner)}; this is ${short(mismatch.reader)}): ` +
            "an earlier boot of this machine, or another machine with the same hostname"
        case "hostname":
          return `it was taken on another host (${mismatch.owner})`
      }
  }
}

const evidenceLines = (s: Style, lock: LockReport, reader: OwnerEvidence | undefined): ReadonlyArray<string> => {
  const field = (label: string, value: string) => `${s.dim(label.padEnd(12))} ${value}`
  const owner = lock.owner
  return [
    field("Commit lock", lock.path),
    field(
      "Token",
      lock.tokenPrefix !== null
        ? `${lock.tokenPrefix}…`
        : s.red(lock.unreadable === null ? "none (torn lock file)" : `none (cannot be read: ${lock.unreadable})`)
    ),
    field(
      "Claimed at",
      `${displayText(lock.claimedAt ?? "unknown", 40)}${
        lock.ageMs === null ? "" : ` (${formatDuration(lock.ageMs)} ago)`
      }`
    ),
    field(
      "Owner",
      owner === null
        ? "no owner evidence (a lock written by the reference implementation, or torn)"
        : [
          `pid ${owner.pid} on ${displayText(owner.hostname, 64)}`,
          owner.platform === undefined ? null : `platform ${displayText(owner.platform, 24)}`,
          owner.bootId === undefined ? null : `boot ${owner.bootId.slice(0, 8)}…`,
          owner.startTicks === undefined
            ? null
            : `${owner.platform === undefined ? "start ticks" : "started at"} ${displayText(owner.startTicks, 24)}`,
          owner.pidNamespace === undefined
            ? owner.platform === undefined ? "PID namespace not recorded" : null
            : `PID namespace ${displayText(owner.pidNamespace, 40)}`,
          owner.timeNamespace === undefined ? null : `time namespace ${displayText(owner.timeNamespace, 40)}`
        ].filter((part) => part !== null).join(", ")
    ),
    field(
      "Verdict",
      lock.liveness === "dead"
        ? s.green("owner is provably gone")
        : lock.liveness === "no_evidence"
        ? s.yellow("owner may be alive (no evidence to prove otherwise)")
        : s.yellow(`owner may be alive: ${whyMayBeAlive(reader, lock)}`)
    ),
    ...lock.breakFiles.map((file) => field("Break file", s.yellow(file)))
  ]
}

const outcomeOf = (removal: LockRemoval): { action: UnlockAction; detail: string } => {
  switch (removal._tag) {
    case "Removed":
      return { action: "removed", detail: "lock removed" }
    case "Absent":
      return {
        action: "already_gone",
        detail: "the lock disappeared meanwhile (its owner released it); nothing removed"
      }
    case "Changed":
      return {
        action: "changed",
        detail: `the lock was replaced meanwhile (now token ${removal.tokenPrefix ?? "none"}…); not removed`
      }
    case "BreakInProgress":
      return {
        action: "break_in_progress",
        detail: `another repair of this lock is in progress or crashed (${removal.breakPath}); not removed`
      }
    case "OwnerMayBeAlive":
      // Only if the verdict changed between the inspection and the removal.
      return { action: "refused", detail: "its owner may be alive after all; not removed" }
  }
}

/**
 * The `unlock` command.
 *
 * @category commands
 * @since 0.1.0
 */
export const unlockCommand = Command.make(
  "unlock",
  {
    session: sessionFlag,
    force: Flag.Boolean("force").pipe(
      Flag.withDescription("Remove the lock even though its owner may be alive (only if no writer is running!)"),
      Flag.withDefault(false)
    ),
    token: Flag.String("token").pipe(
      Flag.withMetavar("prefix"),
      Flag.withDescription("Remove only the lock whose token starts with this (as shown by an earlier run)"),
      Flag.optional
    )
  },
  Effect.fn("cli.unlock")(function*({ force, session, token }) {
    const options = yield* globals
    yield* requireStore(options)
    const resolved = yield* resolveSession(session, options)
    const s = yield* style
    const lockPath = resolved.lockPath
    const emit = (report: UnlockReport) =>
      options.json ? printJson(report) : printLines(report.lock === null ? [report.detail] : [s.bold(report.detail)])

    // One probe, the one in the environment (the platform's, from `main`),
    // judges the lock, explains the verdict and guards the removal.
    const probe = yield* LockOwner
    const inspected = yield* inspectCommitLock(lockPath).pipe(
      Effect.provideService(LockOwner, probe),
      Effect.mapError(toCliFailure)
    )
    if (inspected === undefined) {
      return yield* emit({
        lockPath,
        lock: null,
        action: "none",
        detail: `No commit lock at ${lockPath}; nothing to do`
      })
    }
    const { key, lock } = inspected
    if (!options.json) yield* printLines(evidenceLines(s, lock, probe.current))

    const refuse = (action: UnlockAction, detail: string, hint: string) =>
      Effect.andThen(
        options.json ? printJson({ lockPath, lock, action, detail } satisfies UnlockReport) : Effect.void,
        Effect.fail(cliFailure("Refused", ExitCode.Refused, detail, hint))
      )

    if (Option.isSome(token) && !keyMatches(key, token.value)) {
      return yield* refuse(
        "changed",
        token.value.length < 8 && key.startsWith(token.value)
          ? "--token needs the whole token or at least 8 characters of it"
          : `the lock's token is ${key.slice(0, 12)}…, not ${token.value}; it was replaced since you inspected it`,
        "re-run without --token to inspect the current lock"
      )
    }
    if (lock.liveness !== "dead" && !force) {
      const who = lock.owner === null ? "" : ` (pid ${lock.owner.pid} on ${displayText(lock.owner.hostname, 64)})`
      return yield* refuse(
        "refused",
        `refusing to remove the lock: its owner may be alive${who}: ${whyMayBeAlive(probe.current, lock)}`,
        `if you are sure no writer is running, re-run with --force --token ${key.length > 12 ? key.slice(0, 12) : key}`
      )
    }

    const removal = yield* removeCommitLock(lockPath, key, { force, clearStaleBreakFile: force }).pipe(
      Effect.provideService(LockOwner, probe),
      Effect.mapError(toCliFailure)
    )
    const outcome = outcomeOf(removal)
    if (outcome.action !== "removed" && outcome.action !== "already_gone") {
      return yield* refuse(
        outcome.action,
        outcome.detail,
        outcome.action === "changed"
          ? "re-run to inspect the new lock"
          : outcome.action === "refused"
          ? "re-run to inspect it again"
          : "if no other repair or writer is running, delete the break file and re-run"
      )
    }
    yield* emit({ lockPath, lock, ...outcome })
  })
).pipe(
  Command.withDescription(
    "Show a Session's commit lock and remove it if its owner is provably gone, or with --force; " +
      "never removes a lock that was replaced meanwhile. Exits 5 when it refuses, 3 when there is no store at " +
      "--root. --json prints one JSON document {lockPath, lock, action, detail}, also when it refuses; errors " +
      "are one JSON line on stderr"
  ),
  Command.withExamples([
    {
      command: "rarebit-store unlock --session ./proj/session.jsonl",
      description: "inspect; remove if the owner is gone"
    },
    {
      command: "rarebit-store unlock --session ./proj/session.jsonl --force --token 3f2a9c01d4e5",
      description: "remove exactly the lock inspected before, whatever its owner"
    }
  ])
)
