/**
 * Sub-records shared by the Summary and Title receipts of protocol v4.
 *
 * Each part comes twice: as an `effect/Schema` (the documented definition,
 * decoded with `onExcessProperty: "error"`) and as a hand-written guard with
 * the reference's exact JavaScript semantics, used on hot read paths. Tests
 * prove the two agree with each other and with the reference validators.
 *
 * Every record here is exact-key: a missing key, an unknown key or a key that
 * is only inherited makes it invalid.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import { SHA256_HEX_PATTERN } from "./CanonicalJson.js"
import {
  hasKeyShape,
  isNonEmptyString,
  isNonNegativeInteger,
  isNullableNonEmptyString,
  isNullableNonNegativeNumber,
  isNullableString,
  isParsableTimestamp,
  isPositiveInteger,
  keyShapeOf
} from "./internal/JsonShape.js"

// ---------------------------------------------------------------------------
// leaves
// ---------------------------------------------------------------------------

/**
 * Lower-case 64-digit SHA-256 hex.
 *
 * @category schemas
 * @since 0.1.0
 */
export const Sha256Hex = Schema.String.check(Schema.isPattern(SHA256_HEX_PATTERN, { expected: "a SHA-256 hex string" }))

/**
 * A string with at least one UTF-16 code unit (whitespace counts).
 *
 * @category schemas
 * @since 0.1.0
 */
export const NonEmptyString = Schema.String.check(
  Schema.makeFilter(isNonEmptyString, { expected: "a non-empty string" })
)

/**
 * An integer ≥ 0 by `Number.isInteger`: `-0` and integers beyond the safe
 * range pass, as in the reference.
 *
 * @category schemas
 * @since 0.1.0
 */
export const NonNegativeInteger = Schema.Number.check(
  Schema.makeFilter(isNonNegativeInteger, { expected: "a non-negative integer" })
)

/**
 * An integer > 0 by `Number.isInteger` (so `-0` fails).
 *
 * @category schemas
 * @since 0.1.0
 */
export const PositiveInteger = Schema.Number.check(
  Schema.makeFilter(isPositiveInteger, { expected: "a positive integer" })
)

/**
 * `null` or a finite number ≥ 0 (fractions allowed), as usage counters are.
 *
 * @category schemas
 * @since 0.1.0
 */
export const NullableNonNegativeNumber = Schema.NullOr(
  Schema.Number.check(
    Schema.makeFilter((n: number) => Number.isFinite(n) && n >= 0, { expected: "a finite non-negative number" })
  )
)

/**
 * A non-empty string that `Date.parse` accepts.
 *
 * **Gotchas**
 *
 * This is the reference's rule, not ISO 8601: any format the running engine's
 * `Date.parse` understands passes.
 *
 * @category schemas
 * @since 0.1.0
 */
export const Timestamp = Schema.String.check(
  Schema.makeFilter(isParsableTimestamp, { expected: "a date-time string accepted by Date.parse" })
)

// ---------------------------------------------------------------------------
// branch
// ---------------------------------------------------------------------------

/**
 * The active branch a receipt was derived from.
 *
 * @category schemas
 * @since 0.1.0
 */
export const BranchRef = Schema.Struct({
  leafId: Schema.NullOr(NonEmptyString),
  entryCount: NonNegativeInteger,
  pathHash: Sha256Hex
})

/**
 * @category models
 * @since 0.1.0
 */
export type BranchRef = typeof BranchRef.Type

const branchKeys = keyShapeOf(BranchRef.fields)

/**
 * Exact guard for {@link BranchRef}.
 *
 * @category guards
 * @since 0.1.0
 */
export const isBranchRef = (u: unknown): u is BranchRef =>
  hasKeyShape(u, branchKeys) &&
  isNullableNonEmptyString(u.leafId) &&
  isNonNegativeInteger(u.entryCount) &&
  typeof u.pathHash === "string" &&
  SHA256_HEX_PATTERN.test(u.pathHash)

// ---------------------------------------------------------------------------
// model
// ---------------------------------------------------------------------------

/**
 * A model identity: provider and model id, both non-empty.
 *
 * @category schemas
 * @since 0.1.0
 */
export const ModelRef = Schema.Struct({
  provider: NonEmptyString,
  id: NonEmptyString
})

/**
 * @category models
 * @since 0.1.0
 */
export type ModelRef = typeof ModelRef.Type

/**
 * A model identity or `null` when none was chosen.
 *
 * @category schemas
 * @since 0.1.0
 */
export const NullableModelRef = Schema.NullOr(ModelRef)

const modelKeys = keyShapeOf(ModelRef.fields)

/**
 * Exact guard for {@link NullableModelRef}.
 *
 * @category guards
 * @since 0.1.0
 */
export const isNullableModelRef = (u: unknown): u is ModelRef | null =>
  u === null || (hasKeyShape(u, modelKeys) && isNonEmptyString(u.provider) && isNonEmptyString(u.id))

/**
 * Where the model choice came from.
 *
 * @category schemas
 * @since 0.1.0
 */
export const ModelProvenance = Schema.Struct({
  source: NonEmptyString,
  status: NonEmptyString,
  settingsKey: Schema.optionalKey(NonEmptyString)
})

/**
 * @category models
 * @since 0.1.0
 */
export type ModelProvenance = typeof ModelProvenance.Type

const modelProvenanceKeys = keyShapeOf(ModelProvenance.fields)

/**
 * Exact guard for {@link ModelProvenance}.
 *
 * @category guards
 * @since 0.1.0
 */
export const isModelProvenance = (u: unknown): u is ModelProvenance =>
  hasKeyShape(u, modelProvenanceKeys) &&
  isNonEmptyString(u.source) &&
  isNonEmptyString(u.status) &&
  (!Object.hasOwn(u, "settingsKey") || isNonEmptyString(u.settingsKey))

// ---------------------------------------------------------------------------
// error
// ---------------------------------------------------------------------------

/**
 * The error a failed derivation recorded: a non-empty name and any message.
 *
 * @category schemas
 * @since 0.1.0
 */
export const ReceiptError = Schema.Struct({
  name: NonEmptyString,
  message: Schema.String
})

/**
 * @category models
 * @since 0.1.0
 */
export type ReceiptError = typeof ReceiptError.Type

const errorKeys = keyShapeOf(ReceiptError.fields)

/**
 * Exact guard for {@link ReceiptError}.
 *
 * @category guards
 * @since 0.1.0
 */
export const isReceiptError = (u: unknown): u is ReceiptError =>
  hasKeyShape(u, errorKeys) && isNonEmptyString(u.name) && typeof u.message === "string"

// ---------------------------------------------------------------------------
// synthesis receipt
// ---------------------------------------------------------------------------

const NullableString = Schema.NullOr(Schema.String)

/**
 * The token and cost figures a synthesis `usage` (and its `provenance`)
 * carries, each a number or `null`.
 *
 * @category models
 * @since 0.1.0
 */
export const SYNTHESIS_USAGE_KEYS = [
  "inputTokens",
  "outputTokens",
  "totalTokens",
  "cacheReadTokens",
  "cacheWriteTokens",
  "reasoningTokens",
  "estimatedCostUsd"
] as const

/** One field per `SYNTHESIS_USAGE_KEYS` entry, each of `schema`, in that order. */
const usageFields = <S extends Schema.Top>(schema: S) =>
  Object.fromEntries(SYNTHESIS_USAGE_KEYS.map((key) => [key, schema])) as {
    readonly [K in (typeof SYNTHESIS_USAGE_KEYS)[number]]: S
  }

/**
 * What the model provider reported about one synthesis call: timing, response
 * identity and token usage, each value `null` when unknown.
 *
 * @category schemas
 * @since 0.1.0
 */
export const SynthesisReceipt = Schema.Struct({
  schemaVersion: Schema.Literal(1),
  kind: Schema.Literal("rarebit_model_synthesis"),
  outcome: NonEmptyString,
  requestedModel: NullableModelRef,
  timing: Schema.Struct({
    startedAt: NullableString,
    completedAt: NullableString,
    durationMs: NullableNonNegativeNumber,
    provenance: Schema.Literal("local_monotonic_clock")
  }),
  provider: Schema.Struct({
    responseProvider: NullableString,
    responseProviderSource: NullableString,
    responseModel: NullableString,
    responseModelSource: NullableString,
    responseId: NullableString,
    responseIdSource: NullableString,
    requestId: NullableString,
    requestIdSource: NullableString
  }),
  usage: Schema.Struct({
    availability: Schema.Literals(["unavailable", "partial", "reported"]),
    ...usageFields(NullableNonNegativeNumber),
    provenance: Schema.Struct(usageFields(NullableString))
  })
})

/**
 * @category models
 * @since 0.1.0
 */
export type SynthesisReceipt = typeof SynthesisReceipt.Type

const synthesisKeys = keyShapeOf(SynthesisReceipt.fields)
const timingKeys = keyShapeOf(SynthesisReceipt.fields.timing.fields)
const providerKeys = keyShapeOf(SynthesisReceipt.fields.provider.fields)
const usageKeys = keyShapeOf(SynthesisReceipt.fields.usage.fields)
const usageProvenanceKeys = keyShapeOf(SynthesisReceipt.fields.usage.fields.provenance.fields)

const everyNullableString = (record: Record<string, unknown>, keys: ReadonlyArray<string>): boolean => {
  for (let i = 0; i < keys.length; i++) {
    if (!isNullableString(record[keys[i]])) return false
  }
  return true
}

/**
 * Exact guard for {@link SynthesisReceipt}.
 *
 * @category guards
 * @since 0.1.0
 */
export const isSynthesisReceipt = (u: unknown): u is SynthesisReceipt => {
  if (
    !hasKeyShape(u, synthesisKeys) ||
    u.schemaVersion !== 1 ||
    u.kind !== "rarebit_model_synthesis" ||
    !isNonEmptyString(u.outcome) ||
    !isNullableModelRef(u.requestedModel)
  ) return false
  const timing = u.timing
  if (
    !hasKeyShape(timing, timingKeys) ||
    !isNullableString(timing.startedAt) ||
    !isNullableString(timing.completedAt) ||
    !isNullableNonNegativeNumber(timing.durationMs) ||
    timing.provenance !== "local_monotonic_clock"
  ) return false
  const provider = u.provider
  if (!hasKeyShape(provider, providerKeys) || !everyNullableString(provider, providerKeys.required)) return false
  const usage = u.usage
  if (
    !hasKeyShape(usage, usageKeys) ||
    (usage.availability !== "unavailable" && usage.availability !== "partial" && usage.availability !== "reported")
  ) return false
  for (let i = 0; i < SYNTHESIS_USAGE_KEYS.length; i++) {
    if (!isNullableNonNegativeNumber(usage[SYNTHESIS_USAGE_KEYS[i]])) return false
  }
  const provenance = usage.provenance
  return hasKeyShape(provenance, usageProvenanceKeys) && everyNullableString(provenance, SYNTHESIS_USAGE_KEYS)
}
