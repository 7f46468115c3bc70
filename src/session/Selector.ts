/**
 * Rarebit selector v1: which prose of an active branch counts as evidence.
 *
 * The selection is deterministic and sparse: user messages, assistant messages
 * that stopped (`stopReason: "stop"`), and assistant messages that handed over
 * to tools (`"toolUse"`, a continuation), each only when it carries text. Tool
 * results, tool-call inputs, images, errors and transport records never count.
 * A message's text is its string content, or its text blocks joined by "\n".
 *
 * The result is the occurrences in branch order, the distinct texts
 * (`payloads`, deduplicated by content hash, first occurrence first), and a
 * text-free `manifest` whose `stableJson` SHA-256 is the selection's identity.
 * Object key order matches the reference, so JSON renderings agree too.
 *
 * @since 0.1.0
 */
import { sha256Hex, streamedStableJsonSha256 } from "../protocol/CanonicalJson.js"
import { memberOf } from "../protocol/internal/JsonShape.js"

/**
 * The selector version written into every manifest.
 *
 * @category constants
 * @since 0.1.0
 */
export const RAREBIT_SELECTOR_VERSION = "rarebit-selector-v1" as const

/**
 * Where an occurrence came from and how it was classified; no text.
 *
 * @category models
 * @since 0.1.0
 */
export interface RarebitMetadata {
  readonly sourceEntryId: string | null
  readonly order: number
  readonly role: "user" | "assistant"
  readonly outcome: "user" | "stop" | "continuation"
  readonly timestamp: string | null
}

/**
 * One selected message in the manifest: metadata plus its content hash.
 *
 * @category models
 * @since 0.1.0
 */
export interface RarebitManifestOccurrence {
  readonly occurrenceId: string
  readonly sourceEntryId: string | null
  readonly order: number
  readonly role: "user" | "assistant"
  readonly outcome: "user" | "stop" | "continuation"
  readonly timestamp: string | null
  readonly contentHash: string
}

/**
 * One selected message with its text.
 *
 * @category models
 * @since 0.1.0
 */
export interface RarebitOccurrence extends RarebitManifestOccurrence {
  readonly text: string
}

/**
 * One distinct selected text and the occurrences that carry it.
 *
 * @category models
 * @since 0.1.0
 */
export interface RarebitPayload {
  readonly contentHash: string
  readonly text: string
  readonly occurrenceIds: Array<string>
}

/**
 * The hashed, text-free description of a selection.
 *
 * A type alias rather than an interface so that it stays assignable to
 * `Record<string, unknown>`, the reference's declared type of a manifest.
 *
 * @category models
 * @since 0.1.0
 */
export type RarebitManifest = {
  readonly selectorVersion: typeof RAREBIT_SELECTOR_VERSION
  readonly occurrences: Array<RarebitManifestOccurrence>
  readonly payloads: Array<{ readonly contentHash: string; readonly occurrenceIds: Array<string> }>
}

/**
 * What `selectRarebits` returns.
 *
 * @category models
 * @since 0.1.0
 */
export interface RarebitSelection {
  readonly occurrences: Array<RarebitOccurrence>
  readonly payloads: Array<RarebitPayload>
  readonly manifest: RarebitManifest
  readonly manifestHash: string
}

/**
 * The message a branch entry carries: its `message` when its `type` is
 * "message", else `undefined`.
 *
 * @category selection
 * @since 0.1.0
 */
export const messageOf = (entry: unknown): unknown =>
  memberOf(entry, "type") === "message" ? memberOf(entry, "message") : undefined

/**
 * Every human-readable text of one persisted Pi message: its string content,
 * or the `text` of each `{type: "text", text: string}` block, in order.
 *
 * @category selection
 * @since 0.1.0
 */
export const messageTextBlocks = (message: unknown): Array<string> => {
  const content = memberOf(message, "content")
  if (typeof content === "string") return [content]
  if (!Array.isArray(content)) return []
  const texts: Array<string> = []
  for (const block of content) {
    if (block && typeof block === "object" && block.type === "text" && typeof block.text === "string") {
      texts.push(block.text)
    }
  }
  return texts
}

/**
 * Classifies one branch entry, or `null` when it is not selected.
 *
 * **Details**
 *
 * `sourceEntryId` and `timestamp` prefer the entry's own string field and fall
 * back to the message's, else `null`.
 *
 * @category selection
 * @since 0.1.0
 */
export const rarebitMetadata = (entry: unknown, order: number = 0): RarebitMetadata | null => {
  const message = messageOf(entry)
  if (!message || messageTextBlocks(message).length === 0) return null
  const role = memberOf(message, "role")
  const stopReason = memberOf(message, "stopReason")
  let outcome: RarebitMetadata["outcome"]
  if (role === "user") outcome = "user"
  else if (role === "assistant" && stopReason === "stop") outcome = "stop"
  else if (role === "assistant" && stopReason === "toolUse") outcome = "continuation"
  else return null
  const entryId = memberOf(entry, "id")
  const messageId = memberOf(message, "id")
  const entryTimestamp = memberOf(entry, "timestamp")
  const messageTimestamp = memberOf(message, "timestamp")
  return {
    sourceEntryId: typeof entryId === "string" ? entryId : typeof messageId === "string" ? messageId : null,
    order,
    // The literal, not the parsed string: a cache keeps one copy for every message instead of one each.
    role: outcome === "user" ? "user" : "assistant",
    outcome,
    timestamp: typeof entryTimestamp === "string"
      ? entryTimestamp
      : typeof messageTimestamp === "string"
      ? messageTimestamp
      : null
  }
}

/**
 * The text an entry contributes when selected: its text blocks joined by "\n".
 *
 * @category selection
 * @since 0.1.0
 */
export const rarebitText = (entry: unknown): string => messageTextBlocks(messageOf(entry)).join("\n")

/**
 * Selects the Rarebits of an active branch (anything but an array selects
 * nothing).
 *
 * **Details**
 *
 * `occurrenceId` is `<sourceEntryId or "message">:<branch index>`. Payloads
 * are deduplicated by the SHA-256 of the text; each lists every occurrence
 * carrying it, in branch order. `manifestHash` is `sha256(manifest)`, hashed
 * piece by piece (`streamedStableJsonSha256`): a read selects when it holds
 * every parsed entry, so the manifest's text is never built whole.
 *
 * @category selection
 * @since 0.1.0
 */
export const selectRarebits = (branch: unknown): RarebitSelection => {
  const entries: ReadonlyArray<unknown> = Array.isArray(branch) ? branch : []
  const occurrences: Array<RarebitOccurrence> = []
  const manifestOccurrences: Array<RarebitManifestOccurrence> = []
  const payloadsByHash = new Map<string, RarebitPayload>()
  for (let order = 0; order < entries.length; order++) {
    const metadata = rarebitMetadata(entries[order], order)
    if (metadata === null) continue
    const text = rarebitText(entries[order])
    const contentHash = sha256Hex(text)
    const occurrenceId = `${metadata.sourceEntryId ?? "message"}:${order}`
    const listed: RarebitManifestOccurrence = {
      occurrenceId,
      sourceEntryId: metadata.sourceEntryId,
      order: metadata.order,
      role: metadata.role,
      outcome: metadata.outcome,
      timestamp: metadata.timestamp,
      contentHash
    }
    manifestOccurrences.push(listed)
    occurrences.push({ ...listed, text })
    const prior = payloadsByHash.get(contentHash)
    if (prior) prior.occurrenceIds.push(occurrenceId)
    else payloadsByHash.set(contentHash, { contentHash, text, occurrenceIds: [occurrenceId] })
  }
  const payloads = [...payloadsByHash.values()]
  const manifest: RarebitManifest = {
    selectorVersion: RAREBIT_SELECTOR_VERSION,
    occurrences: manifestOccurrences,
    payloads: payloads.map(({ contentHash, occurrenceIds }) => ({ contentHash, occurrenceIds }))
  }
  return { occurrences, payloads, manifest, manifestHash: streamedStableJsonSha256(manifest) }
}
