/**
 * The deterministic identity of one Rarebit model operation (a summary or a
 * title of one selection), and the summary eligibility policy it hashes.
 *
 * The identity is the SHA-256 of the `stableJson` of every input that could
 * change the model's output: operation, mode, input policy, lifecycle
 * boundary, Session id, branch, selection manifest hash, normalized policy,
 * prompt version and model. Two workers given the same inputs compute the same
 * job id, which is what makes reservation deduplicate work. Invalid inputs throw
 * the reference's error classes with its messages, since plain callers see them.
 *
 * @since 0.1.0
 */
import { sha256 } from "../protocol/CanonicalJson.js"
import { RAREBIT_MEASUREMENT_VERSION } from "./Measurement.js"

/**
 * The job identity version hashed into every job id.
 *
 * @category constants
 * @since 0.1.0
 */
export const RAREBIT_JOB_IDENTITY_VERSION = "rarebit-job-identity-v2" as const

/**
 * A summary eligibility policy as callers pass it: any subset of the fields,
 * overriding the defaults.
 *
 * @category models
 * @since 0.1.0
 */
export interface RarebitSummaryPolicy {
  readonly policyVersion?: string | undefined
  readonly measurementVersion?: string | undefined
  readonly minTotalLength?: number | undefined
  readonly minTotalLengthUnit?: "estimated_tokens_chars_div_4_ceil" | undefined
  readonly maxRarebitRatio?: number | undefined
}

/**
 * A policy after normalization: the defaults overlaid with the caller's
 * fields (extra fields are kept, as the reference keeps them).
 *
 * @category models
 * @since 0.1.0
 */
export interface NormalizedRarebitSummaryPolicy {
  readonly policyVersion: string
  readonly measurementVersion: typeof RAREBIT_MEASUREMENT_VERSION
  readonly minTotalLength: number
  readonly minTotalLengthUnit: "estimated_tokens_chars_div_4_ceil"
  readonly maxRarebitRatio: number
  readonly [field: string]: unknown
}

/**
 * The default summary eligibility policy (frozen).
 *
 * @category constants
 * @since 0.1.0
 */
export const DEFAULT_RAREBIT_SUMMARY_POLICY: Readonly<{
  policyVersion: "rarebit-summary-eligibility-v1"
  measurementVersion: typeof RAREBIT_MEASUREMENT_VERSION
  minTotalLength: 80_000
  minTotalLengthUnit: "estimated_tokens_chars_div_4_ceil"
  maxRarebitRatio: 0.4
}> = Object.freeze({
  policyVersion: "rarebit-summary-eligibility-v1",
  measurementVersion: RAREBIT_MEASUREMENT_VERSION,
  minTotalLength: 80_000,
  minTotalLengthUnit: "estimated_tokens_chars_div_4_ceil",
  maxRarebitRatio: 0.4
})

const finiteNonNegative = (value: unknown, name: string): number => {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new TypeError(`${name} must be a finite non-negative number`)
  }
  return value
}

/**
 * Overlays a policy on the defaults and checks it.
 *
 * **Details**
 *
 * Throws `TypeError` for a negative or non-finite `minTotalLength` or
 * `maxRarebitRatio` and for an empty `policyVersion`, `RangeError` for a ratio
 * above 1, and `Error` for an unsupported measurement version or length unit.
 *
 * @category policies
 * @since 0.1.0
 */
export const normalizeRarebitSummaryPolicy = (
  policy: RarebitSummaryPolicy | object = {}
): NormalizedRarebitSummaryPolicy => {
  // Spread exactly like the reference: own enumerable keys of whatever was
  // passed (even a string's indices) land in the hashed policy.
  const candidate: Record<string, unknown> = { ...DEFAULT_RAREBIT_SUMMARY_POLICY, ...policy }
  const minTotalLength = finiteNonNegative(candidate.minTotalLength, "minTotalLength")
  const maxRarebitRatio = finiteNonNegative(candidate.maxRarebitRatio, "maxRarebitRatio")
  if (maxRarebitRatio > 1) throw new RangeError("maxRarebitRatio must not exceed 1")
  if (typeof candidate.policyVersion !== "string" || !candidate.policyVersion) {
    throw new TypeError("policyVersion is required")
  }
  if (candidate.measurementVersion !== RAREBIT_MEASUREMENT_VERSION) {
    throw new Error(`Unsupported Rarebit measurement version: ${candidate.measurementVersion}`)
  }
  if (candidate.minTotalLengthUnit !== "estimated_tokens_chars_div_4_ceil") {
    throw new Error(`Unsupported Rarebit length unit: ${candidate.minTotalLengthUnit}`)
  }
  return { ...candidate, minTotalLength, maxRarebitRatio } as NormalizedRarebitSummaryPolicy
}

/**
 * The inputs of a job identity.
 *
 * @category models
 * @since 0.1.0
 */
export interface RarebitJobIdentityInput {
  readonly operation: "summary" | "title"
  readonly mode?: unknown
  readonly inputPolicy?: unknown
  readonly lifecycleBoundary?: unknown
  readonly sessionId: string
  readonly branch?: unknown
  readonly selection: { readonly manifestHash: string }
  readonly policy?: RarebitSummaryPolicy | object | null | undefined
  readonly promptVersion?: string | null | undefined
  readonly model?: unknown
}

/**
 * The job id (64 lower-case hex digits) of one model operation.
 *
 * **Details**
 *
 * Absent optional fields hash as `null`. A non-null `policy` is normalized
 * first, so its errors surface here too.
 *
 * **Gotchas**
 *
 * Throws `TypeError` when `operation` is not "summary" or "title", when
 * `sessionId` is not a non-empty string, or when `selection.manifestHash` is
 * missing.
 *
 * @category identities
 * @since 0.1.0
 */
export const rarebitJobIdentity = (
  {
    operation,
    mode = null,
    inputPolicy = null,
    lifecycleBoundary = null,
    sessionId,
    branch,
    selection,
    policy = null,
    promptVersion,
    model = null
  }: RarebitJobIdentityInput = {} as RarebitJobIdentityInput
): string => {
  if (operation !== "summary" && operation !== "title") {
    throw new TypeError("Rarebit job operation must be summary or title")
  }
  if (typeof sessionId !== "string" || !sessionId) throw new TypeError("sessionId is required")
  if (!selection?.manifestHash) throw new TypeError("Rarebit selection manifestHash is required")
  return sha256({
    version: RAREBIT_JOB_IDENTITY_VERSION,
    operation,
    mode,
    inputPolicy,
    lifecycleBoundary,
    sessionId,
    branch: branch ?? null,
    selectionManifestHash: selection.manifestHash,
    policy: policy === null ? null : normalizeRarebitSummaryPolicy(policy),
    promptVersion: promptVersion ?? null,
    model
  })
}
