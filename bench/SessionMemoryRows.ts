/**
 * `readRarebitSession` peak memory on large Sessions: one read per fresh
 * process (`SessionReadMemory`'s probe: the implementation loaded and a tiny
 * Session read first, then the growth of the peak RSS over one read of the
 * target), ours and the reference alternating round by round.
 *
 * @since 0.1.0
 */
import type { BenchContext, BenchGroup } from "./Groups.js"
import type { Side } from "./Implementations.js"
import type { MeasuredRow } from "./MeasuredTable.js"
import { formatValue } from "./MeasuredTable.js"
import { probeSessionRead, sessionMemoryFixtures, type SessionReadCost } from "./SessionReadMemory.js"
import { machineNote, quantile, type RoundPlan, runRounds } from "./Stats.js"

const sessionMemoryRows = async (context: BenchContext): Promise<ReadonlyArray<MeasuredRow>> => {
  const sizes = context.quick ? [100] : [100, 500]
  const rows: Array<MeasuredRow> = []
  for (const size of sizes) {
    context.log(`session-memory: readRarebitSession, Session ${size} MiB`)
    const { file, warmup } = sessionMemoryFixtures(size)
    const plan: RoundPlan = context.quick
      ? { minRounds: 2, maxRounds: 2, tolerance: 0 }
      : { minRounds: 6, maxRounds: 10, tolerance: 0.03, budgetMs: size >= 500 ? 150_000 : 60_000 }
    const rounds = await runRounds<Record<Side, SessionReadCost>>(plan, async (_, oursFirst) => {
      const result = {} as Record<Side, SessionReadCost>
      for (const side of oursFirst ? ["ours", "reference"] as const : ["reference", "ours"] as const) {
        result[side] = await probeSessionRead(side, file, warmup)
      }
      return { ours: [result.ours.peakGrowthMiB], theirs: [result.reference.peakGrowthMiB], extra: result }
    })
    const ms = (side: Side) => formatValue(quantile(rounds.extras.map((result) => result[side].ms), 0.5))
    rows.push({
      group: "session-memory",
      benchmark: `readRarebitSession, Session ${size} MiB: peak RSS growth of one read`,
      unit: "MiB",
      ours: rounds.ours,
      theirs: rounds.theirs,
      ratio: rounds.ratio,
      samples: rounds.samples,
      target: { ratioAtMost: 0.5 },
      note: `fresh process per read; read time ${ms("ours")}/${ms("reference")} ms o/r; ${machineNote(rounds)}`
    })
  }
  return rows
}

export const sessionMemoryGroup: BenchGroup = {
  name: "session-memory",
  summary: "readRarebitSession peak RSS growth on 100 and 500 MiB Sessions (100 only quick), a process per read",
  run: sessionMemoryRows
}
