/**
 * `rarebit-store jobs [--session <path|id>]`: the job claims under
 * `jobs-v4/`: active (lease left or expired) and settled (receipt pointer
 * verified, invalid, or orphaned).
 *
 * Claims do not name their Session, so a settled claim's pointer is checked
 * against the sidecars that hold a receipt of its job, which means reading
 * the sidecars. With `--session`, only the claims whose job has a receipt in
 * that Session's sidecar are listed; active claims of jobs that never
 * settled cannot be attributed and are only counted. Lease tokens are never
 * shown. A root that does not exist is "no store" (exit 3), not "0 claims".
 * Nothing is written.
 *
 * @since 0.1.0
 */
import { Clock, Effect } from "effect"
import { Command, Flag } from "effect/cli"
import { Path } from "effect/Path"
import type { AuditReport, ClaimReport } from "../store/audit/SidecarAudit.js"
import { globals, sessionFlag } from "./GlobalOptions.js"
import { formatDuration, printJson, printLines, short, type Style, style } from "./Output.js"
import { relativeTo, runAudit } from "./RunAudit.js"

/**
 * The JSON shape of `jobs --json`.
 *
 * @category models
 * @since 0.1.0
 */
export interface JobsReport {
  readonly rarebitRoot: string
  readonly sessionFile: string | null
  readonly claims: ReadonlyArray<ClaimReport>
  readonly unattributedClaims: number
}

const stateOf = (claim: ClaimReport): string =>
  claim.state === "active" ? (claim.expired ? "expired" : "active") : claim.state

/**
 * One claim as a table row.
 *
 * @category formatting
 * @since 0.1.0
 */
export const formatClaim = (s: Style, path: Path, root: string, claim: ClaimReport, now: number): string => {
  const state = stateOf(claim)
  const label = state === "active"
    ? s.green(state.padEnd(10))
    : state === "settled"
    ? (claim.pointer === "verified" ? s.green : s.red)(state.padEnd(10))
    : state === "expired"
    ? s.yellow(state.padEnd(10))
    : s.red(state.padEnd(10))
  const detail = (() => {
    switch (state) {
      case "active": {
        const left = claim.expiresAt === null ? Number.NaN : Date.parse(claim.expiresAt) - now
        return Number.isFinite(left)
          ? `lease left ${formatDuration(left)} (claimed ${claim.claimedAt})`
          : `claimed ${claim.claimedAt}`
      }
      case "expired": {
        const ago = claim.expiresAt === null ? Number.NaN : now - Date.parse(claim.expiresAt)
        return `lease ran out ${Number.isFinite(ago) ? `${formatDuration(ago)} ago` : ""} (claimed ${claim.claimedAt})`
      }
      case "settled": {
        const ref = claim.receiptRef
        const where = ref === null ? "malformed receiptRef" : `@ ${ref.receiptOffset}+${ref.receiptLength}`
        return claim.pointer === "verified"
          ? `receipt verified in ${relativeTo(path, root, claim.sidecar ?? "")} ${where}`
          : claim.pointer === "orphan"
          ? s.red(`ORPHAN: no sidecar holds a receipt of this job (${where})`)
          : s.red(`POINTER INVALID: ${where} does not verify in ${relativeTo(path, root, claim.sidecar ?? "")}`)
      }
      default:
        return s.red(claim.detail ?? "")
    }
  })()
  return `  ${label} ${short(claim.jobId, 16).padEnd(17)} ${detail}`
}

/**
 * The human-readable rendering of `jobs`.
 *
 * @category formatting
 * @since 0.1.0
 */
export const formatJobs = (s: Style, path: Path, report: AuditReport, now: number): ReadonlyArray<string> => {
  const counts = new Map<string, number>()
  for (const claim of report.claims) counts.set(stateOf(claim), (counts.get(stateOf(claim)) ?? 0) + 1)
  const summary = [...counts].map(([state, count]) => `${count} ${state}`).join(", ")
  const lines = [
    `${s.bold(`${report.claims.length} claim(s)`)} under ${report.rarebitRoot}/jobs-v4${
      summary === "" ? "" : ` (${summary})`
    }`,
    ...report.claims.map((claim) => formatClaim(s, path, report.rarebitRoot, claim, now))
  ]
  if (report.scope === "sidecar" && report.unattributedClaims > 0) {
    lines.push(s.dim(
      `${report.unattributedClaims} other claim(s) cannot be attributed to this Session; ` +
        "run 'rarebit-store jobs' to list them"
    ))
  }
  return lines
}

/**
 * The `jobs` command.
 *
 * @category commands
 * @since 0.1.0
 */
export const jobsCommand = Command.make(
  "jobs",
  { session: sessionFlag.pipe(Flag.optional) },
  Effect.fn("cli.jobs")(function*({ session }) {
    const options = yield* globals
    const { report, resolved } = yield* runAudit(options, session)
    if (options.json) {
      return yield* printJson(
        {
          rarebitRoot: report.rarebitRoot,
          sessionFile: resolved?.sessionFile ?? null,
          claims: report.claims,
          unattributedClaims: report.unattributedClaims
        } satisfies JobsReport
      )
    }
    yield* printLines(formatJobs(yield* style, yield* Path, report, yield* Clock.currentTimeMillis))
  })
).pipe(
  Command.withDescription(
    "List job claims: active (lease left or expired) and settled (receipt pointer verified or not). " +
      "--json prints one JSON document {rarebitRoot, sessionFile, claims, unattributedClaims}; errors are one " +
      "JSON line on stderr. Exits 3 when there is no store at --root"
  ),
  Command.withExamples([
    { command: "rarebit-store jobs", description: "every claim under the default root" },
    {
      command: "rarebit-store jobs --root /tmp/rarebit --session ./proj/session.jsonl --json",
      description: "one Session"
    }
  ])
)
