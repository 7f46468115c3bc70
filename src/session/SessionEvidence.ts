/**
 * What the artifact-state projection reads of a Session, and nothing more:
 * its id and its selection's manifest (occurrences and payloads without
 * their text), manifest hash and selector version.
 *
 * The Session cache keeps this, and only this, for a Session at rest that a
 * store polls: a `readCurrent` reports the state of the Session's receipts
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

/**
 * Evidence as the Session cache keeps it for a Session at rest: the UTF-8
 * bytes of its JSON, outside the JavaScript heap.
 *
 * **Details**
 *
 * As objects, the evidence of one of the benchmark's Sessions is about sixty
 * of them (~3 KiB of heap); a dashboard polling a thousand Sessions kept
 * three thousand KiB of them, all of it copied through the young
 * generation as the caches filled, which grew that generation to its
 * largest size. Packed, it is one byte array over a ~1 KiB buffer
 * outside the heap, and each poll decodes a copy (a few microseconds): its
 * lists are that poll's own.
 *
 * @category models
 * @since 0.1.0
 */
export type PackedEvidence = Uint8Array

const encoder = new TextEncoder()
const decoder = new TextDecoder()

const ROLES = ["user", "assistant"] as const
const OUTCOMES = ["user", "stop", "continuation"] as const

/**
 * One occurrence in the compact form: what the selector does not derive.
 * `occurrenceId` is `${sourceEntryId ?? "message"}:${order}` and each payload
 * lists occurrences of its content hash, so both are rebuilt from these.
 */
type CompactOccurrence = readonly [
  sourceEntryId: string | null,
  order: number,
  role: number,
  outcome: number,
  timestamp: string | null,
  contentHash: string
]

type CompactEvidence = readonly [
  sessionId: string,
  manifestHash: string,
  selectorVersion: string,
  occurrences: ReadonlyArray<CompactOccurrence>,
  /** Each payload as the positions of its occurrences. */
  payloads: ReadonlyArray<ReadonlyArray<number>>
]

const compactOf = ({ selection, sessionId }: AvailableEvidence): CompactEvidence => {
  const position = new Map<string, number>()
  selection.occurrences.forEach((occurrence, index) => position.set(occurrence.occurrenceId, index))
  return [
    sessionId,
    selection.manifestHash,
    selection.selectorVersion,
    selection.occurrences.map((occurrence) => [
      occurrence.sourceEntryId,
      occurrence.order,
      ROLES.indexOf(occurrence.role),
      OUTCOMES.indexOf(occurrence.outcome),
      occurrence.timestamp,
      occurrence.contentHash
    ]),
    selection.payloads.map((payload) => payload.occurrenceIds.map((id) => position.get(id) ?? -1))
  ]
}

const fromCompact = (
  [sessionId, manifestHash, selectorVersion, compact, payloads]: CompactEvidence
): AvailableEvidence => {
  const occurrences = compact.map(([sourceEntryId, order, role, outcome, timestamp, contentHash]) => ({
    occurrenceId: `${sourceEntryId ?? "message"}:${order}`,
    sourceEntryId,
    order,
    role: ROLES[role],
    outcome: OUTCOMES[outcome],
    timestamp,
    contentHash
  }))
  return {
    availability: "available",
    sessionId,
    selection: {
      occurrences,
      payloads: payloads.map((positions) => ({
        contentHash: occurrences[positions[0]].contentHash,
        occurrenceIds: positions.map((at) => occurrences[at].occurrenceId)
      })),
      manifestHash,
      selectorVersion
    }
  }
}

const readsBackAs = (compact: string, plain: string): boolean => {
  try {
    return JSON.stringify(fromCompact(JSON.parse(compact))) === plain
  } catch {
    // A payload without occurrences, or with one the list does not have: not the selector's.
    return false
  }
}

/**
 * Packs available evidence: compactly when the compact form reads back as
 * the very same evidence (it does for every selection the selector makes,
 * about 40 % of the plain JSON), else as its plain JSON. Every value in it
 * came from JSON (the Session's lines) or is a string or count the selector
 * made, so either JSON reads back as the same values, in the same order.
 *
 * @category constructors
 * @since 0.1.0
 */
export const packEvidence = (evidence: AvailableEvidence): PackedEvidence => {
  const plain = JSON.stringify(evidence)
  const compact = JSON.stringify(compactOf(evidence))
  return encoder.encode(readsBackAs(compact, plain) ? compact : plain)
}

/**
 * The evidence packed in `packed`, decoded anew: lists no other result shares.
 *
 * @category constructors
 * @since 0.1.0
 */
export const unpackEvidence = (packed: PackedEvidence): SessionEvidence => {
  const value = JSON.parse(decoder.decode(packed))
  return Array.isArray(value) ? fromCompact(value as unknown as CompactEvidence) : value
}

/**
 * Bytes packed evidence keeps alive: its buffer, and the array and buffer
 * objects in the heap.
 *
 * @category models
 * @since 0.1.0
 */
export const packedEvidenceBytes = (packed: PackedEvidence): number => packed.byteLength + 192
