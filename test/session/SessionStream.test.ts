/**
 * The streaming line scanner on its own: its decode is the whole-text decode
 * whatever the chunking, its lines are the whole text's split at "\n", it
 * gives up as soon as the decoded length passes the limit, it reads a long
 * line again only when the sink still wants it, and it reports the bytes
 * the cache fingerprints.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { toPlainError } from "../../src/promise/PlainErrors.js"
import { scanBytes, SessionLineScanner, type SessionLineSink, SessionTooLarge } from "../../src/session/index.js"
import { fuzzRuns } from "../support/FuzzRuns.js"

const whole = new TextDecoder("utf-8", { ignoreBOM: true })

/** Bytes that stress a UTF-8 decoder: every lead and continuation class, invalid bytes, newlines, a BOM. */
const trickyByte = fc.constantFrom(
  0x0a,
  0x0a,
  0x41,
  0x20,
  0x7b,
  0x22,
  0x00,
  0xc2,
  0xc3,
  0xa9,
  0xdf,
  0xe0,
  0xa0,
  0xe2,
  0x82,
  0xac,
  0xed,
  0x9f,
  0xef,
  0xbb,
  0xbf,
  0xf0,
  0x90,
  0x9f,
  0x98,
  0xf4,
  0x8f,
  0xbf,
  0x80,
  0xc0,
  0xc1,
  0xf5,
  0xff
)

const bytesArb = fc.oneof(
  fc.uint8Array({ maxLength: 200 }),
  fc.array(trickyByte, { maxLength: 200 }).map((bytes) => Uint8Array.from(bytes)),
  fc.array(
    fc.oneof(fc.constantFrom("😀", "€", "é", "日本", "\n", "\uFEFF", "{\"a\":1}", "x".repeat(40)), fc.string()),
    { maxLength: 30 }
  ).map((parts) => new TextEncoder().encode(parts.join("")))
)

/** Records the lines it gets; stops wanting lines after `wanted` of them. */
const recorder = (wanted = Infinity) => {
  const lines: Array<string> = []
  const sink: SessionLineSink = {
    get wantsLines() {
      return lines.length < wanted
    },
    addLine(line: string) {
      if (lines.length < wanted) lines.push(line)
    }
  }
  return { lines, sink }
}

describe("SessionLineScanner", () => {
  const tuningArb = fc.record({
    chunk: fc.integer({ min: 1, max: 70 }),
    pendingTextBytes: fc.integer({ min: 0, max: 40 }),
    pendingBytesKept: fc.integer({ min: 1, max: 40 }),
    pendingLastBytes: fc.integer({ min: 1, max: 20 }),
    slack: fc.integer({ min: -3, max: 3 })
  })

  it("yields the whole text's lines, or gives up exactly when the decoded text is longer than the limit", () => {
    fc.assert(
      fc.property(bytesArb, tuningArb, (bytes, tuning) => {
        const { chunk, pendingBytesKept, pendingLastBytes, pendingTextBytes, slack } = tuning
        const text = whole.decode(bytes)
        const limit = Math.max(0, text.length + slack)
        const { lines, sink } = recorder()
        const pieces: Array<{ bytes: Uint8Array; at: number }> = []
        const scanner = new SessionLineScanner(sink, {
          maxTextUnits: limit,
          pendingTextBytes,
          pendingBytesKept,
          pendingLastBytes,
          onCommit: (piece, at) => pieces.push({ bytes: piece.slice(), at })
        })
        const end = scanBytes(scanner, bytes, chunk)
        if (text.length > limit) {
          assert.isUndefined(end)
          return
        }
        assert.isDefined(end)
        const split = text.split("\n")
        const trailing = split.pop()!
        assert.deepStrictEqual(lines, split)
        assert.strictEqual(end!.trailing, trailing)
        const committedEnd = bytes.lastIndexOf(10) + 1
        assert.strictEqual(end!.committedEnd, committedEnd)
        assert.strictEqual(end!.committedUnits, text.length - trailing.length)
        assert.strictEqual(end!.size, bytes.length)
        if (bytes.length - committedEnd <= pendingBytesKept) {
          assert.deepStrictEqual(end!.trailingBytes, bytes.subarray(committedEnd))
        } else {
          assert.isUndefined(end!.trailingBytes)
        }
        // Committed pieces: true bytes, in order, never past the commit, covering both ends of it.
        const covered = new Uint8Array(committedEnd)
        let previousEnd = 0
        for (const { at, bytes: piece } of pieces) {
          assert.isAtLeast(at, previousEnd)
          assert.isAtMost(at + piece.length, committedEnd)
          assert.deepStrictEqual(piece, bytes.subarray(at, at + piece.length))
          covered.fill(1, at, at + piece.length)
          previousEnd = at + piece.length
        }
        const head = Math.min(pendingBytesKept, committedEnd)
        const tail = Math.min(pendingLastBytes, committedEnd)
        assert.isTrue(covered.subarray(0, head).every((flag) => flag === 1), "head covered")
        assert.isTrue(covered.subarray(committedEnd - tail).every((flag) => flag === 1), "tail covered")
      }),
      { numRuns: fuzzRuns(3000) }
    )
  })

  it("gives up at the first byte that takes the decoded length past the limit, without holding the line", () => {
    const { lines, sink } = recorder()
    const scanner = new SessionLineScanner(sink, { maxTextUnits: 10, pendingTextBytes: 4 })
    const bytes = new TextEncoder().encode(`{"a":"${"x".repeat(100)}`)
    let pushed = 0
    while (pushed < bytes.length && scanner.push(bytes.subarray(pushed, pushed + 1))._tag === "Consumed") pushed++
    assert.strictEqual(pushed, 10, "the 11th byte is the 11th code unit")
    assert.deepStrictEqual(lines, [])
    // Three-byte characters count one unit each: 30 bytes are still within 10 units.
    const euros = new SessionLineScanner(recorder().sink, { maxTextUnits: 10 })
    assert.strictEqual(euros.push(new TextEncoder().encode("€".repeat(10)))._tag, "Consumed")
    assert.strictEqual(euros.finish()._tag, "Done")
    assert.strictEqual(euros.push(new TextEncoder().encode("€"))._tag, "TooLarge")
    // An incomplete character at the very end counts when the scan ends.
    const dangling = new SessionLineScanner(recorder().sink, { maxTextUnits: 10 })
    assert.strictEqual(dangling.push(Uint8Array.of(...new TextEncoder().encode("x".repeat(10)), 0xe2))._tag, "Consumed")
    assert.strictEqual(dangling.finish()._tag, "TooLarge")
  })

  it("asks for a long line again only while the sink still wants lines", () => {
    const long = new TextEncoder().encode(`${"y".repeat(50)}\n${"z".repeat(50)}\nend`)
    const wanting = recorder()
    const scanner = new SessionLineScanner(wanting.sink, { maxTextUnits: 1000, pendingTextBytes: 8 })
    const steps: Array<string> = []
    const drive = (scan: SessionLineScanner) => {
      for (let offset = 0; offset < long.length; offset += 16) {
        let chunk = long.subarray(offset, offset + 16)
        for (;;) {
          const step = scan.push(chunk)
          steps.push(step._tag)
          if (step._tag !== "LineNeeded") break
          scan.supply(new TextDecoder().decode(long.subarray(step.start, step.end)))
          chunk = chunk.subarray(step.consumed)
        }
      }
      return scan.finish()
    }
    assert.strictEqual(drive(scanner)._tag, "Done")
    assert.strictEqual(steps.filter((step) => step === "LineNeeded").length, 2)
    assert.deepStrictEqual(wanting.lines, ["y".repeat(50), "z".repeat(50)])

    steps.length = 0
    const settled = recorder(0)
    const unwanted = new SessionLineScanner(settled.sink, { maxTextUnits: 1000, pendingTextBytes: 8 })
    assert.strictEqual(drive(unwanted)._tag, "Done")
    assert.deepStrictEqual(steps.filter((step) => step === "LineNeeded"), [])
  })
})

describe("SessionTooLarge", () => {
  it("becomes the RangeError Node's readFile throws for the same file", () => {
    const file = toPlainError(
      new SessionTooLarge({ path: "/s.jsonl", reason: "file", size: 2 ** 31, limit: 2 ** 31 - 1 })
    )
    assert.instanceOf(file, RangeError)
    assert.strictEqual((file as Error).name, "RangeError")
    assert.strictEqual((file as Error).message, "File size (2147483648) is greater than 2 GiB")
    assert.strictEqual((file as { code?: unknown }).code, "ERR_FS_FILE_TOO_LARGE")
    assert.deepStrictEqual(Object.keys(file as object), ["code"])
    assert.strictEqual(String(file), "RangeError [ERR_FS_FILE_TOO_LARGE]: File size (2147483648) is greater than 2 GiB")
    const text = toPlainError(new SessionTooLarge({ path: "/s.jsonl", reason: "text", size: 2 ** 30, limit: 1 }))
    assert.strictEqual(Object.getPrototypeOf(text), RangeError.prototype)
    assert.strictEqual((text as Error).message, "Invalid string length")
    assert.isUndefined((text as { code?: unknown }).code)
  })
})
