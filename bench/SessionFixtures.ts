/**
 * The native observation of a fixture Session, as the reference computes it,
 * cached next to the Session (`<file>.native.json`, valid while the size
 * matches), so rows can write sidecars and receipts that are current for it.
 *
 * @since 0.1.0
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { sizeOf } from "./Fixtures.js"
import { loadReferenceSession } from "./Implementations.js"

export interface NativeSummary {
  readonly native: unknown
  readonly manifestHash: string
  readonly occurrenceCount: number
}

export const nativeOf = async (sessionFile: string, sessionRoot: string): Promise<NativeSummary> => {
  const cache = `${sessionFile}.native.json`
  if (existsSync(cache) && existsSync(`${sessionFile}.fixture.json`)) {
    const stamp = JSON.parse(readFileSync(cache, "utf8")) as NativeSummary & { readonly size: number }
    if (stamp.size === sizeOf(sessionFile)) return stamp
  }
  const session = await (await loadReferenceSession()).readRarebitSession(sessionFile, { sessionRoot })
  const summary = {
    native: {
      availability: "available",
      sessionId: session.session.id,
      selection: { ...session.selection, selectorVersion: session.selection.manifest.selectorVersion }
    },
    manifestHash: session.selection.manifestHash as string,
    occurrenceCount: session.selection.occurrences.length as number
  }
  writeFileSync(cache, JSON.stringify({ ...summary, size: sizeOf(sessionFile) }))
  return summary
}
