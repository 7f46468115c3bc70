/**
 * The Title receipt, schema v4 (`type: "rarebit_title"`).
 *
 * A receipt is the durable outcome of one Title job: a `proposal` or an
 * `applied` title, one of three `skipped_*` outcomes (the session, its title
 * or an existing title stood in the way) or a `failure`.
 *
 * Validity is defined by the reference's `validateRarebitTitleReceipt`, and
 * this module accepts exactly the same records: exact keys per variant, a
 * non-empty `title` for `proposal` and `applied` and `null` otherwise, a
 * synthesis receipt on every variant but `failure`, which carries `retryable`
 * and `error` instead.
 *
 * `TitleReceipt` is the documented definition; `isTitleReceipt` is an
 * equivalent hand-written guard that the validator runs on hot read paths.
 * They agree on every JSON value; on objects whose required keys are only
 * inherited, only the guard follows the reference.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import {
  hasKeyShape,
  isNonEmptyString,
  isNullableNonEmptyString,
  isObjectRecord,
  isParsableTimestamp,
  isSha256Hex,
  keyShapeOf
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
  NullableModelRef,
  ReceiptError,
  Sha256Hex,
  SynthesisReceipt,
  Timestamp
} from "./ReceiptParts.js"
import { makeExplainer, makeValidator, type ReceiptValidation } from "./ReceiptValidation.js"

/**
 * Where the title evidence came from and which session entry carried it.
 *
 * @category schemas
 * @since 0.1.0
 */
export const TitleEvidence = Schema.Struct({
  provenance: NonEmptyString,
  sourceEntryId: Schema.NullOr(NonEmptyString)
})

/**
 * @category models
 * @since 0.1.0
 */
export type TitleEvidence = typeof TitleEvidence.Type

/**
 * Whether the job was allowed to apply the title or only to propose it.
 *
 * @category schemas
 * @since 0.1.0
 */
export const TitleApplicationMode = Schema.Literals(["apply", "proposal"])

/**
 * @category models
 * @since 0.1.0
 */
export type TitleApplicationMode = typeof TitleApplicationMode.Type

const commonFields = {
  schemaVersion: Schema.Literal(4),
  type: Schema.Literal("rarebit_title"),
  jobId: Sha256Hex,
  implementationVersion: Schema.Literal("hc-rarebit-title-v4"),
  sessionId: NonEmptyString,
  branch: BranchRef,
  selectionManifestHash: Sha256Hex,
  titleEvidence: TitleEvidence,
  promptVersion: NonEmptyString,
  model: NullableModelRef,
  modelProvenance: ModelProvenance,
  applicationMode: TitleApplicationMode,
  priorTitle: Schema.NullOr(Schema.String),
  observedAt: Timestamp
}

/**
 * A `proposal` or `applied` receipt: the synthesized title.
 *
 * @category schemas
 * @since 0.1.0
 */
export const TitledTitleReceipt = Schema.Struct({
  ...commonFields,
  status: Schema.Literals(["proposal", "applied"]),
  title: NonEmptyString,
  synthesis: SynthesisReceipt
})

/**
 * @category models
 * @since 0.1.0
 */
export type TitledTitleReceipt = typeof TitledTitleReceipt.Type

/**
 * A `skipped_session_changed`, `skipped_title_changed` or
 * `skipped_existing_title` receipt: synthesis ran but no title was kept.
 *
 * @category schemas
 * @since 0.1.0
 */
export const SkippedTitleReceipt = Schema.Struct({
  ...commonFields,
  status: Schema.Literals(["skipped_session_changed", "skipped_title_changed", "skipped_existing_title"]),
  title: Schema.Null,
  synthesis: SynthesisReceipt
})

/**
 * @category models
 * @since 0.1.0
 */
export type SkippedTitleReceipt = typeof SkippedTitleReceipt.Type

/**
 * A `failure` receipt: no title, and the error that prevented one.
 *
 * @category schemas
 * @since 0.1.0
 */
export const FailureTitleReceipt = Schema.Struct({
  ...commonFields,
  status: Schema.Literal("failure"),
  title: Schema.Null,
  retryable: Schema.Boolean,
  error: ReceiptError
})

/**
 * @category models
 * @since 0.1.0
 */
export type FailureTitleReceipt = typeof FailureTitleReceipt.Type

/**
 * The Title receipt v4: one of the six status variants.
 *
 * **Gotchas**
 *
 * Decode with `onExcessProperty: "error"`; the default silently drops unknown
 * keys, which the protocol forbids. Prefer {@link validateTitleReceipt}, which
 * also returns the input object itself.
 *
 * @category schemas
 * @since 0.1.0
 */
export const TitleReceipt = Schema.Union([TitledTitleReceipt, SkippedTitleReceipt, FailureTitleReceipt]).annotate({
  expected: "a rarebit_title v4 record with status proposal, applied, skipped_session_changed, " +
    "skipped_title_changed, skipped_existing_title or failure"
})

/**
 * @category models
 * @since 0.1.0
 */
export type TitleReceipt = typeof TitleReceipt.Type

// Titled and skipped receipts have the same keys.
const synthesizedKeys = keyShapeOf(TitledTitleReceipt.fields)
const failureKeys = keyShapeOf(FailureTitleReceipt.fields)
const evidenceKeys = keyShapeOf(TitleEvidence.fields)

/**
 * Exact guard for {@link TitleReceipt}, with the reference validator's
 * JavaScript semantics and without allocating.
 *
 * @category guards
 * @since 0.1.0
 */
export const isTitleReceipt = (u: unknown): u is TitleReceipt => {
  if (!isObjectRecord(u)) return false
  const status = u.status
  let titled = false
  switch (status) {
    case "proposal":
    case "applied":
      titled = true
      break
    case "skipped_session_changed":
    case "skipped_title_changed":
    case "skipped_existing_title":
    case "failure":
      break
    default:
      return false
  }
  const failure = status === "failure"
  if (
    !hasKeyShape(u, failure ? failureKeys : synthesizedKeys) ||
    u.schemaVersion !== 4 ||
    u.type !== "rarebit_title" ||
    !isSha256Hex(u.jobId) ||
    u.implementationVersion !== "hc-rarebit-title-v4" ||
    !isNonEmptyString(u.sessionId) ||
    !isBranchRef(u.branch) ||
    !isSha256Hex(u.selectionManifestHash)
  ) return false
  const evidence = u.titleEvidence
  if (
    !hasKeyShape(evidence, evidenceKeys) ||
    !isNonEmptyString(evidence.provenance) ||
    !isNullableNonEmptyString(evidence.sourceEntryId) ||
    !isNonEmptyString(u.promptVersion) ||
    !isNullableModelRef(u.model) ||
    !isModelProvenance(u.modelProvenance) ||
    (u.applicationMode !== "apply" && u.applicationMode !== "proposal") ||
    !(u.priorTitle === null || typeof u.priorTitle === "string") ||
    !isParsableTimestamp(u.observedAt)
  ) return false
  if (failure) return u.title === null && typeof u.retryable === "boolean" && isReceiptError(u.error)
  return (titled ? isNonEmptyString(u.title) : u.title === null) && isSynthesisReceipt(u.synthesis)
}

/**
 * Validates a Title receipt exactly as the reference's
 * `validateRarebitTitleReceipt` does.
 *
 * **Details**
 *
 * A valid result's `record` is the very object passed in, not a copy.
 *
 * @category validation
 * @since 0.1.0
 */
export const validateTitleReceipt: (record: unknown) => ReceiptValidation<TitleReceipt> = makeValidator(isTitleReceipt)

/**
 * Why a record is not a valid Title receipt, as the Schema issue formatter
 * words it, or `undefined` when it is valid.
 *
 * @category validation
 * @since 0.1.0
 */
export const explainTitleReceipt: (record: unknown) => string | undefined = makeExplainer(
  isTitleReceipt,
  TitleReceipt,
  "the record is not plain JSON data: a required key is inherited rather than owned"
)
