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
import { hash } from "node:crypto"

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

/** Lower-case 64-digit hex, the shape of every hash and job id. @category hashing @since 0.1.0 */
export const SHA256_HEX_PATTERN = /^[a-f0-9]{64}$/
