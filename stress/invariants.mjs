/**
 * The on-disk invariants of a Rarebit store, checked from raw bytes.
 *
 * One checker for every reliability test: the crash-point enumeration feeds it
 * the files of an in-memory crash image, the stress run the files of a real
 * directory. It knows the protocol, not either implementation: it parses
 * sidecars line by line, hashes receipt ranges itself and validates receipts
 * with the reference's validators, so a bug shared by our readers and our
 * writers cannot hide from it.
 *
 * What counts as a violation (the run is wrong) and what as pending (a state
 * the protocol finishes on its own, such as an expired claim whose receipt a
 * takeover will recover) is decided here, in one place.
 */
import { validateRarebitArtifactReceipt, validateRarebitTitleReceipt } from "@hypercarrier/rarebit/artifact-state"
import { createHash } from "node:crypto"

/** @import { RarebitHeadV1, RarebitSummaryReceiptV4, RarebitTitleReceiptV4 } from "@hypercarrier/rarebit/types" */

/**
 * A receipt of either kind, as the reference's validators accept it.
 * @typedef {RarebitSummaryReceiptV4 | RarebitTitleReceiptV4} Receipt
 */

/**
 * One complete line of a sidecar; `record` is what the line parses to, typed
 * by what `kind` says it is.
 * @typedef {{
 *   readonly offset: number
 *   readonly length: number
 *   readonly hash: string
 *   readonly empty: boolean
 * } & Classified} SidecarLine
 */

/**
 * @typedef {{ readonly kind: "receipt"; readonly record: Receipt }
 *   | { readonly kind: "head"; readonly record: RarebitHeadV1 }
 *   | { readonly kind: "badHead" | "other"; readonly record: unknown }} Classified
 */

/**
 * @typedef {{
 *   readonly size: number
 *   readonly lines: ReadonlyArray<SidecarLine>
 *   readonly tornTail: boolean
 *   readonly tornBytes: number
 * }} ParsedSidecar
 */

/** @typedef {{ readonly path: string; readonly bytes: Uint8Array }} FileBytes */

/**
 * What `checkStore` reads; see there.
 * @typedef {{
 *   readonly sidecars: ReadonlyArray<FileBytes>
 *   readonly claims: ReadonlyArray<FileBytes & { readonly jobId: string }>
 *   readonly locks: ReadonlyArray<FileBytes>
 *   readonly others?: ReadonlyArray<string>
 *   readonly jobSidecar?: ReadonlyMap<string, string>
 *   readonly expectedJobs?: Iterable<string>
 *   readonly tokenOf?: (record: Receipt) => string | undefined
 *   readonly deadLocksArePending?: boolean
 * }} StoreFiles
 */

/**
 * @typedef {{
 *   sidecars: number
 *   receipts: number
 *   heads: number
 *   badHeadLines: number
 *   tornTails: number
 *   claims: number
 *   settledClaims: number
 *   activeClaims: number
 *   tornClaims: number
 *   jobsWithReceipts: number
 *   duplicateReceiptJobs: number
 *   orphanReceiptJobs: number
 *   leftoverLocks: number
 *   breakFiles: number
 *   tempFiles: number
 * }} StoreStats
 */

/**
 * @typedef {{
 *   readonly violations: Array<string>
 *   readonly pending: Array<string>
 *   readonly stats: StoreStats
 * }} StoreCheck
 */

const NEWLINE = 10
const HASH = /^[a-f0-9]{64}$/
const MAX_RECEIPT_BYTES = 48 * 1024
const utf8 = new TextDecoder("utf-8")

/** @param {Uint8Array} bytes */
const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex")

/**
 * @param {string} text
 * @returns {{ readonly ok: true; readonly value: unknown } | { readonly ok: false }}
 */
const parse = (text) => {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch {
    return { ok: false }
  }
}

/**
 * @param {unknown} u
 * @returns {u is Record<string, unknown>}
 */
const isObject = (u) => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * @param {unknown} u
 * @returns {u is number}
 */
const isSafeInteger = (u) => Number.isSafeInteger(u)

/**
 * A receipt of either kind that the reference's validators accept.
 * @param {unknown} record
 * @returns {record is Receipt}
 */
const isValidReceipt = (record) =>
  isObject(record) &&
  ((record.type === "rarebit_summary" && validateRarebitArtifactReceipt(record).valid) ||
    (record.type === "rarebit_title" && validateRarebitTitleReceipt(record).valid))

/**
 * The head shape the protocol accepts (protocol 1).
 * @param {unknown} head
 * @returns {head is RarebitHeadV1}
 */
const isValidHead = (head) =>
  isObject(head) &&
  head.type === "rarebit_head" &&
  head.protocolVersion === 1 &&
  typeof head.sessionId === "string" &&
  head.sessionId.length > 0 &&
  isSafeInteger(head.receiptOffset) &&
  head.receiptOffset >= 0 &&
  isSafeInteger(head.receiptLength) &&
  head.receiptLength > 0 &&
  head.receiptLength <= MAX_RECEIPT_BYTES &&
  typeof head.receiptHash === "string" &&
  HASH.test(head.receiptHash)

/**
 * Verifies a receipt range: inside the file, newline-terminated, hashing to
 * `receiptHash`, and a valid receipt. Returns the record or a reason.
 * @param {Uint8Array} bytes
 * @param {unknown} ref
 * @param {{ readonly requireSummaryOf?: string }} [options]
 * @returns {{ readonly error: string; readonly record?: undefined }
 *   | { readonly error?: undefined; readonly record: Receipt }}
 */
const verifyRange = (bytes, ref, { requireSummaryOf } = {}) => {
  if (!isObject(ref)) return { error: "not an object" }
  const { receiptOffset: offset, receiptLength: length, receiptHash: hash } = ref
  if (!isSafeInteger(offset) || offset < 0) return { error: "bad offset" }
  if (!isSafeInteger(length) || length < 1 || length > MAX_RECEIPT_BYTES) return { error: "bad length" }
  if (typeof hash !== "string" || !HASH.test(hash)) return { error: "bad hash" }
  if (offset + length > bytes.length) return { error: "range outside the file" }
  const range = bytes.subarray(offset, offset + length)
  if (range[range.length - 1] !== NEWLINE) return { error: "range does not end with a newline" }
  if (sha256(range) !== hash) return { error: "hash mismatch" }
  const parsed = parse(utf8.decode(range.subarray(0, -1)))
  if (!parsed.ok) return { error: "range does not parse" }
  const record = parsed.value
  if (requireSummaryOf !== undefined) {
    if (!isObject(record) || record.type !== "rarebit_summary" || record.sessionId !== requireSummaryOf) {
      return { error: "not a summary of the head's session" }
    }
  }
  if (!isValidReceipt(record)) return { error: "not a valid receipt" }
  return { record }
}

/**
 * What a line is, from what it parses to (`parsed`) and its text.
 * @param {ReturnType<typeof parse>} parsed
 * @param {string} text
 * @returns {Classified}
 */
const classify = (parsed, text) => {
  const record = parsed.ok ? parsed.value : null
  if (isValidReceipt(record)) return { record, kind: "receipt" }
  if (isValidHead(record)) return { record, kind: "head" }
  const headTyped = isObject(record) && record.type === "rarebit_head"
  return { record, kind: headTyped || (!parsed.ok && text.includes("\"rarebit_head\"")) ? "badHead" : "other" }
}

/**
 * Splits a sidecar into its lines. Each complete line carries its absolute
 * offset, its exact bytes' hash and what it is: a valid `receipt`, a valid
 * `head`, a `badHead` (head-typed or unparsable text mentioning
 * `"rarebit_head"`: the current reader fails closed on it), or `other`.
 * @param {Uint8Array} bytes
 * @returns {ParsedSidecar}
 */
export const parseSidecar = (bytes) => {
  /** @type {Array<SidecarLine>} */
  const lines = []
  let cursor = 0
  while (cursor < bytes.length) {
    const newline = bytes.indexOf(NEWLINE, cursor)
    if (newline < 0) break
    const lineBytes = bytes.subarray(cursor, newline + 1)
    const text = utf8.decode(lineBytes.subarray(0, -1))
    const parsed = text.length > 0 ? parse(text) : /** @type {const} */ ({ ok: false })
    lines.push({
      offset: cursor,
      length: lineBytes.length,
      hash: sha256(lineBytes),
      ...classify(parsed, text),
      empty: text === ""
    })
    cursor = newline + 1
  }
  return { size: bytes.length, lines, tornTail: cursor < bytes.length, tornBytes: bytes.length - cursor }
}

/**
 * Checks a whole store.
 *
 * Input:
 * - `sidecars`: `[{ path, bytes }]`
 * - `claims`: `[{ jobId, path, bytes }]` (the files `jobs-v4/<jobId>.json`)
 * - `locks`: `[{ path, bytes }]` (the `.commit-lock` files)
 * - `others`: paths of every other file under the Rarebit root
 * - `jobSidecar`: optional `Map<jobId, sidecarPath>`; jobs found in no sidecar
 *   and absent from it are checked against every sidecar
 * - `expectedJobs`: optional job ids that must end settled
 * - `tokenOf`: optional `(record) => leaseToken | undefined`, when receipts
 *   name the lease that wrote them
 * - `deadLocksArePending`: leftover locks are reported as pending, not
 *   violations (a crash image, before anyone has needed the lock again)
 *
 * Output: `{ violations, pending, stats }`; `violations` and `pending` are
 * lists of readable strings.
 * @param {StoreFiles} input
 * @returns {StoreCheck}
 */
export const checkStore = (input) => {
  /** @type {Array<string>} */
  const violations = []
  /** @type {Array<string>} */
  const pending = []
  /** @type {StoreStats} */
  const stats = {
    sidecars: input.sidecars.length,
    receipts: 0,
    heads: 0,
    badHeadLines: 0,
    tornTails: 0,
    claims: input.claims.length,
    settledClaims: 0,
    activeClaims: 0,
    tornClaims: 0,
    jobsWithReceipts: 0,
    duplicateReceiptJobs: 0,
    orphanReceiptJobs: 0,
    leftoverLocks: input.locks.length,
    breakFiles: 0,
    tempFiles: 0
  }

  /** @type {Map<string, { readonly bytes: Uint8Array; readonly parsed: ParsedSidecar }>} */
  const parsedSidecars = new Map()
  /** @type {Map<string, Array<{ readonly path: string; readonly line: SidecarLine }>>} */
  const receiptsByJob = new Map()
  for (const { path, bytes } of input.sidecars) {
    const parsed = parseSidecar(bytes)
    parsedSidecars.set(path, { bytes, parsed })
    if (parsed.tornTail) stats.tornTails++
    for (const line of parsed.lines) {
      if (line.kind === "receipt") {
        stats.receipts++
        const list = receiptsByJob.get(line.record.jobId) ?? []
        list.push({ path, line })
        receiptsByJob.set(line.record.jobId, list)
      } else if (line.kind === "head") {
        stats.heads++
        const checked = verifyRange(bytes, line.record, { requireSummaryOf: line.record.sessionId })
        if (checked.error !== undefined) {
          violations.push(`${path}@${line.offset}: head does not verify (${checked.error})`)
        } else if (checked.record.jobId === undefined) {
          violations.push(`${path}@${line.offset}: head points at a receipt without a job`)
        }
      } else if (line.kind === "badHead") {
        stats.badHeadLines++
      }
    }
  }

  /** @type {Set<string>} */
  const claimed = new Set()
  for (const { bytes, jobId, path } of input.claims) {
    claimed.add(jobId)
    const parsed = parse(utf8.decode(bytes))
    if (!parsed.ok || !isObject(parsed.value)) {
      stats.tornClaims++
      violations.push(`${path}: claim is not a JSON object (${bytes.length} bytes)`)
      continue
    }
    const claim = parsed.value
    if (claim.jobId !== jobId) violations.push(`${path}: claim names job ${String(claim.jobId)}`)
    const receipts = receiptsByJob.get(jobId) ?? []
    if (claim.state === "settled") {
      stats.settledClaims++
      const sidecarPath = input.jobSidecar?.get(jobId) ?? receipts[0]?.path
      const sidecar = sidecarPath === undefined ? undefined : parsedSidecars.get(sidecarPath)
      if (sidecar === undefined) {
        violations.push(`${path}: settled claim, but its sidecar holds no receipt of the job`)
        continue
      }
      const checked = verifyRange(sidecar.bytes, claim.receiptRef)
      if (checked.error !== undefined) {
        violations.push(`${path}: settled pointer does not verify (${checked.error})`)
        continue
      }
      if (checked.record.jobId !== jobId) {
        violations.push(`${path}: settled pointer names a receipt of job ${String(checked.record.jobId)}`)
      }
      const token = input.tokenOf?.(checked.record)
      if (token !== undefined && token !== claim.leaseToken) {
        violations.push(`${path}: settled by lease ${claim.leaseToken}, but its receipt was written by lease ${token}`)
      }
      if (receipts.length !== 1) {
        violations.push(`${jobId}: settled with ${receipts.length} receipts in the sidecar`)
      }
    } else if (claim.state === "active") {
      stats.activeClaims++
      if (receipts.length > 1) violations.push(`${jobId}: active claim and ${receipts.length} receipts`)
      else if (receipts.length === 1) {
        pending.push(`${jobId}: receipt written, claim still active (recovered on takeover)`)
      } else pending.push(`${jobId}: claim active`)
    } else {
      violations.push(`${path}: claim state ${JSON.stringify(claim.state)}`)
    }
  }

  for (const [jobId, receipts] of receiptsByJob) {
    stats.jobsWithReceipts++
    if (receipts.length > 1) stats.duplicateReceiptJobs++
    if (!claimed.has(jobId)) {
      stats.orphanReceiptJobs++
      violations.push(`${jobId}: ${receipts.length} receipt(s) but no claim (a new reserve would run it again)`)
    }
  }

  for (const jobId of input.expectedJobs ?? []) {
    const claim = input.claims.find((entry) => entry.jobId === jobId)
    const parsed = claim === undefined ? undefined : parse(utf8.decode(claim.bytes))
    if (parsed?.ok !== true || !isObject(parsed.value) || parsed.value.state !== "settled") {
      violations.push(`${jobId}: expected to end settled, claim is ${claim === undefined ? "absent" : "not settled"}`)
    }
  }

  for (const { bytes, path } of input.locks) {
    const parsed = parse(utf8.decode(bytes))
    if (!parsed.ok || !isObject(parsed.value) || typeof parsed.value.token !== "string") {
      violations.push(`${path}: lock is not a JSON object with a token`)
    } else if (input.deadLocksArePending) {
      pending.push(`${path}: lock left by ${JSON.stringify(parsed.value.owner ?? "an owner without evidence")}`)
    } else {
      violations.push(`${path}: lock left behind`)
    }
  }
  const lockPaths = new Set(input.locks.map(({ path }) => path))
  for (const path of input.others ?? []) {
    const broken = /^(.*\.commit-lock)\.break-[a-f0-9]+$/.exec(path)
    if (broken !== null) {
      // A break file whose lock is gone is litter; one beside its lock blocks
      // every waiter until `rarebit-store unlock`.
      stats.breakFiles++
      if (lockPaths.has(broken[1])) pending.push(`${path}: break file beside its lock (needs unlock)`)
    } else if (path.endsWith(".tmp")) {
      stats.tempFiles++
    } else {
      violations.push(`${path}: unexpected file`)
    }
  }

  return { violations, pending, stats }
}
