/**
 * This package's types under the names `@hypercarrier/rarebit`'s
 * declarations give them, so TypeScript code written against the
 * reference's types keeps compiling when its import moves here.
 *
 * Each is the very type the Effect API uses, and each is assignable to the
 * reference's type of the same name: a value typed here can be handed to
 * code typed against the reference. Several are more precise than the
 * reference's: a current read's `receipt` is non-null exactly when
 * `availability` is `"available"`, an `ok` receipt pairs each
 * `sessionStatus` with its own reasons, and projections carry only the
 * reasons the projection can produce.
 *
 * @since 0.1.0
 */
import type { ArtifactProjection } from "../state/ArtifactState.js"

export type { Head as RarebitHeadV1 } from "../protocol/Head.js"
export type {
  BranchRef as RarebitBranchRef,
  ModelProvenance as RarebitModelProvenance,
  ModelRef as RarebitModel,
  SynthesisReceipt as RarebitSynthesisReceipt
} from "../protocol/ReceiptParts.js"
export type {
  CompactSelection as RarebitSelectionRef,
  InputCoverage as RarebitSummaryInputCoverage,
  InputCoveragePolicy as RarebitInputCoveragePolicy,
  SummaryReceipt as RarebitSummaryReceiptV4
} from "../protocol/SummaryReceipt.js"
export type { TitleReceipt as RarebitTitleReceiptV4 } from "../protocol/TitleReceipt.js"
export type { RarebitMeasurement } from "../session/Measurement.js"
export type { RarebitOccurrence } from "../session/Selector.js"
export type {
  ArtifactApplicability as RarebitArtifactApplicability,
  ArtifactAvailability as RarebitArtifactAvailability,
  ArtifactState as RarebitArtifactState,
  ArtifactSyncState as RarebitArtifactSyncState,
  AssessmentRef as RarebitSessionAssessmentRef,
  NativeObservation as RarebitNativeObservation
} from "../state/ArtifactState.js"
export type { SessionOverviewEntry as RarebitSessionOverview } from "../store/read/SessionOverview.js"
export type { SidecarDiagnostics as RarebitSidecarDiagnostics } from "../store/read/SidecarReader.js"

/**
 * The Session status a projection shows, without its assessment reference.
 *
 * @category models
 * @since 0.1.0
 */
export type RarebitSessionStatus = WithoutAssessmentRef<ArtifactProjection>

type WithoutAssessmentRef<P> = P extends unknown ? Omit<P, "assessmentRef"> : never
