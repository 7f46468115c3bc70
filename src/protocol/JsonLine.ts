/**
 * One JSONL line as the protocol writes it: `JSON.stringify(value) + "\n"`,
 * UTF-8 encoded.
 *
 * Receipts, claims and locks are written this way, and a head repeated from
 * disk is re-serialised this way from its parsed record, so the bytes match
 * the reference's for the same value.
 *
 * @since 0.1.0
 */

const utf8 = new TextEncoder()

/**
 * The UTF-8 bytes of `JSON.stringify(value)` followed by a newline.
 *
 * **Gotchas**
 *
 * The value must be JSON-serialisable to a string; `undefined` or a function
 * at the top level throws a `TypeError` rather than writing `"undefined"`.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeJsonLine = (value: unknown): Uint8Array => {
  const json: string | undefined = JSON.stringify(value)
  if (json === undefined) throw new TypeError("a JSONL record must serialise to JSON text")
  return utf8.encode(`${json}\n`)
}
