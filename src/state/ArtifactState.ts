/**
 * The artifact-state projection: what a reader may believe about a Session's
 * Summary, given the native Session evidence and the sidecar's receipts.
 *
 * It is a pure function of its input. It never reads Summary prose, never
 * walks selection ancestry, and never infers identity from the physical order
 * of lines: a receipt applies to the native Session only when its compact
 * selection equals the native selection (an exact assessment) or, for an
 * owner request, hashes to a prefix of it that still ends at the same latest
 * user message (a request generation).
 *
 * Compatibility is exact, including for malformed input: every result is
 * deep-equal, key order included, to the reference's `projectRarebitArtifactState`,
 * and inputs the reference rejects throw the same `TypeError`. Persistence,
 * locking and reading the Session are left to the store.
 *
 * Its models are in `ArtifactModels`; the projection is kept whole so that
 * its order of checks (which decides the state, or the `TypeError`, malformed
 * input gets) reads top to bottom like the reference's.
 *
 * @since 0.1.0
 */
import { Result, Schema } from "effect"
import { sha256, SHA256_HEX_PATTERN } from "../protocol/CanonicalJson.js"
import { memberOf } from "../protocol/internal/JsonShape.js"
import { isOwnEvidence } from "../protocol/internal/OwnEvidence.js"
import { isVerifiedSummary } from "../protocol/internal/VerifiedReceipts.js"
import { validReceipt } from "../protocol/ReceiptValidation.js"
import { type CompactSelection, type SummaryReceipt, validateSummaryReceipt } from "../protocol/SummaryReceipt.js"
import type {
  ArtifactApplicability,
  ArtifactAvailability,
  ArtifactExpectation,
  ArtifactProjection,
  ArtifactRetry,
  ArtifactState,
  ArtifactSyncState,
  AssessedProjection,
  AssessmentRef,
  MaterializationObservation,
  NativeObservation,
  NativeOccurrence,
  NativeRef,
  NativeSelection,
  ProjectionInput,
  RetryReason,
  TerminalErrorReason
} from "./ArtifactModels.js"

export type * from "./ArtifactModels.js"

// ---------------------------------------------------------------------------
// errors
// ---------------------------------------------------------------------------

/**
 * The message thrown for an availability outside `available | missing | unreadable`.
 *
 * @category errors
 * @since 0.1.0
 */
export const INVALID_AVAILABILITY_MESSAGE =
  "native and materialization availability must be available, missing, or unreadable"

/**
 * The message thrown for an unknown expectation.
 *
 * @category errors
 * @since 0.1.0
 */
export const INVALID_EXPECTATION_MESSAGE = "Unsupported Rarebit artifact expectation"

/**
 * The projection input names an availability or expectation outside the protocol.
 *
 * @category errors
 * @since 0.1.0
 */
export class ProjectionInputInvalid extends Schema.TaggedError<ProjectionInputInvalid>()("ProjectionInputInvalid", {
  field: Schema.Literals(["availability", "expectation"])
}) {
  override get message() {
    return this.field === "availability" ? INVALID_AVAILABILITY_MESSAGE : INVALID_EXPECTATION_MESSAGE
  }
}

// ---------------------------------------------------------------------------
// selection applicability
// ---------------------------------------------------------------------------

const selectorVersionOf = (selection: unknown): unknown =>
  memberOf(selection, "selectorVersion") ?? memberOf(memberOf(selection, "manifest"), "selectorVersion")

const isNonEmptyString = (value: unknown): value is string => typeof value === "string" && value.length > 0

const isSha256Hex = (value: unknown): value is string => typeof value === "string" && SHA256_HEX_PATTERN.test(value)

const isNativeOccurrence = (value: unknown): boolean => {
  if (!value || typeof value !== "object") return false
  const occurrence = value as Record<string, unknown>
  return isNonEmptyString(occurrence.occurrenceId) &&
    (typeof occurrence.sourceEntryId === "string" || occurrence.sourceEntryId === null) &&
    Number.isInteger(occurrence.order) &&
    (occurrence.role === "user" || occurrence.role === "assistant") &&
    (occurrence.outcome === "user" || occurrence.outcome === "stop" || occurrence.outcome === "continuation") &&
    isNonEmptyString(occurrence.contentHash)
}

/**
 * The native selection must carry a manifest hash, a selector version and
 * well-formed occurrences whose non-null source entries are unique; payloads
 * are taken on trust, as the reference does.
 */
const isValidNativeSelection = (selection: unknown): boolean => {
  if (
    !selection || !isSha256Hex(memberOf(selection, "manifestHash")) || !isNonEmptyString(selectorVersionOf(selection))
  ) {
    return false
  }
  const occurrences = memberOf(selection, "occurrences")
  if (!Array.isArray(occurrences)) return false
  // A polled Session hands over the same list again and again; its verdict cannot change.
  const own = isOwnEvidence(occurrences)
  const known = own ? occurrenceVerdicts.get(occurrences) : undefined
  if (known !== undefined) return known
  const verdict = areValidOccurrences(occurrences)
  if (own) occurrenceVerdicts.set(occurrences, verdict)
  return verdict
}

const occurrenceVerdicts = new WeakMap<ReadonlyArray<unknown>, boolean>()

const areValidOccurrences = (occurrences: ReadonlyArray<unknown>): boolean => {
  if (!occurrences.every(isNativeOccurrence)) return false
  const seen = new Set<string>()
  for (const occurrence of occurrences as ReadonlyArray<NativeOccurrence>) {
    if (occurrence.sourceEntryId === null) continue
    if (occurrence.sourceEntryId === "" || seen.has(occurrence.sourceEntryId)) return false
    seen.add(occurrence.sourceEntryId)
  }
  return true
}

/**
 * The manifest hash the first `count` occurrences would have had on their own:
 * text dropped, payloads narrowed to the kept occurrences and emptied ones removed.
 * `null` when the selection has no occurrence or payload arrays.
 *
 * The property reads and destructurings below deliberately stay plain, so that
 * a malformed payload fails with the very `TypeError` the reference raises.
 */
const prefixManifestHash = (selection: NativeSelection, count: number): string | null => {
  if (!Array.isArray(memberOf(selection, "occurrences")) || !Array.isArray(memberOf(selection, "payloads"))) return null
  const kept = selection.occurrences.slice(0, count).map(({ text: _text, ...occurrence }) => occurrence)
  const keptIds = new Set(kept.map((occurrence) => occurrence.occurrenceId))
  const payloads = selection.payloads
    .map(({ text: _text, ...payload }) => ({
      ...payload,
      occurrenceIds: payload.occurrenceIds.filter((id) => keptIds.has(id))
    }))
    .filter((payload) => payload.occurrenceIds.length)
  return sha256({ selectorVersion: selectorVersionOf(selection), occurrences: kept, payloads })
}

/**
 * Whether a receipt's compact selection names exactly this native selection.
 *
 * **Details**
 *
 * Manifest hash and selector version must both be equal; either argument may
 * be missing, in which case the missing fields compare as `undefined`.
 *
 * @category predicates
 * @since 0.1.0
 */
export const exactSelectionApplies = (
  receiptSelection: CompactSelection | null | undefined,
  selection: NativeSelection | null | undefined
): boolean =>
  memberOf(receiptSelection, "manifestHash") === memberOf(selection, "manifestHash") &&
  memberOf(receiptSelection, "selectorVersion") === selectorVersionOf(selection)

/**
 * Whether an owner request's compact selection is a prefix of this native
 * selection that still ends at the same latest user message.
 *
 * **Details**
 *
 * Selector versions must match, the receipt's `occurrenceCount` must be an
 * integer no larger than the native occurrence count, the native prefix of
 * that length must hash to the receipt's manifest hash, and the last native
 * user occurrence must be the receipt's `latestUserSourceEntryId`. Assistant
 * continuations and stops after the cut keep the request current; a later
 * user message ends it.
 *
 * **Gotchas**
 *
 * Like the reference, a native selection whose payloads are malformed makes
 * this throw a `TypeError` once the cheap checks pass.
 *
 * @category predicates
 * @since 0.1.0
 */
export const requestPrefixApplies = (
  receiptSelection: CompactSelection | null | undefined,
  selection: NativeSelection | null | undefined
): boolean => {
  if (memberOf(receiptSelection, "selectorVersion") !== selectorVersionOf(selection)) return false
  const count = memberOf(receiptSelection, "occurrenceCount")
  if (!Number.isInteger(count)) return false
  // Past this point the reference reads without guards; plain reads keep its TypeErrors.
  return (count as number) <= selection!.occurrences.length &&
    prefixManifestHash(selection!, count as number) === receiptSelection!.manifestHash &&
    selection!.occurrences
        // The reference filters every occurrence, so a malformed one throws here as there; findLast would stop early.
        // oxlint-disable-next-line unicorn/prefer-array-find
        .filter((occurrence) => occurrence.role === "user" && occurrence.outcome === "user")
        .at(-1)?.sourceEntryId === receiptSelection!.latestUserSourceEntryId
}

// ---------------------------------------------------------------------------
// projection
// ---------------------------------------------------------------------------

interface Candidate {
  readonly record: SummaryReceipt
  readonly index: number
}

const availabilities: ReadonlySet<unknown> = new Set<ArtifactAvailability>(["available", "missing", "unreadable"])
const expectations: ReadonlySet<unknown> = new Set<ArtifactExpectation>(["owner_request", "agent_settled", "snapshot"])

const missingNative: NativeObservation = { availability: "missing" }
const missingMaterialization: MaterializationObservation = { availability: "missing", records: [] }

/** Unparsable times sort before every real one. */
const observedTime = (value: unknown): number => {
  const time = Date.parse(value as string)
  return Number.isFinite(time) ? time : Number.NEGATIVE_INFINITY
}

/** Later `observedAt` wins; on a tie the record further down the sidecar wins. */
const isNewer = (candidate: Candidate, than: Candidate | null): boolean => {
  if (than === null) return true
  const candidateTime = observedTime(candidate.record.observedAt)
  const thanTime = observedTime(than.record.observedAt)
  return candidateTime > thanTime || (candidateTime === thanTime && candidate.index > than.index)
}

const newestOf = (
  candidates: ReadonlyArray<Candidate>,
  keep: (record: SummaryReceipt) => boolean
): Candidate | null => {
  let best: Candidate | null = null
  for (const candidate of candidates) {
    if (keep(candidate.record) && isNewer(candidate, best)) best = candidate
  }
  return best
}

const assessmentRef = (record: SummaryReceipt): AssessmentRef => ({
  jobId: record.jobId,
  sessionId: record.sessionId,
  branchLeafId: record.branch.leafId,
  selectionManifestHash: record.selection.manifestHash,
  selectorVersion: record.selection.selectorVersion,
  lifecycleBoundary: record.lifecycleBoundary,
  promptVersion: record.promptVersion,
  model: record.model === null ? null : { provider: record.model.provider, id: record.model.id },
  observedAt: record.observedAt,
  schemaVersion: record.schemaVersion,
  implementationVersion: record.implementationVersion
})

const receiptErrorReasons = {
  inhibited: "inhibited",
  unavailable_overflow: "overflow",
  failure: "synthesis_failure"
} as const

const projectReceipt = (record: SummaryReceipt): ArtifactProjection => {
  switch (record.status) {
    case "ok":
      // The validator paired the status with one of its reasons; TypeScript cannot follow two reads.
      return {
        status: record.sessionStatus,
        reason: record.statusReason,
        assessmentRef: assessmentRef(record)
      } as AssessedProjection
    case "ineligible":
      return { status: "ineligible", reason: "intrinsic_policy", assessmentRef: assessmentRef(record) }
    default:
      return { status: "error", reason: receiptErrorReasons[record.status], assessmentRef: assessmentRef(record) }
  }
}

const nativeRefOf = (native: NativeObservation): NativeRef => ({
  availability: (memberOf(native, "availability") ?? "missing") as ArtifactAvailability,
  sessionId: (memberOf(native, "sessionId") ?? null) as string | null,
  selectionManifestHash: (memberOf(memberOf(native, "selection"), "manifestHash") ?? null) as string | null
})

const retryAfter = (reason: RetryReason, deadlineExpired: boolean): ArtifactRetry => ({
  recommended: !deadlineExpired,
  reason,
  deadlineExpired
})

const stateOf = (
  syncState: ArtifactSyncState,
  native: NativeObservation,
  fields: {
    readonly projection?: ArtifactProjection
    readonly applicability?: ArtifactApplicability
    readonly receipt?: SummaryReceipt
    readonly retry?: ArtifactRetry
  }
): ArtifactState => ({
  syncState,
  projection: fields.projection ?? null,
  applicability: fields.applicability ?? "none",
  nativeRef: nativeRefOf(native),
  receiptRef: fields.receipt === undefined ? null : assessmentRef(fields.receipt),
  retry: fields.retry ?? null
})

const receiptState = (
  syncState: ArtifactSyncState,
  native: NativeObservation,
  applicability: ArtifactApplicability,
  chosen: Candidate,
  retry?: ArtifactRetry
): ArtifactState =>
  stateOf(syncState, native, {
    projection: projectReceipt(chosen.record),
    applicability,
    receipt: chosen.record,
    ...(retry === undefined ? {} : { retry })
  })

const terminalError = (reason: TerminalErrorReason, native: NativeObservation): ArtifactState =>
  stateOf("terminal_error", native, {
    projection: { status: "error", reason, assessmentRef: null },
    retry: retryAfter(reason, true)
  })

/** Invalid Summary-typed records explain a terminal error; an older schema outranks plain malformation. */
const invalidSummaryReason = (
  checked: ReadonlyArray<{ readonly record: unknown; readonly valid: boolean }>
): "unsupported" | "malformed" | null => {
  let reason: "malformed" | null = null
  for (const { record, valid } of checked) {
    if (valid || memberOf(record, "type") !== "rarebit_summary") continue
    if (memberOf(record, "schemaVersion") !== 4) return "unsupported"
    reason = "malformed"
  }
  return reason
}

/** Distinct non-empty session ids named by Summary-typed records, valid or not, in first-seen order. */
const sidecarSessionIds = (records: ReadonlyArray<unknown>): ReadonlyArray<string> => {
  const ids = new Set<string>()
  for (const record of records) {
    if (memberOf(record, "type") !== "rarebit_summary") continue
    const sessionId = memberOf(record, "sessionId")
    if (isNonEmptyString(sessionId)) ids.add(sessionId)
  }
  return [...ids]
}

// Parameter destructuring (rather than `?.`) keeps the reference's TypeError for a `null` input.
const projectValidated = ({
  native = missingNative,
  materialization = missingMaterialization,
  expectation = "snapshot",
  deadlineExpired = false
}: ProjectionInput = {}): ArtifactState | ProjectionInputInvalid["field"] => {
  if (!availabilities.has(native.availability) || !availabilities.has(materialization.availability)) {
    return "availability"
  }
  if (!expectations.has(expectation)) return "expectation"

  const records: ReadonlyArray<unknown> = Array.isArray(materialization.records) ? materialization.records : []
  // Every record is validated exactly once, up front and in order, like the reference.
  const checked = records.map((record, index) => ({
    record,
    index,
    validation: isVerifiedSummary(record) ? validReceipt(record as SummaryReceipt) : validateSummaryReceipt(record)
  }))
  const valid: Array<Candidate> = []
  for (const { index, validation } of checked) {
    if (validation.valid) valid.push({ record: validation.record, index })
  }
  const terminalReason = (fallback: TerminalErrorReason): TerminalErrorReason =>
    invalidSummaryReason(checked.map(({ record, validation }) => ({ record, valid: validation.valid }))) ?? fallback

  const sessionIds = sidecarSessionIds(records)
  if (sessionIds.length > 1) return terminalError("session_conflict", native)
  const sidecarSessionId = sessionIds[0] ?? null
  const materializationUnreadable = materialization.availability === "unreadable"

  if (native.availability !== "available") {
    const unavailable: TerminalErrorReason & RetryReason = materializationUnreadable
      ? "materialization_unreadable"
      : native.availability === "unreadable"
      ? "native_unreadable"
      : "native_missing"
    const opposite = expectation === "owner_request"
      ? "agent_settled"
      : expectation === "agent_settled"
      ? "owner_request"
      : null
    const chosen = newestOf(
      valid,
      (record) => expectation === "snapshot" || record.lifecycleBoundary === expectation
    )
    const opposing = newestOf(valid, (record) => opposite !== null && record.lifecycleBoundary === opposite)
    if (chosen !== null && isNewer(chosen, opposing)) {
      const request = chosen.record.lifecycleBoundary === "owner_request"
      return receiptState(
        request ? "request_source_pending" : "assessment_source_pending",
        native,
        request ? "request_cut" : "materialization_only",
        chosen,
        retryAfter("native_source_pending", deadlineExpired)
      )
    }
    if (!deadlineExpired) {
      return stateOf("awaiting_artifacts", native, { retry: retryAfter(unavailable, false) })
    }
    return terminalError(terminalReason(unavailable), native)
  }

  if (!native.sessionId || !isValidNativeSelection(native.selection)) {
    return terminalError("native_malformed", native)
  }
  if (sidecarSessionId !== null && sidecarSessionId !== native.sessionId) {
    return terminalError("session_conflict", native)
  }

  const selection = native.selection
  const current = valid.filter(({ record }) => record.sessionId === native.sessionId)
  const exact = current.filter(({ record }) => exactSelectionApplies(record.selection, selection))
  const requests = current.filter(({ record }) =>
    record.lifecycleBoundary === "owner_request" && requestPrefixApplies(record.selection, selection)
  )
  const activeRequest = newestOf(requests, () => true)
  const settled = newestOf(exact, (record) => record.lifecycleBoundary === "agent_settled")
  // A settlement ends a request generation only if it came after the request.
  if (settled !== null && isNewer(settled, activeRequest)) {
    return receiptState("assessment_current", native, "exact_selection", settled)
  }
  if (activeRequest !== null) {
    const settlementPending = selection.occurrences
      .slice(activeRequest.record.selection.occurrenceCount)
      .some((occurrence) => occurrence.role === "assistant" && occurrence.outcome === "stop")
    return settlementPending
      ? receiptState(
        "settlement_pending",
        native,
        "request_generation",
        activeRequest,
        retryAfter("settlement_pending", deadlineExpired)
      )
      : receiptState("request_current", native, "request_generation", activeRequest)
  }
  const assessment = newestOf(exact, (record) => record.lifecycleBoundary !== "owner_request")
  if (assessment !== null) return receiptState("assessment_current", native, "exact_selection", assessment)
  if (!deadlineExpired) {
    return stateOf("awaiting_artifacts", native, {
      retry: retryAfter(materializationUnreadable ? "materialization_unreadable" : "materialization_pending", false)
    })
  }
  return terminalError(
    terminalReason(
      materializationUnreadable
        ? "materialization_unreadable"
        : materialization.availability === "missing"
        ? "materialization_missing"
        : "settlement_timeout"
    ),
    native
  )
}

/**
 * Projects native Session evidence and sidecar receipts onto one artifact state.
 *
 * **Details**
 *
 * - Native Session unavailable: the newest valid receipt of the expected
 *   generation is shown as source-pending, unless a receipt of the opposite
 *   generation is newer.
 * - Native Session available: the newest exact `agent_settled` assessment
 *   wins if it is newer than the newest applicable owner request; otherwise
 *   that request is current (or `settlement_pending` once an assistant stop
 *   follows its cut); otherwise the newest exact non-request assessment.
 * - "Newest" is by `observedAt`, then by position in `records`.
 * - Nothing applicable: `awaiting_artifacts` until `deadlineExpired`, then
 *   `terminal_error`.
 *
 * **Gotchas**
 *
 * Throws `TypeError` for an availability or expectation outside the
 * protocol, with the reference's messages. A `null` input, `native` or
 * `materialization`, and a native selection with malformed payloads throw
 * the same `TypeError`s as the reference too; see
 * {@link projectArtifactStateResult} for a non-throwing variant of the
 * checked cases.
 *
 * @category projections
 * @since 0.1.0
 */
export const projectArtifactState = (input?: ProjectionInput): ArtifactState => {
  const outcome = projectValidated(input)
  if (typeof outcome === "string") {
    throw new TypeError(outcome === "availability" ? INVALID_AVAILABILITY_MESSAGE : INVALID_EXPECTATION_MESSAGE)
  }
  return outcome
}

/**
 * {@link projectArtifactState}, with an unsupported availability or
 * expectation returned as a failed `Result` instead of thrown.
 *
 * **Gotchas**
 *
 * Input that does not even have the documented shape (a `null` `native`, for
 * instance) still throws, as it would in the reference.
 *
 * @category projections
 * @since 0.1.0
 */
export const projectArtifactStateResult = (
  input?: ProjectionInput
): Result.Result<ArtifactState, ProjectionInputInvalid> => {
  const outcome = projectValidated(input)
  return typeof outcome === "string"
    ? Result.fail(new ProjectionInputInvalid({ field: outcome }))
    : Result.succeed(outcome)
}
