/**
 * `decodeUtf8` is the reference's decoder, `Buffer#toString("utf8")`, under
 * another name: it keeps a BOM, and replaces invalid sequences with U+FFFD
 * exactly where and as often as Node does. Checked against fixed expected
 * strings, against `Buffer#toString` over every sequence of up to three
 * bytes, and over generated longer sequences built from the
 * decoder-sensitive byte classes. `Utf8Pieces`, the streaming form the
 * Session scanner uses, is held to `decodeUtf8` of the same bytes whole,
 * however they are cut into pieces.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { decodeUtf8, Utf8Pieces } from "../../src/protocol/internal/Utf8.js"
import { concatBytes, decoderSensitive, sensitiveBytes, trickyByteArray } from "../support/DecoderBytes.js"
import { fuzzRuns } from "../support/FuzzRuns.js"

const nodeDecode = (bytes: Uint8Array): string =>
  Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString("utf8")

const R = "\uFFFD"

describe("decodeUtf8", () => {
  it("keeps a byte-order mark, so JSON after it does not parse", () => {
    const text = decodeUtf8(concatBytes(decoderSensitive.bom, new TextEncoder().encode("{}")))
    assert.strictEqual(text, "\uFEFF{}")
    assert.throws(() => JSON.parse(text))
    assert.strictEqual(decodeUtf8(decoderSensitive.bomTwice), "\uFEFF\uFEFF")
  })

  it("replaces each maximal invalid subpart with one U+FFFD, as Node does", () => {
    const expected: Record<string, string> = {
      utf16BomBigEndian: R + R,
      overlongSlash2: R + R,
      overlongSlash3: R + R + R,
      overlongSlash4: R + R + R + R,
      overlongQuote: R + R,
      overlongNul: R + R,
      surrogateHigh: R + R + R,
      surrogatePairCesu: R.repeat(6),
      continuation: R,
      continuations: R + R + R,
      truncated2: R,
      truncated3: R,
      truncated4: R,
      beyondU10FFFF: R.repeat(4),
      leadF5: R.repeat(4),
      fiveByteForm: R.repeat(5),
      sixByteForm: R.repeat(6),
      byteFF: R,
      nul: "\u0000",
      cr: "\r",
      lineSeparator: "\u2028",
      paragraphSeparator: "\u2029",
      nonCharacterFFFE: "\uFFFE",
      validMultibyte: "é😀"
    }
    for (const [name, text] of Object.entries(expected)) {
      assert.strictEqual(decodeUtf8(decoderSensitive[name]), text, name)
      assert.strictEqual(nodeDecode(decoderSensitive[name]), text, `${name} (Buffer#toString)`)
    }
    // A sequence cut short just before a newline loses only itself, never the newline.
    assert.strictEqual(decodeUtf8(Uint8Array.of(0xf0, 0x9f, 0x98, 0x0a)), `${R}\n`)
  })

  it("equals Buffer#toString on every sequence of up to three bytes", () => {
    let mismatches = 0
    const one = new Uint8Array(1)
    const two = new Uint8Array(2)
    const three = new Uint8Array(3)
    for (let a = 0; a < 256; a++) {
      one[0] = a
      if (decodeUtf8(one) !== nodeDecode(one)) mismatches++
      for (let b = 0; b < 256; b++) {
        two[0] = a
        two[1] = b
        if (decodeUtf8(two) !== nodeDecode(two)) mismatches++
        // After an ASCII first byte a decoder starts afresh, so three-byte
        // sequences are checked from every non-ASCII first byte.
        if (a < 0x80) continue
        for (let c = 0; c < 256; c++) {
          three[0] = a
          three[1] = b
          three[2] = c
          if (decodeUtf8(three) !== nodeDecode(three)) mismatches++
        }
      }
    }
    assert.strictEqual(mismatches, 0)
  }, 120_000)

  it("equals Buffer#toString on generated sequences of sensitive bytes, short and long", () => {
    const ascii = fc.string({ maxLength: 200 }).map((text) => new TextEncoder().encode(text))
    const piece = fc.oneof(trickyByteArray(12), sensitiveBytes.map(({ bytes }) => bytes), ascii)
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 40 }), (pieces) => {
        const bytes = concatBytes(...pieces)
        assert.strictEqual(decodeUtf8(bytes), nodeDecode(bytes))
        // Decoding a view into a larger buffer reads only the view.
        const padded = concatBytes(Uint8Array.of(0xe2), bytes, Uint8Array.of(0x82))
        assert.strictEqual(decodeUtf8(padded.subarray(1, 1 + bytes.length)), nodeDecode(bytes))
      }),
      { numRuns: fuzzRuns(2000) }
    )
  })
})

/** `bytes` cut at `cuts` (taken modulo its length) into consecutive pieces, empty ones included. */
const piecesOf = (bytes: Uint8Array, cuts: ReadonlyArray<number>): Array<Uint8Array> => {
  const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b)
  const pieces: Array<Uint8Array> = []
  let start = 0
  for (const point of points) {
    pieces.push(bytes.subarray(start, point))
    start = point
  }
  pieces.push(bytes.subarray(start))
  return pieces
}

const decodeInPieces = (pieces: ReadonlyArray<Uint8Array>): string => {
  const decoder = new Utf8Pieces()
  let text = ""
  for (const piece of pieces) text += decoder.decode(piece)
  return text + decoder.end()
}

describe("Utf8Pieces", () => {
  it("decodes any bytes cut anywhere exactly as decodeUtf8 (and Buffer#toString) decodes them whole", () => {
    const text = fc.array(
      fc.oneof(fc.constantFrom("😀", "€", "é", "日本", "\n", "\uFEFF", "{\"a\":1}", "x".repeat(40)), fc.string()),
      { maxLength: 30 }
    ).map((parts) => new TextEncoder().encode(parts.join("")))
    const part = fc.oneof(
      fc.uint8Array({ maxLength: 60 }),
      trickyByteArray(60),
      sensitiveBytes.map(({ bytes }) => bytes),
      text
    )
    fc.assert(
      fc.property(fc.array(part, { maxLength: 8 }), fc.array(fc.nat(), { maxLength: 12 }), (parts, cuts) => {
        const bytes = concatBytes(...parts)
        const text = decodeInPieces(piecesOf(bytes, cuts))
        assert.strictEqual(text, decodeUtf8(bytes))
        assert.strictEqual(text, nodeDecode(bytes))
      }),
      { numRuns: fuzzRuns(3000) }
    )
  })

  it(
    "decodes every sequence of up to two bytes, and of three from a non-ASCII byte, cut at every point, as decodeUtf8",
    () => {
      let mismatches = 0
      const bytes = new Uint8Array(3)
      for (let a = 0x80; a < 256; a++) {
        bytes[0] = a
        for (let b = 0; b < 256; b++) {
          bytes[1] = b
          const two = bytes.subarray(0, 2)
          if (decodeInPieces([two.subarray(0, 1), two.subarray(1)]) !== decodeUtf8(two)) mismatches++
          // Only where the first two bytes may still begin a longer character does the third matter.
          if (b < 0x80 || b > 0xbf) continue
          for (let c = 0; c < 256; c++) {
            bytes[2] = c
            const whole = decodeUtf8(bytes)
            if (decodeInPieces([bytes.subarray(0, 1), bytes.subarray(1)]) !== whole) mismatches++
            if (decodeInPieces([bytes.subarray(0, 2), bytes.subarray(2)]) !== whole) mismatches++
            if (decodeInPieces([bytes.subarray(0, 1), bytes.subarray(1, 2), bytes.subarray(2)]) !== whole) mismatches++
          }
        }
      }
      assert.strictEqual(mismatches, 0)
    },
    120_000
  )

  it("holds back exactly a character the next byte may still complete", () => {
    const decoder = new Utf8Pieces()
    // U+1F600 one byte at a time, then an A that cuts a second one short.
    assert.strictEqual(decoder.decode(Uint8Array.of(0xf0)), "")
    assert.strictEqual(decoder.decode(Uint8Array.of(0x9f, 0x98)), "")
    assert.strictEqual(decoder.decode(Uint8Array.of(0x80, 0xe2, 0x82)), "😀")
    assert.strictEqual(decoder.decode(Uint8Array.of(0x41)), "\uFFFDA")
    // ED A0 can never complete (a surrogate): decoded at once, not held.
    assert.strictEqual(decoder.decode(Uint8Array.of(0xed, 0xa0)), "\uFFFD\uFFFD")
    assert.strictEqual(decoder.decode(Uint8Array.of(0xf0, 0x80)), "\uFFFD\uFFFD")
    assert.strictEqual(decoder.decode(Uint8Array.of(0xf4, 0x90)), "\uFFFD\uFFFD")
    assert.strictEqual(decoder.decode(Uint8Array.of(0xe0, 0x9f)), "\uFFFD\uFFFD")
    assert.strictEqual(decoder.decode(Uint8Array.of(0xf4)), "")
    assert.strictEqual(decoder.end(), "\uFFFD")
  })
})
