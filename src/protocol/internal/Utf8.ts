/**
 * The one way bytes read from disk become text: exactly as Node's
 * `Buffer#toString("utf8")` (and `readFile(path, "utf8")`) turn them into
 * text, because that is what the reference parses.
 *
 * Two rules follow, and both decide whether a line is accepted at all:
 * - A leading byte-order mark (EF BB BF) is kept as U+FEFF, so a line, head,
 *   receipt, claim or lock that starts with one is not JSON. (The WHATWG
 *   default, `new TextDecoder("utf-8")`, silently strips it, and so does
 *   `FileSystem.readFileString`: a reader built on either accepts lines the
 *   reference rejects.)
 * - Invalid sequences (overlong forms, encoded surrogates, lone continuation
 *   bytes, truncated sequences, F5..FF) become U+FFFD, one per maximal
 *   invalid subpart, never an error. `test/protocol/Utf8.test.ts` holds this
 *   decoder to `Buffer#toString` over every sequence of up to three bytes
 *   and generated longer ones.
 *
 * @internal
 */

// `ignoreBOM: true` keeps the mark; `fatal: false` replaces invalid bytes.
const decoder = new TextDecoder("utf-8", { ignoreBOM: true, fatal: false })

/** Decodes UTF-8 as `Buffer#toString("utf8")` does: BOM kept, invalid subparts as U+FFFD. */
export const decodeUtf8 = (bytes: Uint8Array): string => decoder.decode(bytes)
