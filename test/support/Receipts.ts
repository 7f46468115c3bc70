/**
 * Builders for store tests: Pi Session files (v3: a header, then message
 * entries linked by `parentId`), valid schema-v4 Summary and Title receipts
 * for a branch, and the native observation the store derives from such a
 * Session. Selections come from the reference selector, so they are computed
 * independently of the code under test.
 */
import type { ReceiptInput } from "../../src/protocol/Receipt.js"
import { ArtifactState as RefArtifactState, Core } from "./Reference.js"

export type Json = Record<string, unknown>

/**
 * A value passed where the store's types ask for something else, as a
 * JavaScript caller may pass it: the types do not vouch for it, so the
 * store's run-time checks decide. For tests of those checks.
 */
export const fromPlainCaller = <A = ReceiptInput>(value: unknown): A => value as A

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
): Array<Json> =>
  messages.map(([role, text], index) => entry(`e${index}`, role, text, index === 0 ? null : `e${index - 1}`))

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

/**
 * Valid receipts for a branch, the same builders the interop tests use (reference-derived, so independent of our
 * selector).
 */
export { summaryReceipt, titleReceipt } from "./Reference.js"

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
