/**
 * Valid schema-v4 receipts for tests and demos, built from a Session branch.
 *
 * A worker's real receipts come from a model call; tests of programs that
 * use the store need receipts the store accepts without one. These builders
 * derive every evidence field (branch reference, compact selection, title
 * evidence) from the branch with this package's own selector, so a summary
 * built for a Session's whole active branch is that Session's semantic
 * current summary and gets a head when settled. Pure: no disk, no clock.
 *
 * @since 0.1.0
 */
import { sha256 } from "../protocol/CanonicalJson.js"
import type { BranchRef, SYNTHESIS_USAGE_KEYS, SynthesisReceipt } from "../protocol/ReceiptParts.js"
import type { OkSummaryReceipt } from "../protocol/SummaryReceipt.js"
import type { TitledTitleReceipt } from "../protocol/TitleReceipt.js"
import { selectRarebits } from "../session/Selector.js"

/** A branch as `Session.readSession` returns it: entries as Pi wrote them. */
type Branch = ReadonlyArray<unknown>

const idOf = (entry: unknown): unknown =>
  entry === null || typeof entry !== "object" ? undefined : (entry as { readonly id?: unknown }).id

/** The model the receipts name unless told otherwise. @category constants @since 0.1.0 */
export const TEST_MODEL = { provider: "test", id: "test-model" } as const

/** Options shared by both builders. @category models @since 0.1.0 */
export interface ReceiptOptions {
  /** The Session id the receipt belongs to. */
  readonly sessionId: string
  /** When the receipt was made (an ISO timestamp). */
  readonly observedAt: string
  /** A placeholder until settle replaces it with the reservation's. */
  readonly jobId?: string | undefined
  readonly model?: { readonly provider: string; readonly id: string } | undefined
  /** `modelProvenance.source`. */
  readonly source?: string | undefined
}

/**
 * A synthesis record for a model call whose provider reported nothing.
 *
 * @category constructors
 * @since 0.1.0
 */
export const unreportedSynthesis = (
  observedAt: string,
  model: { readonly provider: string; readonly id: string } = TEST_MODEL
): SynthesisReceipt => {
  const nulls = {
    inputTokens: null,
    outputTokens: null,
    totalTokens: null,
    cacheReadTokens: null,
    cacheWriteTokens: null,
    reasoningTokens: null,
    estimatedCostUsd: null
  } satisfies Record<(typeof SYNTHESIS_USAGE_KEYS)[number], null>
  return {
    schemaVersion: 1,
    kind: "rarebit_model_synthesis",
    outcome: "response",
    requestedModel: { provider: model.provider, id: model.id },
    timing: { startedAt: observedAt, completedAt: observedAt, durationMs: 0, provenance: "local_monotonic_clock" },
    provider: {
      responseProvider: null,
      responseProviderSource: null,
      responseModel: null,
      responseModelSource: null,
      responseId: null,
      responseIdSource: null,
      requestId: null,
      requestIdSource: null
    },
    usage: { availability: "unavailable", ...nulls, provenance: { ...nulls } }
  }
}

/**
 * The `branch` reference of a receipt: leaf id, entry count and the hash of
 * the entry ids along the branch.
 *
 * @category constructors
 * @since 0.1.0
 */
export const branchReference = (branch: Branch): BranchRef => {
  const leafId = idOf(branch.at(-1))
  return {
    leafId: typeof leafId === "string" ? leafId : null,
    entryCount: branch.length,
    pathHash: sha256(branch.map((entry) => String(idOf(entry) ?? "")))
  }
}

const latestUserEntryId = (branch: Branch): string | null => {
  const users = selectRarebits(branch).occurrences.filter((occurrence) => occurrence.outcome === "user")
  return users.at(-1)?.sourceEntryId ?? null
}

/**
 * A valid `ok` Summary receipt (manual boundary, finished) for `branch`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const summaryReceipt = (
  branch: Branch,
  options: ReceiptOptions & { readonly summary: string }
): OkSummaryReceipt => {
  const selection = selectRarebits(branch)
  const model = options.model ?? TEST_MODEL
  return {
    schemaVersion: 4,
    type: "rarebit_summary",
    status: "ok",
    jobId: options.jobId ?? "0".repeat(64),
    sessionId: options.sessionId,
    branch: branchReference(branch),
    observedAt: options.observedAt,
    selection: {
      manifestHash: selection.manifestHash,
      selectorVersion: selection.manifest.selectorVersion,
      occurrenceCount: selection.occurrences.length,
      uniquePayloadCount: selection.payloads.length,
      latestUserSourceEntryId: latestUserEntryId(branch)
    },
    lifecycleBoundary: "manual",
    implementationVersion: "hc-rarebit-summary-v4",
    synthesisMode: "forced",
    inputCoveragePolicy: { strategy: "complete_or_explicit_overflow", maxPromptChars: 12_000 },
    promptVersion: "rarebit-summary-v4",
    model: { provider: model.provider, id: model.id },
    modelProvenance: { source: options.source ?? "test", status: "resolved" },
    summary: options.summary,
    sessionStatus: "finished",
    statusReason: "all_requests_accomplished",
    synthesis: unreportedSynthesis(options.observedAt, model)
  }
}

/**
 * A valid Title proposal receipt for `branch`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const titleReceipt = (
  branch: Branch,
  options: ReceiptOptions & { readonly title: string }
): TitledTitleReceipt => {
  const model = options.model ?? TEST_MODEL
  return {
    schemaVersion: 4,
    type: "rarebit_title",
    status: "proposal",
    jobId: options.jobId ?? "0".repeat(64),
    implementationVersion: "hc-rarebit-title-v4",
    sessionId: options.sessionId,
    branch: branchReference(branch),
    selectionManifestHash: selectRarebits(branch).manifestHash,
    titleEvidence: { provenance: options.source ?? "test", sourceEntryId: latestUserEntryId(branch) },
    promptVersion: "rarebit-title-v4",
    model: { provider: model.provider, id: model.id },
    modelProvenance: { source: options.source ?? "test", status: "resolved" },
    applicationMode: "proposal",
    priorTitle: null,
    title: options.title,
    observedAt: options.observedAt,
    synthesis: unreportedSynthesis(options.observedAt, model)
  }
}
