/**
 * Every result of this package's Promise API is assignable to the type the
 * reference declares for the same function, and every argument the
 * reference's declarations accept is accepted here; every type exported
 * under a reference name is assignable to the reference's type of that
 * name. None of them is `any`.
 *
 * Checked by `npm run typecheck` (`tsconfig.json`); nothing here runs.
 * `reserveRarebitJob`, `settleRarebitJob` and `releaseRarebitJob` are not
 * declared by the reference, so `Misuse.ts` pins their types instead.
 */
import type * as Ref from "@hypercarrier/rarebit"
import type * as Ours from "../../src/promise/index.js"

type IsAny<T> = 0 extends 1 & T ? true : false
type Extends<A, B> = [A] extends [B] ? true : false
/** `true` when `A` is assignable to `B` and neither is `any`. */
type Assignable<A, B> = IsAny<A> extends true ? false : IsAny<B> extends true ? false : Extends<A, B>
type Assert<T extends true> = T

type Result<F extends (...args: never) => unknown> = Awaited<ReturnType<F>>

/**
 * Ours returns something the reference's callers can take, accepts whatever
 * they pass, and takes no parameter as `any`.
 */
type DropsIn<Mine extends (...args: never) => unknown, Theirs extends (...args: never) => unknown> = Assignable<
  Result<Mine>,
  Result<Theirs>
> extends true ? IsAny<Parameters<Mine>[number]> extends true ? false : Assignable<Parameters<Theirs>, Parameters<Mine>>
  : false

export type Functions = [
  Assert<DropsIn<typeof Ours.readRarebitCurrent, typeof Ref.readRarebitCurrent>>,
  Assert<DropsIn<typeof Ours.readRarebitHistory, typeof Ref.readRarebitHistory>>,
  Assert<DropsIn<typeof Ours.validateRarebitArtifactReceipt, typeof Ref.validateRarebitArtifactReceipt>>,
  Assert<DropsIn<typeof Ours.validateRarebitTitleReceipt, typeof Ref.validateRarebitTitleReceipt>>,
  Assert<DropsIn<typeof Ours.projectRarebitArtifactState, typeof Ref.projectRarebitArtifactState>>,
  Assert<DropsIn<typeof Ours.exactSelectionApplies, typeof Ref.exactSelectionApplies>>,
  Assert<DropsIn<typeof Ours.requestPrefixApplies, typeof Ref.requestPrefixApplies>>,
  Assert<DropsIn<typeof Ours.selectRarebits, typeof Ref.selectRarebits>>,
  Assert<DropsIn<typeof Ours.measureRarebits, typeof Ref.measureRarebits>>
]

export type Types = [
  Assert<Assignable<Ours.RarebitSidecarCurrent, Ref.RarebitSidecarCurrent>>,
  Assert<Assignable<Ours.RarebitSidecarDiagnostics, Ref.RarebitSidecarDiagnostics>>,
  Assert<Assignable<Ours.RarebitSummaryReceiptV4, Ref.RarebitSummaryReceiptV4>>,
  Assert<Assignable<Ours.RarebitTitleReceiptV4, Ref.RarebitTitleReceiptV4>>,
  Assert<Assignable<Ours.RarebitHeadV1, Ref.RarebitHeadV1>>,
  Assert<Assignable<Ours.RarebitArtifactState, Ref.RarebitArtifactState>>,
  Assert<Assignable<Ours.RarebitArtifactAvailability, Ref.RarebitArtifactAvailability>>,
  Assert<Assignable<Ours.RarebitArtifactSyncState, Ref.RarebitArtifactSyncState>>,
  Assert<Assignable<Ours.RarebitArtifactApplicability, Ref.RarebitArtifactApplicability>>,
  Assert<Assignable<Ours.RarebitSessionAssessmentRef, Ref.RarebitSessionAssessmentRef>>,
  Assert<Assignable<Ours.RarebitSessionStatus, Ref.RarebitSessionStatus>>,
  Assert<Assignable<Ours.RarebitSelectionRef, Ref.RarebitSelectionRef>>,
  Assert<Assignable<Ours.RarebitBranchRef, Ref.RarebitBranchRef>>,
  Assert<Assignable<Ours.RarebitModel, Ref.RarebitModel>>,
  Assert<Assignable<Ours.RarebitModelProvenance, Ref.RarebitModelProvenance>>,
  Assert<Assignable<Ours.RarebitSynthesisReceipt, Ref.RarebitSynthesisReceipt>>,
  Assert<Assignable<Ours.RarebitInputCoveragePolicy, Ref.RarebitInputCoveragePolicy>>,
  Assert<Assignable<Ours.RarebitSummaryInputCoverage, Ref.RarebitSummaryInputCoverage>>,
  Assert<Assignable<Ours.RarebitMeasurement, Ref.RarebitMeasurement>>,
  Assert<Assignable<Ours.RarebitOccurrence, Ref.RarebitOccurrence>>,
  // The receipts the reference's declarations describe are receipts here too (the validators agree).
  Assert<Assignable<Ref.RarebitTitleReceiptV4, Ours.RarebitTitleReceiptV4>>,
  Assert<Assignable<Ref.RarebitHeadV1, Ours.RarebitHeadV1>>,
  // An input type: ours accepts every observation the reference's type describes (and looser selections).
  Assert<Assignable<Ref.RarebitNativeObservation, Ours.RarebitNativeObservation>>
]

/** The constants keep their literal types. */
export type Constants = [
  Assert<Extends<typeof Ours.RAREBIT_SIDECAR_PROTOCOL_VERSION, 1>>,
  Assert<Extends<typeof Ours.RAREBIT_SELECTOR_VERSION, "rarebit-selector-v1">>
]
