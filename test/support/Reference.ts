/**
 * Typed handles on the reference package (`@hypercarrier/rarebit`) for the
 * interoperability tests, plus builders for the Sessions and receipts they
 * write. Tests only: nothing under `src/` may import this.
 *
 * The store and model modules have no subpath export, so they are imported
 * by path; the reference's own service module imports the same store file,
 * so `Service.processRarebitSummary` writes through the very `Store` below.
 */
import * as ArtifactModule from "@hypercarrier/rarebit/artifact-state"
import * as CoreModule from "@hypercarrier/rarebit/core"
import * as ServiceModule from "@hypercarrier/rarebit/service"
import * as SessionModule from "@hypercarrier/rarebit/session"
import type { RarebitNativeObservation } from "@hypercarrier/rarebit/types"
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import * as ModelModule from "../../node_modules/@hypercarrier/rarebit/src/rarebit-model.mjs"
import * as StoreModule from "../../node_modules/@hypercarrier/rarebit/src/rarebit-store.mjs"
import type { OkSummaryReceipt } from "../../src/protocol/SummaryReceipt.js"
import type { TitledTitleReceipt } from "../../src/protocol/TitleReceipt.js"
import * as Receipts from "../../stress/receipts.mjs"

type Json = Record<string, unknown>

/** The reference store's Promise API, the one ours must match. */
export interface RefStore {
  readonly DEFAULT_RAREBIT_ROOT: string
  readonly DEFAULT_RAREBIT_SESSION_ROOT: string
  readonly DEFAULT_RAREBIT_LEASE_MS: number
  readonly RAREBIT_SIDECAR_PROTOCOL_VERSION: number
  readonly rarebitMaterializationPath: (sessionFile: unknown, options?: Json) => string
  readonly readRarebitCurrent: (input?: Json) => Promise<any>
  readonly readRarebitHistory: (input?: Json) => Promise<any>
  readonly reserveRarebitJob: (input?: Json) => Promise<any>
  readonly settleRarebitJob: (reservation: unknown, record: unknown) => Promise<any>
  readonly releaseRarebitJob: (reservation: unknown) => Promise<void>
}

export interface RefCore {
  readonly RAREBIT_SELECTOR_VERSION: string
  readonly RAREBIT_MEASUREMENT_VERSION: string
  readonly RAREBIT_JOB_IDENTITY_VERSION: string
  readonly DEFAULT_RAREBIT_SUMMARY_POLICY: Readonly<Record<string, unknown>>
  readonly messageTextBlocks: (message: unknown) => Array<string>
  readonly rarebitMetadata: (entry: unknown, order?: number) => unknown
  readonly rarebitText: (entry: unknown) => string
  readonly selectRarebits: (branch: unknown) => any
  readonly measureRarebits: (branch: unknown, selection?: unknown) => unknown
  readonly normalizeRarebitSummaryPolicy: (policy?: unknown) => unknown
  readonly rarebitJobIdentity: (input?: unknown) => string
  readonly sha256: (value: unknown) => string
  readonly stableJson: (value: unknown) => string
}

/** The reference's parsed Session, as `parseNativeSession` returns it. */
export interface RefParsed {
  readonly header: Record<string, unknown>
  readonly entries: Array<unknown>
  readonly byId: Map<string, unknown>
  readonly linear: boolean
}

export interface RefSession {
  readonly RAREBIT_QUERY_SCHEMA_VERSION: number
  readonly parseNativeSession: (content: string, source?: string) => RefParsed
  readonly resolveActiveBranch: (parsed: unknown, source?: string) => Array<unknown>
  readonly resolveRarebitSessionFile: (reference: unknown, options?: { sessionRoot?: string }) => Promise<string>
  readonly readRarebitSession: (reference: unknown, options?: { sessionRoot?: string }) => Promise<any>
}

export interface RefArtifactState {
  readonly validateRarebitArtifactReceipt: (record: unknown) => { readonly valid: boolean }
  readonly validateRarebitTitleReceipt: (record: unknown) => { readonly valid: boolean }
  readonly projectRarebitArtifactState: (input?: unknown) => any
}

export interface RefService {
  readonly processRarebitSummary: (ctx: unknown, config?: Json) => Promise<any>
  readonly processRarebitTitle: (ctx: unknown, config?: Json) => Promise<any>
}

export interface RefModel {
  readonly extractRarebitSynthesisReceipt: (response: unknown, options?: Json) => Json
}

export const Store = StoreModule as unknown as RefStore
export const Core = CoreModule as unknown as RefCore
export const Session = SessionModule as unknown as RefSession
export const ArtifactState = ArtifactModule as unknown as RefArtifactState
export const Service = ServiceModule as unknown as RefService
export const Model = ModelModule as unknown as RefModel

/** Absolute path of the reference store module, for child processes. */
export const referenceStorePath = new URL(
  "../../node_modules/@hypercarrier/rarebit/src/rarebit-store.mjs",
  import.meta.url
).pathname

// ---------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------

/** A Pi message entry as the reference's own tests write them. */
export const entry = (id: string, role: "user" | "assistant", text: string): Json => ({
  id,
  type: "message",
  message: { role, content: text, ...(role === "assistant" ? { stopReason: "stop" } : {}) }
})

/** A linear Session file: header line, then one line per entry. */
export const sessionText = (sessionId: string, branch: ReadonlyArray<Json>): string =>
  [JSON.stringify({ type: "session", id: sessionId }), ...branch.map((value) => JSON.stringify(value))].join("\n") +
  "\n"

export const writeSession = async (file: string, sessionId: string, branch: ReadonlyArray<Json>): Promise<void> => {
  await mkdir(dirname(file), { recursive: true })
  await writeFile(file, sessionText(sessionId, branch))
}

/** One temporary root holding a Session root and a Rarebit root. */
export interface Roots {
  readonly root: string
  readonly sessionRoot: string
  readonly rarebitRoot: string
  /** A Session file under the Session root (created by `writeSession`). */
  readonly sessionFile: string
  readonly location: { readonly sessionRoot: string; readonly rarebitRoot: string }
  readonly cleanup: () => Promise<void>
}

export const makeRoots = async (prefix = "rarebit-interop-"): Promise<Roots> => {
  const root = await mkdtemp(join(tmpdir(), prefix))
  const sessionRoot = join(root, "sessions")
  const rarebitRoot = join(root, "rarebit")
  const sessionFile = join(sessionRoot, "project", "trace.jsonl")
  await mkdir(dirname(sessionFile), { recursive: true })
  return {
    root,
    sessionRoot,
    rarebitRoot,
    sessionFile,
    location: { sessionRoot, rarebitRoot },
    cleanup: () => rm(root, { recursive: true, force: true })
  }
}

/** The seed's native observation of a Session, built on the reference reader. */
export const referenceNative = async (sessionFile: string, sessionRoot: string): Promise<RarebitNativeObservation> => {
  try {
    const session = await Session.readRarebitSession(sessionFile, { sessionRoot })
    return {
      availability: "available",
      sessionId: session.session.id,
      selection: { ...session.selection, selectorVersion: session.selection.manifest.selectorVersion }
    }
  } catch (error) {
    return { availability: (error as { code?: unknown } | null)?.code === "ENOENT" ? "missing" : "unreadable" }
  }
}

// ---------------------------------------------------------------------------
// Receipts
// ---------------------------------------------------------------------------

const MODEL = { provider: "test", id: "model" }
const TEST_RECEIPT = { model: MODEL, source: "test" }

/** A 64-hex job id from a small number, so tests can reuse ids on purpose. */
export const jobId = (n: number): string => n.toString(16).padStart(64, "0")

/**
 * A valid `ok` Summary receipt for `branch`, shaped like the reference test
 * suite's compact receipt. `jobId` is a placeholder: settle replaces it.
 *
 * Built by the stress kit's plain-JavaScript builders, which make exactly
 * this kind of receipt (the interop and fixture tests validate them with the
 * reference), so the type is asserted here rather than derived.
 */
export const summaryReceipt = (
  branch: ReadonlyArray<Json>,
  sessionId: string,
  overrides: Partial<OkSummaryReceipt> = {}
): OkSummaryReceipt =>
  ({
    ...Receipts.summaryReceipt(branch, sessionId, { ...TEST_RECEIPT, text: "ok" }),
    ...overrides
  }) as OkSummaryReceipt

/** A valid Title receipt (`proposal` unless overridden) for `branch`. */
export const titleReceipt = (
  branch: ReadonlyArray<Json>,
  sessionId: string,
  overrides: Partial<TitledTitleReceipt> = {}
): TitledTitleReceipt =>
  ({
    ...Receipts.titleReceipt(branch, sessionId, { ...TEST_RECEIPT, text: "2026-07-26 Test title" }),
    ...overrides
  }) as TitledTitleReceipt

// ---------------------------------------------------------------------------
// The reference's service, writing through its own store
// ---------------------------------------------------------------------------

const sessionContext = (sessionFile: string, sessionId: string, branch: ReadonlyArray<Json>) => ({
  sessionManager: {
    getHeader: () => ({ id: sessionId }),
    getSessionFile: () => sessionFile,
    getBranch: () => branch
  }
})

/**
 * Writes the Session and derives a Summary through the reference's
 * `processRarebitSummary` with a scripted model, as its own tests do.
 */
export const referenceSummary = async (
  roots: Roots,
  sessionId: string,
  branch: ReadonlyArray<Json>,
  options: Json = {}
): Promise<any> => {
  await writeSession(roots.sessionFile, sessionId, branch)
  return Service.processRarebitSummary(sessionContext(roots.sessionFile, sessionId, branch), {
    ...roots.location,
    summaryPolicy: { minTotalLength: 0, maxRarebitRatio: 1 },
    model: MODEL,
    modelClient: {
      complete: async () =>
        JSON.stringify({ summary: "ok", sessionStatus: "finished", statusReason: "all_requests_accomplished" })
    },
    ...options
  })
}

/** Derives a Title through the reference's `processRarebitTitle` (the Session must exist). */
export const referenceTitle = async (
  roots: Roots,
  sessionId: string,
  branch: ReadonlyArray<Json>,
  sourceEntryId: string,
  options: Json = {}
): Promise<any> =>
  Service.processRarebitTitle(sessionContext(roots.sessionFile, sessionId, branch), {
    ...roots.location,
    sourceEntryId,
    titleDate: "2026-07-26",
    model: MODEL,
    modelClient: { complete: async () => ({ text: "Compact protocol" }) },
    ...options
  })

// ---------------------------------------------------------------------------
// Outcomes
// ---------------------------------------------------------------------------

/** How a call ended, in a form two implementations can be compared by. */
export type Outcome =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly errorClass: string; readonly message: string; readonly code?: unknown }

/** Runs `f`, catching a synchronous throw or a rejection into an `Outcome`. */
export const outcomeOf = async (f: () => unknown): Promise<Outcome> => {
  try {
    return { ok: true, value: await f() }
  } catch (error) {
    const e = error as { constructor?: { name?: string }; message?: unknown; code?: unknown } | null
    return {
      ok: false,
      errorClass: e?.constructor?.name ?? typeof error,
      message: String(e?.message ?? error),
      ...(e?.code !== undefined ? { code: e.code } : {})
    }
  }
}
