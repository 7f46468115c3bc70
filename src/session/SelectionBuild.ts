/**
 * The selection of a growing branch, built from the selected entries
 * (`Pick`s) and extended as the branch grows instead of selected again.
 *
 * A Session read again after it grew usually has the same selection (most
 * appended lines, such as tool calls and results, select nothing) or the
 * same selection plus a few occurrences at its end. A `SelectionBuilder`
 * remembers the last selection it built and answers with it, or extends it
 * by the new picks only; anything else (a branch switch) is built afresh.
 *
 * Guarantees: a selection built here equals `selectRarebits` of the branch
 * the picks came from, manifest hash included (its `stableJson` is put
 * together from renderings kept on each pick, re-rendered only when the
 * pick's position on the branch changed); arrays and objects that earlier
 * results hold are never changed afterwards (extending copies them).
 *
 * Pure; a builder is not shared between Sessions.
 *
 * @since 0.1.0
 */
import { sha256Hex, stableJson } from "../protocol/CanonicalJson.js"
import { registerOwnEvidence } from "../protocol/internal/OwnEvidence.js"
import {
  RAREBIT_SELECTOR_VERSION,
  type RarebitManifest,
  type RarebitManifestOccurrence,
  type RarebitMetadata,
  type RarebitOccurrence,
  type RarebitPayload,
  type RarebitSelection
} from "./Selector.js"

/**
 * What a selected entry contributes, independent of its position on the
 * branch, with the renderings of its last position.
 *
 * @category models
 * @since 0.1.0
 */
export interface Pick {
  readonly metadata: RarebitMetadata
  readonly text: string
  /** SHA-256 of `text`, computed the first time the entry is on a branch. */
  hash: string | undefined
  /** The branch position `json` and `payloadJson` were rendered for. */
  renderedOrder: number
  /** `stableJson` of the manifest occurrence at `renderedOrder`. */
  json: string
  /** `stableJson` of the manifest payload when this is its only occurrence. */
  payloadJson: string
}

/**
 * The pick of an entry that `rarebitMetadata` selects, with `text` its text
 * blocks joined by "\n"; rendered when first built into a selection.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makePick = (metadata: RarebitMetadata, text: string): Pick => ({
  metadata,
  text,
  hash: undefined,
  renderedOrder: -1,
  json: "",
  payloadJson: ""
})

/**
 * Roughly the bytes a pick keeps alive: its text, hash and two renderings.
 *
 * @category models
 * @since 0.1.0
 */
export const pickRetainedBytes = (pick: Pick): number => 2 * pick.text.length + 800

/**
 * The picks of a branch in branch order, each with its position (`order`)
 * on the branch.
 *
 * @category models
 * @since 0.1.0
 */
export type OrderedPicks = ReadonlyArray<{ readonly order: number; readonly pick: Pick }>

/**
 * A selection with what it takes to extend it: the pieces of its manifest's
 * `stableJson`, and where each payload sits.
 *
 * @category models
 * @since 0.1.0
 */
export interface SelectionBuild {
  readonly selection: RarebitSelection
  /** UTF-16 code units of the selected texts, occurrences counted one by one. */
  readonly rarebitChars: number
  /** The occurrence renderings, comma-joined. */
  readonly occurrencesJson: string
  readonly payloadJsons: ReadonlyArray<string>
  /**
   * Payload position by content hash. Owned by the newest build of a
   * builder: extending moves it to the new build (see `extendSelection`).
   */
  readonly payloadIndex: Map<string, number>
}

const SELECTOR_VERSION_JSON = JSON.stringify(RAREBIT_SELECTOR_VERSION)

/** The rendering and objects of one picked occurrence at `order`; renders only when its position changed. */
const occurrenceOf = (order: number, pick: Pick) => {
  const { metadata, text } = pick
  const contentHash = pick.hash ??= sha256Hex(text)
  const occurrenceId = `${metadata.sourceEntryId ?? "message"}:${order}`
  const listed: RarebitManifestOccurrence = {
    occurrenceId,
    sourceEntryId: metadata.sourceEntryId,
    order,
    role: metadata.role,
    outcome: metadata.outcome,
    timestamp: metadata.timestamp,
    contentHash
  }
  if (pick.renderedOrder !== order) {
    pick.json = stableJson(listed)
    pick.payloadJson = stableJson({ contentHash, occurrenceIds: [occurrenceId] })
    pick.renderedOrder = order
  }
  return { listed, occurrence: { ...listed, text } satisfies RarebitOccurrence }
}

const payloadJsonOf = (payload: RarebitPayload): string =>
  stableJson({ contentHash: payload.contentHash, occurrenceIds: payload.occurrenceIds })

/**
 * Assembles a selection from its parts. `stableJson(manifest)`: its keys in
 * sorted order around the kept renderings.
 */
const finishSelection = (
  occurrences: Array<RarebitOccurrence>,
  manifestOccurrences: Array<RarebitManifestOccurrence>,
  payloads: Array<RarebitPayload>,
  manifestPayloads: RarebitManifest["payloads"],
  parts: Omit<SelectionBuild, "selection">
): SelectionBuild => {
  const manifestJson = `{"occurrences":[${parts.occurrencesJson}],"payloads":[${
    parts.payloadJsons.join(",")
  }],"selectorVersion":${SELECTOR_VERSION_JSON}}`
  return {
    ...parts,
    selection: {
      // Every poll of an unchanged Session shares this list; the projection
      // remembers its verdict on it.
      occurrences: registerOwnEvidence(occurrences),
      payloads,
      manifest: {
        selectorVersion: RAREBIT_SELECTOR_VERSION,
        occurrences: manifestOccurrences,
        payloads: manifestPayloads
      },
      manifestHash: sha256Hex(manifestJson)
    }
  }
}

const EMPTY_SELECTION = finishSelection([], [], [], [], {
  rarebitChars: 0,
  occurrencesJson: "",
  payloadJsons: [],
  payloadIndex: new Map()
})

/** The selection of no picks, to extend from; with an index of its own, since extending takes the index over. */
const emptySelection = (): SelectionBuild => ({ ...EMPTY_SELECTION, payloadIndex: new Map() })

/**
 * The selection of `picks`, whose first `shared` entries are exactly those
 * `prior` was built from, in time for the new picks only (plus copying the
 * arrays, which earlier results share and so are never changed in place).
 * From `emptySelection()` it is the whole selection of `picks`.
 */
const extendSelection = (prior: SelectionBuild, picks: OrderedPicks, shared: number): SelectionBuild => {
  const occurrences = prior.selection.occurrences.slice()
  const manifestOccurrences = prior.selection.manifest.occurrences.slice()
  const payloads = prior.selection.payloads.slice()
  const manifestPayloads = prior.selection.manifest.payloads.slice()
  const payloadJsons = prior.payloadJsons.slice()
  // Moved, not copied: `prior` is never extended again once this build replaces it in the memo.
  const payloadIndex = prior.payloadIndex
  let occurrencesJson = prior.occurrencesJson
  let rarebitChars = prior.rarebitChars
  // Payloads made or copied in this build (so this build may change them), and those that gained occurrences.
  const owned = new Set<number>()
  const grown = new Set<number>()
  for (let index = shared; index < picks.length; index++) {
    const { order, pick } = picks[index]
    const { listed, occurrence } = occurrenceOf(order, pick)
    manifestOccurrences.push(listed)
    occurrences.push(occurrence)
    occurrencesJson = occurrencesJson === "" ? pick.json : `${occurrencesJson},${pick.json}`
    rarebitChars += pick.text.length
    const at = payloadIndex.get(listed.contentHash)
    if (at === undefined) {
      payloadIndex.set(listed.contentHash, payloads.length)
      owned.add(payloads.length)
      const occurrenceIds = [listed.occurrenceId]
      payloads.push({ contentHash: listed.contentHash, text: pick.text, occurrenceIds })
      manifestPayloads.push({ contentHash: listed.contentHash, occurrenceIds })
      payloadJsons.push(pick.payloadJson)
    } else {
      // Earlier results hold the old payload: the first new occurrence puts a copy in its place.
      if (!owned.has(at)) {
        const occurrenceIds = [...payloads[at].occurrenceIds]
        payloads[at] = { ...payloads[at], occurrenceIds }
        manifestPayloads[at] = { contentHash: listed.contentHash, occurrenceIds }
        owned.add(at)
      }
      payloads[at].occurrenceIds.push(listed.occurrenceId)
      grown.add(at)
    }
  }
  // Rendered once per build, however many occurrences a payload gained in it.
  for (const at of grown) payloadJsons[at] = payloadJsonOf(payloads[at])
  return finishSelection(occurrences, manifestOccurrences, payloads, manifestPayloads, {
    rarebitChars,
    occurrencesJson,
    payloadJsons,
    payloadIndex
  })
}

/**
 * The selection of `picks`, built afresh.
 *
 * @category constructors
 * @since 0.1.0
 */
export const selectionOfPicks = (picks: OrderedPicks): SelectionBuild => extendSelection(emptySelection(), picks, 0)

/** How many of `picks` start with exactly `prefix` (same picks at the same positions): its length, or -1. */
const sharedPrefix = (prefix: OrderedPicks, picks: OrderedPicks): number => {
  if (prefix.length > picks.length) return -1
  for (let index = 0; index < prefix.length; index++) {
    if (prefix[index].pick !== picks[index].pick || prefix[index].order !== picks[index].order) return -1
  }
  return prefix.length
}

/**
 * Selections of one growing branch, each built from the last one when the
 * picks still start with the picks it was built from.
 *
 * @category models
 * @since 0.1.0
 */
export class SelectionBuilder {
  private last: { readonly picks: OrderedPicks; readonly build: SelectionBuild } | undefined = undefined

  /** The selection of `picks`: the last one again, the last one extended, or built afresh. */
  selectionOf(picks: OrderedPicks): SelectionBuild {
    const last = this.last
    const shared = last === undefined ? -1 : sharedPrefix(last.picks, picks)
    const build = last === undefined || shared < 0
      ? selectionOfPicks(picks)
      : shared === picks.length
      ? last.build
      : extendSelection(last.build, picks, shared)
    // A copy: linear Sessions pass their growing array of picks itself.
    if (build !== last?.build) this.last = { picks: [...picks], build }
    return build
  }
}
