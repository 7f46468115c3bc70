/**
 * The models of the artifact-state projection: what it reads (the native
 * Session's evidence, the sidecar's observation) and what it returns. Their
 * key order is the reference's, since callers serialise them.
 *
 * @since 0.1.0
 */
import type { SessionAssessment } from "../protocol/SummaryReceipt.js"
import type { RarebitManifestOccurrence } from "../session/Selector.js"

/**
 * Whether a source (the native Session or the sidecar) could be read.
 *
 * @category models
 * @since 0.1.0
 */
export type ArtifactAvailability = "available" | "missing" | "unreadable"

/**
 * Which lifecycle generation the caller is waiting for; `snapshot` waits for none.
 *
 * @category models
 * @since 0.1.0
 */
export type ArtifactExpectation = "owner_request" | "agent_settled" | "snapshot"

/**
 * The synchronisation state between native evidence and materialized artifacts.
 *
 * @category models
 * @since 0.1.0
 */
export type ArtifactSyncState =
  | "awaiting_artifacts"
  | "request_source_pending"
  | "request_current"
  | "settlement_pending"
  | "assessment_source_pending"
  | "assessment_current"
  | "terminal_error"

/**
 * Why the projected receipt applies to what the reader sees.
 *
 * @category models
 * @since 0.1.0
 */
export type ArtifactApplicability =
  | "none"
  | "request_cut"
  | "request_generation"
  | "exact_selection"
  | "materialization_only"

/**
 * Why the projection gave up for good.
 *
 * @category models
 * @since 0.1.0
 */
export type TerminalErrorReason =
  | "session_conflict"
  | "native_malformed"
  | "unsupported"
  | "malformed"
  | "materialization_unreadable"
  | "materialization_missing"
  | "settlement_timeout"
  | "native_unreadable"
  | "native_missing"

/**
 * Why a caller should (or, once the deadline passed, would) read again.
 *
 * @category models
 * @since 0.1.0
 */
export type RetryReason =
  | "native_source_pending"
  | "materialization_unreadable"
  | "materialization_pending"
  | "native_unreadable"
  | "native_missing"
  | "settlement_pending"
  | TerminalErrorReason

/**
 * One selected occurrence of native Session evidence, as `selectRarebits` yields it.
 *
 * @category models
 * @since 0.1.0
 */
export interface NativeOccurrence extends RarebitManifestOccurrence {
  readonly text?: string
}

/**
 * One deduplicated payload of a native selection.
 *
 * @category models
 * @since 0.1.0
 */
export interface NativePayload {
  readonly contentHash: string
  readonly occurrenceIds: ReadonlyArray<string>
  readonly text?: string
}

/**
 * The native selection of a Session's active branch.
 *
 * **Details**
 *
 * The selector version is read from `selectorVersion`, falling back to
 * `manifest.selectorVersion`, so both the session reader's shape and the raw
 * `selectRarebits` shape are accepted.
 *
 * @category models
 * @since 0.1.0
 */
export interface NativeSelection {
  readonly occurrences: ReadonlyArray<NativeOccurrence>
  readonly payloads: ReadonlyArray<NativePayload>
  readonly manifestHash: string
  readonly selectorVersion?: string
  readonly manifest?: { readonly selectorVersion?: unknown }
}

/**
 * What was observed of the native Session.
 *
 * @category models
 * @since 0.1.0
 */
export type NativeObservation =
  | {
    readonly availability: "available"
    readonly sessionId: string
    readonly selection: NativeSelection
  }
  | { readonly availability: "missing" }
  | { readonly availability: "unreadable" }

/**
 * What was observed of the sidecar: its availability and the records read from it.
 *
 * **Details**
 *
 * `records` may hold anything; only valid schema-v4 Summary receipts take
 * part in the projection, and invalid Summary-typed records only colour the
 * terminal error reason.
 *
 * @category models
 * @since 0.1.0
 */
export interface MaterializationObservation {
  readonly availability: ArtifactAvailability
  readonly records: ReadonlyArray<unknown>
}

/**
 * The input of {@link projectArtifactState}; every field has a default.
 *
 * @category models
 * @since 0.1.0
 */
export interface ProjectionInput {
  /** Defaults to `{ availability: "missing" }`. */
  readonly native?: NativeObservation | undefined
  /** Defaults to `{ availability: "missing", records: [] }`. */
  readonly materialization?: MaterializationObservation | undefined
  /** Defaults to `"snapshot"`. */
  readonly expectation?: ArtifactExpectation | undefined
  /** Defaults to `false`. */
  readonly deadlineExpired?: boolean | undefined
}

/**
 * The lineage of the receipt behind a projection, without its prose.
 *
 * @category models
 * @since 0.1.0
 */
export interface AssessmentRef {
  readonly jobId: string | null
  readonly sessionId: string | null
  readonly branchLeafId: string | null
  readonly selectionManifestHash: string | null
  readonly selectorVersion: string | null
  readonly lifecycleBoundary: string | null
  readonly promptVersion: string | null
  readonly model: { readonly provider: string; readonly id: string } | null
  readonly observedAt: string | null
  readonly schemaVersion: number | null
  readonly implementationVersion: string | null
}

/**
 * The assessment of an `ok` receipt, as a projection shows it: each status
 * with its legal reasons.
 *
 * @category models
 * @since 0.1.0
 */
export type AssessedProjection = {
  readonly [S in SessionAssessment["sessionStatus"]]: {
    readonly status: S
    readonly reason: Extract<SessionAssessment, { readonly sessionStatus: S }>["statusReason"]
    readonly assessmentRef: AssessmentRef
  }
}[SessionAssessment["sessionStatus"]]

/**
 * The Session status a reader may show.
 *
 * @category models
 * @since 0.1.0
 */
export type ArtifactProjection =
  | AssessedProjection
  | {
    readonly status: "ineligible"
    readonly reason: "intrinsic_policy"
    readonly assessmentRef: AssessmentRef
  }
  | {
    readonly status: "error"
    readonly reason: "inhibited" | "overflow" | "synthesis_failure"
    readonly assessmentRef: AssessmentRef
  }
  | {
    readonly status: "error"
    readonly reason: TerminalErrorReason
    readonly assessmentRef: null
  }

/**
 * Which native Session the projection was made against.
 *
 * **Gotchas**
 *
 * `sessionId` and `selectionManifestHash` are copied as given (or `null`), so
 * a malformed observation shows up here exactly as it was passed in.
 *
 * @category models
 * @since 0.1.0
 */
export interface NativeRef {
  readonly availability: ArtifactAvailability
  readonly sessionId: string | null
  readonly selectionManifestHash: string | null
}

/**
 * Whether, and why, to read again.
 *
 * **Gotchas**
 *
 * `deadlineExpired` echoes the caller's value on source-pending and
 * settlement-pending results, and `recommended` is its negation.
 *
 * @category models
 * @since 0.1.0
 */
export interface ArtifactRetry {
  readonly recommended: boolean
  readonly reason: RetryReason
  readonly deadlineExpired: boolean
}

/**
 * The projection result. Callers serialise it, so its key order is fixed.
 *
 * @category models
 * @since 0.1.0
 */
export interface ArtifactState {
  readonly syncState: ArtifactSyncState
  readonly projection: ArtifactProjection | null
  readonly applicability: ArtifactApplicability
  readonly nativeRef: NativeRef | null
  readonly receiptRef: AssessmentRef | null
  readonly retry: ArtifactRetry | null
}
