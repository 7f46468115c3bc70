/**
 * What the artifact-state projection reads of a Session, and nothing more:
 * its id and its selection's manifest (occurrences and payloads without
 * their text), manifest hash and selector version.
 *
 * The Session cache keeps this, and only this (as plain objects), for an
 * idle Session that a store polls: a `readCurrent` reports the state of the Session's receipts
 * against its selection, which never needs the selected texts, the branch's
 * tree or the renderings kept to extend the selection. Those are most of
 * what a Session's full parse keeps (about 14 KiB of the benchmark's 15–110
 * KiB Sessions against about 2 KiB here).
 *
 * Guarantees: the evidence of a projection answers every question of the
 * artifact-state projection (`isValidNativeSelection`, `exactSelectionApplies`,
 * `requestPrefixApplies`, the settlement-pending scan) exactly as the full
 * selection does: those drop or ignore the texts, and the manifest lists the
 * same occurrences and payloads in the same order with the same fields.
 * Pure; its lists are never changed after they are made.
 *
 * @since 0.1.0
 */
import { registerOwnEvidence } from "../protocol/internal/OwnEvidence.js"
import type { RarebitManifestOccurrence } from "./Selector.js"
import type { SessionProjection } from "./SessionProjection.js"

/**
 * A selection as the artifact-state projection reads it: the manifest's
 * occurrences and payloads, without the texts.
 *
 * @category models
 * @since 0.1.0
 */
export interface EvidenceSelection {
  readonly occurrences: ReadonlyArray<RarebitManifestOccurrence>
  readonly payloads: ReadonlyArray<{ readonly contentHash: string; readonly occurrenceIds: ReadonlyArray<string> }>
  readonly manifestHash: string
  readonly selectorVersion: string
}

/**
 * What the store observes of a native Session for its artifact state:
 * available with its id and `EvidenceSelection`, or missing or unreadable.
 * Assignable to the projection's `NativeObservation`.
 *
 * @category models
 * @since 0.1.0
 */
export type SessionEvidence =
  | {
    readonly availability: "available"
    readonly sessionId: string
    readonly selection: EvidenceSelection
  }
  | { readonly availability: "missing" }
  | { readonly availability: "unreadable" }

/**
 * Evidence of a Session that could be read.
 *
 * @category models
 * @since 0.1.0
 */
export type AvailableEvidence = Extract<SessionEvidence, { readonly availability: "available" }>

/**
 * The evidence of a Session's projection. Shares the manifest's lists,
 * which no later result changes (a selection extended is a copy).
 *
 * @category constructors
 * @since 0.1.0
 */
export const evidenceOf = ({ selection, session }: SessionProjection): AvailableEvidence => ({
  availability: "available",
  sessionId: session.id,
  selection: {
    // Registered, so that the projection remembers its verdict on the list as it does on the full one.
    occurrences: registerOwnEvidence(selection.manifest.occurrences),
    payloads: selection.manifest.payloads,
    manifestHash: selection.manifestHash,
    selectorVersion: selection.manifest.selectorVersion
  }
})
