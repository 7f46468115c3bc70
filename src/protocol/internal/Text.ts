/**
 * Bounded text for messages and reports that quote what a file or a caller
 * gave: a key, a type, a timestamp. Such text can be megabytes long, and a
 * message must stay readable and small whatever it quotes.
 *
 * @internal
 */

/**
 * `text`, or its first `max - 1` UTF-16 units followed by `…` (so at most
 * `max` units), never splitting a surrogate pair.
 *
 * @internal
 */
export const clipText = (text: string, max: number): string => {
  if (text.length <= max) return text
  let end = Math.max(0, max - 1)
  const last = text.charCodeAt(end - 1)
  if (last >= 0xd800 && last <= 0xdbff) end--
  return `${text.slice(0, end)}…`
}
