/**
 * What a Session read reports: the Session's facts, the selection of its
 * active branch and the measurement of that selection, shaped (keys in
 * order) like the reference's `readRarebitSession` result without the
 * parsed entries.
 *
 * Pure. Every reader assembles its answer here, from a parsed Session
 * (`projectSession`) or from totals kept while lines streamed in
 * (`projectionOf`), so the two cannot disagree on a field.
 *
 * @since 0.1.0
 */
import type { RarebitMeasurement } from "./Measurement.js"
import { measureRarebits } from "./Measurement.js"
import { RAREBIT_SELECTOR_VERSION, type RarebitSelection, selectRarebits } from "./Selector.js"
import type { ParsedSession, SessionHeader } from "./SessionParse.js"

/**
 * The schema version of a Session read result.
 *
 * @category constants
 * @since 0.1.0
 */
export const RAREBIT_QUERY_SCHEMA_VERSION = 1 as const

/**
 * The Session facts a read reports besides the selection.
 *
 * @category models
 * @since 0.1.0
 */
export interface SessionSummary {
  readonly id: string
  /** The last branch entry's id for a tree Session; `null` for linear ones. */
  readonly activeLeafId: string | null
  /** The header's `timestamp` when it is a string. */
  readonly startedAt: string | null
}

/**
 * The projection of a parsed Session and its active branch.
 *
 * @category models
 * @since 0.1.0
 */
export interface SessionProjection {
  readonly schemaVersion: typeof RAREBIT_QUERY_SCHEMA_VERSION
  readonly selectorVersion: typeof RAREBIT_SELECTOR_VERSION
  readonly session: SessionSummary
  readonly selection: RarebitSelection
  readonly measurement: RarebitMeasurement
}

/**
 * The projection of a Session from its header, its active leaf (`null` for
 * a linear Session), and the selection and measurement of its branch.
 *
 * @category constructors
 * @since 0.1.0
 */
export const projectionOf = (
  header: SessionHeader,
  activeLeafId: string | null,
  selection: RarebitSelection,
  measurement: RarebitMeasurement
): SessionProjection => {
  const startedAt = header.timestamp
  return {
    schemaVersion: RAREBIT_QUERY_SCHEMA_VERSION,
    selectorVersion: RAREBIT_SELECTOR_VERSION,
    session: { id: header.id, activeLeafId, startedAt: typeof startedAt === "string" ? startedAt : null },
    selection,
    measurement
  }
}

/**
 * The projection of a parsed Session and its branch: Session facts, the
 * selection and its measurement.
 *
 * @category constructors
 * @since 0.1.0
 */
export const projectSession = (parsed: ParsedSession, branch: ReadonlyArray<unknown>): SessionProjection => {
  const selection = selectRarebits(branch)
  const leaf = branch.at(-1) as { readonly id?: string } | null | undefined
  return projectionOf(
    parsed.header,
    parsed.linear ? null : (leaf?.id ?? null),
    selection,
    measureRarebits(branch, selection)
  )
}
