/**
 * Rows measured in interleaved rounds (see `Stats.ts`): each side's median
 * with its p10–p90, the median of the paired per-round ratios with their
 * p10–p90 and the 95 % interval of that median, how many rounds ran and why
 * they stopped, and the target.
 *
 * @since 0.1.0
 */
import type { RatioSummary, Samples, Spread } from "./Stats.js"

/** What a row must meet: a ratio, an absolute bound on our value, or both. */
export interface Target {
  readonly ratioAtMost?: number | undefined
  readonly oursAtMost?: number | undefined
}

export interface MeasuredRow {
  readonly group: string
  readonly benchmark: string
  readonly unit: "ms" | "MiB"
  readonly ours: Spread
  readonly theirs: Spread
  readonly ratio: RatioSummary
  /** What the other side is, when not the reference store. */
  readonly versus?: string | undefined
  readonly target?: Target | undefined
  /** Diagnostics (CPU per operation, lock idle, load, …). */
  readonly note?: string | undefined
  /** The raw samples, saved with the run's results (not printed). */
  readonly samples?: Samples | undefined
}

export const meetsTarget = (row: MeasuredRow): boolean | undefined => {
  if (row.target === undefined) return undefined
  const { oursAtMost, ratioAtMost } = row.target
  return (ratioAtMost === undefined || row.ratio.median <= ratioAtMost) &&
    (oursAtMost === undefined || row.ours.median <= oursAtMost)
}

export const formatValue = (value: number): string =>
  !Number.isFinite(value)
    ? "-"
    : value >= 100
    ? value.toFixed(0)
    : value >= 10
    ? value.toFixed(1)
    : value >= 1
    ? value.toFixed(2)
    : value.toFixed(3)

const formatSpread = (spread: Spread, unit: string) =>
  `${formatValue(spread.median)} ${unit} (${formatValue(spread.p10)}–${formatValue(spread.p90)})`

const formatTarget = (target: Target | undefined, unit: string) =>
  target === undefined ? "" : [
    target.ratioAtMost === undefined ? undefined : `ratio ≤ ${target.ratioAtMost}`,
    target.oursAtMost === undefined ? undefined : `ours ≤ ${target.oursAtMost} ${unit}`
  ].filter((part) => part !== undefined).join(", ")

/** Half the width of the 95 % interval, relative to the median ratio. */
export const relativeInterval = (ratio: RatioSummary): number | undefined =>
  ratio.low === undefined || ratio.high === undefined
    ? undefined
    : Math.max(ratio.median - ratio.low, ratio.high - ratio.median) / ratio.median

const formatInterval = (ratio: RatioSummary) => {
  const relative = relativeInterval(ratio)
  return relative === undefined
    ? "n/a"
    : `${ratio.low!.toFixed(3)}–${ratio.high!.toFixed(3)} (±${(relative * 100).toFixed(0)} %)`
}

const cellsOf = (row: MeasuredRow) => {
  const ok = meetsTarget(row)
  return [
    row.benchmark,
    formatSpread(row.ours, row.unit),
    formatSpread(row.theirs, row.unit),
    row.ratio.median.toFixed(3),
    `${row.ratio.p10.toFixed(3)}–${row.ratio.p90.toFixed(3)}`,
    formatInterval(row.ratio),
    `${row.ratio.rounds} (${row.ratio.stoppedBy})`,
    formatTarget(row.target, row.unit),
    ok === undefined ? "" : ok ? "yes" : "no",
    [row.versus === undefined ? undefined : `vs ${row.versus}`, row.note].filter((part) => part).join("; ")
  ]
}

const HEADER = [
  "benchmark",
  "ours: median (p10–p90)",
  "other side: median (p10–p90)",
  "ratio",
  "ratio p10–p90",
  "ratio 95 % CI",
  "rounds (stop)",
  "target",
  "ok",
  "note"
]

export const measuredMarkdown = (rows: ReadonlyArray<MeasuredRow>): string =>
  [
    `| ${HEADER.join(" | ")} |`,
    `| ${HEADER.map(() => "---").join(" | ")} |`,
    ...rows.map((row) => {
      const cells = cellsOf(row)
      if (cells[8] === "no") cells[8] = "**no**"
      return `| ${cells.join(" | ")} |`
    })
  ].join("\n")

export const measuredText = (rows: ReadonlyArray<MeasuredRow>): string => {
  const cells = rows.map(cellsOf)
  const widths = HEADER.map((title, column) =>
    column === HEADER.length - 1 ? 0 : Math.max(title.length, ...cells.map((row) => row[column].length))
  )
  const render = (row: ReadonlyArray<string>) =>
    row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join("  ")
  return [render(HEADER), render(widths.map((width) => "-".repeat(width))), ...cells.map(render)].join("\n")
}
