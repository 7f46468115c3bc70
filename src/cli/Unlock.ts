/**
 * `rarebit-store unlock --session <path|id> [--force] [--token <prefix>]`:
 * the explicit repair the protocol asks for when a crashed writer leaves a
 * `.commit-lock` behind.
 *
 * It shows the lock's evidence, then removes it only when the owner is
 * provably gone (our owner evidence: same host and boot, pid gone or
 * reused) or when told `--force`; otherwise it refuses (exit 5). Removal
 * goes through `removeCommitLock`: the per-token break file is created
 * exclusively, the lock is read again, and it is removed only if it still
 * holds the token that was inspected, so a lock taken meanwhile by another
 * writer is never removed. `--token` pins the lock an operator inspected in
 * an earlier run. This and `demo` are the only commands that write.
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import { Command, Flag } from "effect/cli"
import * as ProcessOwner from "../platform/ProcessOwner.js"
import {
  inspectCommitLock,
  keyMatches,
  type LockReport,
  type LockRemoval,
  removeCommitLock
} from "../store/SidecarAudit.js"
import { cliFailure, ExitCode, toCliFailure } from "./CliFailure.js"
import { globals, resolveSession, sessionFlag } from "./GlobalOptions.js"
import { formatDuration, printJson, printLines, type Style, style } from "./Output.js"

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

const evidenceLines = (s: Style, lock: LockReport): ReadonlyArray<string> => {
  const field = (label: string, value: string) => `${s.dim(label.padEnd(12))} ${value}`
  const owner = lock.owner
  return [
    field("Commit lock", lock.path),
    field("Token", lock.tokenPrefix === null ? s.red("none (torn lock file)") : `${lock.tokenPrefix}…`),
    field(
      "Claimed at",
      `${lock.claimedAt ?? "unknown"}${lock.ageMs === null ? "" : ` (${formatDuration(lock.ageMs)} ago)`}`
    ),
    field(
      "Owner",
      owner === null
        ? "no owner evidence (a lock written by the reference implementation, or torn)"
        : [
          `pid ${owner.pid} on ${owner.hostname}`,
          owner.bootId === undefined ? null : `boot ${owner.bootId.slice(0, 8)}…`,
          owner.startTicks === undefined ? null : `start ticks ${owner.startTicks}`
        ].filter((part) => part !== null).join(", ")
    ),
    field(
      "Verdict",
      lock.liveness === "dead"
        ? s.green("owner is provably gone")
        : lock.liveness === "no_evidence"
        ? s.yellow("owner may be alive (no evidence to prove otherwise)")
        : s.yellow("owner may be alive (evidence does not prove it gone here)")
    ),
    ...lock.breakFiles.map((file) => field("Break file", s.yellow(file)))
  ]
}

const outcomeOf = (removal: LockRemoval): { action: UnlockAction; detail: string } => {
  switch (removal._tag) {
    case "Removed":
      return { action: "removed", detail: "lock removed" }
    case "Absent":
      return { action: "already_gone", detail: "the lock disappeared meanwhile (its owner released it); nothing removed" }
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
    const resolved = yield* resolveSession(session, options)
    const s = yield* style
    const lockPath = resolved.lockPath
    const emit = (report: UnlockReport) =>
      options.json ? printJson(report) : printLines(report.lock === null ? [report.detail] : [s.bold(report.detail)])

    const inspected = yield* inspectCommitLock(lockPath).pipe(
      Effect.provide(ProcessOwner.layer),
      Effect.mapError(toCliFailure)
    )
    if (inspected === undefined) {
      return yield* emit({ lockPath, lock: null, action: "none", detail: `No commit lock at ${lockPath}; nothing to do` })
    }
    const { key, lock } = inspected
    if (!options.json) yield* printLines(evidenceLines(s, lock))

    const refuse = (action: UnlockAction, detail: string, hint: string) =>
      Effect.andThen(
        options.json ? printJson({ lockPath, lock, action, detail } satisfies UnlockReport) : Effect.void,
        Effect.fail(cliFailure(ExitCode.Refused, detail, hint))
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
      const who = lock.owner === null ? "" : ` (pid ${lock.owner.pid} on ${lock.owner.hostname})`
      return yield* refuse(
        "refused",
        `refusing to remove the lock: its owner may be alive${who}`,
        `if you are sure no writer is running, re-run with --force --token ${key.length > 12 ? key.slice(0, 12) : key}`
      )
    }

    const removal = yield* removeCommitLock(lockPath, key, { clearStaleBreakFile: force }).pipe(
      Effect.mapError(toCliFailure)
    )
    const outcome = outcomeOf(removal)
    if (outcome.action === "changed" || outcome.action === "break_in_progress") {
      return yield* refuse(
        outcome.action,
        outcome.detail,
        outcome.action === "changed"
          ? "re-run to inspect the new lock"
          : "if no other repair or writer is running, delete the break file and re-run"
      )
    }
    yield* emit({ lockPath, lock, ...outcome })
  })
).pipe(
  Command.withDescription(
    "Show a Session's commit lock and remove it if its owner is provably gone, or with --force; " +
      "never removes a lock that was replaced meanwhile"
  ),
  Command.withExamples([
    { command: "rarebit-store unlock --session ./proj/session.jsonl", description: "inspect; remove if the owner is gone" },
    {
      command: "rarebit-store unlock --session ./proj/session.jsonl --force --token 3f2a9c01d4e5",
      description: "remove exactly the lock inspected before, whatever its owner"
    }
  ])
)
