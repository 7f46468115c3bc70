/**
 * The Summary receipt, schema v4 (`type: "rarebit_summary"`).
 *
 * A receipt is the durable outcome of one Summary job: `ok` (a summary and a
 * session assessment), `ineligible`, `inhibited` (an automatic-summary policy
 * said no), `unavailable_overflow` (the prompt cannot fit) or `failure`.
 *
 * Validity is defined by the reference's `validateRarebitArtifactReceipt`,
 * quirks included, and this module accepts exactly the same records:
 *
 * - exact keys per variant; `inputCoverage` is allowed only on `ok`, optional
 *   for implementation v4 and required for v5 and v6;
 * - an `owner_request` receipt names the latest user source entry and records
 *   `user_requested` / `owner_request_recorded`; no other boundary may record
 *   `user_requested`;
 * - `sessionStatus` is looked up as a property key, so a one-element array
 *   such as `["finished"]` is accepted wherever `"finished"` is (the strict
 *   comparisons that follow still see the array).
 *
 * `SummaryReceipt` is the documented definition; `isSummaryReceipt` is an
 * equivalent hand-written guard that the validator runs on hot read paths.
 * They agree on every JSON value; on exotic non-JSON objects (a required key
 * inherited from a prototype, a symbol key, a boxed string status) only the
 * guard follows the reference.
 *
 * Why one module of this size: the Schemas and the guard must accept exactly
 * the same records, so they stay in one module, to be changed together; the
 * sub-records the Title receipt shares already live in `ReceiptParts.ts`.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import type { Simplify } from "effect/Types"
import {
  hasKeyShape,
  isNonEmptyString,
  isNonNegativeInteger,
  isNullableNonEmptyString,
  isObjectRecord,
  isParsableTimestamp,
  isPositiveInteger,
  isSha256Hex,
  type KeyShape,
  keyShapeOf,
  propertyKeyOf
} from "./internal/JsonShape.js"
import {
  BranchRef,
  isBranchRef,
  isModelProvenance,
  isNullableModelRef,
  isReceiptError,
  isSynthesisReceipt,
  ModelProvenance,
  NonEmptyString,
  NonNegativeInteger,
  NullableModelRef,
  PositiveInteger,
  ReceiptError,
  Sha256Hex,
  SynthesisReceipt,
  Timestamp
} from "./ReceiptParts.js"
import { makeExplainer, makeValidator, type ReceiptValidation } from "./ReceiptValidation.js"

// ---------------------------------------------------------------------------
// vocabularies
// ---------------------------------------------------------------------------

/**
 * Summary implementations whose receipts v4 readers accept.
 *
 * @category schemas
 * @since 0.1.0
 */
export const SummaryImplementationVersion = Schema.Literals([
  "hc-rarebit-summary-v4",
  "hc-rarebit-summary-v5",
  "hc-rarebit-summary-v6"
])

/**
 * @category models
 * @since 0.1.0
 */
export type SummaryImplementationVersion = typeof SummaryImplementationVersion.Type

/**
 * The lifecycle moments a receipt may record. `session_start` is still read
 * (old receipts are immutable evidence) although writers no longer produce it.
 *
 * @category schemas
 * @since 0.1.0
 */
export const LifecycleBoundary = Schema.Literals(["owner_request", "agent_settled", "session_start", "manual"])

/**
 * @category models
 * @since 0.1.0
 */
export type LifecycleBoundary = typeof LifecycleBoundary.Type

/**
 * Whether the summary was asked for or produced automatically.
 *
 * @category schemas
 * @since 0.1.0
 */
export const SynthesisMode = Schema.Literals(["forced", "automatic"])

/**
 * @category models
 * @since 0.1.0
 */
export type SynthesisMode = typeof SynthesisMode.Type

/**
 * The legal `statusReason` values of each `sessionStatus`.
 *
 * @category constants
 * @since 0.1.0
 */
export const SESSION_STATUS_REASONS = {
  user_requested: ["owner_request_recorded"],
  finished: ["all_requests_accomplished"],
  needs_attention: [
    "decision",
    "input",
    "approval",
    "blocker",
    "unfinished",
    "uncertain",
    "conflicting_evidence"
  ]
} as const

/**
 * @category schemas
 * @since 0.1.0
 */
export const SessionStatus = Schema.Literals(["user_requested", "finished", "needs_attention"])

/**
 * @category models
 * @since 0.1.0
 */
export type SessionStatus = typeof SessionStatus.Type

/**
 * @category schemas
 * @since 0.1.0
 */
export const StatusReason = Schema.Literals([
  "owner_request_recorded",
  "all_requests_accomplished",
  "decision",
  "input",
  "approval",
  "blocker",
  "unfinished",
  "uncertain",
  "conflicting_evidence"
])

/**
 * @category models
 * @since 0.1.0
 */
export type StatusReason = typeof StatusReason.Type

/**
 * The session status a `sessionStatus` value stands for, read the way the
 * reference reads it: as a property key of the reason table. `"finished"` and
 * `["finished"]` both give `"finished"`; anything else gives `undefined`.
 *
 * @category accessors
 * @since 0.1.0
 */
export const sessionStatusKey = (u: unknown): SessionStatus | undefined => {
  const key = propertyKeyOf(u)
  // An inherited key such as "toString" makes the reference throw, never pass.
  return typeof key === "string" && Object.hasOwn(SESSION_STATUS_REASONS, key) ? key as SessionStatus : undefined
}

/**
 * A `sessionStatus` as receipts may carry it: one of the statuses, or (a quirk
 * of the reference's key lookup) an array whose string form is one.
 *
 * @category schemas
 * @since 0.1.0
 */
export const SessionStatusValue = Schema.Union([
  SessionStatus,
  Schema.Array(Schema.Unknown).check(
    Schema.makeFilter((u: ReadonlyArray<unknown>) => sessionStatusKey(u) !== undefined, {
      expected: "an array whose string form is a session status"
    })
  )
])

/**
 * @category models
 * @since 0.1.0
 */
export type SessionStatusValue = typeof SessionStatusValue.Type

/**
 * A session status with one of its legal reasons, as an `ok` receipt
 * records them.
 *
 * @category models
 * @since 0.1.0
 */
export type SessionAssessment = {
  readonly [S in SessionStatus]: {
    readonly sessionStatus: S
    readonly statusReason: (typeof SESSION_STATUS_REASONS)[S][number]
  }
}[SessionStatus]

const isLegalAssessment = (status: unknown, reason: unknown, ownerRequest: boolean): boolean => {
  const key = sessionStatusKey(status)
  if (key === undefined || !(SESSION_STATUS_REASONS[key] as ReadonlyArray<unknown>).includes(reason)) return false
  return ownerRequest
    ? status === "user_requested" && reason === "owner_request_recorded"
    : status !== "user_requested"
}

// ---------------------------------------------------------------------------
// sub-records
// ---------------------------------------------------------------------------

/**
 * The Rarebit selection a receipt was derived from, in its compact form.
 *
 * @category schemas
 * @since 0.1.0
 */
export const CompactSelection = Schema.Struct({
  manifestHash: Sha256Hex,
  selectorVersion: NonEmptyString,
  occurrenceCount: NonNegativeInteger,
  uniquePayloadCount: NonNegativeInteger,
  latestUserSourceEntryId: Schema.NullOr(NonEmptyString)
}).check(
  Schema.makeFilter((s) =>
    s.uniquePayloadCount <= s.occurrenceCount
      ? undefined
      : { path: ["uniquePayloadCount"], issue: "uniquePayloadCount must not exceed occurrenceCount" }
  )
)

/**
 * @category models
 * @since 0.1.0
 */
export type CompactSelection = typeof CompactSelection.Type

const selectionKeys = keyShapeOf(CompactSelection.fields)

const isCompactSelection = (u: unknown, ownerRequest: boolean): boolean =>
  hasKeyShape(u, selectionKeys) &&
  isSha256Hex(u.manifestHash) &&
  isNonEmptyString(u.selectorVersion) &&
  isNonNegativeInteger(u.occurrenceCount) &&
  isNonNegativeInteger(u.uniquePayloadCount) &&
  u.uniquePayloadCount <= u.occurrenceCount &&
  (ownerRequest ? isNonEmptyString(u.latestUserSourceEntryId) : isNullableNonEmptyString(u.latestUserSourceEntryId))

/**
 * How a Summary job bounds its prompt.
 *
 * @category schemas
 * @since 0.1.0
 */
export const InputCoveragePolicy = Schema.Struct({
  strategy: Schema.Literals(["complete_or_explicit_overflow", "newest_suffix_with_explicit_omission"]),
  maxPromptChars: PositiveInteger
})

/**
 * @category models
 * @since 0.1.0
 */
export type InputCoveragePolicy = typeof InputCoveragePolicy.Type

const coveragePolicyKeys = keyShapeOf(InputCoveragePolicy.fields)

const isInputCoveragePolicy = (u: unknown): boolean =>
  hasKeyShape(u, coveragePolicyKeys) &&
  (u.strategy === "complete_or_explicit_overflow" || u.strategy === "newest_suffix_with_explicit_omission") &&
  isPositiveInteger(u.maxPromptChars)

const coverageAddsUp = (c: {
  readonly totalMessageCount: number
  readonly includedMessageCount: number
  readonly omittedMessageCount: number
}): boolean => c.includedMessageCount + c.omittedMessageCount === c.totalMessageCount

const coverageCompleteness = (c: {
  readonly omittedMessageCount: number
  readonly omittedTextChars: number
}): boolean => c.omittedMessageCount === 0 && c.omittedTextChars === 0

/**
 * How much of the selection the prompt really covered.
 *
 * **Details**
 *
 * `includedMessageCount + omittedMessageCount` equals `totalMessageCount`
 * (as a JavaScript number sum), and `complete` is true exactly when nothing
 * was omitted (no messages, no text characters).
 *
 * @category schemas
 * @since 0.1.0
 */
export const InputCoverage = Schema.Struct({
  totalMessageCount: NonNegativeInteger,
  includedMessageCount: NonNegativeInteger,
  omittedMessageCount: NonNegativeInteger,
  omittedTextChars: NonNegativeInteger,
  promptChars: NonNegativeInteger,
  complete: Schema.Boolean
}).check(
  Schema.makeFilter((c) =>
    coverageAddsUp(c)
      ? undefined
      : {
        path: ["totalMessageCount"],
        issue: "includedMessageCount + omittedMessageCount must equal totalMessageCount"
      }
  ),
  Schema.makeFilter((c) =>
    c.complete === coverageCompleteness(c)
      ? undefined
      : { path: ["complete"], issue: "complete must be true exactly when nothing was omitted" }
  )
)

/**
 * @category models
 * @since 0.1.0
 */
export type InputCoverage = typeof InputCoverage.Type

const coverageKeys = keyShapeOf(InputCoverage.fields)

const isInputCoverage = (u: unknown): boolean =>
  hasKeyShape(u, coverageKeys) &&
  isNonNegativeInteger(u.totalMessageCount) &&
  isNonNegativeInteger(u.includedMessageCount) &&
  isNonNegativeInteger(u.omittedMessageCount) &&
  isNonNegativeInteger(u.omittedTextChars) &&
  isNonNegativeInteger(u.promptChars) &&
  typeof u.complete === "boolean" &&
  coverageAddsUp(u as InputCoverage) &&
  u.complete === coverageCompleteness(u as InputCoverage)

/**
 * Why the prompt could not be built.
 *
 * @category schemas
 * @since 0.1.0
 */
export const Overflow = Schema.Struct({
  promptChars: NonNegativeInteger,
  maxPromptChars: PositiveInteger,
  strategy: Schema.Literals(["none", "fixed_contract_exceeds_limit"])
})

/**
 * @category models
 * @since 0.1.0
 */
export type Overflow = typeof Overflow.Type

const overflowKeys = keyShapeOf(Overflow.fields)

const isOverflow = (u: unknown): boolean =>
  hasKeyShape(u, overflowKeys) &&
  isNonNegativeInteger(u.promptChars) &&
  isPositiveInteger(u.maxPromptChars) &&
  (u.strategy === "none" || u.strategy === "fixed_contract_exceeds_limit")

/**
 * The automatic-summary policy answer that inhibited a Summary job.
 *
 * **Gotchas**
 *
 * Its `observedAt`, `validUntil` and `queriedAt` only need to be non-empty
 * strings; unlike the receipt's own `observedAt` they are not parsed.
 *
 * @category schemas
 * @since 0.1.0
 */
export const AutomaticSummaryPolicy = Schema.Struct({
  contractVersion: Schema.Literal("rarebit-automatic-summary-policy/1"),
  decision: Schema.Literal("inhibit"),
  queryStatus: Schema.Literal("inhibited"),
  queryId: NonEmptyString,
  provider: NonEmptyString,
  reason: NonEmptyString,
  observedAt: NonEmptyString,
  validUntil: NonEmptyString,
  queriedAt: NonEmptyString,
  provenance: Schema.Struct({
    identity: NonEmptyString,
    generation: NonEmptyString,
    association: NonEmptyString
  })
})

/**
 * @category models
 * @since 0.1.0
 */
export type AutomaticSummaryPolicy = typeof AutomaticSummaryPolicy.Type

const policyKeys = keyShapeOf(AutomaticSummaryPolicy.fields)
const policyProvenanceKeys = keyShapeOf(AutomaticSummaryPolicy.fields.provenance.fields)

const isAutomaticSummaryPolicy = (u: unknown): boolean => {
  if (
    !hasKeyShape(u, policyKeys) ||
    u.contractVersion !== "rarebit-automatic-summary-policy/1" ||
    u.decision !== "inhibit" ||
    u.queryStatus !== "inhibited" ||
    !isNonEmptyString(u.queryId) ||
    !isNonEmptyString(u.provider) ||
    !isNonEmptyString(u.reason) ||
    !isNonEmptyString(u.observedAt) ||
    !isNonEmptyString(u.validUntil) ||
    !isNonEmptyString(u.queriedAt)
  ) return false
  const provenance = u.provenance
  return hasKeyShape(provenance, policyProvenanceKeys) &&
    isNonEmptyString(provenance.identity) &&
    isNonEmptyString(provenance.generation) &&
    isNonEmptyString(provenance.association)
}

// ---------------------------------------------------------------------------
// the receipt
// ---------------------------------------------------------------------------

const commonFields = {
  schemaVersion: Schema.Literal(4),
  type: Schema.Literal("rarebit_summary"),
  jobId: Sha256Hex,
  sessionId: NonEmptyString,
  branch: BranchRef,
  observedAt: Timestamp,
  selection: CompactSelection,
  lifecycleBoundary: LifecycleBoundary,
  implementationVersion: SummaryImplementationVersion,
  synthesisMode: SynthesisMode,
  inputCoveragePolicy: InputCoveragePolicy,
  promptVersion: NonEmptyString,
  model: NullableModelRef,
  modelProvenance: ModelProvenance
}

const ownerRequestNamesLatestUserEntry = Schema.makeFilter(
  (r: { readonly lifecycleBoundary: LifecycleBoundary; readonly selection: CompactSelection }) =>
    r.lifecycleBoundary !== "owner_request" || r.selection.latestUserSourceEntryId !== null
      ? undefined
      : {
        path: ["selection", "latestUserSourceEntryId"],
        issue: "an owner_request receipt must name the latest user source entry"
      }
)

/**
 * An `ok` receipt: a non-blank summary, the session assessment and the
 * synthesis receipt of the model call.
 *
 * @category schemas
 * @since 0.1.0
 */
export const OkSummaryReceipt = Schema.Struct({
  ...commonFields,
  status: Schema.Literal("ok"),
  inputCoverage: Schema.optionalKey(InputCoverage),
  summary: Schema.String.check(
    Schema.makeFilter((s: string) => s.trim().length > 0, { expected: "a summary that is not blank" })
  ),
  sessionStatus: SessionStatusValue,
  statusReason: StatusReason,
  synthesis: SynthesisReceipt
}).check(
  ownerRequestNamesLatestUserEntry,
  Schema.makeFilter((r) =>
    r.implementationVersion === "hc-rarebit-summary-v4" || Object.hasOwn(r, "inputCoverage")
      ? undefined
      : { path: ["inputCoverage"], issue: `inputCoverage is required by ${r.implementationVersion}` }
  ),
  Schema.makeFilter((r) =>
    isLegalAssessment(r.sessionStatus, r.statusReason, r.lifecycleBoundary === "owner_request")
      ? undefined
      : {
        path: ["statusReason"],
        issue: r.lifecycleBoundary === "owner_request"
          ? "an owner_request receipt must record user_requested / owner_request_recorded"
          : "statusReason is not a reason of sessionStatus, or user_requested outside an owner_request"
      }
  )
)

/**
 * An `ok` Summary receipt.
 *
 * **Details**
 *
 * `sessionStatus` and `statusReason` are typed together, as
 * {@link SessionAssessment}: the validators accept no other pairing.
 *
 * **Gotchas**
 *
 * `sessionStatus` is typed as the status string Rarebit writers produce.
 * The validators, like the reference's, also accept that string wrapped in a
 * one-element array (the reference looks the status up as a property key),
 * and a record carrying that form is returned as it is: only code that reads
 * records no Rarebit writer produced can meet it.
 *
 * @category models
 * @since 0.1.0
 */
export type OkSummaryReceipt = Simplify<
  Omit<typeof OkSummaryReceipt.Type, "sessionStatus" | "statusReason"> & SessionAssessment
>

/**
 * An `ineligible` receipt: the selection did not qualify for a summary.
 *
 * @category schemas
 * @since 0.1.0
 */
export const IneligibleSummaryReceipt = Schema.Struct({
  ...commonFields,
  status: Schema.Literal("ineligible")
}).check(ownerRequestNamesLatestUserEntry)

/**
 * @category models
 * @since 0.1.0
 */
export type IneligibleSummaryReceipt = typeof IneligibleSummaryReceipt.Type

/**
 * An `inhibited` receipt: an automatic-summary policy declined the job.
 *
 * @category schemas
 * @since 0.1.0
 */
export const InhibitedSummaryReceipt = Schema.Struct({
  ...commonFields,
  status: Schema.Literal("inhibited"),
  automaticSummaryPolicy: AutomaticSummaryPolicy
}).check(ownerRequestNamesLatestUserEntry)

/**
 * @category models
 * @since 0.1.0
 */
export type InhibitedSummaryReceipt = typeof InhibitedSummaryReceipt.Type

/**
 * An `unavailable_overflow` receipt: the prompt could not fit its limit.
 *
 * @category schemas
 * @since 0.1.0
 */
export const UnavailableOverflowSummaryReceipt = Schema.Struct({
  ...commonFields,
  status: Schema.Literal("unavailable_overflow"),
  overflow: Overflow
}).check(ownerRequestNamesLatestUserEntry)

/**
 * @category models
 * @since 0.1.0
 */
export type UnavailableOverflowSummaryReceipt = typeof UnavailableOverflowSummaryReceipt.Type

/**
 * A `failure` receipt: the derivation failed, possibly retryably.
 *
 * @category schemas
 * @since 0.1.0
 */
export const FailureSummaryReceipt = Schema.Struct({
  ...commonFields,
  status: Schema.Literal("failure"),
  retryable: Schema.Boolean,
  error: ReceiptError
}).check(ownerRequestNamesLatestUserEntry)

/**
 * @category models
 * @since 0.1.0
 */
export type FailureSummaryReceipt = typeof FailureSummaryReceipt.Type

/**
 * The Summary receipt v4: one of the five status variants.
 *
 * **Gotchas**
 *
 * Decode with `onExcessProperty: "error"`; the default silently drops unknown
 * keys, which the protocol forbids. Prefer {@link validateSummaryReceipt},
 * which also returns the input object itself.
 *
 * @category schemas
 * @since 0.1.0
 */
export const SummaryReceipt = Schema.Union([
  OkSummaryReceipt,
  IneligibleSummaryReceipt,
  InhibitedSummaryReceipt,
  UnavailableOverflowSummaryReceipt,
  FailureSummaryReceipt
]).annotate({
  expected: "a rarebit_summary v4 record with status ok, ineligible, inhibited, unavailable_overflow or failure"
})

/**
 * The Summary receipt v4, discriminated by `status`: the type of
 * {@link SummaryReceipt}, with `sessionStatus` as {@link OkSummaryReceipt}
 * types it.
 *
 * @category models
 * @since 0.1.0
 */
export type SummaryReceipt =
  | OkSummaryReceipt
  | IneligibleSummaryReceipt
  | InhibitedSummaryReceipt
  | UnavailableOverflowSummaryReceipt
  | FailureSummaryReceipt

// ---------------------------------------------------------------------------
// the guard
// ---------------------------------------------------------------------------

// `inputCoverage` is an optional key of an ok receipt; the variant's rule on it is checked below.
const okKeys = keyShapeOf(OkSummaryReceipt.fields)
const ineligibleKeys = keyShapeOf(IneligibleSummaryReceipt.fields)
const inhibitedKeys = keyShapeOf(InhibitedSummaryReceipt.fields)
const overflowVariantKeys = keyShapeOf(UnavailableOverflowSummaryReceipt.fields)
const failureKeys = keyShapeOf(FailureSummaryReceipt.fields)

const variantKeys = (record: Record<string, unknown>): KeyShape | undefined => {
  switch (record.status) {
    case "ok":
      return okKeys
    case "ineligible":
      return ineligibleKeys
    case "inhibited":
      return inhibitedKeys
    case "unavailable_overflow":
      return overflowVariantKeys
    case "failure":
      return failureKeys
    default:
      return undefined
  }
}

/**
 * Exact guard for {@link SummaryReceipt}, with the reference validator's
 * JavaScript semantics and without allocating.
 *
 * @category guards
 * @since 0.1.0
 */
export const isSummaryReceipt = (u: unknown): u is SummaryReceipt => {
  if (!isObjectRecord(u)) return false
  const keys = variantKeys(u)
  if (
    keys === undefined ||
    !hasKeyShape(u, keys) ||
    u.type !== "rarebit_summary" ||
    u.schemaVersion !== 4 ||
    !isSha256Hex(u.jobId) ||
    !isNonEmptyString(u.sessionId)
  ) return false
  const version = u.implementationVersion
  if (
    version !== "hc-rarebit-summary-v4" && version !== "hc-rarebit-summary-v5" && version !== "hc-rarebit-summary-v6"
  ) return false
  const boundary = u.lifecycleBoundary
  const ownerRequest = boundary === "owner_request"
  if (
    !isNonEmptyString(u.promptVersion) ||
    !isBranchRef(u.branch) ||
    !isCompactSelection(u.selection, ownerRequest) ||
    !(ownerRequest || boundary === "agent_settled" || boundary === "session_start" || boundary === "manual") ||
    !isParsableTimestamp(u.observedAt) ||
    (u.synthesisMode !== "forced" && u.synthesisMode !== "automatic") ||
    !isInputCoveragePolicy(u.inputCoveragePolicy) ||
    !isNullableModelRef(u.model) ||
    !isModelProvenance(u.modelProvenance)
  ) return false
  // Checked whenever owned, not only on ok: a non-enumerable own key slips
  // past the exact-key test of any variant but is still validated.
  if (
    Object.hasOwn(u, "inputCoverage")
      ? !isInputCoverage(u.inputCoverage)
      : u.status === "ok" && version !== "hc-rarebit-summary-v4"
  ) return false
  switch (u.status) {
    case "ok": {
      return typeof u.summary === "string" &&
        u.summary.trim().length > 0 &&
        isSynthesisReceipt(u.synthesis) &&
        isLegalAssessment(u.sessionStatus, u.statusReason, ownerRequest)
    }
    case "inhibited":
      return isAutomaticSummaryPolicy(u.automaticSummaryPolicy)
    case "unavailable_overflow":
      return isOverflow(u.overflow)
    case "failure":
      return typeof u.retryable === "boolean" && isReceiptError(u.error)
    default:
      return true
  }
}

// ---------------------------------------------------------------------------
// validation
// ---------------------------------------------------------------------------

/**
 * Validates a Summary receipt exactly as the reference's
 * `validateRarebitArtifactReceipt` does.
 *
 * **Details**
 *
 * A valid result's `record` is the very object passed in, not a copy.
 * Where the reference would throw (a `sessionStatus` whose string conversion
 * fails or names an `Object.prototype` member), this returns `malformed`.
 *
 * @category validation
 * @since 0.1.0
 */
export const validateSummaryReceipt: (record: unknown) => ReceiptValidation<SummaryReceipt> = makeValidator(
  isSummaryReceipt
)

/**
 * Why a record is not a valid Summary receipt, as the Schema issue formatter
 * words it, or `undefined` when it is valid.
 *
 * @category validation
 * @since 0.1.0
 */
export const explainSummaryReceipt: (record: unknown) => string | undefined = makeExplainer(
  isSummaryReceipt,
  SummaryReceipt,
  "the record is not plain JSON data: a required key is inherited, or a value converts to a string only through a custom toString"
)
