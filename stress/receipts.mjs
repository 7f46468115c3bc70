/**
 * Receipts for the stress workers, derived from a Session as it is on disk,
 * shaped like the reference test suite's compact receipts. Each one names
 * the lease that wrote it (`<impl>:<worker>:<leaseToken>` in its free text),
 * so the checker can tell which lease owner wrote every receipt it finds.
 *
 * The builders are shared with the TypeScript tests (`test/support/Reference.ts`),
 * so this module imports only the reference's: a reference stress worker must
 * not load our store.
 */
import * as CoreModule from "@hypercarrier/rarebit/core"
import * as SessionModule from "@hypercarrier/rarebit/session"
import { extractRarebitSynthesisReceipt } from "../node_modules/@hypercarrier/rarebit/src/rarebit-model.mjs"

/** @import { RarebitModel } from "@hypercarrier/rarebit/types" */

// The reference declares every subpath with one `types.d.ts`, which lacks `sha256` and
// `readRarebitSession` and asks for a mutable branch that `selectRarebits` only reads.
const { selectRarebits, sha256 } =
  /**
   * @type {{
   *   readonly selectRarebits: (branch: ReadonlyArray<unknown>) => ReturnType<typeof CoreModule.selectRarebits>
   *   readonly sha256: (value: unknown) => string
   * }}
   */
  (/** @type {unknown} */ (CoreModule))
const { readRarebitSession } =
  /**
   * @type {{
   *   readonly readRarebitSession: (
   *     reference: string,
   *     options: { readonly sessionRoot: string }
   *   ) => Promise<{ readonly branch: ReadonlyArray<Entry>; readonly session: { readonly id: string } }>
   * }}
   */
  (/** @type {unknown} */ (SessionModule))

/**
 * A Session entry on the active branch, as the reference parses it.
 * @typedef {Readonly<Record<string, unknown>>} Entry
 */

/**
 * Who a receipt says derived it, and the text it carries (`summary` or `title`).
 * @typedef {{
 *   readonly model: RarebitModel
 *   readonly source: string
 *   readonly text: string
 * }} ReceiptSource
 */

/** @typedef {"ours" | "reference"} Impl */

/**
 * The lease a receipt names.
 * @typedef {{ readonly impl: Impl; readonly worker: number; readonly token: string }} Lease
 */

const OBSERVED_AT = "2026-07-26T00:00:00.000Z"
const STRESS = { model: { provider: "stress", id: "model" }, source: "stress" }

/** @param {RarebitModel} model */
const synthesis = (model) =>
  extractRarebitSynthesisReceipt({}, {
    requestedModel: model,
    startedAt: OBSERVED_AT,
    completedAt: OBSERVED_AT,
    durationMs: 0
  })

/** @param {ReadonlyArray<Entry>} branch */
const branchRef = (branch) => ({
  leafId: branch.at(-1)?.id ?? null,
  entryCount: branch.length,
  pathHash: sha256(branch.map((entry) => String(entry?.id ?? "")))
})

/**
 * A valid `ok` Summary receipt for `branch`, whose `summary` is `text`.
 * `jobId` is a placeholder: settle replaces it.
 * @param {ReadonlyArray<Entry>} branch
 * @param {string} sessionId
 * @param {ReceiptSource} source
 */
export const summaryReceipt = (branch, sessionId, { model, source, text }) => {
  const selected = selectRarebits(branch)
  const latestUser = selected.occurrences.findLast((occurrence) => occurrence.role === "user")
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
    model,
    modelProvenance: { source, status: "resolved" },
    summary: text,
    sessionStatus: "finished",
    statusReason: "all_requests_accomplished",
    synthesis: synthesis(model)
  }
}

/**
 * A valid `proposal` Title receipt for `branch`, whose `title` is `text`.
 * @param {ReadonlyArray<Entry>} branch
 * @param {string} sessionId
 * @param {ReceiptSource} source
 */
export const titleReceipt = (branch, sessionId, { model, source, text }) => {
  const selected = selectRarebits(branch)
  const firstUser = selected.occurrences.find((occurrence) => occurrence.role === "user")
  return {
    schemaVersion: 4,
    type: "rarebit_title",
    status: "proposal",
    jobId: "0".repeat(64),
    implementationVersion: "hc-rarebit-title-v4",
    sessionId,
    branch: branchRef(branch),
    selectionManifestHash: selected.manifestHash,
    titleEvidence: { provenance: "captured_interactive_rpc", sourceEntryId: firstUser?.sourceEntryId ?? null },
    promptVersion: "rarebit-title-v1",
    model,
    modelProvenance: { source, status: "resolved" },
    applicationMode: "proposal",
    priorTitle: null,
    title: text,
    observedAt: OBSERVED_AT,
    synthesis: synthesis(model)
  }
}

/**
 * The lease a receipt names, or `undefined`.
 * @param {unknown} record
 * @returns {Lease | undefined}
 */
export const leaseOf = (record) => {
  const fields = typeof record === "object" && record !== null
    ? /** @type {Readonly<Record<string, unknown>>} */ (record)
    : {}
  const text = fields.type === "rarebit_title" ? fields.title : fields.summary
  const match = typeof text === "string" ? /^(ours|reference):(\d+):([a-f0-9]+)$/.exec(text) : null
  if (match === null) return undefined
  // The pattern admits only the two implementations' names.
  return { impl: /** @type {Impl} */ (match[1]), worker: Number(match[2]), token: match[3] }
}

/**
 * A receipt of `kind` for the Session's active branch now, signed with
 * `signature`; `undefined` when the Session cannot be read (a torn append).
 * @param {string} sessionFile
 * @param {string} sessionRoot
 * @param {"summary" | "title"} kind
 * @param {string} signature
 */
export const receiptFor = async (sessionFile, sessionRoot, kind, signature) => {
  let session
  try {
    session = await readRarebitSession(sessionFile, { sessionRoot })
  } catch {
    return undefined
  }
  const build = kind === "title" ? titleReceipt : summaryReceipt
  return build(session.branch, session.session.id, { ...STRESS, text: signature })
}
