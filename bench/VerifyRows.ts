/**
 * `verify` over a store of many small sidecars against its floor: the
 * package's own executable (`rarebit-store --root … verify --json`, stdout
 * discarded) and `VerifyFloor` (a script that reads every file of the same
 * root once), each a fresh process, alternating round by round. Both are
 * timed from spawn to exit, and their peak RSS and CPU time are read by the
 * `PeakRss` preload.
 *
 * The store: `sidecars` sidecars of two receipt + head pairs each (~4.6 KB)
 * in 100 directories, and the settled claim of every receipt, all valid, so
 * `verify` finds nothing. Generated once under `.bench-data/fixtures`.
 *
 * @since 0.1.0
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { encodeClaimLine, makeSettledClaim } from "../src/protocol/JobClaim.js"
import { jobIdOf, receiptAndHead, summaryReceipt } from "./Fixtures.js"
import type { BenchContext, BenchGroup } from "./Groups.js"
import { siblingScript } from "./Harness.js"
import type { MeasuredRow } from "./MeasuredTable.js"
import { type ProcessCost, timedProcess } from "./Processes.js"
import { machineNote, ratioSummaryOf, type RoundPlan, runRounds, spreadOf } from "./Stats.js"

const FIXTURE_VERSION = 1
const RECEIPTS_PER_SIDECAR = 2

/** A valid store of `sidecars` small sidecars and their settled claims; returns its rarebit root. */
export const writeVerifyStore = (fixtures: string, sidecars: number): string => {
  const dir = join(fixtures, `verify-${sidecars}`)
  const root = join(dir, "rarebit")
  const stamp = join(dir, "complete.json")
  const key = JSON.stringify({ version: FIXTURE_VERSION, sidecars, receipts: RECEIPTS_PER_SIDECAR })
  if (existsSync(stamp) && readFileSync(stamp, "utf8") === key) return root
  rmSync(dir, { recursive: true, force: true })
  const building = join(dir, "building")
  const claims = join(building, "jobs-v4")
  mkdirSync(claims, { recursive: true, mode: 0o700 })
  for (let index = 0; index < sidecars; index++) {
    const sessionId = `0194c1d2-7a00-7000-8000-${index.toString(16).padStart(12, "0")}`
    const folder = join(building, "materializations-v4", `--project-${index % 100}--`)
    if (index < 100) mkdirSync(folder, { recursive: true, mode: 0o700 })
    const lines: Array<Uint8Array> = []
    let offset = 0
    for (let receipt = 0; receipt < RECEIPTS_PER_SIDECAR; receipt++) {
      const jobId = jobIdOf(`verify-${index}`, receipt)
      const { head, headLine, receiptLine } = receiptAndHead(
        summaryReceipt({
          jobId,
          sessionId,
          manifestHash: jobIdOf("manifest", index),
          occurrenceCount: 3 + receipt,
          observedAt: new Date(Date.UTC(2026, 0, 1) + index * 60_000 + receipt * 1000).toISOString()
        }),
        sessionId,
        offset
      )
      lines.push(receiptLine, headLine)
      offset += receiptLine.byteLength + headLine.byteLength
      const claim = makeSettledClaim(jobId, jobIdOf("lease", index * RECEIPTS_PER_SIDECAR + receipt).slice(0, 32), head)
      writeFileSync(join(claims, `${jobId}.json`), encodeClaimLine(claim), { mode: 0o600 })
    }
    writeFileSync(join(folder, `2026-01-01T00-00-00-000Z_${sessionId}.jsonl`), Buffer.concat(lines), { mode: 0o600 })
  }
  renameSync(building, root)
  writeFileSync(stamp, key)
  return root
}

/** The package's executable, as `npm run build` leaves it. */
const executableOf = (root: string): string => {
  const bin = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { bin: Record<string, string> }).bin
  const path = join(root, bin["rarebit-store"])
  if (!existsSync(path)) throw new Error(`${path} is missing: run \`npm run build\` first`)
  return path
}

const verifyRows = async (context: BenchContext): Promise<ReadonlyArray<MeasuredRow>> => {
  const sidecars = context.quick ? 2_000 : 10_000
  context.log(`verify: ${sidecars.toLocaleString("en")} sidecars against a script that reads every file once`)
  const root = writeVerifyStore(context.fixtures, sidecars)
  const executable = executableOf(context.root)
  const verify = (stdoutFile?: string) =>
    timedProcess([executable, "--root", root, "verify", "--json"], stdoutFile === undefined ? {} : { stdoutFile })
  const floor = (stdoutFile?: string) =>
    timedProcess([siblingScript("VerifyFloor.js"), root], stdoutFile === undefined ? {} : { stdoutFile })

  // Untimed first runs: they fill the page cache for both, and check that
  // verify finds every sidecar and claim and nothing wrong.
  mkdirSync(context.work, { recursive: true })
  const reportFile = join(context.work, "verify-report.json")
  await verify(reportFile)
  const report = JSON.parse(readFileSync(reportFile, "utf8")) as {
    ok: boolean
    sidecars: Array<unknown>
    claims: Array<unknown>
    findings: Array<unknown>
  }
  if (
    !report.ok || report.findings.length > 0 || report.sidecars.length !== sidecars ||
    report.claims.length !== sidecars * RECEIPTS_PER_SIDECAR
  ) {
    throw new Error(
      `verify fixture: ok ${report.ok}, ${report.findings.length} findings, ${report.sidecars.length} sidecars, ${report.claims.length} claims`
    )
  }
  const floorFile = join(context.work, "verify-floor.json")
  await floor(floorFile)
  const walked = JSON.parse(readFileSync(floorFile, "utf8")) as { files: number; bytes: number }
  if (walked.files !== sidecars * (1 + RECEIPTS_PER_SIDECAR)) throw new Error(`floor read ${walked.files} files`)

  const plan: RoundPlan = context.quick
    ? { minRounds: 2, maxRounds: 2, tolerance: 0 }
    : { minRounds: 4, maxRounds: 10, tolerance: 0.05, budgetMs: 150_000 }
  const rounds = await runRounds<{ ours: ProcessCost; floor: ProcessCost }>(plan, async (_, oursFirst) => {
    let ours: ProcessCost
    let other: ProcessCost
    if (oursFirst) {
      ours = await verify()
      other = await floor()
    } else {
      other = await floor()
      ours = await verify()
    }
    return { ours: [ours.wallMs], theirs: [other.wallMs], extra: { ours, floor: other } }
  })
  const costs = rounds.extras
  const pairedRow = (pick: (cost: ProcessCost) => number) => {
    const ours = costs.map((cost) => pick(cost.ours))
    const floor = costs.map((cost) => pick(cost.floor))
    return {
      ours: spreadOf(ours),
      theirs: spreadOf(floor),
      ratio: ratioSummaryOf(ours.map((value, index) => value / floor[index]), rounds.ratio.stoppedBy),
      samples: { ours, theirs: floor, ratios: ours.map((value, index) => value / floor[index]) }
    }
  }
  const what = `${sidecars.toLocaleString("en")} sidecars (${RECEIPTS_PER_SIDECAR} receipts each) + ${
    (sidecars * RECEIPTS_PER_SIDECAR).toLocaleString("en")
  } claims, ${(walked.bytes / 1024 / 1024).toFixed(0)} MiB`
  return [
    {
      group: "verify",
      benchmark: `verify --json, ${what}: wall time of the process`,
      unit: "ms",
      ours: rounds.ours,
      theirs: rounds.theirs,
      ratio: rounds.ratio,
      samples: rounds.samples,
      versus: "a script reading every file once (floor)",
      target: { ratioAtMost: 4 },
      note: machineNote(rounds)
    },
    {
      group: "verify",
      benchmark: `verify --json, ${what}: CPU time of the process`,
      unit: "ms",
      ...pairedRow((cost) => cost.cpuMs),
      versus: "the floor script",
      note: "user + system, same processes as the row above; steadier than wall time on a loaded machine"
    },
    {
      group: "verify",
      benchmark: `verify --json, ${what}: peak RSS of the process`,
      unit: "MiB",
      ...pairedRow((cost) => cost.peakRssMiB),
      versus: "the floor script",
      target: { oursAtMost: 160 }
    }
  ]
}

export const verifyGroup: BenchGroup = {
  name: "verify",
  summary: "verify --json over 10,000 small sidecars (2,000 quick) against a script reading every file once",
  run: verifyRows
}
