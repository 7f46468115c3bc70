/**
 * Rounds, spreads and a stopping rule for rows that compare two sides on a
 * noisy shared machine.
 *
 * A round runs both sides once each (a block of operations, a process, a
 * batch), the side going first alternating round by round (ABBA…), so load
 * that drifts over the run falls on both. Each round gives one paired ratio
 * (ours / theirs, from the medians of that round's samples); the row reports
 * the median of those ratios, their p10–p90, and a distribution-free 95 %
 * confidence interval of that median (order statistics of the ratios).
 *
 * Stopping rule: rounds continue, in pairs so both orders are as frequent,
 * until at least `minRounds` ran and the 95 % interval of the median ratio
 * lies within ± `tolerance` of it ("converged"), or `maxRounds` ran, or the
 * row's time budget is spent. The row states which.
 *
 * @since 0.1.0
 */
import { sampleLoad } from "./BackgroundLoad.js"

/** Linear-interpolation quantile (the usual "type 7") of unsorted values. */
export const quantile = (values: ReadonlyArray<number>, q: number): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const position = (sorted.length - 1) * q
  const below = Math.floor(position)
  const above = Math.ceil(position)
  return sorted[below] + (sorted[above] - sorted[below]) * (position - below)
}

/** Median and p10–p90 of one side's samples. */
export interface Spread {
  readonly median: number
  readonly p10: number
  readonly p90: number
  readonly n: number
}

export const spreadOf = (values: ReadonlyArray<number>): Spread => ({
  median: quantile(values, 0.5),
  p10: quantile(values, 0.1),
  p90: quantile(values, 0.9),
  n: values.length
})

/** P(X ≤ k) for X ~ Binomial(n, 1/2). */
const binomialHalfCdf = (n: number, k: number): number => {
  let term = 0.5 ** n
  let sum = term
  for (let i = 1; i <= k; i++) {
    term = term * (n - i + 1) / i
    sum += term
  }
  return sum
}

/**
 * A distribution-free confidence interval for the median: the order
 * statistics `x(k)` and `x(n+1-k)` with the largest `k` whose coverage is at
 * least `confidence`. Needs 6 values for 95 %; fewer give `undefined`.
 */
export const medianInterval = (
  values: ReadonlyArray<number>,
  confidence = 0.95
): { readonly low: number; readonly high: number } | undefined => {
  const n = values.length
  const tail = (1 - confidence) / 2
  let k = 0
  while (k + 1 <= n / 2 && binomialHalfCdf(n, k) <= tail) k++
  if (k === 0) return undefined
  const sorted = [...values].sort((a, b) => a - b)
  return { low: sorted[k - 1], high: sorted[n - k] }
}

/** The paired ratios of a row and how its rounds ended. */
export interface RatioSummary extends Spread {
  /** 95 % interval of the median ratio, when there were enough rounds. */
  readonly low?: number | undefined
  readonly high?: number | undefined
  readonly rounds: number
  readonly stoppedBy: "converged" | "max rounds" | "budget"
}

/** How many rounds a row may run. */
export interface RoundPlan {
  readonly minRounds: number
  readonly maxRounds: number
  /** Relative half-width of the 95 % interval of the median ratio that ends the row early. */
  readonly tolerance: number
  /** Wall-clock budget of the row's rounds in ms; the rounds in flight finish. */
  readonly budgetMs?: number | undefined
}

/** One round's samples of each side (one or more values each). */
export interface RoundResult<Extra = undefined> {
  readonly ours: ReadonlyArray<number>
  readonly theirs: ReadonlyArray<number>
  readonly extra?: Extra
}

/** Every sample of a row and its per-round ratios, kept for later analysis. */
export interface Samples {
  readonly ours: ReadonlyArray<number>
  readonly theirs: ReadonlyArray<number>
  readonly ratios: ReadonlyArray<number>
}

export interface Rounds<Extra> {
  readonly ours: Spread
  readonly theirs: Spread
  readonly ratio: RatioSummary
  readonly samples: Samples
  readonly extras: ReadonlyArray<Extra>
  /** Runnable tasks (median of samples every 200 ms) and the 1-minute load average at the end. */
  readonly machine: { readonly runnableMedian: number | undefined; readonly loadAverage: number }
}

/** The machine's state during a row, for its note. */
export const machineNote = (rounds: Pick<Rounds<unknown>, "machine">): string =>
  `runnable tasks ${rounds.machine.runnableMedian ?? "?"}, load ${rounds.machine.loadAverage.toFixed(1)}`

const relativeHalfWidth = (ratios: ReadonlyArray<number>): number => {
  const interval = medianInterval(ratios)
  if (interval === undefined) return Number.POSITIVE_INFINITY
  const middle = quantile(ratios, 0.5)
  return Math.max(middle - interval.low, interval.high - middle) / middle
}

/**
 * Runs rounds until the stopping rule says so. `round(index, oursFirst)`
 * must run both sides, `oursFirst` deciding the order.
 */
export const runRounds = async <Extra = undefined>(
  plan: RoundPlan,
  round: (index: number, oursFirst: boolean) => Promise<RoundResult<Extra>>
): Promise<Rounds<Extra>> => {
  const started = performance.now()
  const load = sampleLoad()
  const ours: Array<number> = []
  const theirs: Array<number> = []
  const ratios: Array<number> = []
  const extras: Array<Extra> = []
  let stoppedBy: RatioSummary["stoppedBy"] = "max rounds"
  for (let index = 0; index < plan.maxRounds; index++) {
    const result = await round(index, index % 2 === 0)
    ours.push(...result.ours)
    theirs.push(...result.theirs)
    ratios.push(quantile(result.ours, 0.5) / quantile(result.theirs, 0.5))
    if (result.extra !== undefined) extras.push(result.extra)
    const done = index + 1
    // Stop only after an even number of rounds, so each side went first as often.
    if (done % 2 !== 0 || done >= plan.maxRounds) continue
    if (done >= plan.minRounds && relativeHalfWidth(ratios) <= plan.tolerance) {
      stoppedBy = "converged"
      break
    }
    if (
      plan.budgetMs !== undefined && performance.now() - started >= plan.budgetMs && done >= Math.min(2, plan.minRounds)
    ) {
      stoppedBy = "budget"
      break
    }
  }
  if (stoppedBy === "max rounds" && ratios.length >= plan.minRounds && relativeHalfWidth(ratios) <= plan.tolerance) {
    stoppedBy = "converged"
  }
  const interval = medianInterval(ratios)
  return {
    ours: spreadOf(ours),
    theirs: spreadOf(theirs),
    ratio: { ...spreadOf(ratios), low: interval?.low, high: interval?.high, rounds: ratios.length, stoppedBy },
    samples: { ours, theirs, ratios },
    extras,
    machine: load.stop()
  }
}

/** The summary of paired ratios measured alongside a row's main one (e.g. memory next to time). */
export const ratioSummaryOf = (ratios: ReadonlyArray<number>, stoppedBy: RatioSummary["stoppedBy"]): RatioSummary => {
  const interval = medianInterval(ratios)
  return { ...spreadOf(ratios), low: interval?.low, high: interval?.high, rounds: ratios.length, stoppedBy }
}
