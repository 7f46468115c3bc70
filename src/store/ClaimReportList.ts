/**
 * The claim reports of an audit, held compactly while the audit runs.
 *
 * A store audit keeps one report per claim until it returns: tens of
 * thousands at once, nearly all of them settled claims whose pointer
 * verified in a sidecar of the store. As objects, each is about half a
 * kilobyte (its path, job id and hash as strings, its pointer as an object).
 * Here such a report is 84 bytes in a few typed arrays (job id and hash as
 * 32 bytes each, offset, length, and its sidecar path shared with the
 * sidecar's summary); every other report is kept as it is. `at` gives back
 * a report equal to the one added, fields in the same order, so a report
 * printed from this list is the same text as one printed from the objects.
 *
 * @since 0.1.0
 */
import type { ClaimReport } from "./ClaimInspection.js"

/** 64 lowercase hex digits: a job id or SHA-256 the list and the audit's claim table pack into 32 bytes. @internal */
export const HEX64 = /^[0-9a-f]{64}$/
const HEX_DIGITS = "0123456789abcdef"
const INITIAL_CAPACITY = 64

const hexValue = (code: number): number => (code <= 57 ? code - 48 : code - 87)

/** Writes the 64 lowercase hex digits `hex` as 32 bytes at `at`. @internal */
export const packHex = (target: Uint8Array, at: number, hex: string) => {
  for (let index = 0; index < 32; index++) {
    target[at + index] = (hexValue(hex.charCodeAt(2 * index)) << 4) | hexValue(hex.charCodeAt(2 * index + 1))
  }
}

/** The character codes of the hex digits, by value. @internal */
export const HEX_CODES = Uint16Array.from(HEX_DIGITS, (digit) => digit.charCodeAt(0))
const digitCodes = new Uint16Array(64)

// Made in one piece: a string grown by `+=` is a chain of pieces V8 keeps
// until something flattens it, many times the size of its 64 characters.
/** The 32 bytes at `at`, as 64 lowercase hex digits. @internal */
export const unpackHex = (source: Uint8Array, at: number): string => {
  for (let index = 0; index < 32; index++) {
    const byte = source[at + index]
    digitCodes[2 * index] = HEX_CODES[byte >> 4]
    digitCodes[2 * index + 1] = HEX_CODES[byte & 15]
  }
  return String.fromCharCode.apply(null, digitCodes as unknown as Array<number>)
}

/**
 * Claim reports in order, the common verified ones packed.
 *
 * **Details**
 *
 * A report is packed when it is settled, its pointer `verified` in a
 * sidecar, its path is `<jobsDirectory>/<jobId>.json`, its job id and hash
 * are 64 lowercase hex digits, and every other field is `null`; any other is
 * kept as given. Either way `at(index)` equals, field for field and in the
 * same key order, the report added at that index.
 *
 * @category models
 * @since 0.1.0
 */
export class ClaimReportList {
  private size = 0
  private ids: Uint8Array
  private ranges: Float64Array
  private sidecars: Array<string | undefined> = []
  private readonly others = new Map<number, ClaimReport>()

  /** `expected`: how many reports will be added, so that the list is made at its size once. */
  constructor(private readonly jobsDirectory: string, expected: number = INITIAL_CAPACITY) {
    const capacity = Math.max(1, expected)
    this.ids = new Uint8Array(capacity * 64)
    this.ranges = new Float64Array(capacity * 2)
  }

  /** How many reports the list holds. */
  get length(): number {
    return this.size
  }

  /** Adds `report` after the others. */
  push(report: ClaimReport): void {
    const index = this.size++
    if (!this.packs(report)) {
      this.others.set(index, report)
      this.sidecars.push(undefined)
      return
    }
    if (index * 2 >= this.ranges.length) this.grow()
    const ref = report.receiptRef!
    packHex(this.ids, index * 64, report.jobId)
    packHex(this.ids, index * 64 + 32, ref.receiptHash)
    this.ranges[index * 2] = ref.receiptOffset
    this.ranges[index * 2 + 1] = ref.receiptLength
    this.sidecars.push(report.sidecar!)
  }

  /**
   * Adds, after the others, the verified settled claim whose job id and
   * receipt hash are the 64 bytes at `at` of `ids` (as `packHex` writes
   * them): what `push` would pack from its report.
   */
  pushVerified(ids: Uint8Array, at: number, receiptOffset: number, receiptLength: number, sidecar: string): void {
    const index = this.size++
    if (index * 2 >= this.ranges.length) this.grow()
    this.ids.set(ids.subarray(at, at + 64), index * 64)
    this.ranges[index * 2] = receiptOffset
    this.ranges[index * 2 + 1] = receiptLength
    this.sidecars.push(sidecar)
  }

  /** The report at `index` (from 0), a new object equal to the one added. */
  at(index: number): ClaimReport | undefined {
    if (!Number.isInteger(index) || index < 0 || index >= this.size) return undefined
    const sidecar = this.sidecars[index]
    if (sidecar === undefined) return this.others.get(index)
    const jobId = unpackHex(this.ids, index * 64)
    const receiptRef = {
      receiptOffset: this.ranges[index * 2],
      receiptLength: this.ranges[index * 2 + 1],
      receiptHash: unpackHex(this.ids, index * 64 + 32)
    }
    return settledClaimReport(this.jobsDirectory, jobId, receiptRef, "verified", sidecar)
  }

  /** Every report, as objects. */
  toArray(): Array<ClaimReport> {
    return Array.from({ length: this.size }, (_, index) => this.at(index)!)
  }

  private packs(report: ClaimReport): boolean {
    const ref = report.receiptRef
    return report.state === "settled" && report.pointer === "verified" && report.sidecar !== null &&
      ref !== null && HEX64.test(report.jobId) && HEX64.test(ref.receiptHash) &&
      report.path === `${this.jobsDirectory}/${report.jobId}.json` &&
      report.claimedAt === null && report.leaseMs === null && report.expiresAt === null &&
      report.expired === null && report.detail === null &&
      // Exactly the keys `at` writes, in its order: nothing added is lost.
      hasSettledReportKeys(report)
  }

  private grow() {
    // Twice as many reports as now fit.
    const capacity = this.ranges.length
    const ids = new Uint8Array(capacity * 64)
    ids.set(this.ids)
    this.ids = ids
    const ranges = new Float64Array(capacity * 2)
    ranges.set(this.ranges)
    this.ranges = ranges
  }
}

const CLAIM_KEYS = [
  "path",
  "jobId",
  "state",
  "claimedAt",
  "leaseMs",
  "expiresAt",
  "expired",
  "receiptRef",
  "pointer",
  "sidecar",
  "detail"
] as const
const REF_KEYS = ["receiptOffset", "receiptLength", "receiptHash"] as const

const sameKeys = (value: object, keys: ReadonlyArray<string>): boolean => {
  const own = Object.keys(value)
  return own.length === keys.length && own.every((key, index) => key === keys[index])
}

/**
 * The report of a settled claim with nothing else to say, as a packed one
 * is made back: its path `<jobsDirectory>/<jobId>.json`, every other field
 * `null`.
 *
 * @internal
 */
export const settledClaimReport = (
  jobsDirectory: string,
  jobId: string,
  receiptRef: { readonly receiptOffset: number; readonly receiptLength: number; readonly receiptHash: string },
  pointer: "verified" | null,
  sidecar: string | null
): ClaimReport => ({
  path: `${jobsDirectory}/${jobId}.json`,
  jobId,
  state: "settled",
  claimedAt: null,
  leaseMs: null,
  expiresAt: null,
  expired: null,
  receiptRef,
  pointer,
  sidecar,
  detail: null
})

/** Whether `ref` has exactly a receipt pointer's three keys, in their order. @internal */
export const hasReceiptRefKeys = (ref: object): boolean => sameKeys(ref, REF_KEYS)

/**
 * Whether `report` and its pointer have exactly the keys
 * `settledClaimReport` writes, in its order: packing it loses nothing.
 *
 * @internal
 */
export const hasSettledReportKeys = (report: ClaimReport): boolean =>
  sameKeys(report, CLAIM_KEYS) && report.receiptRef !== null && hasReceiptRefKeys(report.receiptRef)
