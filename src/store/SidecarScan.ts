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
 * The scan is streaming: the file is read in 1 MiB chunks up to its size at
 * open, and of a line longer than any record only its first bytes are kept,
 * so memory never grows with the sidecar. It never blocks and never reads
 * anything but a regular file (`io/RegularFile`); what it cannot read is a
 * finding, never a failure.
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import type { FileSystem } from "effect/FileSystem"
import { sha256Hex } from "../protocol/CanonicalJson.js"
import { concatBytes } from "../protocol/internal/Bytes.js"
import { type Head, isValidHead } from "../protocol/Head.js"
import { parseJsonOrNull } from "../protocol/internal/JsonParse.js"
import { isObjectRecord, memberOf } from "../protocol/internal/JsonShape.js"
import { decodeUtf8 } from "../protocol/internal/Utf8.js"
import { MAX_HISTORY_BYTES, MAX_RECEIPT_BYTES } from "../protocol/Limits.js"
import { explainSummaryReceipt, validateSummaryReceipt } from "../protocol/SummaryReceipt.js"
import { explainTitleReceipt } from "../protocol/TitleReceipt.js"
import { describeType, openRegular } from "../io/RegularFile.js"
import { type AuditFinding, finding } from "./AuditFinding.js"
import { describeError, describeJson, plural } from "./ReportFields.js"
import {
  type Availability,
  isHeadTyped,
  isValidReceipt,
  readSidecarCurrent,
  type SidecarReason,
  verifyReceiptRange
} from "./SidecarReader.js"

const NEWLINE = 10

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

/** What the scan of one sidecar found. @category models @since 0.1.0 */
export interface SidecarScan {
  readonly summary: SidecarSummary
  readonly findings: ReadonlyArray<AuditFinding>
  /** Job ids (among the claimed ones) with a valid receipt in this sidecar. */
  readonly jobIds: ReadonlySet<string>
}

const receiptProblem = (record: unknown, text: string): string => {
  if (record === null && text.trim() !== "null") return "not valid JSON"
  const type = memberOf(record, "type")
  if (type === "rarebit_summary") return `summary receipt fails v4 validation: ${explainSummaryReceipt(record)}`
  if (type === "rarebit_title") return `title receipt fails v4 validation: ${explainTitleReceipt(record)}`
  return `not a receipt or head (its type is ${describeJson(type)})`
}

/** Says why a valid head's range does not verify; the caller already knows it does not. */
const headRangeProblem = Effect.fnUntraced(function*(
  file: Effect.Success<ReturnType<FileSystem["open"]>>,
  size: number,
  head: Head
) {
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

/**
 * Scans every line of one sidecar, and asks the bounded current reader what
 * it says about the same file. `wanted` are the job ids whose receipts the
 * caller looks for (the claimed ones); the scan notes which it meets.
 *
 * @category audit
 * @since 0.1.0
 */
export const scanSidecar = (
  fs: FileSystem,
  path: string,
  wanted: ReadonlySet<string>
): Effect.Effect<SidecarScan> =>
  Effect.gen(function*() {
    const current = yield* readSidecarCurrent(fs, path)
    const currentView = { availability: current.availability, reason: current.diagnostics.reason ?? null }
    const findings: Array<AuditFinding> = []
    const jobIds = new Set<string>()
    const empty = (bytes: number | null): SidecarScan => ({
      summary: { path, bytes, lines: 0, receipts: 0, heads: 0, current: currentView },
      findings,
      jobIds
    })

    const info = yield* Effect.result(fs.lstat(path))
    if (info._tag === "Failure") {
      findings.push(finding("sidecar_unreadable", "damage", path, describeError(info.failure)))
      return empty(null)
    }
    if (info.success.type !== "File") {
      findings.push(
        finding(
          "sidecar_not_regular",
          "damage",
          path,
          `is ${describeType(info.success.type)}, not a regular file; the store never reads it`
        )
      )
      return empty(null)
    }
    const size = Number(info.success.size)

    const scanned = yield* Effect.result(Effect.scoped(Effect.gen(function*() {
      // Never blocks, and refuses whatever replaced the file since the lstat.
      const { file } = yield* openRegular(fs, path, { flag: "r", followSymlinks: false })
      let lines = 0
      let receipts = 0
      let heads = 0
      let headSeen = false
      let afterHead = 0
      let firstAfterHead = -1

      const onLine = Effect.fnUntraced(function*(offset: number, bytes: Uint8Array, length: number) {
        lines++
        if (length === 1) return
        if (length > MAX_RECEIPT_BYTES) {
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
        const text = decodeUtf8(bytes)
        const record = parseJsonOrNull(text)
        if (isHeadTyped(record, text)) {
          if (!isValidHead(record)) {
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
          const verified = yield* verifyReceiptRange(file, size, record, true)
          if (verified === undefined) {
            const why = yield* headRangeProblem(file, size, record)
            findings.push(finding("head_range_invalid", "damage", path, why, { offset }))
          }
          return
        }
        if (headSeen && afterHead++ === 0) firstAfterHead = offset
        if (isValidReceipt(record)) {
          receipts++
          const jobId = record.jobId
          if (typeof jobId === "string" && wanted.has(jobId)) jobIds.add(jobId)
          return
        }
        findings.push(finding("invalid_record", "damage", path, receiptProblem(record, text), { offset }))
      })

      let position = 0
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
      const joined = (piece: Uint8Array): Uint8Array => {
        if (pending.length === 0) return piece
        keep(piece)
        return concatBytes(pending)
      }
      while (position < size) {
        const chunk = Option.getOrElse(
          yield* file.readAlloc(Math.min(MAX_HISTORY_BYTES, size - position), { position: BigInt(position) }),
          () => new Uint8Array(0)
        )
        if (chunk.length === 0) break
        let cursor = 0
        while (cursor < chunk.length) {
          const newline = chunk.indexOf(NEWLINE, cursor)
          if (newline < 0) {
            keep(chunk.subarray(cursor))
            break
          }
          const piece = chunk.subarray(cursor, newline)
          const length = pendingLength + piece.length + 1
          yield* onLine(lineStart, joined(piece), length)
          pending = []
          pendingLength = 0
          lineStart = position + newline + 1
          cursor = newline + 1
        }
        position += chunk.length
      }
      if (pendingLength > 0) {
        findings.push(finding(
          "torn_tail",
          "crash_trace",
          path,
          `${plural(pendingLength, "byte")} after the last newline (an append that did not finish); readers ignore them`,
          { offset: lineStart }
        ))
      }
      if (afterHead > 0) {
        findings.push(finding(
          "uncommitted_tail",
          "crash_trace",
          path,
          `${plural(afterHead, "complete line")} after the last head (a writer stopped between receipt and head)`,
          { offset: firstAfterHead }
        ))
      }
      return { lines, receipts, heads }
    })))
    if (scanned._tag === "Failure") {
      const failure = scanned.failure
      findings.push(
        failure._tag === "FileNotRegular"
          ? finding("sidecar_not_regular", "damage", path, `is ${describeType(failure.type)}, not a regular file; the store never reads it`)
          : finding("sidecar_unreadable", "damage", path, describeError(failure))
      )
      return empty(size)
    }
    return {
      summary: { path, bytes: size, ...scanned.success, current: currentView },
      findings,
      jobIds
    }
  })
