/**
 * How much of an active branch's readable prose a selection keeps.
 *
 * The denominator is every text block of every message on the branch, tool
 * results included; the numerator counts each selected occurrence, duplicates
 * included, because deduplication is a storage detail and must not change the
 * share of the trace that was selected. Lengths are UTF-16 code units; the
 * token figures are the labelled `ceil(chars / 4)` estimate Pi shows, not a
 * tokenizer or provider-reported usage.
 *
 * @since 0.1.0
 */
import { messageOf, messageTextBlocks, selectRarebits } from "./Selector.js"

/**
 * The measurement version written into every measurement.
 *
 * @category constants
 * @since 0.1.0
 */
export const RAREBIT_MEASUREMENT_VERSION = "rarebit-prose-chars-div4-v1" as const

/**
 * What `measureRarebits` returns, keys in the reference's order.
 *
 * @category models
 * @since 0.1.0
 */
export interface RarebitMeasurement {
  readonly measurementVersion: typeof RAREBIT_MEASUREMENT_VERSION
  readonly rawUnit: "utf16_code_units_of_human_readable_message_text"
  readonly estimateMethod: "ceil(chars_div_4)"
  readonly totalMessageProseChars: number
  readonly rarebitChars: number
  readonly estimatedTotalTokens: number
  readonly estimatedRarebitTokens: number
  readonly rarebitRatio: number | null
  readonly rarebitOccurrenceCount: number
}

/**
 * The part of a selection the measurement reads.
 *
 * @category models
 * @since 0.1.0
 */
export interface MeasuredSelection {
  readonly occurrences: ReadonlyArray<{ readonly text: unknown }>
}

const charLength = (value: unknown): number => String(value).length

const estimatedTokens = (chars: number): number => Math.ceil(chars / 4)

/**
 * Measures a selection against all message prose of its branch.
 *
 * **Details**
 *
 * Without `selection`, the branch is selected first. `rarebitRatio` is `null`
 * when the branch has no message prose at all.
 *
 * @category measurement
 * @since 0.1.0
 */
export const measureRarebits = (
  branch: unknown,
  selection: MeasuredSelection = selectRarebits(branch)
): RarebitMeasurement => {
  const entries: ReadonlyArray<unknown> = Array.isArray(branch) ? branch : []
  // `reduce` (not `for...of`) so holes and non-arrays behave as in the reference.
  const totalMessageProseChars = entries.reduce<number>(
    (sum, entry) => sum + messageTextBlocks(messageOf(entry)).reduce((length, text) => length + charLength(text), 0),
    0
  )
  const rarebitChars = selection.occurrences.reduce<number>((sum, occurrence) => sum + charLength(occurrence.text), 0)
  return measurementOf(totalMessageProseChars, rarebitChars, selection.occurrences.length)
}

/**
 * The measurement of a selection from its totals: the prose of the whole
 * branch, the selected prose and how many occurrences carry it.
 *
 * @category measurement
 * @since 0.1.0
 */
export const measurementOf = (
  totalMessageProseChars: number,
  rarebitChars: number,
  rarebitOccurrenceCount: number
): RarebitMeasurement => ({
  measurementVersion: RAREBIT_MEASUREMENT_VERSION,
  rawUnit: "utf16_code_units_of_human_readable_message_text",
  estimateMethod: "ceil(chars_div_4)",
  totalMessageProseChars,
  rarebitChars,
  estimatedTotalTokens: estimatedTokens(totalMessageProseChars),
  estimatedRarebitTokens: estimatedTokens(rarebitChars),
  rarebitRatio: totalMessageProseChars === 0 ? null : rarebitChars / totalMessageProseChars,
  rarebitOccurrenceCount
})
