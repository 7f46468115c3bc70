/**
 * Bounded, fail-closed reads of a sidecar.
 *
 * The current reader touches one window (the last 64 KiB) plus the one
 * receipt range the last valid head points at, however large the sidecar
 * grows. A receipt is reported only after its bytes hash to the head's
 * `receiptHash`; any doubt (an invalid head after the current one, a range
 * that does not verify) yields `unreadable`, never an older head. History is
 * the explicit audit path: pages of at most 1 MiB and 1000 receipts,
 * resumable at absolute byte offsets. Neither reader fails for what it finds
 * on disk; problems are reported in `availability` and `diagnostics`.
 *
 * Lines are decoded exactly as the reference's `Buffer#toString("utf8")`
 * decodes them (`decodeUtf8`): a BOM is kept, so a head or receipt line that
 * starts with one is not JSON, and invalid sequences become U+FFFD.
 *
 * Repeated current reads of the same sidecars are `SidecarCurrentCache`'s,
 * on top of the reader here.
 *
 * @since 0.1.0
 */
import { Effect, Option, type Scope } from "effect"
import type { File, FileSystem } from "effect/FileSystem"
import type { PlatformError } from "effect/PlatformError"
import { type FileNotRegular, openRegular } from "../../io/RegularFile.js"
import { sha256Hex } from "../../protocol/CanonicalJson.js"
import { type Head, isValidHead, isValidReceiptReference } from "../../protocol/Head.js"
import { fileIdentity } from "../../protocol/internal/FileInfo.js"
import { parseJsonOrNull } from "../../protocol/internal/JsonParse.js"
import { isObjectRecord, memberOf } from "../../protocol/internal/JsonShape.js"
import { decodeUtf8 } from "../../protocol/internal/Utf8.js"
import { MAX_HISTORY_BYTES, MAX_HISTORY_RECORDS, MAX_TAIL_BYTES } from "../../protocol/Limits.js"
import type { Receipt } from "../../protocol/Receipt.js"
import { isSummaryReceipt, type SummaryReceipt } from "../../protocol/SummaryReceipt.js"
import { isTitleReceipt } from "../../protocol/TitleReceipt.js"
import { NotRegularFile } from "../Errors.js"

const NEWLINE = 10

/** Whether a sidecar and its receipt could be read. @category models @since 0.1.0 */
export type Availability = "available" | "missing" | "unreadable"

/** Why a current read is not plainly available (or has trailing records). @category models @since 0.1.0 */
export type SidecarReason =
  | "sidecar_missing"
  | "sidecar_empty"
  | "sidecar_head_missing"
  | "sidecar_head_invalid"
  | "sidecar_unreadable"
  | "sidecar_uncommitted_tail"

/** What the current reader observed beside its answer. @category models @since 0.1.0 */
export interface SidecarDiagnostics {
  readonly tornTail: boolean
  readonly tailOffset?: number
  readonly reason?: SidecarReason
}

/**
 * A current read that found a committed receipt: the last valid head and the
 * Summary receipt it points at, verified by hash.
 *
 * `records` holds that one receipt. The arrays and objects of a read are the
 * caller's own: every read builds fresh ones.
 *
 * @category models
 * @since 0.1.0
 */
export interface AvailableSidecarCurrent {
  readonly availability: "available"
  readonly path: string
  readonly receipt: SummaryReceipt
  readonly records: Array<SummaryReceipt>
  readonly head: Head
  readonly diagnostics: SidecarDiagnostics
}

/**
 * A current read without a receipt: the sidecar is `missing` (absent, empty,
 * or without a head) or `unreadable` (an invalid head, a range that does not
 * verify, or a file that cannot be read). `head` is the last valid head when
 * one was found; `diagnostics.reason` says which case it is.
 *
 * @category models
 * @since 0.1.0
 */
export interface UnavailableSidecarCurrent {
  readonly availability: "missing" | "unreadable"
  readonly path: string
  readonly receipt: null
  readonly records: Array<SummaryReceipt>
  readonly head: Head | null
  readonly diagnostics: SidecarDiagnostics
}

/**
 * The sidecar part of a current read, before the artifact-state projection.
 * Narrow on `availability` to reach the receipt.
 *
 * @category models
 * @since 0.1.0
 */
export type SidecarCurrent = AvailableSidecarCurrent | UnavailableSidecarCurrent

/** One valid receipt found by the history reader, at its absolute byte offset. @category models @since 0.1.0 */
export interface HistoryRecord {
  readonly offset: number
  readonly record: Receipt
}

/** One page of history; `nextOffset` is `null` only at the end of the file. @category models @since 0.1.0 */
export interface HistoryPage {
  readonly availability: Availability
  readonly path: string
  readonly records: Array<HistoryRecord>
  readonly nextOffset: number | null
}

interface TailWindow {
  readonly size: number
  /** Absolute offset of `bytes[0]`. */
  readonly offset: number
  readonly bytes: Uint8Array
}

/** A complete line of the tail window; `record` is `null` when it does not parse. @category models @since 0.1.0 */
export interface TailLine {
  readonly offset: number
  readonly line: string
  readonly record: unknown
}

/** A tail line holding a valid head. */
interface HeadLine extends TailLine {
  readonly record: Head
}

/**
 * The part of a tail window that holds complete lines: from just after its
 * first newline when the window starts inside the file (that line's start is
 * outside it), up to `completeLength`, before a torn last line.
 */
const completeRegion = (tail: TailWindow) => {
  let bytes = tail.bytes
  let offset = tail.offset
  if (offset > 0) {
    const firstNewline = bytes.indexOf(NEWLINE)
    if (firstNewline < 0) return { bytes: bytes.subarray(0, 0), offset, completeLength: 0, tornTail: true }
    bytes = bytes.subarray(firstNewline + 1)
    offset += firstNewline + 1
  }
  const tornTail = bytes.length > 0 && bytes[bytes.length - 1] !== NEWLINE
  return { bytes, offset, completeLength: tornTail ? bytes.lastIndexOf(NEWLINE) + 1 : bytes.length, tornTail }
}

/**
 * Splits a tail window into its complete lines.
 *
 * **Details**
 *
 * A window that starts inside the file drops everything up to its first
 * newline, since that line's start is outside the window. A final line
 * without a newline is a torn tail and is ignored. Unparsable complete lines
 * are kept with `record: null` so an invalid head among them fails closed.
 *
 * @category parsing
 * @since 0.1.0
 */
export const completeTailLines = (tail: TailWindow): {
  readonly lines: ReadonlyArray<TailLine>
  readonly tornTail: boolean
} => {
  const { bytes, completeLength, offset, tornTail } = completeRegion(tail)
  const lines: Array<TailLine> = []
  let cursor = 0
  while (cursor < completeLength) {
    const newline = bytes.indexOf(NEWLINE, cursor)
    if (newline < 0 || newline >= completeLength) break
    if (newline > cursor) {
      const line = decodeUtf8(bytes.subarray(cursor, newline))
      lines.push({ offset: offset + cursor, line, record: parseJsonOrNull(line) })
    }
    cursor = newline + 1
  }
  return { lines, tornTail }
}

/**
 * The last valid head of a tail window and the complete lines after it (last
 * first): `completeTailLines` read from the end and parsed only as far back
 * as that head, since nothing before it can change a current read.
 */
const lastHeadOf = (tail: TailWindow): {
  readonly head: HeadLine | undefined
  readonly after: ReadonlyArray<TailLine>
  readonly tornTail: boolean
} => {
  const { bytes, completeLength, offset, tornTail } = completeRegion(tail)
  const after: Array<TailLine> = []
  // `end` is the newline that ends the line being looked at.
  let end = completeLength - 1
  while (end >= 0) {
    const start = end === 0 ? 0 : bytes.lastIndexOf(NEWLINE, end - 1) + 1
    if (end > start) {
      const line = decodeUtf8(bytes.subarray(start, end))
      const record = parseJsonOrNull(line)
      if (isValidHead(record)) return { head: { offset: offset + start, line, record }, after, tornTail }
      after.push({ offset: offset + start, line, record })
    }
    end = start - 1
  }
  return { head: undefined, after, tornTail }
}

/** A receipt of either kind that its schema accepts. @category validation @since 0.1.0 */
export const isValidReceipt = (record: unknown): record is Receipt => {
  const type = memberOf(record, "type")
  return (type === "rarebit_summary" && isSummaryReceipt(record)) ||
    (type === "rarebit_title" && isTitleReceipt(record))
}

/**
 * Whether a sidecar line is meant as a head: head-typed, or unparsable yet
 * mentioning `"rarebit_head"`. Such a line that is not a valid head makes a
 * current read fail closed.
 *
 * @internal
 */
export const isHeadTyped = (record: unknown, line: string): boolean =>
  memberOf(record, "type") === "rarebit_head" || (!record && line.includes("\"rarebit_head\""))

/** The sidecar's tail lines say an invalid head follows the last valid one. */
const invalidHeadAfter = (lines: ReadonlyArray<TailLine>, lastValidHeadOffset: number): boolean =>
  lines.some(({ line, offset, record }) =>
    offset > lastValidHeadOffset && isHeadTyped(record, line) && !isValidHead(record)
  )

/**
 * Opens a sidecar for reading, refusing anything but a regular file.
 *
 * **Details**
 *
 * The open never follows a symlink and never blocks, and the handle's
 * `fstat` decides (`io/RegularFile`): a symlink, FIFO, socket, device or
 * directory at the path is `NotRegularFile`, and nothing of it is read. Size
 * and identity are the opened file's.
 *
 * @internal
 */
export const openRegularFile = (
  fs: FileSystem,
  path: string
): Effect.Effect<
  { readonly file: File; readonly size: number; readonly identity: string | undefined },
  PlatformError | NotRegularFile,
  Scope.Scope
> =>
  openRegular(fs, path, { flag: "r", followSymlinks: false }).pipe(
    Effect.map(({ file, info }) => ({ file, size: Number(info.size), identity: fileIdentity(info) })),
    Effect.catchTag("FileNotRegular", () => Effect.fail(new NotRegularFile({ path })))
  )

type OpenFile = File

/** The bytes `[position, position + length)` of a file, or fewer at its end. @internal */
export const readRange = (file: OpenFile, position: number, length: number): Effect.Effect<Uint8Array, PlatformError> =>
  Effect.map(file.readAlloc(length, { position: BigInt(position) }), Option.getOrElse(() => new Uint8Array(0)))

/**
 * Reads and verifies the receipt a head (or a settled claim) points at.
 *
 * **Details**
 *
 * The range must lie inside the file, hash to `receiptHash`, end with a
 * newline and parse. With `requireSummary` it must be a valid summary of the
 * reference's `sessionId`; otherwise a valid summary or title.
 *
 * @internal
 */
export const verifyReceiptRange = (file: OpenFile, size: number, reference: unknown, requireSummary: boolean) =>
  Effect.map(verifyReceiptBytes(file, size, reference, requireSummary), (verified) => verified?.record)

/** `record` when it is a valid Summary receipt of `sessionId`. */
const summaryOf = (record: unknown, sessionId: unknown): SummaryReceipt | undefined =>
  isObjectRecord(record) && record.type === "rarebit_summary" && record.sessionId === sessionId &&
    isSummaryReceipt(record)
    ? record
    : undefined

/** Like `verifyReceiptRange`, also returning the verified bytes and where they start. */
const verifyReceiptBytes = Effect.fnUntraced(function*(
  file: OpenFile,
  size: number,
  reference: unknown,
  requireSummary: boolean
) {
  if (!isValidReceiptReference(reference)) return undefined
  const { receiptHash, receiptLength, receiptOffset } = reference
  if (receiptOffset + receiptLength > size) return undefined
  const bytes = yield* readRange(file, receiptOffset, receiptLength)
  if (bytes.length !== receiptLength) return undefined
  if (bytes[bytes.length - 1] !== NEWLINE || sha256Hex(bytes) !== receiptHash) return undefined
  const record = parseJsonOrNull(decodeUtf8(bytes.subarray(0, -1)))
  const verified: Receipt | undefined = requireSummary
    ? summaryOf(record, memberOf(reference, "sessionId"))
    : isValidReceipt(record)
    ? record
    : undefined
  return verified === undefined ? undefined : { record: verified, offset: receiptOffset, bytes }
})

/**
 * Reads and verifies the receipt a reference points at, from a sidecar path.
 *
 * Fails with the platform error (or `NotRegularFile`) when the sidecar cannot
 * be opened; succeeds with `undefined` when the reference does not verify.
 *
 * @internal
 */
export const readReceiptReference = (fs: FileSystem, path: string, reference: unknown, requireSummary: boolean) =>
  Effect.scoped(Effect.flatMap(
    openRegularFile(fs, path),
    ({ file, size }) => verifyReceiptRange(file, size, reference, requireSummary)
  ))

/** The answer of a current read whose sidecar could not be opened or read: `missing` when not found, else `unreadable`. @internal */
export const sidecarFailure = (path: string, error: PlatformError | NotRegularFile | FileNotRegular): SidecarCurrent =>
  error._tag === "PlatformError" && error.reason._tag === "NotFound"
    ? {
      availability: "missing",
      path,
      receipt: null,
      records: [],
      head: null,
      diagnostics: { tornTail: false, reason: "sidecar_missing" }
    }
    : {
      availability: "unreadable",
      path,
      receipt: null,
      records: [],
      head: null,
      diagnostics: { tornTail: false, reason: "sidecar_unreadable" }
    }

/**
 * What an available current read rests on: the file's identity and size,
 * where the bytes from just before the head line to the end start, and
 * their SHA-256, with where the head and the verified receipt lie. The same
 * bytes at the same places give the same answer, parsed from them again;
 * a receipt before those bytes is verified again against its head's
 * `receiptHash`. Nothing parsed is kept.
 *
 * @internal
 */
export interface CurrentProof {
  readonly identity: string
  readonly size: number
  /** The bytes from here to `size` (the head line, the newline before it, and the receipt if it lies among them). */
  readonly tailStart: number
  readonly tailSha256: string
  readonly headOffset: number
  readonly receiptOffset: number
  /** The receipt line's bytes, newline included. */
  readonly receiptLength: number
  readonly diagnostics: SidecarDiagnostics
}

const unavailable = (
  availability: "missing" | "unreadable",
  path: string,
  head: Head | null,
  diagnostics: SidecarDiagnostics
): { readonly current: SidecarCurrent; readonly proof: undefined } => ({
  current: { availability, path, receipt: null, records: [], head, diagnostics },
  proof: undefined
})

/**
 * The answer `proof` stands for, if the file still holds the bytes it rests
 * on: those bytes are read again and must hash as they did, a receipt
 * before them must hash to its head's `receiptHash` as a full read checks
 * it, and the head and receipt are parsed from the bytes just read (fresh
 * objects, as a full read gives). `undefined` when anything differs.
 *
 * `fnUntraced` rather than `Effect.gen` in an arrow: this runs on every
 * poll, and a generator function made per call costs each read a new hidden
 * class in the old generation, which keeps the read's garbage alive through
 * young collections (see `test/store/PollGarbage.test.ts`).
 *
 * @internal
 */
export const confirmCurrent = Effect.fnUntraced(function*(file: OpenFile, path: string, proof: CurrentProof) {
  const tail = yield* readRange(file, proof.tailStart, proof.size - proof.tailStart)
  if (!tailMatches(proof, tail)) return undefined
  const head = headIn(proof, tail)
  if (proof.receiptOffset >= proof.tailStart) return answerOf(path, proof, head, receiptIn(proof, tail))
  const receiptBytes = yield* readRange(file, proof.receiptOffset, proof.receiptLength)
  if (receiptBytes.length !== proof.receiptLength || sha256Hex(receiptBytes) !== head.receiptHash) return undefined
  return answerOf(path, proof, head, receiptBytes)
})

/**
 * `confirmCurrent` when the proof's tail holds the receipt too, from `tail`:
 * the bytes `[proof.tailStart, proof.size)` just read. `undefined` when the
 * receipt lies before the tail, or anything differs.
 *
 * @internal
 */
export const confirmFromTail = (path: string, proof: CurrentProof, tail: Uint8Array): SidecarCurrent | undefined =>
  proof.receiptOffset >= proof.tailStart && tailMatches(proof, tail)
    ? answerOf(path, proof, headIn(proof, tail), receiptIn(proof, tail))
    : undefined

const tailMatches = (proof: CurrentProof, tail: Uint8Array): boolean =>
  tail.length === proof.size - proof.tailStart && sha256Hex(tail) === proof.tailSha256

// The same bytes as when they parsed as a valid head, and the receipt as a valid Summary receipt.
const headIn = (proof: CurrentProof, tail: Uint8Array): Head => {
  const headAt = proof.headOffset - proof.tailStart
  return parseJsonOrNull(decodeUtf8(tail.subarray(headAt, tail.indexOf(NEWLINE, headAt)))) as Head
}

const receiptIn = (proof: CurrentProof, tail: Uint8Array): Uint8Array => {
  const receiptAt = proof.receiptOffset - proof.tailStart
  return tail.subarray(receiptAt, receiptAt + proof.receiptLength)
}

const answerOf = (path: string, proof: CurrentProof, head: Head, receiptBytes: Uint8Array): SidecarCurrent => {
  const receipt = parseJsonOrNull(decodeUtf8(receiptBytes.subarray(0, -1))) as SummaryReceipt
  return {
    availability: "available",
    path,
    receipt,
    records: [receipt],
    head,
    diagnostics: { ...proof.diagnostics }
  } satisfies SidecarCurrent
}

/**
 * A current read of `file`, open at `path` with `size` bytes and `identity`
 * (if known), with what an available answer rests on (when the identity is known).
 *
 * @internal
 */
export const currentOf = Effect.fnUntraced(function*(
  file: OpenFile,
  path: string,
  size: number,
  identity: string | undefined
) {
  const length = Math.min(size, MAX_TAIL_BYTES)
  const bytes = yield* readRange(file, size - length, length)
  const tailOffset = size - bytes.length
  const parsed = lastHeadOf({ size, offset: tailOffset, bytes })
  const last = parsed.head
  const head = last?.record ?? null
  if (invalidHeadAfter(parsed.after, last?.offset ?? -1)) {
    return unavailable("unreadable", path, head, { tornTail: false, reason: "sidecar_head_invalid" })
  }
  if (last === undefined) {
    return unavailable("missing", path, null, {
      tornTail: parsed.tornTail,
      reason: parsed.after.length > 0 ? "sidecar_head_missing" : "sidecar_empty"
    })
  }
  const verified = yield* verifyReceiptBytes(file, size, last.record, true)
  // `true` above required a Summary receipt; the type check narrows it for the answer.
  if (verified === undefined || verified.record.type !== "rarebit_summary") {
    return unavailable("unreadable", path, head, { tornTail: parsed.tornTail, reason: "sidecar_head_invalid" })
  }
  const headOffset = last.offset
  const uncommitted = parsed.after.length > 0
  const diagnostics: SidecarDiagnostics = uncommitted
    ? { tornTail: parsed.tornTail, tailOffset, reason: "sidecar_uncommitted_tail" }
    : { tornTail: parsed.tornTail, tailOffset }
  // The byte before the head line is part of the proof: it is what makes the
  // head a line of its own. A receipt inside the window is included too, so
  // that one read confirms both.
  const tailStart = Math.max(
    tailOffset,
    verified.offset >= tailOffset ? Math.min(headOffset - 1, verified.offset) : headOffset - 1
  )
  return {
    current: {
      availability: "available",
      path,
      receipt: verified.record,
      records: [verified.record],
      head: last.record,
      diagnostics
    } satisfies SidecarCurrent,
    proof: identity === undefined ? undefined : {
      identity,
      size,
      tailStart,
      tailSha256: sha256Hex(bytes.subarray(tailStart - tailOffset)),
      headOffset,
      receiptOffset: verified.offset,
      receiptLength: verified.bytes.length,
      diagnostics
    } satisfies CurrentProof
  }
})

/**
 * Reads the current receipt of a sidecar: one tail window plus one verified
 * receipt range.
 *
 * @category readers
 * @since 0.1.0
 */
export const readSidecarCurrent = (fs: FileSystem, path: string): Effect.Effect<SidecarCurrent> =>
  Effect.scoped(Effect.flatMap(
    openRegularFile(fs, path),
    // No identity: nothing keeps a proof of this answer, so none is made.
    ({ file, size }) => Effect.map(currentOf(file, path, size, undefined), ({ current }) => current)
  )).pipe(
    Effect.catch((error) => Effect.succeed(sidecarFailure(path, error)))
  )

/**
 * Whether a history page request is inside the protocol's bounds: a safe,
 * non-negative byte offset and a limit of 1 to 1000 records.
 *
 * @category validation
 * @since 0.1.0
 */
export const historyBoundsValid = (fromOffset: unknown, limit: unknown): boolean =>
  typeof fromOffset === "number" && Number.isSafeInteger(fromOffset) && fromOffset >= 0 &&
  typeof limit === "number" && Number.isInteger(limit) && limit >= 1 && limit <= MAX_HISTORY_RECORDS

/**
 * Reads one page of history at an absolute byte offset.
 *
 * **Details**
 *
 * An offset inside a line resumes at the next line. Heads, unparsable lines
 * and invalid receipts are skipped. A page that finds no newline in its whole
 * 1 MiB window skips the window, so a single oversized line cannot stall an
 * audit.
 *
 * @category readers
 * @since 0.1.0
 */
export const readSidecarHistoryPage = (
  fs: FileSystem,
  path: string,
  fromOffset: number,
  limit: number
): Effect.Effect<HistoryPage> =>
  Effect.scoped(Effect.gen(function*() {
    const { file, size } = yield* openRegularFile(fs, path)
    if (fromOffset >= size) {
      return { availability: "available", path, records: [], nextOffset: null } satisfies HistoryPage
    }
    const bytes = yield* readRange(file, fromOffset, Math.min(MAX_HISTORY_BYTES, size - fromOffset))
    let cursor = 0
    if (fromOffset > 0) {
      const previous = yield* readRange(file, fromOffset - 1, 1)
      if (previous[0] !== NEWLINE) {
        const newline = bytes.indexOf(NEWLINE)
        if (newline < 0) {
          const end = fromOffset + bytes.length
          return {
            availability: "available",
            path,
            records: [],
            nextOffset: end < size ? end : null
          } satisfies HistoryPage
        }
        cursor = newline + 1
      }
    }
    const records: Array<HistoryRecord> = []
    while (cursor < bytes.length && records.length < limit) {
      const newline = bytes.indexOf(NEWLINE, cursor)
      if (newline < 0) {
        break
      }
      const lineOffset = fromOffset + cursor
      const lineBytes = bytes.subarray(cursor, newline)
      cursor = newline + 1
      if (lineBytes.length === 0) {
        continue
      }
      const record = parseJsonOrNull(decodeUtf8(lineBytes))
      if (isValidReceipt(record)) records.push({ offset: lineOffset, record })
    }
    const absoluteCursor = fromOffset + cursor
    const nextOffset = absoluteCursor >= size
      ? null
      : cursor === 0 && bytes.length > 0
      ? fromOffset + bytes.length
      : absoluteCursor
    return { availability: "available", path, records, nextOffset } satisfies HistoryPage
  })).pipe(Effect.catch((error) =>
    Effect.succeed<HistoryPage>({
      availability: error._tag === "PlatformError" && error.reason._tag === "NotFound" ? "missing" : "unreadable",
      path,
      records: [],
      nextOffset: null
    })
  ))
