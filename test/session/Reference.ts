/**
 * Typed handles on the reference package's Session and core modules, which
 * its shipped `types.d.ts` only partly describes. Tests only.
 */
import * as CoreModule from "@hypercarrier/rarebit/core"
import * as SessionModule from "@hypercarrier/rarebit/session"

export interface RefParsed {
  readonly header: Record<string, unknown>
  readonly entries: Array<unknown>
  readonly byId: Map<string, unknown>
  readonly linear: boolean
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
}

export interface RefSession {
  readonly RAREBIT_QUERY_SCHEMA_VERSION: number
  readonly parseNativeSession: (content: string, source?: string) => RefParsed
  readonly resolveActiveBranch: (parsed: unknown, source?: string) => Array<unknown>
  readonly resolveRarebitSessionFile: (reference: unknown, options?: { sessionRoot?: string }) => Promise<string>
  readonly readRarebitSession: (reference: unknown, options?: { sessionRoot?: string }) => Promise<any>
}

export const Core = CoreModule as unknown as RefCore
export const Session = SessionModule as unknown as RefSession

/** The seed store's native observation, built on the reference reader as the seed builds it. */
export const referenceNativeObservation = async (sessionFile: string, sessionRoot: string): Promise<unknown> => {
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
