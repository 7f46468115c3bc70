/**
 * Canonical JSON and SHA-256 hex, the hashing rules of the Rarebit protocol.
 *
 * Manifest hashes and job identities are SHA-256 over `stableJson`: object
 * keys sorted by UTF-16 code unit order, `undefined` written as `null`
 * (also inside arrays and objects), everything else exactly as
 * `JSON.stringify` writes it. Sidecar receipt hashes are over raw line bytes.
 *
 * @since 0.1.0
 */
import { createHash, hash } from "node:crypto"

/**
 * Serializes a value with sorted object keys and `undefined` as `null`.
 *
 * **Gotchas**
 *
 * Unlike `JSON.stringify`, object members whose value is `undefined` are kept
 * (as `null`), and `toJSON` is honoured only for non-object leaves because
 * objects are walked key by key. Both match the reference byte for byte.
 *
 * @category canonical json
 * @since 0.1.0
 */
export const stableJson = (value: unknown): string => {
  if (value === undefined) return "null"
  if (value === null || typeof value !== "object") return JSON.stringify(value)
  if (Array.isArray(value)) return `[${value.map(stableJson).join(",")}]`
  const record = value as Record<string, unknown>
  const members: Array<string> = []
  for (const key of Object.keys(record).sort()) {
    members.push(`${JSON.stringify(key)}:${stableJson(record[key])}`)
  }
  return `{${members.join(",")}}`
}

/**
 * SHA-256 hex of raw bytes or of a string's UTF-8 bytes.
 *
 * One-shot `crypto.hash`: no `Hash` object per call (a poll hashes a few
 * short strings).
 *
 * @category hashing
 * @since 0.1.0
 */
export const sha256Hex = (bytes: string | Uint8Array): string => hash("sha256", bytes, "hex")

/**
 * SHA-256 hex of a string as is, or of any other value's `stableJson`.
 *
 * @category hashing
 * @since 0.1.0
 */
export const sha256 = (value: unknown): string => sha256Hex(typeof value === "string" ? value : stableJson(value))

/**
 * How many UTF-16 code units of `stableJson` text `stableJsonPieces` gathers
 * before handing them on.
 *
 * @category canonical json
 * @since 0.1.0
 */
export const STABLE_JSON_PIECE_UNITS = 16 * 1024

/**
 * `stableJson(value)` handed to `onPiece` in order, a piece at a time,
 * without ever holding the whole text: the pieces joined are exactly
 * `stableJson(value)`.
 *
 * **Details**
 *
 * The walk is `stableJson`'s (same branches, same order, holes in arrays
 * written as nothing between their commas), with leaves rendered by
 * `stableJson` itself. A piece is whole tokens, so a character is never
 * split between two pieces, and is shorter than `pieceUnits` plus the
 * longest token (a string leaf, or an object key).
 *
 * @category canonical json
 * @since 0.1.0
 */
export const stableJsonPieces = (
  value: unknown,
  onPiece: (piece: string) => void,
  pieceUnits: number = STABLE_JSON_PIECE_UNITS
): void => {
  let pending = ""
  const write = (text: string): void => {
    pending += text
    if (pending.length >= pieceUnits) {
      onPiece(pending)
      pending = ""
    }
  }
  const walk = (value: unknown): void => {
    if (value === null || typeof value !== "object") {
      write(stableJson(value))
    } else if (Array.isArray(value)) {
      write("[")
      for (let index = 0; index < value.length; index++) {
        if (index > 0) write(",")
        // `map` skips holes and `join` writes them as nothing.
        if (index in value) walk(value[index])
      }
      write("]")
    } else {
      const record = value as Record<string, unknown>
      write("{")
      let first = true
      for (const key of Object.keys(record).sort()) {
        write(`${first ? "" : ","}${JSON.stringify(key)}:`)
        first = false
        walk(record[key])
      }
      write("}")
    }
  }
  walk(value)
  if (pending !== "") onPiece(pending)
}

/**
 * SHA-256 hex of `stableJson(value)`, hashed piece by piece
 * (`stableJsonPieces`) and never built whole: `sha256(value)` for any value
 * but a string (which `sha256` hashes as it is, unquoted).
 *
 * **Details**
 *
 * A Session's manifest is hashed this way: its text grows with the selected
 * occurrences (~350 characters each, ~3 MiB for a 100 MiB Session of the
 * benchmark), and rendered whole, with the member strings and arrays
 * `stableJson` joins on the way, it was the largest allocation of a
 * Session read after the entries, made when every parsed entry is held.
 *
 * @category hashing
 * @since 0.1.0
 */
export const streamedStableJsonSha256 = (value: unknown): string => {
  const hasher = createHash("sha256")
  stableJsonPieces(value, (piece) => hasher.update(piece, "utf8"))
  return hasher.digest("hex")
}

/** Lower-case 64-digit hex, the shape of every hash and job id. @category hashing @since 0.1.0 */
export const SHA256_HEX_PATTERN = /^[a-f0-9]{64}$/
