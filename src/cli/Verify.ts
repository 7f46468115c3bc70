/**
 * `rarebit-store verify [--session <path|id>] [--strict]`: the full scan of
 * every sidecar under the root (or one Session's), every claim, commit lock
 * and leftover file, by the library's `auditStore`.
 *
 * Exits 1 when anything is damaged (see `SidecarAudit.ts` for the precise
 * list), 0 when only notices were found. The traces a crash leaves and no
 * reader or writer is hurt by (a torn tail, an uncommitted tail, a stale
 * temp file) are notices, or damage with `--strict`. Exits 3 when there is
 * no store at the root. `--json` prints the `AuditReport`, one document,
 * every finding with its `severity` and `expectedAfterCrash`. Nothing is
 * written.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { Command, Flag } from "effect/cli"
import { Path } from "effect/Path"
import type { AuditFinding, AuditReport, FindingKind } from "../store/audit/SidecarAudit.js"
import { CliFailure, ExitCode } from "./CliFailure.js"
import { globals, sessionFlag } from "./GlobalOptions.js"
import { printJson, printLines, type Style, style } from "./Output.js"
import { relativeTo, runAudit } from "./RunAudit.js"

const HINTS: Partial<Record<FindingKind, string>> = {
  torn_tail: "an append was cut short by a crash; readers ignore these bytes (a notice without --strict)",
  uncommitted_tail:
    "a writer crashed between receipt and head; reserving its job again completes or redoes it (a notice without --strict)",
  invalid_head: "current reads of this sidecar fail closed until a valid head follows",
  head_range_invalid: "the sidecar was edited or corrupted after the head was written",
  invalid_record: "the line is skipped by readers; it was not written by a v4 writer",
  claim_invalid: "remove the claim file (with no worker running) so the job can be reserved again",
  claim_pointer_invalid: "remove the claim file (with no worker running) so the job can run again",
  claim_orphan: "the job's sidecar is gone; remove the claim file if the job should run again",
  commit_lock_leftover: "inspect and remove it with 'rarebit-store unlock --session <path|id>'",
  temp_file_leftover: "safe to delete once no writer is running (a notice without --strict)",
  break_file_leftover: "a lock repair crashed; run 'rarebit-store unlock' on that Session",
  sidecar_not_regular: "replace it with the regular file it should be, or remove it"
}

const findingLine = (s: Style, path: Path, root: string, item: AuditFinding) => {
  const where = `${relativeTo(path, root, item.path)}${item.offset === null ? "" : ` @ ${item.offset}`}`
  const severity = item.severity === "damage" ? s.red("DAMAGE") : s.yellow("notice")
  return `  ${severity} ${item.kind.padEnd(22)} ${where}: ${item.detail}`
}

/**
 * The human-readable rendering of an audit.
 *
 * @category formatting
 * @since 0.1.0
 */
export const formatAudit = (s: Style, path: Path, report: AuditReport): ReadonlyArray<string> => {
  const receipts = report.sidecars.reduce((sum, sidecar) => sum + sidecar.receipts, 0)
  const heads = report.sidecars.reduce((sum, sidecar) => sum + sidecar.heads, 0)
  const lines = [
    `${s.bold("Verified")} ${report.rarebitRoot}${report.scope === "sidecar" ? " (one Session)" : ""}: ` +
    `${report.sidecars.length} sidecar(s) with ${receipts} receipt(s) and ${heads} head(s), ` +
    `${report.claims.length} claim(s), ${report.locks.length} commit lock(s)`
  ]
  for (const item of report.findings) lines.push(findingLine(s, path, report.rarebitRoot, item))
  const worthAHint = report.findings.filter((item) => item.severity === "damage" || item.expectedAfterCrash)
  const kinds = [...new Set(worthAHint.map((item) => item.kind))]
  for (const kind of kinds) {
    const hint = HINTS[kind]
    if (hint !== undefined) lines.push(s.dim(`  hint (${kind}): ${hint}`))
  }
  const traces = report.findings.filter((item) => item.expectedAfterCrash && item.severity === "notice").length
  const tracesNote = traces === 0 ? "" : ` (${traces} left by a crash; --strict counts them as damage)`
  lines.push(
    report.ok
      ? s.green(`OK: no damage${report.counts.notices > 0 ? `, ${report.counts.notices} notice(s)${tracesNote}` : ""}`)
      : s.red(`${report.counts.damage} problem(s), ${report.counts.notices} notice(s)${tracesNote}`)
  )
  return lines
}

/**
 * The `verify` command.
 *
 * @category commands
 * @since 0.1.0
 */
export const verifyCommand = Command.make(
  "verify",
  {
    session: sessionFlag.pipe(Flag.optional),
    strict: Flag.Boolean("strict").pipe(
      Flag.withDescription(
        "Count the traces a crash leaves (torn tail, uncommitted tail, stale temp file) as damage, not notices"
      ),
      Flag.withDefault(false)
    )
  },
  Effect.fn("cli.verify")(function*({ session, strict }) {
    const options = yield* globals
    const { report } = yield* runAudit(options, session, strict)
    if (options.json) yield* printJson(report)
    else yield* printLines(formatAudit(yield* style, yield* Path, report))
    if (!report.ok) {
      return yield* new CliFailure({
        tag: "Damage",
        exitCode: ExitCode.Damage,
        message: `verify found ${report.counts.damage} problem(s)`,
        hint: null,
        reported: true
      })
    }
  })
).pipe(
  Command.withDescription(
    "Full scan: every head's range and hash, torn and uncommitted tails, invalid heads and records, " +
      "unreadable files, settled claims whose pointer does not verify, orphan claims, leftover locks and temp files. " +
      "Exits 1 when anything is damaged, 0 when only notices were found, 3 when there is no store at --root. " +
      "What a crash leaves and no reader or writer is hurt by (a torn tail, an uncommitted tail, a stale temp file) " +
      "is a notice, or damage with --strict. --json prints one JSON document, the report, each finding with its " +
      "severity (damage or notice) and expectedAfterCrash; errors are one JSON line on stderr"
  ),
  Command.withExamples([
    { command: "rarebit-store verify", description: "the whole default store" },
    {
      command: "rarebit-store verify --root /tmp/rarebit --session ./proj/session.jsonl --json",
      description: "one Session"
    }
  ])
)
