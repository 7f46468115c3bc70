/**
 * A benchmark group: a named set of rows that `main.ts` runs when asked for
 * (`--only=<name>`), each in its own module, measuring with the rounds and
 * stopping rule of `Stats.ts` and reporting `MeasuredRow`s.
 *
 * @since 0.1.0
 */
import type { MeasuredRow } from "./MeasuredTable.js"

/** What every group gets from the runner. */
export interface BenchContext {
  /** Fewer rounds and smaller inputs, for CI. */
  readonly quick: boolean
  /** The package root. */
  readonly root: string
  /** Generated inputs, kept between runs (`.bench-data/fixtures`). */
  readonly fixtures: string
  /** This run's scratch directory, removed at the end. */
  readonly work: string
  readonly log: (message: string) => void
}

export interface BenchGroup {
  readonly name: string
  /** One line for `--help`. */
  readonly summary: string
  readonly run: (context: BenchContext) => Promise<ReadonlyArray<MeasuredRow>>
}
