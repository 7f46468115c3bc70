/**
 * Byte sequences that UTF-8 decoders disagree on, or that a decoder turns
 * into text a parser treats specially: byte-order marks, non-shortest
 * (overlong) forms, UTF-8-encoded surrogates, lone continuation bytes,
 * sequences cut short, lead bytes no valid text has (F5..FF, including the
 * old 5- and 6-byte forms), NUL, CR, U+2028/U+2029 and other spaces that
 * `JSON.parse` does not skip. The differential read tests put them in every
 * line position; the reference decodes with `Buffer#toString("utf8")`, so
 * any of them that our readers decode otherwise shows up as a disagreement.
 */
import fc from "fast-check"

/** Every decoder-sensitive byte class, by name. */
export const decoderSensitive: Readonly<Record<string, Uint8Array>> = {
  bom: Uint8Array.of(0xef, 0xbb, 0xbf),
  bomTwice: Uint8Array.of(0xef, 0xbb, 0xbf, 0xef, 0xbb, 0xbf),
  utf16BomBigEndian: Uint8Array.of(0xfe, 0xff),
  utf16BomLittleEndian: Uint8Array.of(0xff, 0xfe),
  overlongSlash2: Uint8Array.of(0xc0, 0xaf),
  overlongSlash3: Uint8Array.of(0xe0, 0x80, 0xaf),
  overlongSlash4: Uint8Array.of(0xf0, 0x80, 0x80, 0xaf),
  overlongQuote: Uint8Array.of(0xc0, 0xa2),
  overlongNewline: Uint8Array.of(0xc0, 0x8a),
  overlongBrace: Uint8Array.of(0xc1, 0xbb),
  overlongNul: Uint8Array.of(0xc0, 0x80),
  surrogateHigh: Uint8Array.of(0xed, 0xa0, 0x80),
  surrogateLow: Uint8Array.of(0xed, 0xbf, 0xbf),
  surrogatePairCesu: Uint8Array.of(0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80),
  continuation: Uint8Array.of(0x80),
  continuations: Uint8Array.of(0x80, 0xbf, 0x80),
  truncated2: Uint8Array.of(0xc3),
  truncated3: Uint8Array.of(0xe2, 0x82),
  truncated4: Uint8Array.of(0xf0, 0x9f, 0x98),
  beyondU10FFFF: Uint8Array.of(0xf4, 0x90, 0x80, 0x80),
  leadF5: Uint8Array.of(0xf5, 0x80, 0x80, 0x80),
  fiveByteForm: Uint8Array.of(0xf8, 0x88, 0x80, 0x80, 0x80),
  sixByteForm: Uint8Array.of(0xfc, 0x84, 0x80, 0x80, 0x80, 0x80),
  byteFE: Uint8Array.of(0xfe),
  byteFF: Uint8Array.of(0xff),
  nul: Uint8Array.of(0x00),
  cr: Uint8Array.of(0x0d),
  lineSeparator: Uint8Array.of(0xe2, 0x80, 0xa8),
  paragraphSeparator: Uint8Array.of(0xe2, 0x80, 0xa9),
  noBreakSpace: Uint8Array.of(0xc2, 0xa0),
  zeroWidthSpace: Uint8Array.of(0xe2, 0x80, 0x8b),
  nonCharacterFFFE: Uint8Array.of(0xef, 0xbf, 0xbe),
  replacementCharacter: Uint8Array.of(0xef, 0xbf, 0xbd),
  validMultibyte: Uint8Array.of(0xc3, 0xa9, 0xf0, 0x9f, 0x98, 0x80)
}

/** One named decoder-sensitive byte class. */
export interface SensitiveBytes {
  readonly name: string
  readonly bytes: Uint8Array
}

const named = (...names: ReadonlyArray<string>): Array<SensitiveBytes> =>
  names.map((name) => ({ name, bytes: decoderSensitive[name] }))

/**
 * Any decoder-sensitive byte class, a byte-order mark a quarter of the time:
 * it is the one class a standard decoder option (`ignoreBOM`) silently
 * changes, so it must come up in every default run.
 */
export const sensitiveBytes: fc.Arbitrary<SensitiveBytes> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...named(...Object.keys(decoderSensitive))) },
  { weight: 1, arbitrary: fc.constantFrom(...named("bom", "bomTwice")) }
)

/**
 * The non-shortest form of an ASCII byte in `length` (2 to 4) bytes: what a
 * lenient decoder reads back as that same character.
 */
export const overlongOf = (byte: number, length: 2 | 3 | 4): Uint8Array =>
  length === 2
    ? Uint8Array.of(0xc0 | (byte >> 6), 0x80 | (byte & 0x3f))
    : length === 3
    ? Uint8Array.of(0xe0, 0x80 | (byte >> 6), 0x80 | (byte & 0x3f))
    : Uint8Array.of(0xf0, 0x80, 0x80 | (byte >> 6), 0x80 | (byte & 0x3f))

/** Byte sequences weighted toward the decoder-sensitive lead and continuation bytes. */
export const trickyByteArray = (maxLength: number): fc.Arbitrary<Uint8Array> =>
  fc.array(
    fc.oneof(
      fc.constantFrom(
        0x00,
        0x0a,
        0x0d,
        0x22,
        0x7b,
        0x7f,
        0x80,
        0x8f,
        0x90,
        0x9f,
        0xa0,
        0xbb,
        0xbf,
        0xc0,
        0xc1,
        0xc2,
        0xdf,
        0xe0,
        0xe1,
        0xed,
        0xef,
        0xf0,
        0xf4,
        0xf5,
        0xf8,
        0xfc,
        0xfe,
        0xff
      ),
      fc.integer({ min: 0, max: 255 }),
      sensitiveBytes.map(({ bytes }) => bytes[0])
    ),
    { maxLength }
  ).map((bytes) => Uint8Array.from(bytes))

/** Concatenates byte arrays. */
export const concatBytes = (...parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0))
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.length
  }
  return out
}

const insertBytes = (bytes: Uint8Array, at: number, inserted: Uint8Array): Uint8Array =>
  concatBytes(bytes.subarray(0, at), inserted, bytes.subarray(at))

/**
 * Where in a JSON line `editLine` puts its bytes: before the JSON, right
 * after its opening brace, inside a string value, between the JSON and the
 * newline, or instead of one ASCII character (its non-shortest form).
 */
export type Spot =
  | { readonly kind: "start" }
  | { readonly kind: "afterBrace" }
  | { readonly kind: "inString" }
  | { readonly kind: "beforeNewline" }
  /** The first ASCII character at or after `pick` (modulo the line) replaced by its non-shortest form. */
  | { readonly kind: "overlong"; readonly pick: number; readonly length: 2 | 3 | 4 }

/** The string values whose content an `inString` edit goes into: free text, else the session id. */
const stringAnchors = ["\"summary\":\"", "\"title\":\"", "\"sessionId\":\""].map((anchor) =>
  new TextEncoder().encode(anchor)
)

const indexOfBytes = (haystack: Uint8Array, needle: Uint8Array): number =>
  Buffer.from(haystack.buffer, haystack.byteOffset, haystack.length).indexOf(needle)

/** `line` (newline included) with `inserted` put at `spot`. */
export const editLine = (line: Uint8Array, spot: Spot, inserted: Uint8Array): Uint8Array => {
  const body = line.length - 1
  switch (spot.kind) {
    case "start":
      return insertBytes(line, 0, inserted)
    case "afterBrace":
      return insertBytes(line, Math.min(1, body), inserted)
    case "inString": {
      for (const anchor of stringAnchors) {
        const found = indexOfBytes(line, anchor)
        // One character into the value, so the string stays non-empty either way.
        if (found >= 0) return insertBytes(line, found + anchor.length + 1, inserted)
      }
      return insertBytes(line, Math.min(1, body), inserted)
    }
    case "beforeNewline":
      return insertBytes(line, body, inserted)
    case "overlong": {
      // The first ASCII character from `pick` on (wrapping), since only those have a non-shortest form.
      for (let step = 0; step < body; step++) {
        const index = (spot.pick + step) % body
        if (line[index] < 0x80) {
          return concatBytes(line.subarray(0, index), overlongOf(line[index], spot.length), line.subarray(index + 1))
        }
      }
      return line
    }
  }
}

/** Any spot; the start of the line (where a BOM goes) twice as often as each other. */
export const spot: fc.Arbitrary<Spot> = fc.oneof(
  { weight: 2, arbitrary: fc.constant<Spot>({ kind: "start" }) },
  {
    weight: 3,
    arbitrary: fc.constantFrom<Spot>({ kind: "afterBrace" }, { kind: "inString" }, { kind: "beforeNewline" })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("overlong" as const),
      pick: fc.nat(),
      length: fc.constantFrom<2 | 3 | 4>(2, 3, 4)
    })
  }
)
