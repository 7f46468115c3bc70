/**
 * Builders for native selections and schema-v4 Summary receipts used by the
 * artifact-state tests. Receipts built here are valid unless a test breaks
 * them on purpose; selections come from the reference selector and every
 * other field is written out here, so nothing is computed by the code under
 * test.
 */
import * as RefCore from "@hypercarrier/rarebit/core"

export const SELECTOR_VERSION = "rarebit-selector-v1"

export const hex = (char: string): string => char.repeat(64)

export type Status = "ok" | "ineligible" | "inhibited" | "unavailable_overflow" | "failure"
export type Boundary = "owner_request" | "agent_settled" | "manual" | "session_start"

/** A branch entry as the Pi Session stores it. */
export interface BranchEntry {
  readonly type: "message"
  readonly id?: string
  readonly timestamp: string
  readonly message: {
    readonly role: "user" | "assistant" | "toolResult"
    readonly stopReason?: "stop" | "toolUse" | "error"
    readonly content: string
  }
}

export type Step = "user" | "continuation" | "stop" | "tool" | "error"

/** Turns a list of steps into branch entries with ids `e0`, `e1`, ... and the given texts. */
export const branchOf = (
  steps: ReadonlyArray<{ readonly step: Step; readonly text: string; readonly id?: string | null }>
): Array<BranchEntry> =>
  steps.map(({ id, step, text }, index) => {
    const entryId = id === undefined ? `e${index}` : id
    const timestamp = new Date(Date.UTC(2026, 6, 25, 10, 0, index)).toISOString()
    const message = step === "user"
      ? { role: "user" as const, content: text }
      : step === "tool"
      ? { role: "toolResult" as const, content: text }
      : {
        role: "assistant" as const,
        stopReason: step === "stop" ? "stop" as const : step === "continuation" ? "toolUse" as const : "error" as const,
        content: text
      }
    return entryId === null
      ? { type: "message", timestamp, message }
      : { type: "message", id: entryId, timestamp, message }
  })

/** The native selection the store reads: `selectRarebits` plus a top-level selector version. */
export const nativeSelectionOf = (branch: ReadonlyArray<BranchEntry>) => {
  const selection = RefCore.selectRarebits([...branch])
  return { ...selection, selectorVersion: selection.manifest.selectorVersion as string }
}

export type NativeSelectionFixture = ReturnType<typeof nativeSelectionOf>

export interface CompactSelection {
  readonly manifestHash: string
  readonly selectorVersion: string
  readonly occurrenceCount: number
  readonly uniquePayloadCount: number
  readonly latestUserSourceEntryId: string | null
}

/** The compact selection a receipt would have recorded for the branch as it was. */
export const compactOf = (branch: ReadonlyArray<BranchEntry>): CompactSelection => {
  const selection = RefCore.selectRarebits([...branch])
  return {
    manifestHash: selection.manifestHash,
    selectorVersion: selection.manifest.selectorVersion as string,
    occurrenceCount: selection.occurrences.length,
    uniquePayloadCount: selection.payloads.length,
    latestUserSourceEntryId:
      selection.occurrences.findLast((occurrence) => occurrence.role === "user" && occurrence.outcome === "user")
        ?.sourceEntryId ?? null
  }
}

/** The compact selection of the first `count` occurrences of a branch (a cut recorded earlier). */
export const compactPrefixOf = (branch: ReadonlyArray<BranchEntry>, count: number): CompactSelection => {
  const occurrences = RefCore.selectRarebits([...branch]).occurrences
  const end = count === 0 ? 0 : occurrences[count - 1]!.order + 1
  return compactOf(branch.slice(0, end))
}

export interface ReceiptOptions {
  readonly status?: Status
  readonly boundary?: Boundary
  readonly sessionId?: string
  readonly jobChar?: string
  readonly observedAt?: string
  readonly selection: CompactSelection
  readonly implementationVersion?: "hc-rarebit-summary-v4" | "hc-rarebit-summary-v5" | "hc-rarebit-summary-v6"
  readonly model?: { readonly provider: string; readonly id: string } | null
  readonly needsAttention?: boolean
}

/**
 * The synthesis record of a model call whose provider reported nothing, written
 * out as the reference's `extractRarebitSynthesisReceipt` builds it (same keys,
 * same order) rather than taken from the code under test.
 */
const unreportedSynthesis = (observedAt: string, requestedModel: ReceiptOptions["model"]) => {
  const usage = {
    inputTokens: null,
    outputTokens: null,
    totalTokens: null,
    cacheReadTokens: null,
    cacheWriteTokens: null,
    reasoningTokens: null,
    estimatedCostUsd: null
  }
  return {
    schemaVersion: 1,
    kind: "rarebit_model_synthesis",
    outcome: "response",
    requestedModel,
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
    usage: { availability: "unavailable", ...usage, provenance: { ...usage } }
  }
}

/** A valid schema-v4 Summary receipt with the given coordinates. */
export const receiptOf = (options: ReceiptOptions): Record<string, unknown> => {
  const {
    boundary = "agent_settled",
    implementationVersion = "hc-rarebit-summary-v6",
    jobChar = "e",
    model = { id: "model", provider: "test" },
    observedAt = "2026-07-25T10:00:00.000Z",
    selection,
    sessionId = "session-1",
    status = "ok"
  } = options
  const base = {
    schemaVersion: 4,
    type: "rarebit_summary",
    status,
    jobId: hex(jobChar),
    sessionId,
    branch: { leafId: "leaf", entryCount: selection.occurrenceCount, pathHash: hex("f") },
    observedAt,
    selection,
    lifecycleBoundary: boundary,
    implementationVersion,
    synthesisMode: "forced",
    inputCoveragePolicy: { strategy: "complete_or_explicit_overflow", maxPromptChars: 1000 },
    promptVersion: "rarebit-summary-v4",
    model,
    modelProvenance: { source: "test", status: "resolved" }
  }
  switch (status) {
    case "ok": {
      const owner = boundary === "owner_request"
      return {
        ...base,
        inputCoverage: {
          totalMessageCount: 2,
          includedMessageCount: 2,
          omittedMessageCount: 0,
          omittedTextChars: 0,
          promptChars: 10,
          complete: true
        },
        summary: "Prose that must never influence the state machine.",
        sessionStatus: owner ? "user_requested" : options.needsAttention ? "needs_attention" : "finished",
        statusReason: owner
          ? "owner_request_recorded"
          : options.needsAttention
          ? "decision"
          : "all_requests_accomplished",
        // The model exactly as given (null, or keys in any order) is what the receipt asked for.
        synthesis: unreportedSynthesis(observedAt, model)
      }
    }
    case "ineligible":
      return base
    case "inhibited":
      return {
        ...base,
        automaticSummaryPolicy: {
          contractVersion: "rarebit-automatic-summary-policy/1",
          decision: "inhibit",
          queryStatus: "inhibited",
          queryId: "query-1",
          provider: "policy",
          reason: "quiet",
          observedAt,
          validUntil: observedAt,
          queriedAt: observedAt,
          provenance: { identity: "id", generation: "gen", association: "assoc" }
        }
      }
    case "unavailable_overflow":
      return { ...base, overflow: { promptChars: 2, maxPromptChars: 1, strategy: "none" } }
    case "failure":
      return { ...base, retryable: true, error: { name: "Error", message: "technical failure" } }
  }
}

export const available = (selection: unknown, sessionId: unknown = "session-1") => ({
  availability: "available" as const,
  sessionId,
  selection
})
