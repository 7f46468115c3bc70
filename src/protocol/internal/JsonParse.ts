/**
 * JSON text read the way the reference reads sidecar lines and lock files:
 * `JSON.parse`, where text that does not parse is simply not a record.
 *
 * @internal
 */

/**
 * What `JSON.parse` makes of `text`, or `null` when it throws.
 *
 * **Gotchas**
 *
 * The text `null` parses to `null` too: callers that must tell torn text
 * from a JSON `null` (claims, lock files) parse for themselves.
 *
 * @internal
 */
export const parseJsonOrNull = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return null
  }
}
