/**
 * Builders for store tests: Pi Session files (v3: a header, then message
 * entries linked by `parentId`), valid schema-v4 Summary and Title receipts
 * for a branch, and the native observation the store derives from such a
 * Session. Selections come from the reference selector, so they are computed
 * independently of the code under test.
 */
import { ArtifactState as RefArtifactState, Core, Model } from "./Reference.js"

export type Json = Record<string, unknown>

const OBSERVED_AT = "2026-07-26T00:00:00.000Z"
const MODEL = { provider: "test", id: "model" }

/** A 64-hex job id from a small number, so tests can name jobs `jobId(1)`, `jobId(2)`. */
export const jobId = (n: number): string => n.toString(16).padStart(64, "0")

/** One message entry; `parentId` links it into the Session tree. */
export const entry = (
  id: string,
  role: "user" | "assistant",
  text: string,
  parentId: string | null = null
): Json => ({
  type: "message",
  id,
  parentId,
  timestamp: "2026-07-26T00:00:00.000Z",
  message: { role, content: text, ...(role === "assistant" ? { stopReason: "stop" } : {}) }
})

/** A linear branch: each entry's parent is the one before it. Ids are `e0`, `e1`, ... */
export const branchOf = (
  messages: ReadonlyArray<readonly [role: "user" | "assistant", text: string]>
): Array<Json> => messages.map(([role, text], index) => entry(`e${index}`, role, text, index === 0 ? null : `e${index - 1}`))

/** The branch sessions get unless a test says otherwise: one request and its answer. */
export const defaultBranch = (): Array<Json> => branchOf([["user", "first request"], ["assistant", "done"]])

/** A v3 Session file for `branch`, plus the branch itself. */
export const sessionText = (
  sessionId: string,
  branch: ReadonlyArray<Json> = defaultBranch()
): { readonly branch: ReadonlyArray<Json>; readonly text: string } => ({
  branch,
  text: [JSON.stringify({ type: "session", version: 3, id: sessionId }), ...branch.map((e) => JSON.stringify(e))]
    .join("\n") + "\n"
})

const branchRef = (branch: ReadonlyArray<Json>) => ({
  leafId: (branch.at(-1)?.id as string | undefined) ?? null,
  entryCount: branch.length,
  pathHash: Core.sha256(branch.map((value) => String(value?.id ?? "")))
})

const synthesis = () =>
  Model.extractRarebitSynthesisReceipt({}, {
    requestedModel: MODEL,
    startedAt: OBSERVED_AT,
    completedAt: OBSERVED_AT,
    durationMs: 0
  })

/** A valid `ok` Summary receipt for `branch`. `jobId` is a placeholder: settle replaces it. */
export const summaryReceipt = (branch: ReadonlyArray<Json>, sessionId: string, overrides: Json = {}): Json => {
  const selected = Core.selectRarebits([...branch])
  const latestUser = (selected.occurrences as Array<Json>).filter((value) => value.role === "user").at(-1)
  return {
    schemaVersion: 4,
    type: "rarebit_summary",
    status: "ok",
    jobId: "0".repeat(64),
    sessionId,
    branch: branchRef(branch),
    observedAt: OBSERVED_AT,
    selection: {
      manifestHash: selected.manifestHash,
      selectorVersion: selected.manifest.selectorVersion,
      occurrenceCount: selected.occurrences.length,
      uniquePayloadCount: selected.payloads.length,
      latestUserSourceEntryId: latestUser?.sourceEntryId ?? null
    },
    lifecycleBoundary: "manual",
    implementationVersion: "hc-rarebit-summary-v4",
    synthesisMode: "forced",
    inputCoveragePolicy: { strategy: "complete_or_explicit_overflow", maxPromptChars: 1_000 },
    promptVersion: "rarebit-summary-v4",
    model: MODEL,
    modelProvenance: { source: "test", status: "resolved" },
    summary: "ok",
    sessionStatus: "finished",
    statusReason: "all_requests_accomplished",
    synthesis: synthesis(),
    ...overrides
  }
}

/** A valid Title receipt (`proposal` unless overridden) for `branch`. */
export const titleReceipt = (branch: ReadonlyArray<Json>, sessionId: string, overrides: Json = {}): Json => {
  const selected = Core.selectRarebits([...branch])
  const firstUser = (selected.occurrences as Array<Json>).find((value) => value.role === "user")
  return {
    schemaVersion: 4,
    type: "rarebit_title",
    status: "proposal",
    jobId: "0".repeat(64),
    implementationVersion: "hc-rarebit-title-v4",
    sessionId,
    branch: branchRef(branch),
    selectionManifestHash: selected.manifestHash,
    titleEvidence: {
      provenance: "captured_interactive_rpc",
      sourceEntryId: (firstUser?.sourceEntryId as string | undefined) ?? null
    },
    promptVersion: "rarebit-title-v1",
    model: MODEL,
    modelProvenance: { source: "test", status: "resolved" },
    applicationMode: "proposal",
    priorTitle: null,
    title: "2026-07-26 Test title",
    observedAt: OBSERVED_AT,
    synthesis: synthesis(),
    ...overrides
  }
}

/** What the store observes of a readable Session with `branch`, as the reference's store builds it. */
export const nativeOf = (sessionId: string, branch: ReadonlyArray<Json>): Json => {
  const selection = Core.selectRarebits([...branch])
  return {
    availability: "available",
    sessionId,
    selection: { ...selection, selectorVersion: selection.manifest.selectorVersion }
  }
}

/** The reference's artifact-state projection, to compare the store's `artifactState` with. */
export const referenceProjection = (input: Json): unknown => RefArtifactState.projectRarebitArtifactState(input)
