/**
 * The audit's scan of one sidecar: every line, on purpose, where the bounded
 * readers look at one tail window.
 *
 * Each complete line is classified as the protocol reads it (a receipt, a
 * head, or neither) and every head's byte range is verified, not only the
 * last; a torn tail and the lines after the last head are reported as crash
 * traces. Lines are decoded exactly as the reference's
 * `Buffer#toString("utf8")` decodes them (`decodeUtf8`): a BOM is kept, so
 * a line that starts with one is not JSON (an `invalid_head` if it mentions
 * `"rarebit_head"`, else an `invalid_record`).
 *
 * Each line is decoded, parsed and validated once. A head whose range is
 * exactly one of the last summary lines the scan validated (the receipt
 * written just before it, or the one a repeated head names) is verified by
 * that line's hash, without reading it again; any other range is read back
 * from the file and checked as the current reader checks it. What the
 * bounded current reader would answer for the file is worked out from the
 * same lines when its tail window holds them all, and asked of the reader
 * (on the same open file) otherwise. The valid receipts of the jobs the
 * caller asks for are kept as where they lie and their hash, so a claim's
 * pointer can be checked against them without reading them again.
 *
 * A sidecar no larger than the reader's tail window (64 KiB), on a file
 * system that can read it in one synchronous call (`SmallRegularRead`, the
 * direct file system's), is read that way, with the same refusals; when its
 * lines alone cannot settle it (a head whose range must be read back, a
 * tail), or it changed while it was read, it is scanned again as below.
 *
 * The scan is streaming: the file is opened once and read in 1 MiB chunks
 * up to its size at open, of a line longer than any record only its first
 * bytes are kept, and of earlier lines only the last few summaries' hashes,
 * so memory never grows with the sidecar (only with the receipts of the
 * jobs asked for). It never blocks and never reads anything but a regular
 * file (`io/RegularFile`); what it cannot read is a finding, never a
 * failure.
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import type { File, FileSystem } from "effect/FileSystem"
import type { PlatformError } from "effect/PlatformError"
import { smallRegularReadOf } from "../../io/NonBlockingOpen.js"
import { describeType, type FileNotRegular, openRegular } from "../../io/RegularFile.js"
import { sha256Hex } from "../../protocol/CanonicalJson.js"
import { type Head, isValidHead } from "../../protocol/Head.js"
import { concatBytes } from "../../protocol/internal/Bytes.js"
import { parseJsonOrNull } from "../../protocol/internal/JsonParse.js"
import { isObjectRecord, memberOf } from "../../protocol/internal/JsonShape.js"
import { decodeUtf8 } from "../../protocol/internal/Utf8.js"
import { MAX_HISTORY_BYTES, MAX_RECEIPT_BYTES, MAX_TAIL_BYTES } from "../../protocol/Limits.js"
import { explainSummaryReceipt, validateSummaryReceipt } from "../../protocol/SummaryReceipt.js"
import { explainTitleReceipt } from "../../protocol/TitleReceipt.js"
import {
  type Availability,
  currentOf,
  isHeadTyped,
  isValidReceipt,
  sidecarFailure,
  type SidecarReason,
  verifyReceiptRange
} from "../read/SidecarReader.js"
import { type AuditFinding, finding } from "./AuditFinding.js"
import { describeError, describeJson, plural } from "./ReportFields.js"

const NEWLINE = 10

/**
 * How many of the last summary lines the scan remembers (offset, length,
 * hash, `sessionId`) to verify the heads that follow without reading them
 * again. A head names the receipt written just before it, or repeats the
 * previous head after a title; a range outside these is read back.
 */
const REMEMBERED_SUMMARIES = 16

/** What the scan saw in one sidecar. @category models @since 0.1.0 */
export interface SidecarSummary {
  readonly path: string
  /** Size when the scan opened it; `null` when it could not be opened. */
  readonly bytes: number | null
  readonly lines: number
  readonly receipts: number
  readonly heads: number
  /** What the bounded current reader says about the same file. */
  readonly current: { readonly availability: Availability; readonly reason: SidecarReason | null }
}

/**
 * A valid receipt of one of the jobs the scan was asked about: where its
 * line lies and the SHA-256 of the line's bytes (newline included), which
 * is what a receipt pointer names.
 *
 * @category models
 * @since 0.1.0
 */
export interface ScannedReceipt {
  readonly jobId: string
  readonly offset: number
  /** The line's length in bytes, its newline included. */
  readonly length: number
  readonly hash: string
}

/**
 * The job ids whose receipts a scan keeps (a `Set` of them will do; the
 * audit asks whether it read a claim of the job).
 *
 * @category models
 * @since 0.1.0
 */
export interface WantedJobs {
  readonly has: (jobId: string) => boolean
}

/** What the scan of one sidecar found. @category models @since 0.1.0 */
export interface SidecarScan {
  readonly summary: SidecarSummary
  readonly findings: ReadonlyArray<AuditFinding>
  /** Job ids (among the claimed ones) with a valid receipt in this sidecar. */
  readonly jobIds: ReadonlySet<string>
  /** Every valid receipt of those jobs, in file order. */
  readonly receipts: ReadonlyArray<ScannedReceipt>
}

const receiptProblem = (record: unknown, text: string): string => {
  if (record === null && text.trim() !== "null") return "not valid JSON"
  const type = memberOf(record, "type")
  if (type === "rarebit_summary") return `summary receipt fails v4 validation: ${explainSummaryReceipt(record)}`
  if (type === "rarebit_title") return `title receipt fails v4 validation: ${explainTitleReceipt(record)}`
  return `not a receipt or head (its type is ${describeJson(type)})`
}

/** Says why a valid head's range does not verify; the caller already knows it does not. */
const headRangeProblem = Effect.fnUntraced(function*(file: File, size: number, head: Head) {
  const offset = head.receiptOffset
  const length = head.receiptLength
  if (offset + length > size) return `points at bytes ${offset}+${length}, past the end of the file (${size} bytes)`
  const bytes = Option.getOrElse(yield* file.readAlloc(length, { position: BigInt(offset) }), () => new Uint8Array(0))
  if (sha256Hex(bytes) !== head.receiptHash) return `the bytes at ${offset}+${length} do not hash to receiptHash`
  if (bytes[bytes.length - 1] !== NEWLINE) return `the range at ${offset}+${length} does not end a line`
  const record = parseJsonOrNull(decodeUtf8(bytes.subarray(0, -1)))
  if (!isObjectRecord(record) || record.type !== "rarebit_summary") return "the range does not hold a summary receipt"
  if (record.sessionId !== head.sessionId) return "the receipt belongs to another sessionId than the head"
  if (!validateSummaryReceipt(record).valid) return "the summary receipt it points at fails v4 validation"
  return "the range does not verify"
})

/** A valid head line, and whether its range verified (`undefined` until it is read back). */
interface HeadAt {
  readonly offset: number
  readonly head: Head
  verified: boolean | undefined
}

/** A valid summary line the scan remembers, for the heads that name it. */
interface SummaryLine {
  readonly length: number
  readonly hash: string
  readonly sessionId: unknown
}

type CurrentView = SidecarSummary["current"]

/**
 * Judges the complete lines of one sidecar as they come, without I/O: the
 * findings about each line, the counts, the receipts of the wanted jobs, and
 * the heads whose range must still be read back.
 */
const makeLineJudge = (path: string, wanted: WantedJobs) => {
  const findings: Array<AuditFinding> = []
  const jobIds = new Set<string>()
  const receiptsOfWanted: Array<ScannedReceipt> = []
  const summaries = new Map<number, SummaryLine>()
  const unresolved: Array<HeadAt> = []
  let lines = 0
  let receipts = 0
  let heads = 0
  // The uncommitted tail: lines after the last head that are not heads.
  let headSeen = false
  let afterHead = 0
  let firstAfterHead = -1
  // What the current reader sees after the last valid head: every non-blank line.
  let lastHead: HeadAt | undefined
  let linesAfterLastHead = 0
  let invalidHeadAfterLastHead = false
  let oversizedAfterLastHead = false

  const remember = (offset: number, line: SummaryLine) => {
    summaries.set(offset, line)
    if (summaries.size > REMEMBERED_SUMMARIES) summaries.delete(summaries.keys().next().value!)
  }
  /** The range is one of the remembered summaries, by hash and `sessionId`: the bytes the reader would read verify. */
  const confirmed = (head: Head): boolean => {
    const line = summaries.get(head.receiptOffset)
    return line !== undefined && line.length === head.receiptLength && line.hash === head.receiptHash &&
      line.sessionId === head.sessionId
  }

  /** One complete line at `offset`, `length` bytes with its newline; `bytes` holds all of it (newline included) unless it is longer than any record. */
  const judge = (offset: number, bytes: Uint8Array, length: number) => {
    lines++
    if (length === 1) return
    linesAfterLastHead++
    if (length > MAX_RECEIPT_BYTES) {
      oversizedAfterLastHead = true
      if (headSeen && afterHead++ === 0) firstAfterHead = offset
      const mentionsHead = decodeUtf8(bytes).includes("\"rarebit_head\"")
      findings.push(finding(
        mentionsHead ? "invalid_head" : "invalid_record",
        "damage",
        path,
        `a line of ${length} bytes exceeds the ${MAX_RECEIPT_BYTES}-byte protocol limit`,
        { offset }
      ))
      return
    }
    const text = decodeUtf8(bytes.subarray(0, length - 1))
    const record = parseJsonOrNull(text)
    if (isHeadTyped(record, text)) {
      if (!isValidHead(record)) {
        invalidHeadAfterLastHead = true
        findings.push(finding(
          "invalid_head",
          "damage",
          path,
          record ? "a head record fails validation" : "an unparsable line mentions rarebit_head",
          { offset }
        ))
        return
      }
      heads++
      headSeen = true
      afterHead = 0
      firstAfterHead = -1
      const at: HeadAt = { offset, head: record, verified: confirmed(record) || undefined }
      if (at.verified === undefined) unresolved.push(at)
      lastHead = at
      linesAfterLastHead = 0
      invalidHeadAfterLastHead = false
      oversizedAfterLastHead = false
      return
    }
    if (headSeen && afterHead++ === 0) firstAfterHead = offset
    if (isValidReceipt(record)) {
      receipts++
      const jobId = record.jobId
      const isWanted = typeof jobId === "string" && wanted.has(jobId)
      const isSummary = record.type === "rarebit_summary"
      if (isWanted || isSummary) {
        const hash = sha256Hex(bytes.subarray(0, length))
        if (isWanted) {
          jobIds.add(jobId)
          receiptsOfWanted.push({ jobId, offset, length, hash })
        }
        if (isSummary) remember(offset, { length, hash, sessionId: record.sessionId })
      }
      return
    }
    findings.push(finding("invalid_record", "damage", path, receiptProblem(record, text), { offset }))
  }

  /**
   * The current reader's answer, from the lines judged: when its tail
   * window (the last `MAX_TAIL_BYTES`, from just after their first newline)
   * holds the last valid head and every line after it was parsed.
   * `undefined` when only the reader can tell.
   */
  const current = (size: number): CurrentView | undefined => {
    const windowStart = size > MAX_TAIL_BYTES ? size - MAX_TAIL_BYTES : 0
    if (windowStart > 0 && (lastHead === undefined || lastHead.offset <= windowStart)) return undefined
    if (oversizedAfterLastHead) return undefined
    if (invalidHeadAfterLastHead) return { availability: "unreadable", reason: "sidecar_head_invalid" }
    if (lastHead === undefined) {
      return { availability: "missing", reason: linesAfterLastHead > 0 ? "sidecar_head_missing" : "sidecar_empty" }
    }
    if (lastHead.verified !== true) return { availability: "unreadable", reason: "sidecar_head_invalid" }
    return { availability: "available", reason: linesAfterLastHead > 0 ? "sidecar_uncommitted_tail" : null }
  }

  return {
    judge,
    findings,
    jobIds,
    receipts: receiptsOfWanted,
    unresolved,
    current,
    counts: () => ({ lines, receipts, heads }),
    uncommittedTail: () => (afterHead > 0 ? { lines: afterHead, offset: firstAfterHead } : undefined)
  }
}

type LineJudge = ReturnType<typeof makeLineJudge>

/** The bytes after the last newline, and where they start. */
interface Torn {
  readonly tornBytes: number
  readonly tornAt: number
}

/**
 * Cuts the bytes of a sidecar, chunk after chunk, into complete lines for
 * `judge`, and tells what is left after the last newline (the torn tail).
 */
const makeLineCutter = (judge: LineJudge["judge"]) => {
  let lineStart = 0
  let pending: Array<Uint8Array> = []
  let pendingLength = 0
  const keep = (piece: Uint8Array) => {
    // A line longer than any record can be is invalid whatever follows,
    // so only its first bytes are kept, to bound memory.
    const room = MAX_RECEIPT_BYTES + 1 - Math.min(pendingLength, MAX_RECEIPT_BYTES + 1)
    if (room > 0) pending.push(piece.slice(0, room))
    pendingLength += piece.length
  }
  /** The next chunk, which starts at `position`. */
  const cut = (chunk: Uint8Array, position: number) => {
    let cursor = 0
    while (cursor < chunk.length) {
      const newline = chunk.indexOf(NEWLINE, cursor)
      if (newline < 0) {
        keep(chunk.subarray(cursor))
        return
      }
      // The line with its newline: the bytes a head's hash is taken over.
      const piece = chunk.subarray(cursor, newline + 1)
      const length = pendingLength + piece.length
      if (pending.length === 0) judge(lineStart, piece, length)
      else {
        keep(piece)
        judge(lineStart, concatBytes(pending), length)
      }
      pending = []
      pendingLength = 0
      lineStart = position + newline + 1
      cursor = newline + 1
    }
  }
  return { cut, torn: () => ({ tornBytes: pendingLength, tornAt: lineStart }) }
}

/**
 * Feeds every complete line of `file` (its first `size` bytes, in chunks of
 * at most `MAX_HISTORY_BYTES`) to `judge`; returns what tells the torn tail.
 */
const readLines = (file: File, size: number, judge: LineJudge["judge"]) => {
  const cutter = makeLineCutter(judge)
  // A chain of reads rather than a generator: most sidecars are one read,
  // and an audit makes tens of thousands of them.
  const from = (position: number): Effect.Effect<void, PlatformError> =>
    position >= size ? Effect.void : Effect.flatMap(
      file.readAlloc(Math.min(MAX_HISTORY_BYTES, size - position), { position: BigInt(position) }),
      (read) => {
        const chunk = Option.getOrElse(read, () => new Uint8Array(0))
        if (chunk.length === 0) return Effect.void
        cutter.cut(chunk, position)
        return from(position + chunk.length)
      }
    )
  return Effect.as(from(0), cutter)
}

const notRegularFinding = (path: string, type: string) =>
  finding(
    "sidecar_not_regular",
    "damage",
    path,
    `is ${describeType(type)}, not a regular file; the store never reads it`
  )

/**
 * What to report for a sidecar that could not be opened: what an `lstat`
 * says of the path (it is not a regular file, or cannot be looked at), else
 * why the open failed, with the size the `lstat` saw.
 */
const unopenable = (fs: FileSystem, path: string, error: PlatformError) =>
  Effect.map(Effect.result(fs.lstat(path)), (info) => {
    if (info._tag === "Failure") {
      return { bytes: null, found: finding("sidecar_unreadable", "damage", path, describeError(info.failure)) }
    }
    if (info.success.type !== "File") return { bytes: null, found: notRegularFinding(path, info.success.type) }
    return {
      bytes: Number(info.success.size),
      found: finding("sidecar_unreadable", "damage", path, describeError(error))
    }
  })

/**
 * Scans every line of one sidecar, and tells what the bounded current
 * reader says about the same file. `wanted` are the job ids whose receipts
 * the caller looks for (the claimed ones); the scan notes which it meets,
 * and where their receipts lie.
 *
 * @category audit
 * @since 0.1.0
 */
export const scanSidecar = (
  fs: FileSystem,
  path: string,
  wanted: WantedJobs
): Effect.Effect<SidecarScan> => {
  const readSmall = smallRegularReadOf(fs)
  if (readSmall === undefined) return scanThroughEffects(fs, path, wanted)
  return Effect.suspend(() => {
    const read = readSmall(path, { limit: MAX_TAIL_BYTES, noFollow: true })
    if (read === undefined || read.bytes.length !== read.size) return scanThroughEffects(fs, path, wanted)
    const lines = makeLineJudge(path, wanted)
    const cutter = makeLineCutter(lines.judge)
    cutter.cut(read.bytes, 0)
    const quick = concludeQuickly(lines, path, read.size, cutter.torn())
    // Anything the lines alone cannot settle is scanned again the ordinary way, on an open handle.
    return quick === undefined ? scanThroughEffects(fs, path, wanted) : Effect.succeed(quick)
  })
}

/** What a scan reports, once every line is judged. */
const resultOf = (
  lines: LineJudge,
  path: string,
  bytes: number | null,
  current: CurrentView,
  extra: ReadonlyArray<AuditFinding> = []
): SidecarScan => ({
  summary: { path, bytes, ...lines.counts(), current },
  // The heads read back after the scan are reported where their lines are.
  findings: [...lines.findings.sort((a, b) => a.offset! - b.offset!), ...extra],
  jobIds: lines.jobIds,
  receipts: lines.receipts
})

/** The common case, answered without I/O: every head verified by the lines before it, no tail, and a current answer the lines tell. */
const concludeQuickly = (lines: LineJudge, path: string, size: number, torn: Torn): SidecarScan | undefined => {
  if (lines.unresolved.length > 0 || torn.tornBytes > 0 || lines.uncommittedTail() !== undefined) return undefined
  const current = lines.current(size)
  return current === undefined ? undefined : resultOf(lines, path, size, current)
}

/** The scan through the file system's `Effect`s: any size, any file, and what cannot be read reported. */
const scanThroughEffects = (
  fs: FileSystem,
  path: string,
  wanted: WantedJobs
): Effect.Effect<SidecarScan> => {
  const lines = makeLineJudge(path, wanted)
  const result = (bytes: number | null, current: CurrentView, extra: ReadonlyArray<AuditFinding> = []): SidecarScan =>
    resultOf(lines, path, bytes, current, extra)
  const viewOf = (error: PlatformError | FileNotRegular): CurrentView => {
    const failed = sidecarFailure(path, error)
    return { availability: failed.availability, reason: failed.diagnostics.reason ?? null }
  }
  const empty = (bytes: number | null, current: CurrentView, found: AuditFinding): SidecarScan => ({
    summary: { path, bytes, lines: 0, receipts: 0, heads: 0, current },
    findings: [...lines.findings.sort((a, b) => a.offset! - b.offset!), found],
    jobIds: lines.jobIds,
    receipts: lines.receipts
  })

  /** The heads whose range is read back, the tails, and the current reader's answer, once every line is judged. */
  const conclude = (file: File, size: number, torn: Torn) =>
    Effect.gen(function*() {
      for (const at of lines.unresolved) {
        at.verified = (yield* verifyReceiptRange(file, size, at.head, true)) !== undefined
        if (!at.verified) {
          const why = yield* headRangeProblem(file, size, at.head)
          lines.findings.push(finding("head_range_invalid", "damage", path, why, { offset: at.offset }))
        }
      }
      const tails: Array<AuditFinding> = []
      if (torn.tornBytes > 0) {
        tails.push(finding(
          "torn_tail",
          "crash_trace",
          path,
          `${
            plural(torn.tornBytes, "byte")
          } after the last newline (an append that did not finish); readers ignore them`,
          { offset: torn.tornAt }
        ))
      }
      const uncommitted = lines.uncommittedTail()
      if (uncommitted !== undefined) {
        tails.push(finding(
          "uncommitted_tail",
          "crash_trace",
          path,
          `${
            plural(uncommitted.lines, "complete line")
          } after the last head (a writer stopped between receipt and head)`,
          { offset: uncommitted.offset }
        ))
      }
      const current = lines.current(size) ??
        (yield* Effect.map(currentOf(file, path, size, undefined), ({ current }): CurrentView => ({
          availability: current.availability,
          reason: current.diagnostics.reason ?? null
        })))
      return result(size, current, tails)
    })

  return Effect.scoped(
    // Never blocks, and refuses anything but a regular file.
    Effect.flatMap(openRegular(fs, path, { flag: "r", followSymlinks: false }), ({ file, info }) => {
      const size = Number(info.size)
      const scanned = Effect.flatMap(readLines(file, size, lines.judge), (cutter) => {
        const torn = cutter.torn()
        const quick = concludeQuickly(lines, path, size, torn)
        return quick === undefined ? conclude(file, size, torn) : Effect.succeed(quick)
      })
      return Effect.catch(
        scanned,
        (error) =>
          Effect.succeed(
            empty(size, viewOf(error), finding("sidecar_unreadable", "damage", path, describeError(error)))
          )
      )
    })
  ).pipe(
    Effect.catch((error) =>
      error._tag === "FileNotRegular"
        ? Effect.succeed(empty(null, viewOf(error), notRegularFinding(path, error.type)))
        : Effect.map(unopenable(fs, path, error), ({ bytes, found }) => empty(bytes, viewOf(error), found))
    )
  )
}
