/**
 * Measuring two implementations side by side: interleaved rounds (the order
 * alternates every round, so drift and warm caches hit both alike), one
 * timing per operation, medians, and a plain-text table.
 *
 * @since 0.1.0
 */
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"

/** One operation; `setup` runs before it, untimed. */
export interface Operation {
  readonly setup?: (() => Promise<void> | void) | undefined
  readonly run: () => Promise<unknown>
}

/** Timings of one side, in milliseconds per operation. */
export interface Samples {
  readonly times: Array<number>
}

export const median = (values: ReadonlyArray<number>): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

const collect = () => (globalThis as { gc?: () => void }).gc?.()

/** Runs `operation` once after its setup (and a collection, with `collectFirst`), timing only `run`. */
const timeOnce = async (operation: Operation, into: Samples | undefined, collectFirst: boolean) => {
  await operation.setup?.()
  if (collectFirst) collect()
  const start = performance.now()
  await operation.run()
  into?.times.push(performance.now() - start)
}

/**
 * Runs `ours` and `theirs` for `rounds` rounds of `ops` operations each,
 * after warming both up.
 *
 * **Details**
 *
 * Each round runs one side's `ops` operations as a block, then the other's,
 * and the side that goes first alternates. A full collection runs (untimed)
 * before every block, so neither side pays for the other's garbage or finds
 * its caches cold from the other's work; many short rounds spread the drift
 * of a shared machine over both. With `gcEachOp`, a collection also runs
 * before every timed operation.
 */
export const interleave = async (
  sides: { readonly ours: Operation; readonly theirs: Operation },
  options: {
    readonly rounds: number
    readonly ops: number
    readonly warmup?: number
    readonly warmupMs?: number
    readonly gcEachOp?: boolean
  }
): Promise<{ readonly ours: Samples; readonly theirs: Samples }> => {
  const ours: Samples = { times: [] }
  const theirs: Samples = { times: [] }
  const once = (operation: Operation, into: Samples | undefined) => timeOnce(operation, into, options.gcEachOp ?? false)
  // Warm both sides until each has run `warmup` times and for at least `warmupMs`, so
  // the JIT has settled on this (possibly slow) machine before anything is timed.
  const warmUntil = performance.now() + (options.warmupMs ?? 0)
  for (let index = 0; index < (options.warmup ?? 2) || performance.now() < warmUntil; index++) {
    await once(sides.ours, undefined)
    await once(sides.theirs, undefined)
  }
  for (let round = 0; round < options.rounds; round++) {
    const order: Array<[Operation, Samples]> = round % 2 === 0
      ? [[sides.ours, ours], [sides.theirs, theirs]]
      : [[sides.theirs, theirs], [sides.ours, ours]]
    for (const [operation, samples] of order) {
      collect()
      for (let op = 0; op < options.ops; op++) await once(operation, samples)
    }
  }
  return { ours, theirs }
}

/**
 * Runs `ours` and `theirs` in `pairs` short pairs, one operation each, the
 * side going first alternating, after warming both up for `warmupMs`.
 *
 * **Details**
 *
 * For two sides that run nearly the same code (the Effect API against our
 * own plain API), where the difference is a few percent and a shared
 * machine's load drifts by more than that within seconds: each pair takes
 * a fraction of a millisecond, so drift falls on both sides alike, and
 * hundreds of pairs make the medians stable. One full collection runs
 * before the first pair, none between pairs: a collection before each pair
 * made whichever block ran first after it slower (the collector's threads
 * still sweeping), which split each side's timings into two groups and left
 * their medians to chance. The young-generation collections each side's
 * garbage triggers fall on both sides in turn.
 */
export const alternate = async (
  sides: { readonly ours: Operation; readonly theirs: Operation },
  options: { readonly pairs: number; readonly warmupMs: number }
): Promise<{ readonly ours: Samples; readonly theirs: Samples }> => {
  const ours: Samples = { times: [] }
  const theirs: Samples = { times: [] }
  const once = (operation: Operation, into: Samples | undefined) => timeOnce(operation, into, false)
  const warmUntil = performance.now() + options.warmupMs
  while (performance.now() < warmUntil) {
    await once(sides.ours, undefined)
    await once(sides.theirs, undefined)
  }
  collect()
  for (let pair = 0; pair < options.pairs; pair++) {
    if (pair % 2 === 0) {
      await once(sides.ours, ours)
      await once(sides.theirs, theirs)
    } else {
      await once(sides.theirs, theirs)
      await once(sides.ours, ours)
    }
  }
  return { ours, theirs }
}

/** One line of the results table. */
export interface Row {
  readonly benchmark: string
  readonly ours: number
  readonly theirs: number
  /** What "ours" and "theirs" are, when not our plain API and the reference. */
  readonly versus?: string | undefined
  /** The ratio this row must stay at or below. */
  readonly target?: number | undefined
  /** The value `ours` must stay at or below, in the row's unit. */
  readonly maxOurs?: number | undefined
  /** Peak memory growth in MiB, when measured. */
  readonly oursMiB?: number | undefined
  readonly theirsMiB?: number | undefined
}

export const ratioOf = (row: Row): number => row.ours / row.theirs

/** Whether a row meets its targets; `undefined` when it has none. */
export const meetsTargets = (row: Row): boolean | undefined =>
  row.target === undefined && row.maxOurs === undefined
    ? undefined
    : (row.target === undefined || ratioOf(row) <= row.target) && (row.maxOurs === undefined || row.ours <= row.maxOurs)

const targetText = (row: Row, separator: string): string =>
  [row.target === undefined ? "" : `≤ ${row.target}`, row.maxOurs === undefined ? "" : `ours ≤ ${row.maxOurs}`]
    .filter((text) => text !== "")
    .join(separator)

const formatTime = (ms: number): string =>
  !Number.isFinite(ms)
    ? "-"
    : ms >= 100
    ? ms.toFixed(0)
    : ms >= 10
    ? ms.toFixed(1)
    : ms >= 1
    ? ms.toFixed(2)
    : ms.toFixed(3)

const formatMiB = (value: number | undefined): string => (value === undefined ? "" : value.toFixed(1))

/** The table as GitHub Markdown. */
export const markdownTable = (rows: ReadonlyArray<Row>): string => {
  const header = [
    "benchmark",
    "ours (ms)",
    "reference (ms)",
    "ratio",
    "target",
    "ok",
    "peak MiB ours",
    "peak MiB ref",
    "note"
  ]
  const lines = [`| ${header.join(" | ")} |`, `| ${header.map(() => "---").join(" | ")} |`]
  for (const row of rows) {
    const ratio = ratioOf(row)
    const met = meetsTargets(row)
    const ok = met === undefined ? "" : met ? "yes" : "**no**"
    lines.push(
      `| ${
        [
          row.benchmark,
          formatTime(row.ours),
          formatTime(row.theirs),
          ratio.toFixed(3),
          targetText(row, ", "),
          ok,
          formatMiB(row.oursMiB),
          formatMiB(row.theirsMiB),
          row.versus ?? ""
        ].join(" | ")
      } |`
    )
  }
  return lines.join("\n")
}

/** The table as aligned plain text for the terminal. */
export const textTable = (rows: ReadonlyArray<Row>): string => {
  const cells = rows.map((row) => {
    const ratio = ratioOf(row)
    return [
      row.benchmark,
      formatTime(row.ours),
      formatTime(row.theirs),
      ratio.toFixed(3),
      `${targetText(row, ",").replace(/≤ /g, "<=")}${meetsTargets(row) === false ? " MISS" : ""}`,
      row.oursMiB === undefined ? "" : `${formatMiB(row.oursMiB)}/${formatMiB(row.theirsMiB)}`,
      row.versus ?? ""
    ]
  })
  const header = ["benchmark", "ours ms", "ref ms", "ratio", "target", "peak MiB o/r", "versus"]
  const widths = header.map((title, column) => Math.max(title.length, ...cells.map((row) => row[column].length)))
  const render = (row: ReadonlyArray<string>) =>
    row.map((
      cell,
      column
    ) => (column === 0 || column === 6 ? cell.padEnd(widths[column]) : cell.padStart(widths[column])))
      .join("  ")
  return [render(header), render(widths.map((width) => "-".repeat(width))), ...cells.map(render)].join("\n")
}

/** The compiled sibling script `name` (e.g. "Worker.js"). */
export const siblingScript = (name: string): string => fileURLToPath(new URL(`./${name}`, import.meta.url))

/**
 * Runs a sibling script in a fresh Node process (with `env` added to this
 * one's environment) and parses the JSON it prints on its last stdout line.
 */
export const runChild = (script: string, args: ReadonlyArray<string>, env?: Readonly<Record<string, string>>) =>
  new Promise<unknown>((resolve, reject) => {
    const child = spawn(process.execPath, [siblingScript(script), ...args], {
      stdio: ["ignore", "pipe", "inherit"],
      env: env === undefined ? process.env : { ...process.env, ...env }
    })
    let output = ""
    child.stdout.on("data", (chunk) => (output += String(chunk)))
    child.on("error", reject)
    child.on("exit", (code) => {
      if (code !== 0) return reject(new Error(`${script} ${args.join(" ")} exited with ${code}`))
      const last = output.trim().split("\n").at(-1) ?? ""
      try {
        resolve(JSON.parse(last))
      } catch (error) {
        reject(error)
      }
    })
  })
