/**
 * The polled-heap rows: what an idle polled Session keeps on the V8 heap,
 * and what one poll of it promotes to the old generation, ours against the
 * reference, a fresh process per side and round (`HeapProbe`), over the
 * polling rows' fixture. Diagnostics with no target: they explain the
 * polling rows' RSS, and are V8's figures, not the store's contract.
 *
 * @since 0.1.0
 */
import { readFileSync } from "node:fs"
import type { BenchContext, BenchGroup } from "./Groups.js"
import { runChild } from "./Harness.js"
import type { Side } from "./Implementations.js"
import type { MeasuredRow } from "./MeasuredTable.js"
import { writeManySessions } from "./PollingRows.js"
import { ratioSummaryOf, spreadOf } from "./Stats.js"

interface HeapResult {
  readonly keptBytesPerSession: number
  readonly promotedBytesPerPoll: number
}

const KiB = 1024
const MiB = 1024 * KiB

const heapRows = async (context: BenchContext): Promise<ReadonlyArray<MeasuredRow>> => {
  const fixture = await writeManySessions(context.fixtures, 10_000)
  const list = JSON.parse(readFileSync(fixture.listFile, "utf8")) as Array<string>
  const options = { ...fixture, warm: 64, count: Math.min(600, list.length - 64), polls: context.quick ? 1_000 : 4_000 }
  const rounds = context.quick ? 2 : 5
  const results: Array<Record<Side, HeapResult>> = []
  for (let round = 0; round < rounds; round++) {
    context.log(`polled-heap: round ${round + 1} of ${rounds}`)
    const sides: ReadonlyArray<Side> = round % 2 === 0 ? ["ours", "reference"] : ["reference", "ours"]
    const result = {} as Record<Side, HeapResult>
    for (const side of sides) {
      result[side] = (await runChild("HeapProbe.js", [side, JSON.stringify(options)])) as HeapResult
    }
    results.push(result)
  }
  const row = (benchmark: string, pick: (result: HeapResult) => number, note: string): MeasuredRow => ({
    group: "polled-heap",
    benchmark,
    unit: "MiB",
    ours: spreadOf(results.map((result) => pick(result.ours))),
    theirs: spreadOf(results.map((result) => pick(result.reference))),
    ratio: ratioSummaryOf(results.map((result) => pick(result.ours) / pick(result.reference)), "max rounds"),
    note
  })
  return [
    row(
      `heap kept by ${options.count} idle polled Sessions (V8 heap used after a full collection)`,
      (result) => result.keptBytesPerSession * options.count / MiB,
      `diagnostic, no target; bytes per Session o/r: ${
        results.map((result) =>
          `${result.ours.keptBytesPerSession.toFixed(0)}/${result.reference.keptBytesPerSession.toFixed(0)}`
        )
          .join(", ")
      }; read twice, after ${options.warm} others`
    ),
    row(
      `old generation growth over ${options.polls} polls of one idle Session`,
      (result) => result.promotedBytesPerPoll * options.polls / MiB,
      `diagnostic, no target; bytes promoted per poll o/r: ${
        results.map((result) =>
          `${result.ours.promotedBytesPerPoll.toFixed(0)}/${result.reference.promotedBytesPerPoll.toFixed(0)}`
        )
          .join(", ")
      }`
    )
  ]
}

export const polledHeapGroup: BenchGroup = {
  name: "polled-heap",
  summary: "V8 heap kept per idle polled Session and promoted per poll, a process per side (diagnostics)",
  run: heapRows
}
