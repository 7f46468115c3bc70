/**
 * The full-scan audit of a Rarebit store. (The explicit repair of a commit
 * lock it reports is the lock's: `CommitLockRepair`.)
 *
 * The bounded readers look at one tail window; this module reads everything,
 * on purpose, for operators: every line of every sidecar under
 * `<rarebitRoot>/materializations-v4` (or of one sidecar), every job claim
 * under `jobs-v4`, and every commit lock and leftover temp or break file.
 * What it finds is returned as data (`AuditFinding`), never as a failure:
 * the audit fails only for bugs.
 *
 * Every finding has a severity: `damage` (something is wrong, and some
 * reader or writer will stumble on it), or `notice` (worth knowing, harmless
 * by itself). Three kinds are the expected traces of a crash, which no
 * reader or writer is hurt by, and are notices unless the audit is `strict`
 * (`expectedAfterCrash` marks them): `torn_tail`, `uncommitted_tail`, and a
 * stale `temp_file_leftover`. Everything else listed here is damage:
 *
 * - `sidecar_not_regular`: a sidecar path that is a symlink or another
 *   non-regular file (the store never reads or writes it).
 * - `sidecar_unreadable` / `directory_unreadable` / `claim_unreadable`: the
 *   file system refused to open or read it (or, for a claim, it is not a
 *   regular file or is larger than any claim can be).
 * - `directory_unsafe`: `jobs-v4` or `materializations-v4` is a symlink or
 *   not a directory; the store refuses to write there, and the audit does
 *   not read through it.
 * - `torn_tail` (crash trace): bytes after the last newline (an append that
 *   crashed); readers ignore them.
 * - `uncommitted_tail` (crash trace): complete lines after the last valid
 *   head (a writer that appended a receipt and crashed before its head);
 *   reserving the job again completes or redoes it.
 * - `invalid_head`: a head-typed line that fails validation, or an
 *   unparsable line mentioning `"rarebit_head"`; current reads fail closed.
 * - `head_range_invalid`: a valid head whose byte range does not hold, by
 *   hash, a valid summary receipt of the head's `sessionId`. Every head is
 *   checked, not only the last.
 * - `invalid_record`: any other complete line that is not a valid v4
 *   receipt (unparsable, unknown type, fails its schema, over 48 KiB).
 * - `claim_invalid`: a claim that is torn, not a claim object, names another
 *   job than its file, has an unknown state, an active lease that can never
 *   expire, or is settled without a receipt pointer.
 * - `claim_pointer_invalid`: a settled claim whose `receiptRef` does not
 *   verify (range, hash, a valid receipt of the same job) against any
 *   sidecar that holds a receipt of its job. Reserving that job fails.
 * - `claim_orphan` (store scope only): a settled claim whose job has no
 *   receipt in any sidecar under the root. Claims do not name their Session,
 *   so this is the precise form of "its sidecar is missing": the sidecar was
 *   deleted, replaced or truncated. Reserving that job fails too.
 * - `commit_lock_leftover`: a commit lock whose owner is provably dead, or
 *   that is older than `staleAfterMs` (a commit holds it for milliseconds).
 * - `temp_file_leftover` (crash trace) / `break_file_leftover`: a private
 *   temp file of a lock or claim write, or a lock break file, older than
 *   `staleAfterMs`. (A claim's temp file names no Session, so only the store
 *   scope sees it.) A break file stops the lock it names from being broken
 *   again, so it is damage; a temp file is only garbage.
 *
 * Lines, claims and locks are decoded exactly as the reference's
 * `Buffer#toString("utf8")` decodes them (`decodeUtf8`): a BOM is kept, so a
 * line that starts with one is not JSON (an `invalid_head` if it mentions
 * `"rarebit_head"`, else an `invalid_record`), and a lock behind one is torn.
 *
 * Notices (severity `notice`, not wrong by themselves): `claim_expired` (an
 * active lease ran out; the next reserve takes it over), and young locks,
 * temp and break files, which a running writer may still own.
 *
 * In sidecar scope, only the claims whose job has a receipt in that sidecar
 * are checked (and reported); the rest are counted as unattributed.
 *
 * Whatever a file holds (values nested 100,000 levels deep, megabyte keys or
 * strings), the report stays small and serialisable: parsed values are
 * described without recursion, a finding's `detail` is at most
 * `MAX_DETAIL_CHARS` characters, strings copied from files at most
 * `MAX_FIELD_CHARS`, and a claim's `receiptRef` is reported only when it is
 * a well-formed pointer.
 *
 * The scan is streaming: a sidecar is read in 1 MiB chunks, and memory grows
 * only with the number of files and claims, never with sidecar size. Files
 * that grow while they are scanned are read up to their size at open. The
 * audit reads a store that writers may be using; a finding about something a
 * writer was doing at that instant is possible only for the tail of a
 * sidecar being appended to, and for the young files reported as notices.
 * The audit writes nothing.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Option } from "effect"
import { FileSystem } from "effect/FileSystem"
import { Path } from "effect/Path"
import { isPlatformError, type PlatformError } from "effect/PlatformError"
import { sha256Hex } from "../protocol/CanonicalJson.js"
import { decodeUtf8 } from "../protocol/internal/Utf8.js"
import { type Head, isValidHead, isValidReceiptReference } from "../protocol/Head.js"
import { parseJsonOrNull } from "../protocol/internal/JsonParse.js"
import { isObjectRecord, memberOf, stringCoercionOf } from "../protocol/internal/JsonShape.js"
import { claimExpired, settledReceiptRef } from "../protocol/JobClaim.js"
import { MAX_HISTORY_BYTES, MAX_RECEIPT_BYTES } from "../protocol/Limits.js"
import { explainSummaryReceipt, validateSummaryReceipt } from "../protocol/SummaryReceipt.js"
import { explainTitleReceipt } from "../protocol/TitleReceipt.js"
import { describeType, openRegular } from "../io/RegularFile.js"
import { DEFAULT_STALE_AFTER_MS, inspectCommitLock, type LockReport } from "./CommitLockRepair.js"
import { readClaim } from "./JobClaims.js"
import { JOBS_DIR, MATERIALIZATIONS_DIR } from "./MirroredPath.js"
import {
  ageText,
  clipDetail,
  clipNullableField,
  describeError,
  describeJson,
  modifiedAt,
  plural
} from "./ReportFields.js"
import {
  isValidReceipt,
  readReceiptReference,
  readSidecarCurrent,
  verifyReceiptRange
} from "./SidecarReader.js"
import type { Availability, SidecarReason } from "./SidecarReader.js"

// Part of what an audit reports and takes, defined where they are made.
export { DEFAULT_STALE_AFTER_MS, type LockReport, type OwnerLiveness } from "./CommitLockRepair.js"
export { MAX_DETAIL_CHARS, MAX_FIELD_CHARS } from "./ReportFields.js"

const NEWLINE = 10

/** What an audit finding is about. @category models @since 0.1.0 */
export type FindingKind =
  | "directory_unreadable"
  | "directory_unsafe"
  | "sidecar_not_regular"
  | "sidecar_unreadable"
  | "torn_tail"
  | "uncommitted_tail"
  | "invalid_head"
  | "head_range_invalid"
  | "invalid_record"
  | "claim_unreadable"
  | "claim_invalid"
  | "claim_pointer_invalid"
  | "claim_orphan"
  | "claim_expired"
  | "commit_lock_leftover"
  | "commit_lock_held"
  | "temp_file_leftover"
  | "break_file_leftover"

/** `damage` makes an audit fail; a `notice` is worth knowing but not wrong. @category models @since 0.1.0 */
export type Severity = "damage" | "notice"

// What a finding is when made: a crash trace's severity depends on `strict`.
type Verdict = Severity | "crash_trace"

/**
 * One thing the audit found. `offset` is an absolute byte offset in a
 * sidecar; `jobId` is set for claim findings. `expectedAfterCrash` marks
 * the traces a crash leaves (notices unless the audit is strict).
 *
 * @category models
 * @since 0.1.0
 */
export interface AuditFinding {
  readonly kind: FindingKind
  readonly severity: Severity
  readonly expectedAfterCrash: boolean
  readonly path: string
  readonly offset: number | null
  readonly jobId: string | null
  readonly detail: string
}

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

/** A well-formed receipt pointer, as reported. @category models @since 0.1.0 */
export interface ReportedReceiptRef {
  readonly receiptOffset: number
  readonly receiptLength: number
  readonly receiptHash: string
}

/** How a settled claim's receipt pointer checked out. @category models @since 0.1.0 */
export type PointerStatus = "verified" | "invalid" | "orphan"

/**
 * One job claim as the audit read it.
 *
 * **Details**
 *
 * `jobId` comes from the file name. `expired` and `expiresAt` are set for
 * active claims, `receiptRef`, `pointer` and `sidecar` (where its receipt
 * was found) for settled ones. `receiptRef` is the claim's pointer when it is
 * well formed (offset, length, hash), else `null`; strings copied from the
 * file are cut to `MAX_FIELD_CHARS`. Lease tokens are never reported.
 *
 * @category models
 * @since 0.1.0
 */
export interface ClaimReport {
  readonly path: string
  readonly jobId: string
  readonly state: "active" | "settled" | "invalid" | "unreadable"
  readonly claimedAt: string | null
  readonly leaseMs: number | null
  readonly expiresAt: string | null
  readonly expired: boolean | null
  readonly receiptRef: ReportedReceiptRef | null
  readonly pointer: PointerStatus | null
  readonly sidecar: string | null
  readonly detail: string | null
}

/**
 * The result of an audit.
 *
 * **Details**
 *
 * `ok` is `true` when no finding is `damage`. In sidecar scope, `claims`
 * holds only the claims whose job has a receipt in that sidecar (claims do
 * not name their Session), and `unattributedClaims` counts the rest.
 *
 * @category models
 * @since 0.1.0
 */
export interface AuditReport {
  readonly ok: boolean
  readonly scope: "store" | "sidecar"
  readonly rarebitRoot: string
  readonly sidecars: ReadonlyArray<SidecarSummary>
  readonly claims: ReadonlyArray<ClaimReport>
  readonly unattributedClaims: number
  readonly locks: ReadonlyArray<LockReport>
  readonly findings: ReadonlyArray<AuditFinding>
  readonly counts: { readonly damage: number; readonly notices: number }
}

/** Progress of a store audit, reported once per sidecar before it is read. @category models @since 0.1.0 */
export interface AuditProgress {
  readonly done: number
  readonly total: number
  readonly path: string
}

/** Options of `auditStore`. @category models @since 0.1.0 */
export interface AuditOptions {
  readonly rarebitRoot: string
  /** Audit only this sidecar (and its lock), instead of the whole store. */
  readonly sidecar?: string | undefined
  /** Defaults to `DEFAULT_STALE_AFTER_MS`. */
  readonly staleAfterMs?: number | undefined
  /** Count the traces a crash leaves (torn and uncommitted tails, stale temp files) as damage. */
  readonly strict?: boolean | undefined
  readonly onProgress?: ((progress: AuditProgress) => Effect.Effect<void>) | undefined
}

// ---------------------------------------------------------------------------
// file names
// ---------------------------------------------------------------------------

const LOCK_SUFFIX = ".commit-lock"
const LOCK_TEMP = /\.commit-lock\.[0-9a-f]+\.tmp$/
const LOCK_BREAK = /\.commit-lock\.break-[^/]*$/
const CLAIM_FILE = /^([a-f0-9]{64})\.json$/
const CLAIM_TEMP = /^[a-f0-9]{64}\.json\.[0-9a-f]+\.tmp$/

type TreeFile =
  | { readonly _tag: "Sidecar"; readonly path: string; readonly regular: boolean }
  | { readonly _tag: "Lock"; readonly path: string }
  | { readonly _tag: "Temp"; readonly path: string }
  | { readonly _tag: "Break"; readonly path: string }

const classify = (path: string, regular: boolean): TreeFile =>
  path.endsWith(LOCK_SUFFIX)
    ? { _tag: "Lock", path }
    : LOCK_TEMP.test(path)
    ? { _tag: "Temp", path }
    : LOCK_BREAK.test(path)
    ? { _tag: "Break", path }
    : { _tag: "Sidecar", path, regular }

const finding = (
  kind: FindingKind,
  verdict: Verdict,
  path: string,
  detail: string,
  extra: { readonly offset?: number; readonly jobId?: string } = {}
): AuditFinding => ({
  kind,
  severity: verdict === "crash_trace" ? "notice" : verdict,
  expectedAfterCrash: verdict === "crash_trace",
  path,
  offset: extra.offset ?? null,
  jobId: extra.jobId ?? null,
  detail: clipDetail(detail)
})

// ---------------------------------------------------------------------------
// sidecar scan
// ---------------------------------------------------------------------------

interface SidecarScan {
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

const scanSidecar = (
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
        const headLike = memberOf(record, "type") === "rarebit_head" || (!record && text.includes("\"rarebit_head\""))
        if (headLike) {
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
        const total = pending.reduce((sum, part) => sum + part.length, 0)
        const bytes = new Uint8Array(total)
        let at = 0
        for (const part of pending) {
          bytes.set(part, at)
          at += part.length
        }
        return bytes
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

// ---------------------------------------------------------------------------
// claims
// ---------------------------------------------------------------------------

interface ClaimRead {
  readonly report: ClaimReport
  readonly findings: ReadonlyArray<AuditFinding>
  /** A settled claim's `receiptRef` as found, for the pointer check. */
  readonly receiptRef?: unknown
}

/** The pointer to report: only a well-formed one, and only its three fields. */
const reportedReceiptRef = (ref: unknown): ReportedReceiptRef | null => {
  if (!isValidReceiptReference(ref)) return null
  // The hash passed validation after string conversion, as the seed tests it.
  const receiptHash = stringCoercionOf(memberOf(ref, "receiptHash"))
  return receiptHash === undefined
    ? null
    : { receiptOffset: ref.receiptOffset, receiptLength: ref.receiptLength, receiptHash }
}

const emptyClaim = (path: string, jobId: string): ClaimReport => ({
  path,
  jobId,
  state: "invalid",
  claimedAt: null,
  leaseMs: null,
  expiresAt: null,
  expired: null,
  receiptRef: null,
  pointer: null,
  sidecar: null,
  detail: null
})

const invalidClaim = (path: string, jobId: string, detail: string): ClaimRead => ({
  report: { ...emptyClaim(path, jobId), detail },
  findings: [finding("claim_invalid", "damage", path, detail, { jobId })]
})

/** Reads one claim; `undefined` when it was released while the audit ran. */
const inspectClaim = (
  fs: FileSystem,
  path: string,
  jobId: string,
  now: number
): Effect.Effect<ClaimRead | undefined> =>
  readClaim(fs, path).pipe(
    Effect.map((read): ClaimRead | undefined => {
      if (read._tag === "Absent") return undefined
      if (read._tag === "Torn") {
        if (read.unreadable !== undefined) {
          const detail = `is ${read.unreadable}; it counts as in flight until its lease has passed`
          return {
            report: { ...emptyClaim(path, jobId), state: "unreadable", detail },
            findings: [finding("claim_unreadable", "damage", path, detail, { jobId })]
          }
        }
        return invalidClaim(path, jobId, "empty or unparsable (a writer crashed while writing it)")
      }
      const claim = read.claim
      if (!isObjectRecord(claim)) return invalidClaim(path, jobId, "not a JSON object")
      if (claim.jobId !== jobId) return invalidClaim(path, jobId, "its jobId does not match its file name")
      if (claim.state === "active") {
        const claimedAt = typeof claim.claimedAt === "string" ? claim.claimedAt : null
        const leaseMs = typeof claim.leaseMs === "number" ? claim.leaseMs : null
        const start = claimedAt === null ? Number.NaN : Date.parse(claimedAt)
        if (!Number.isFinite(start) || leaseMs === null || !Number.isFinite(leaseMs)) {
          return invalidClaim(path, jobId, "an active claim without a usable claimedAt and leaseMs never expires")
        }
        const expired = claimExpired(claim, now)
        const expiresAt = Number.isFinite(start + leaseMs) && Math.abs(start + leaseMs) <= 8.64e15
          ? new Date(start + leaseMs).toISOString()
          : null
        const report: ClaimReport = {
          ...emptyClaim(path, jobId),
          state: "active",
          claimedAt: clipNullableField(claimedAt),
          leaseMs,
          expiresAt,
          expired
        }
        return {
          report,
          findings: expired
            ? [finding(
              "claim_expired",
              "notice",
              path,
              `lease ran out at ${expiresAt ?? "an unrepresentable time"}; the next reserve takes the job over`,
              { jobId }
            )]
            : []
        }
      }
      if (claim.state === "settled") {
        const receiptRef = settledReceiptRef(claim)
        if (receiptRef === undefined) {
          return invalidClaim(path, jobId, "a settled claim without a receiptRef keeps its job in flight forever")
        }
        return {
          report: { ...emptyClaim(path, jobId), state: "settled", receiptRef: reportedReceiptRef(receiptRef) },
          findings: [],
          receiptRef
        }
      }
      return invalidClaim(path, jobId, `its state is ${describeJson(claim.state)}, not "active" or "settled"`)
    }),
    Effect.catch((error) =>
      Effect.succeed<ClaimRead>({
        report: { ...emptyClaim(path, jobId), state: "unreadable", detail: describeError(error) },
        findings: [finding("claim_unreadable", "damage", path, describeError(error), { jobId })]
      })
    )
  )

// ---------------------------------------------------------------------------
// locks and leftovers
// ---------------------------------------------------------------------------

const lockFindings = (lock: LockReport, staleAfterMs: number): ReadonlyArray<AuditFinding> => {
  const age = ageText(lock.ageMs)
  // No commit is ever in progress behind a lock that cannot be read: it blocks its sidecar until removed.
  if (lock.unreadable !== null) {
    return [
      finding("commit_lock_leftover", "damage", lock.path, `${lock.unreadable}, ${age}; only unlock --force removes it`)
    ]
  }
  const stale = lock.ageMs === null || lock.ageMs >= staleAfterMs
  if (lock.liveness === "dead") {
    return [finding("commit_lock_leftover", "damage", lock.path, `owner pid ${lock.owner?.pid} is gone (${age})`)]
  }
  if (stale) {
    const who = lock.liveness === "no_evidence" ? "no owner evidence" : `owner pid ${lock.owner?.pid} may be alive`
    return [
      finding("commit_lock_leftover", "damage", lock.path, `${lock.torn ? "torn lock, " : ""}${age}, ${who}`)
    ]
  }
  return [finding("commit_lock_held", "notice", lock.path, `${age}; a commit may be in progress`)]
}

const leftoverFinding = (
  fs: FileSystem,
  path: string,
  kind: "temp_file_leftover" | "break_file_leftover",
  now: number,
  staleAfterMs: number
) =>
  Effect.map(modifiedAt(fs, path), (mtime): AuditFinding => {
    const ageMs = mtime === undefined ? null : now - mtime
    const stale = ageMs === null || ageMs >= staleAfterMs
    const what = kind === "temp_file_leftover" ? "private temp file of a lock or claim write" : "lock break file"
    const age = ageText(ageMs)
    return stale
      ? finding(kind, kind === "temp_file_leftover" ? "crash_trace" : "damage", path, `${what}, ${age}: its writer crashed`)
      : finding(kind, "notice", path, `${what}, ${age}; a write may be in progress`)
  })

// ---------------------------------------------------------------------------
// walking
// ---------------------------------------------------------------------------

interface Tree {
  readonly files: Array<TreeFile>
  readonly findings: Array<AuditFinding>
}

/**
 * Lists one of the store's top directories, unless it is a symlink or not a
 * directory: then what it names is not the store's, and is not read.
 */
type StoreDirectory =
  | { readonly _tag: "Listed"; readonly entries: ReadonlyArray<{ readonly name: string; readonly type: string }> }
  | { readonly _tag: "Unsafe"; readonly type: string }

const listStoreDirectory = (fs: FileSystem, directory: string) =>
  fs.lstat(directory).pipe(
    Effect.flatMap((info): Effect.Effect<StoreDirectory, PlatformError> =>
      info.type === "Directory"
        ? Effect.map(fs.readDirectoryEntries(directory), (entries) => ({ _tag: "Listed", entries }))
        : Effect.succeed({ _tag: "Unsafe", type: info.type })
    ),
    // A store without this directory yet has nothing in it.
    Effect.catchReason("PlatformError", "NotFound", () => Effect.succeed<StoreDirectory>({ _tag: "Listed", entries: [] })),
    Effect.result
  )

const unsafeDirectoryFinding = (directory: string, type: string) =>
  finding(
    "directory_unsafe",
    "damage",
    directory,
    `is ${type === "SymbolicLink" ? "a symlink" : `${describeType(type)}, not a directory`}; the store refuses to use it`
  )

const walkMaterializations = (fs: FileSystem, path: Path, root: string): Effect.Effect<Tree> =>
  Effect.gen(function*() {
    const tree: Tree = { files: [], findings: [] }
    const top = yield* listStoreDirectory(fs, root)
    if (top._tag === "Success" && top.success._tag === "Unsafe") {
      tree.findings.push(unsafeDirectoryFinding(root, top.success.type))
      return tree
    }
    const visit = (directory: string): Effect.Effect<void> =>
      Effect.gen(function*() {
        // A directory removed while the walk runs holds nothing any more.
        const listed = yield* fs.readDirectoryEntries(directory).pipe(
          Effect.catchReason("PlatformError", "NotFound", () => Effect.succeed([])),
          Effect.result
        )
        if (listed._tag === "Failure") {
          tree.findings.push(finding("directory_unreadable", "damage", directory, describeError(listed.failure)))
          return
        }
        const entries = [...listed.success].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        for (const entry of entries) {
          const child = path.join(directory, entry.name)
          if (entry.type === "Directory") yield* visit(child)
          else tree.files.push(classify(child, entry.type === "File"))
        }
      })
    yield* visit(root)
    return tree
  })

// ---------------------------------------------------------------------------
// the audit
// ---------------------------------------------------------------------------

const byPathAndOffset = (a: AuditFinding, b: AuditFinding) =>
  a.path < b.path ? -1 : a.path > b.path ? 1 : (a.offset ?? -1) - (b.offset ?? -1)

/**
 * Audits a whole store, or one sidecar with its lock and the claims of its
 * jobs. See the module documentation for what each finding means.
 *
 * @category audit
 * @since 0.1.0
 */
export const auditStore = Effect.fn("SidecarAudit.auditStore")(function*(options: AuditOptions) {
  const fs = yield* FileSystem
  const path = yield* Path
  const now = yield* Clock.currentTimeMillis
  const staleAfterMs = options.staleAfterMs ?? DEFAULT_STALE_AFTER_MS
  const rarebitRoot = path.resolve(options.rarebitRoot)
  const findings: Array<AuditFinding> = []

  // Claims first, so the sidecar scan can note which of their jobs it meets.
  const jobsDir = path.join(rarebitRoot, JOBS_DIR)
  const claimEntries = yield* listStoreDirectory(fs, jobsDir)
  const claimReads: Array<ClaimRead> = []
  const claimLeftovers: Array<string> = []
  if (claimEntries._tag === "Failure") {
    findings.push(finding("directory_unreadable", "damage", jobsDir, describeError(claimEntries.failure)))
  } else if (claimEntries.success._tag === "Unsafe") {
    findings.push(unsafeDirectoryFinding(jobsDir, claimEntries.success.type))
  } else {
    const entries = [...claimEntries.success.entries].sort((a, b) => (a.name < b.name ? -1 : 1))
    for (const entry of entries) {
      const child = path.join(jobsDir, entry.name)
      const match = CLAIM_FILE.exec(entry.name)
      if (match !== null) {
        const jobId = match[1]
        const read: ClaimRead | undefined = entry.type === "File" || entry.type === "SymbolicLink"
          ? yield* inspectClaim(fs, child, jobId, now)
          : {
            report: { ...emptyClaim(child, jobId), state: "unreadable", detail: "not a regular file" },
            findings: [
              finding("claim_unreadable", "damage", child, `is a ${entry.type.toLowerCase()}, not a file`, { jobId })
            ]
          }
        if (read !== undefined) claimReads.push(read)
      } else if (CLAIM_TEMP.test(entry.name)) {
        claimLeftovers.push(child)
      }
    }
  }
  const wanted = new Set(claimReads.map((read) => read.report.jobId))

  // Sidecars, locks and leftovers.
  const scope = options.sidecar === undefined ? "store" : "sidecar"
  let files: Array<TreeFile>
  if (options.sidecar === undefined) {
    const tree = yield* walkMaterializations(fs, path, path.join(rarebitRoot, MATERIALIZATIONS_DIR))
    findings.push(...tree.findings)
    files = tree.files
  } else {
    const sidecar = path.resolve(options.sidecar)
    const directory = path.dirname(sidecar)
    const base = path.basename(sidecar)
    const entries = yield* fs.readDirectoryEntries(directory).pipe(Effect.catch(() => Effect.succeed([])))
    files = entries
      .filter((entry) => entry.name === base || entry.name.startsWith(`${base}${LOCK_SUFFIX}`))
      .sort((a, b) => (a.name < b.name ? -1 : 1))
      .map((entry) => classify(path.join(directory, entry.name), entry.type === "File"))
      .filter((file) => file._tag !== "Sidecar" || file.path === sidecar)
  }

  const sidecarFiles = files.filter((file) => file._tag === "Sidecar")
  const sidecars: Array<SidecarSummary> = []
  const sidecarsByJob = new Map<string, Array<string>>()
  for (let index = 0; index < sidecarFiles.length; index++) {
    const file = sidecarFiles[index]
    if (options.onProgress) yield* options.onProgress({ done: index, total: sidecarFiles.length, path: file.path })
    const scan = yield* scanSidecar(fs, file.path, wanted)
    sidecars.push(scan.summary)
    findings.push(...scan.findings)
    for (const jobId of scan.jobIds) {
      const holders = sidecarsByJob.get(jobId)
      if (holders === undefined) sidecarsByJob.set(jobId, [file.path])
      else holders.push(file.path)
    }
  }
  if (options.onProgress && sidecarFiles.length > 0) {
    yield* options.onProgress({ done: sidecarFiles.length, total: sidecarFiles.length, path: "" })
  }

  const locks: Array<LockReport> = []
  for (const file of files) {
    if (file._tag === "Lock") {
      const lock = yield* Effect.result(inspectCommitLock(file.path))
      if (lock._tag === "Failure") {
        const cause = lock.failure.cause
        const detail = isPlatformError(cause) ? describeError(cause) : "cannot be read"
        findings.push(finding("commit_lock_leftover", "damage", file.path, detail))
      } else if (lock.success !== undefined) {
        locks.push(lock.success.lock)
        findings.push(...lockFindings(lock.success.lock, staleAfterMs))
      }
    } else if (file._tag === "Temp") {
      findings.push(yield* leftoverFinding(fs, file.path, "temp_file_leftover", now, staleAfterMs))
    } else if (file._tag === "Break") {
      findings.push(yield* leftoverFinding(fs, file.path, "break_file_leftover", now, staleAfterMs))
    }
  }
  // A claim's temp file names its job but not its Session, so only the
  // store scope can report it.
  if (scope === "store") {
    for (const leftover of claimLeftovers) {
      findings.push(yield* leftoverFinding(fs, leftover, "temp_file_leftover", now, staleAfterMs))
    }
  }

  // Settled claims against the sidecars that hold receipts of their jobs.
  const claims: Array<ClaimReport> = []
  let unattributedClaims = 0
  for (const read of claimReads) {
    const { report } = read
    const candidates = sidecarsByJob.get(report.jobId) ?? []
    if (scope === "sidecar" && candidates.length === 0) {
      unattributedClaims++
      continue
    }
    findings.push(...read.findings)
    if (report.state !== "settled") {
      claims.push(report)
      continue
    }
    if (candidates.length === 0) {
      claims.push({ ...report, pointer: "orphan" })
      findings.push(finding(
        "claim_orphan",
        "damage",
        report.path,
        "settled, but no sidecar under the root holds a receipt of this job; reserving it fails",
        { jobId: report.jobId }
      ))
      continue
    }
    let verifiedIn: string | undefined
    for (const sidecar of candidates) {
      const record = yield* readReceiptReference(fs, sidecar, read.receiptRef, false).pipe(
        Effect.catch(() => Effect.succeed(undefined))
      )
      if (record !== undefined && record.jobId === report.jobId) {
        verifiedIn = sidecar
        break
      }
    }
    if (verifiedIn !== undefined) {
      claims.push({ ...report, pointer: "verified", sidecar: verifiedIn })
    } else {
      claims.push({ ...report, pointer: "invalid", sidecar: candidates[0] })
      findings.push(finding(
        "claim_pointer_invalid",
        "damage",
        report.path,
        `receiptRef does not verify against ${candidates.join(", ")}; reserving this job fails`,
        { jobId: report.jobId }
      ))
    }
  }

  const judged = options.strict === true
    ? findings.map((item) => (item.expectedAfterCrash ? { ...item, severity: "damage" as const } : item))
    : findings
  judged.sort(byPathAndOffset)
  const damage = judged.filter((item) => item.severity === "damage").length
  return {
    ok: damage === 0,
    scope,
    rarebitRoot,
    sidecars,
    claims,
    unattributedClaims,
    locks,
    findings: judged,
    counts: { damage, notices: judged.length - damage }
  } satisfies AuditReport
})
