/**
 * Shared material of the fuzz tests: a valid sidecar built line by line
 * (receipts of two Sessions' worth of branches, their heads, a title),
 * optionally with decoder-sensitive bytes written into chosen lines before
 * the heads are hashed, byte mutations that a crash, a hostile writer or a
 * broken disk could leave, and the side-by-side read of one directory by our
 * Promise API and the reference's.
 */
import { assert } from "@effect/vitest"
import fc from "fast-check"
import { createHash } from "node:crypto"
import { mkdir, writeFile } from "node:fs/promises"
import { dirname } from "node:path"
import * as Ours from "../../src/promise/index.js"
import type { NativeObservation } from "../../src/state/ArtifactState.js"
import { concatBytes, editLine, type SensitiveBytes, sensitiveBytes, type Spot, spot } from "../support/DecoderBytes.js"
import {
  entry,
  jobId,
  type Outcome,
  outcomeOf,
  type Roots,
  Store as Ref,
  summaryReceipt,
  titleReceipt
} from "../support/Reference.js"

export const SESSION_ID = "fuzz-session"

export const branches = [
  [entry("u1", "user", "first question"), entry("a1", "assistant", "first answer")],
  [
    entry("u1", "user", "first question"),
    entry("a1", "assistant", "first answer"),
    entry("u2", "user", "second question"),
    entry("a2", "assistant", "second answer")
  ]
]

const encoder = new TextEncoder()
const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

const concat = concatBytes

const insertAt = (bytes: Uint8Array, at: number, inserted: Uint8Array) =>
  concat(bytes.subarray(0, at), inserted, bytes.subarray(at))

/** One line of a sidecar and where it starts. */
export interface Line {
  readonly offset: number
  readonly bytes: Uint8Array
  readonly kind: "summary" | "title" | "head"
}

/**
 * Decoder-sensitive bytes written into one line of the valid sidecar before
 * the heads are computed, so a head pointing at an edited receipt still
 * verifies by hash and the decision is left to how its text decodes.
 */
export interface LineEdit {
  /** A line index, or the lines a current read rests on. */
  readonly target: "currentHead" | "currentReceipt" | number
  readonly spot: Spot
  readonly bytes: SensitiveBytes
}

/** Edits weighted toward the current head and the receipt it points at. */
export const lineEdit: fc.Arbitrary<LineEdit> = fc.record({
  target: fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom<"currentHead" | "currentReceipt">("currentHead", "currentReceipt") },
    { weight: 1, arbitrary: fc.nat() }
  ),
  spot,
  bytes: sensitiveBytes
})

const sidecarRecords = (): ReadonlyArray<Record<string, unknown>> => [
  { ...summaryReceipt(branches[0], SESSION_ID), jobId: jobId(1) },
  { ...titleReceipt(branches[0], SESSION_ID), jobId: jobId(2) },
  { ...summaryReceipt(branches[1], SESSION_ID), jobId: jobId(3) },
  { ...summaryReceipt(branches[0], SESSION_ID), jobId: jobId(4) },
  { ...titleReceipt(branches[1], SESSION_ID), jobId: jobId(5) }
]

/**
 * A valid sidecar: for each record its receipt line, then a head for
 * summaries (repeated after titles). `edits` change lines first; heads are
 * computed over the edited receipts, so they point at them exactly.
 */
export const validSidecar = (edits: ReadonlyArray<LineEdit> = []): {
  readonly bytes: Uint8Array
  readonly lines: ReadonlyArray<Line>
} => {
  const records = sidecarRecords()
  // Line kinds first, so edit targets resolve to indexes before anything is built.
  const kinds: Array<Line["kind"]> = []
  let headSeen = false
  for (const record of records) {
    const summary = record.type === "rarebit_summary"
    kinds.push(summary ? "summary" : "title")
    headSeen ||= summary
    if (headSeen) kinds.push("head")
  }
  const currentHead = kinds.lastIndexOf("head")
  const currentReceipt = kinds.lastIndexOf("summary")
  const editsAt = (index: number) =>
    edits.filter(({ target }) =>
      (target === "currentHead"
        ? currentHead
        : target === "currentReceipt"
        ? currentReceipt
        : target % kinds.length) ===
        index
    )
  const edited = (index: number, line: Uint8Array) =>
    editsAt(index).reduce((bytes, edit) => editLine(bytes, edit.spot, edit.bytes.bytes), line)

  const lines: Array<Line> = []
  let offset = 0
  let lastHead: Uint8Array | undefined
  for (const record of records) {
    const receipt = edited(lines.length, encoder.encode(`${JSON.stringify(record)}\n`))
    lines.push({ offset, bytes: receipt, kind: record.type === "rarebit_title" ? "title" : "summary" })
    const receiptOffset = offset
    offset += receipt.length
    if (record.type === "rarebit_summary") {
      lastHead = encoder.encode(`${
        JSON.stringify({
          type: "rarebit_head",
          protocolVersion: 1,
          sessionId: SESSION_ID,
          receiptOffset,
          receiptLength: receipt.length,
          receiptHash: sha256(receipt)
        })
      }\n`)
    }
    if (lastHead !== undefined) {
      const head = edited(lines.length, lastHead)
      lines.push({ offset, bytes: head, kind: "head" })
      offset += head.length
    }
  }
  const bytes = new Uint8Array(offset)
  for (const line of lines) bytes.set(line.bytes, line.offset)
  return { bytes, lines }
}

/** A head line pointing at `ref`, with `sessionId` unless overridden. */
const headLine = (ref: Record<string, unknown>) =>
  encoder.encode(`${JSON.stringify({ type: "rarebit_head", protocolVersion: 1, sessionId: SESSION_ID, ...ref })}\n`)

/** A mutation of a sidecar, given the sidecar and its valid lines. */
export type Mutation = (bytes: Uint8Array, lines: ReadonlyArray<Line>) => Uint8Array

/** The current read's window: the last 64 KiB of a sidecar. */
export const TAIL_WINDOW_BYTES = 64 * 1024

/** Where each line of `bytes` starts, a torn tail included. */
const lineStarts = (bytes: Uint8Array): Array<number> => {
  const starts = [0]
  for (let index = bytes.indexOf(10); index >= 0 && index + 1 < bytes.length; index = bytes.indexOf(10, index + 1)) {
    starts.push(index + 1)
  }
  return starts
}

/** A JSON line of exactly `length` bytes (at least 11), newline included. */
const paddingLine = (length: number) => encoder.encode(`{"pad":"${"x".repeat(Math.max(0, length - 11))}"}\n`)

const lastHeadOf = (lines: ReadonlyArray<Line>): Uint8Array =>
  lines.findLast((line) => line.kind === "head")?.bytes ?? encoder.encode("{\"type\":\"rarebit_head\"}\n")

/**
 * `bytes` with `line` (edited: `inserted` at its start, or before its
 * newline with `atEnd`) inserted at `lineAt`, and a padding line after it
 * sized so that the current read's 64 KiB window starts `shift` bytes before
 * the inserted bytes: inside them, just before or after them, on the
 * newline before the line or on its own. `bytes` is returned unchanged when
 * it is too long for that.
 */
export const straddlingWindow = (
  bytes: Uint8Array,
  lineAt: number,
  line: Uint8Array,
  inserted: Uint8Array,
  atEnd: boolean,
  shift: number
): Uint8Array => {
  const edited = editLine(line, { kind: atEnd ? "beforeNewline" : "start" }, inserted)
  const insertedAt = atEnd ? line.length - 1 : 0
  const padding = TAIL_WINDOW_BYTES - shift - (edited.length - insertedAt) - (bytes.length - lineAt)
  if (padding < 11) return bytes
  return concat(bytes.subarray(0, lineAt), edited, paddingLine(padding), bytes.subarray(lineAt))
}

/**
 * Decoder-sensitive bytes in every line position of a damaged sidecar, not
 * re-hashed: at the start or just before the newline of any line (a head, a
 * receipt, the lines after the last head, the torn tail), as a torn tail of
 * their own, and straddling the start of the current read's 64 KiB window.
 */
export const decoderMutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.tuple(fc.nat(), fc.boolean(), sensitiveBytes).map(([pick, atEnd, { bytes: inserted }]): Mutation => (bytes) => {
    const starts = lineStarts(bytes)
    const start = starts[pick % starts.length]
    const newline = bytes.indexOf(10, start)
    return insertAt(bytes, atEnd ? (newline < 0 ? bytes.length : newline) : start, inserted)
  }),
  fc.tuple(sensitiveBytes, fc.constantFrom("", "{\"type\":\"rarebit_head\"", "{\"type\":\"rarebit_summary\",")).map(
    ([{ bytes: inserted }, torn]): Mutation => (bytes) => concat(bytes, inserted, encoder.encode(torn))
  ),
  // A copy of the last head with the bytes at its start or before its
  // newline, placed so the window starts near them.
  fc.tuple(fc.nat(), sensitiveBytes, fc.boolean(), fc.integer({ min: -4, max: 4 })).map(
    ([pick, { bytes: inserted }, atEnd, shift]): Mutation => (bytes, lines) => {
      const starts = [...lineStarts(bytes), bytes.length]
      return straddlingWindow(bytes, starts[pick % starts.length], lastHeadOf(lines), inserted, atEnd, shift)
    }
  )
)

const position = fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true })
const at = (fraction: number, length: number) => Math.floor(fraction * (length + 1))

const invalidUtf8 = fc.constantFrom(
  Uint8Array.of(0xff),
  Uint8Array.of(0xfe, 0xff),
  Uint8Array.of(0x80),
  Uint8Array.of(0xc0, 0xaf),
  Uint8Array.of(0xed, 0xa0, 0x80),
  Uint8Array.of(0xf4, 0x90, 0x80, 0x80),
  Uint8Array.of(0xe2, 0x82)
)

const hexChar = fc.constantFrom(..."0123456789abcdef")

/** The ways a receipt reference can miss its receipt by a little. */
export type NearMiss = "exact" | "offset-" | "offset+" | "length-" | "length+" | "hash"

/**
 * A `{receiptOffset, receiptLength, receiptHash}` reference to `target`, off
 * by one byte or one hash digit as `miss` says; `editHash` makes the wrong
 * hash from the right one.
 */
export const nearMissReference = (
  target: { readonly offset: number; readonly bytes: Uint8Array },
  miss: NearMiss,
  editHash: (exact: string) => string
): Record<string, unknown> => {
  const exact = sha256(target.bytes)
  return {
    receiptOffset: target.offset + (miss === "offset-" ? -1 : miss === "offset+" ? 1 : 0),
    receiptLength: target.bytes.length + (miss === "length-" ? -1 : miss === "length+" ? 1 : 0),
    receiptHash: miss === "hash" ? editHash(exact) : exact
  }
}

/**
 * Every kind of damage the fuzzers apply; each picks its positions from the
 * sidecar it is given, so mutations compose.
 */
export const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  // Truncated anywhere: a torn tail, or a cut through a line.
  position.map((f): Mutation => (bytes) => bytes.subarray(0, at(f, bytes.length))),
  // Random bytes instead of the sidecar.
  fc.uint8Array({ maxLength: 600 }).map((random): Mutation => () => random),
  // Random bytes, or a random line, inserted anywhere.
  fc.tuple(position, fc.uint8Array({ minLength: 1, maxLength: 80 })).map(([f, random]): Mutation => (bytes) =>
    insertAt(bytes, at(f, bytes.length), random)
  ),
  fc.tuple(position, fc.string({ maxLength: 80 })).map(([f, text]): Mutation => (bytes) =>
    insertAt(bytes, at(f, bytes.length), encoder.encode(`${text}\n`))
  ),
  // One byte flipped.
  fc.tuple(position, fc.integer({ min: 1, max: 255 })).map(([f, xor]): Mutation => (bytes) => {
    if (bytes.length === 0) return bytes
    const copy = bytes.slice()
    copy[Math.min(copy.length - 1, at(f, copy.length - 1))] ^= xor
    return copy
  }),
  // Invalid UTF-8 inside a line (receipts hash over bytes, so this also breaks hashes).
  fc.tuple(position, invalidUtf8).map(([f, bad]): Mutation => (bytes) => insertAt(bytes, at(f, bytes.length), bad)),
  // Decoder-sensitive bytes at the edges of lines and of the tail window.
  { weight: 3, arbitrary: decoderMutation },
  // Lines spliced: a random selection of whole lines, reordered, repeated or dropped.
  fc.array(fc.nat(), { maxLength: 12 }).map((picks): Mutation => (bytes, lines) =>
    lines.length === 0 ? bytes : concat(...picks.map((pick) => lines[pick % lines.length].bytes))
  ),
  // A line cut short and glued to the next one.
  fc.tuple(fc.nat(), position).map(([pick, f]): Mutation => (bytes, lines) => {
    if (lines.length === 0) return bytes
    const line = lines[pick % lines.length]
    const cut = line.offset + at(f, line.bytes.length - 1)
    return concat(bytes.subarray(0, cut), bytes.subarray(line.offset + line.bytes.length))
  }),
  // A huge line: beyond the 64 KiB current-read window, or beyond the 48 KiB receipt limit.
  fc.tuple(position, fc.constantFrom(49 * 1024, 70 * 1024), fc.boolean(), fc.boolean()).map(
    ([f, size, mentionsHead, terminated]): Mutation => (bytes) => {
      const filler = "x".repeat(size)
      const text = mentionsHead ? `{"type":"rarebit_head","pad":"${filler}"}` : filler
      return insertAt(bytes, at(f, bytes.length), encoder.encode(terminated ? `${text}\n` : text))
    }
  ),
  // A head pointing anywhere, appended.
  fc.record({
    receiptOffset: fc.oneof(fc.nat({ max: 5000 }), fc.integer(), fc.double()),
    receiptLength: fc.oneof(fc.nat({ max: 5000 }), fc.integer({ min: 48 * 1024 - 2, max: 48 * 1024 + 2 })),
    receiptHash: fc.oneof(fc.stringMatching(/^[a-f0-9]{64}$/), fc.string({ maxLength: 70 }))
  }).map((ref): Mutation => (bytes) => concat(bytes, headLine(ref))),
  // A near-miss of a real head: offset or length off by one, one hex digit changed, another session, a title.
  fc.tuple(fc.nat(), fc.constantFrom("offset-", "offset+", "length-", "length+", "hash", "session", "title"), hexChar)
    .map(([pick, miss, digit]): Mutation => (bytes, lines) => {
      const receipts = lines.filter((line) => line.kind !== "head")
      if (receipts.length === 0) return bytes
      const target = receipts[pick % receipts.length]
      const ref = nearMissReference(target, miss === "session" || miss === "title" ? "exact" : miss, (hash) => {
        const index = pick % 64
        const replaced = hash[index] === digit ? (digit === "0" ? "1" : "0") : digit
        return hash.slice(0, index) + replaced + hash.slice(index + 1)
      })
      if (miss === "session") ref.sessionId = "another-session"
      // "title": a valid pointer, but heads may only point at summaries.
      const pointed = miss === "title"
        ? lines.find((line) => line.kind === "title")
        : undefined
      if (pointed !== undefined) {
        ref.receiptOffset = pointed.offset
        ref.receiptLength = pointed.bytes.length
        ref.receiptHash = sha256(pointed.bytes)
      }
      return concat(bytes, headLine(ref))
    }),
  // A head-typed line that is not a valid head, or an unparsable one mentioning it.
  fc.constantFrom(
    "{\"type\":\"rarebit_head\"}\n",
    "{\"type\":\"rarebit_head\",\"protocolVersion\":2}\n",
    "not json \"rarebit_head\"\n",
    "{\"type\":\"rarebit_head\",\"protocolVersion\":1,\"sessionId\":\"\",\"receiptOffset\":0,\"receiptLength\":1,\"receiptHash\":\"x\"}\n",
    "\n\n",
    "[]\n",
    "null\n"
  ).map((text): Mutation => (bytes) => concat(bytes, encoder.encode(text)))
)

/** Applies mutations in order. */
export const mutate = (base: Uint8Array, lines: ReadonlyArray<Line>, mutations: ReadonlyArray<Mutation>) =>
  mutations.reduce((bytes, apply) => apply(bytes, lines), base)

export const writeBytes = async (path: string, bytes: Uint8Array): Promise<void> => {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 })
  await writeFile(path, bytes, { mode: 0o600 })
}

/** An outcome as text, to compare key order too (both implementations read the same directory, so paths agree). */
const show = (outcome: Outcome) => JSON.stringify(outcome)

/**
 * Reads one directory with both implementations and asserts identical
 * answers: the current read (with the given native observation and with
 * the Session read from disk) and every history page from 0 and from
 * `fromOffset`. Neither may throw for any content.
 */
export const assertSameReads = async (
  roots: Roots,
  native: NativeObservation,
  options: { readonly limit: number; readonly fromOffset: number; readonly label: string }
): Promise<void> => {
  const base = { sessionFile: roots.sessionFile, ...roots.location }
  for (const variant of [{ native }, {}]) {
    const mine = await outcomeOf(() => Ours.readRarebitCurrent({ ...base, ...variant }))
    const theirs = await outcomeOf(() => Ref.readRarebitCurrent({ ...base, ...variant }))
    assert.isTrue(mine.ok, `our current read threw ${show(mine)} (${options.label})`)
    assert.strictEqual(show(mine), show(theirs), `current read (${options.label})`)
  }
  for (const start of [0, options.fromOffset]) {
    let offset: number | null = start
    for (let page = 0; offset !== null && page < 10_000; page++) {
      const from: number = offset
      const mine = await outcomeOf(() => Ours.readRarebitHistory({ ...base, fromOffset: from, limit: options.limit }))
      const theirs = await outcomeOf(() => Ref.readRarebitHistory({ ...base, fromOffset: from, limit: options.limit }))
      assert.isTrue(mine.ok, `our history threw ${show(mine)} (${options.label})`)
      assert.strictEqual(show(mine), show(theirs), `history page at ${from} (${options.label})`)
      offset = (mine as { value: { nextOffset: number | null } }).value.nextOffset
    }
  }
}
