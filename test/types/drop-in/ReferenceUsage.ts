/**
 * A TypeScript client written against `@hypercarrier/rarebit`'s own
 * declarations (`src/types.d.ts` of the reference package), unchanged.
 *
 * It is compiled twice by `npm run typecheck`: by `tsconfig.json`, against
 * the reference's declarations, and by `test/types/tsconfig.drop-in.json`,
 * which maps the `@hypercarrier/rarebit` import to this package's Promise
 * API. Both must succeed. The `@ts-expect-error` lines are misuse that each
 * set of types must reject, and the `NotAny` checks fail if a result is
 * `any`: a looser type than the reference's fails the second compile.
 *
 * Nothing here runs; the functions only have to compile.
 */
import {
  exactSelectionApplies,
  measureRarebits,
  projectRarebitArtifactState,
  type RarebitArtifactAvailability,
  type RarebitArtifactState,
  type RarebitBranchRef,
  type RarebitHeadV1,
  type RarebitMeasurement,
  type RarebitModel,
  type RarebitNativeObservation,
  type RarebitOccurrence,
  type RarebitSelectionRef,
  type RarebitSessionAssessmentRef,
  type RarebitSessionStatus,
  type RarebitSidecarCurrent,
  type RarebitSidecarDiagnostics,
  type RarebitSummaryReceiptV4,
  type RarebitTitleReceiptV4,
  readRarebitCurrent,
  readRarebitHistory,
  requestPrefixApplies,
  selectRarebits,
  validateRarebitArtifactReceipt,
  validateRarebitTitleReceipt
} from "@hypercarrier/rarebit"

type IsAny<T> = 0 extends 1 & T ? true : false
/** Compiles only when `T` is not `any`. */
export type NotAny<T> = IsAny<T> extends false ? true : never
/** Its argument, provided the argument's type is not `any` (which would make every use below compile). */
const notAny = <T>(value: T, ..._proof: NotAny<T> extends true ? [] : [never]): T => value

const roots = { sessionRoot: "/home/user/.pi/agent/sessions", rarebitRoot: "/home/user/.pi/agent/rarebit" }

/** The native observation a client builds from a branch it already holds. */
export const observe = (sessionId: string, branch: Array<unknown>): RarebitNativeObservation => {
  const selection = notAny(selectRarebits(branch))
  const occurrences: Array<RarebitOccurrence> = selection.occurrences
  const first: string | undefined = occurrences[0]?.text
  void first
  return { availability: "available", sessionId, selection: { ...selection, selectorVersion: "rarebit-selector-v1" } }
}

/** Polls the current Summary and renders one line. */
export async function currentLine(sessionFile: string, branch: Array<unknown>): Promise<string> {
  const native = observe("session-1", branch)
  const current = notAny(
    await readRarebitCurrent({
      sessionFile,
      native,
      expectation: "agent_settled",
      deadlineExpired: false,
      ...roots
    })
  )
  const typed: RarebitSidecarCurrent = current
  void typed
  const availability: RarebitArtifactAvailability = current.availability
  const diagnostics: RarebitSidecarDiagnostics = current.diagnostics
  const head: RarebitHeadV1 | null = current.head
  const state: RarebitArtifactState = current.artifactState
  const records: Array<RarebitSummaryReceiptV4> = current.records
  void records

  // @ts-expect-error the receipt is null unless a committed one was found
  void current.receipt.status

  const receipt = current.receipt
  if (receipt === null) return `${availability} ${diagnostics.reason ?? "no receipt"} (${state.syncState})`
  // @ts-expect-error only an `ok` receipt has a summary
  void receipt.summary
  const assessment: RarebitSessionAssessmentRef | null = state.receiptRef
  const status: RarebitSessionStatus["status"] | undefined = state.projection?.status
  void assessment
  void status
  if (receipt.status !== "ok") return `${receipt.status} @ ${head?.receiptOffset ?? "?"}`
  const summary: string = receipt.summary
  const model: RarebitModel | null = receipt.model
  const branchRef: RarebitBranchRef = receipt.branch
  return `${summary} [${receipt.sessionStatus}/${receipt.statusReason}] ${
    model?.id ?? "no model"
  } ${branchRef.entryCount}`
}

/** Pages through the whole history, Summaries and Titles apart. */
export async function historyTitles(sessionFile: string): Promise<Array<string>> {
  const titles: Array<string> = []
  let fromOffset: number | null = 0
  while (fromOffset !== null) {
    const at: number = fromOffset
    const page = notAny(await readRarebitHistory({ sessionFile, fromOffset: at, limit: 100, ...roots }))
    for (const { offset, record } of page.records) {
      // @ts-expect-error a history record is a Summary or a Title receipt
      void record.title
      const kind: "rarebit_summary" | "rarebit_title" = record.type
      void kind
      if (record.type === "rarebit_title") {
        const title: RarebitTitleReceiptV4 = record
        if (title.title !== null) titles.push(`@${offset} ${title.title}`)
      }
    }
    fromOffset = page.nextOffset
  }
  return titles
}

/** Validation, projection and selection helpers, as a client composes them. */
export function assess(record: unknown, branch: Array<unknown>, receiptSelection: RarebitSelectionRef): string {
  const summary = notAny(validateRarebitArtifactReceipt(record))
  // @ts-expect-error the record is there only when it is valid
  void summary.record
  const title = notAny(validateRarebitTitleReceipt(record))
  const selection = notAny(selectRarebits(branch))
  const measurement: RarebitMeasurement = notAny(measureRarebits(branch, selection))
  const ratio: number | null = measurement.rarebitRatio
  const exact: boolean = notAny(exactSelectionApplies(receiptSelection, selection))
  const prefix: boolean = notAny(requestPrefixApplies(receiptSelection, selection))
  const state = notAny(projectRarebitArtifactState({
    native: observe("session-1", branch),
    materialization: { availability: "available", records: summary.valid ? [summary.record] : [] },
    expectation: "owner_request",
    deadlineExpired: true
  }))
  // @ts-expect-error not a sync state
  const wrong: RarebitArtifactState["syncState"] = "current"
  void wrong
  const reason: string | undefined = state.retry?.reason
  const validTitle: string | null = title.valid ? title.record.title : null
  return [state.syncState, reason, ratio, exact, prefix, validTitle].join(" ")
}
