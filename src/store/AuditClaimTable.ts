/**
 * The claims a store audit has inspected, held compactly from the moment
 * each is read until its pointer is checked, and the receipts of their jobs
 * that the sidecar scan finds.
 *
 * The audit reads every claim before it scans the sidecars (so the receipt
 * of a claim settled while it runs is in a sidecar by the time the scan
 * reads it), then checks each settled claim's pointer against what the scan
 * found: tens of thousands of claims and receipts are held through the whole
 * scan. As objects (each claim's report and pointer, each job's sidecars and
 * receipt hashes as strings in a `Map` keyed by job id) that was about
 * 1.4 KB a claim, all of it promoted to the old generation. Here the common
 * case, a settled claim with a well-formed pointer and nothing wrong with
 * it, whose job has one receipt in one sidecar, is about 150 bytes in typed
 * arrays: the job id and both hashes as 32 bytes each, offsets and lengths
 * as numbers, the sidecar as its place in the walk. Every other claim, and
 * every job with several receipts, is kept as the objects it was.
 *
 * A packed claim is made back into the inspected claim it was whenever its
 * pointer does not name exactly the one receipt of its job, so the pointer
 * checks give the same reports and findings as the objects did.
 *
 * @since 0.1.0
 */
import type { InspectedClaim, KnownReceipt } from "./ClaimInspection.js"
import {
  type ClaimReportList,
  hasReceiptRefKeys,
  hasSettledReportKeys,
  HEX64,
  HEX_CODES,
  packHex,
  settledClaimReport,
  unpackHex
} from "./ClaimReportList.js"
import type { ScannedReceipt } from "./SidecarScan.js"

const NOT_READ = 0
const PACKED = 1
const KEPT = 2
const NO_RECEIPT = -1

const CLAIM_FILE_NAME = /^[0-9a-f]{64}\.json$/

const NO_FINDINGS: InspectedClaim["findings"] = Object.freeze([])

/** The sidecars that hold receipts of one job, in walk order, and those receipts. */
interface JobReceipts {
  readonly sidecars: Array<string>
  /** Each sidecar's place in the walk. */
  readonly order: Array<number>
  readonly known: Array<KnownReceipt>
}

/** FNV-1a over the characters: job ids in file names are anyone's, so not just their first digits. */
const hashOf = (text: string, length: number): number => {
  let hash = 0x811c9dc5
  for (let index = 0; index < length; index++) hash = Math.imul(hash ^ text.charCodeAt(index), 0x01000193)
  return hash >>> 0
}

/** `hex` is the 32 bytes at `at`, as 64 lowercase hex digits. */
const equalsHex = (bytes: Uint8Array, at: number, hex: string): boolean => {
  if (hex.length !== 64) return false
  for (let index = 0; index < 32; index++) {
    const byte = bytes[at + index]
    if (hex.charCodeAt(2 * index) !== HEX_CODES[byte >> 4] || hex.charCodeAt(2 * index + 1) !== HEX_CODES[byte & 15]) {
      return false
    }
  }
  return true
}

const equalBytes = (a: Uint8Array, aAt: number, b: Uint8Array, bAt: number, length: number): boolean => {
  for (let index = 0; index < length; index++) if (a[aAt + index] !== b[bAt + index]) return false
  return true
}

/**
 * The claims of one audit, by slot (the claim's place in the sorted listing
 * of `jobs-v4`), and the receipts of their jobs.
 *
 * @internal
 */
export class AuditClaimTable {
  /** How many slots (claims listed); a claim released before it was read stays unread. */
  readonly size: number
  private readonly kinds: Uint8Array
  /** 64 bytes a slot: its job id, then a packed claim's receipt hash. */
  private readonly ids: Uint8Array
  /** A packed claim's receiptOffset and receiptLength. */
  private readonly ranges: Float64Array
  private readonly kept = new Map<number, InspectedClaim>()
  /** Open addressing over the job ids: slot + 1, 0 for an empty place. */
  private readonly places: Int32Array
  /** The walk index of the sidecar holding the one receipt of the slot's job, or `NO_RECEIPT`. */
  private readonly receiptIn: Int32Array
  private readonly receiptRanges: Float64Array
  private readonly receiptHashes: Uint8Array
  /** Jobs with more than one receipt. */
  private readonly several = new Map<number, JobReceipts>()
  private presentCount = 0

  /**
   * `claimFiles` are the names of the listed claims, `<jobId>.json`, the
   * job id 64 lowercase hex digits; `sidecarAt` gives the path of the
   * sidecar at a place in the walk once it has been scanned.
   */
  constructor(
    private readonly jobsDirectory: string,
    claimFiles: ReadonlyArray<string>,
    private readonly sidecarAt: (walkIndex: number) => string
  ) {
    const size = claimFiles.length
    this.size = size
    this.kinds = new Uint8Array(size)
    this.ids = new Uint8Array(size * 64)
    this.ranges = new Float64Array(size * 2)
    this.receiptIn = new Int32Array(size).fill(NO_RECEIPT)
    this.receiptRanges = new Float64Array(size * 2)
    this.receiptHashes = new Uint8Array(size * 32)
    let capacity = 16
    while (capacity < size * 2) capacity *= 2
    this.places = new Int32Array(capacity)
    const mask = capacity - 1
    for (let slot = 0; slot < size; slot++) {
      const name = claimFiles[slot]
      if (!CLAIM_FILE_NAME.test(name)) throw new Error(`not a claim's file name: ${name}`)
      // Its first 64 characters, the job id, without a copy of them.
      packHex(this.ids, slot * 64, name)
      let place = hashOf(name, 64) & mask
      while (this.places[place] !== 0) place = (place + 1) & mask
      this.places[place] = slot + 1
    }
  }

  /** The job id of `slot`. */
  jobIdAt(slot: number): string {
    return unpackHex(this.ids, slot * 64)
  }

  /** The slot of `jobId`, or -1. */
  slotOf(jobId: string): number {
    if (jobId.length !== 64) return -1
    const mask = this.places.length - 1
    for (let place = hashOf(jobId, 64) & mask;; place = (place + 1) & mask) {
      const held = this.places[place]
      if (held === 0) return -1
      if (equalsHex(this.ids, (held - 1) * 64, jobId)) return held - 1
    }
  }

  /** A claim of `jobId` was read: the scan looks for its job's receipts. */
  has(jobId: string): boolean {
    const slot = this.slotOf(jobId)
    return slot >= 0 && this.kinds[slot] !== NOT_READ
  }

  /** How many claims, and jobs' receipts, are held as objects rather than packed: what the table's saving is measured by. */
  get heldAsObjects(): number {
    return this.kept.size + this.several.size
  }

  /** How many claims were read. */
  get present(): number {
    return this.presentCount
  }

  /** The claim of `slot` was read (not released before). */
  isPresent(slot: number): boolean {
    return this.kinds[slot] !== NOT_READ
  }

  /** Records the claim read at `slot`; `undefined` when it was released before it could be read. */
  record(slot: number, inspected: InspectedClaim | undefined): void {
    if (inspected === undefined) return
    this.presentCount++
    if (!this.packs(slot, inspected)) {
      this.kinds[slot] = KEPT
      this.kept.set(slot, inspected)
      return
    }
    const ref = inspected.report.receiptRef!
    this.kinds[slot] = PACKED
    packHex(this.ids, slot * 64 + 32, ref.receiptHash)
    this.ranges[slot * 2] = ref.receiptOffset
    this.ranges[slot * 2 + 1] = ref.receiptLength
  }

  /** The claim read at `slot`, equal to the one recorded. */
  inspected(slot: number): InspectedClaim {
    if (this.kinds[slot] !== PACKED) return this.kept.get(slot)!
    const jobId = this.jobIdAt(slot)
    const receiptRef = {
      receiptOffset: this.ranges[slot * 2],
      receiptLength: this.ranges[slot * 2 + 1],
      receiptHash: unpackHex(this.ids, slot * 64 + 32)
    }
    return {
      report: settledClaimReport(this.jobsDirectory, jobId, receiptRef, null, null),
      findings: NO_FINDINGS,
      receiptRef: { ...receiptRef }
    }
  }

  /** Notes the receipts of claimed jobs the scan found in the sidecar at `walkIndex`. */
  noteReceipts(walkIndex: number, receipts: ReadonlyArray<ScannedReceipt>): void {
    for (const receipt of receipts) {
      const slot = this.slotOf(receipt.jobId)
      if (slot < 0) continue
      if (this.receiptIn[slot] === NO_RECEIPT && !this.several.has(slot) && HEX64.test(receipt.hash)) {
        this.receiptIn[slot] = walkIndex
        this.receiptRanges[slot * 2] = receipt.offset
        this.receiptRanges[slot * 2 + 1] = receipt.length
        packHex(this.receiptHashes, slot * 32, receipt.hash)
        continue
      }
      const held = this.severalOf(slot)
      if (!held.order.includes(walkIndex)) {
        // Scans end in about walk order; the sidecars of a job are kept in walk order exactly.
        let at = held.order.length
        while (at > 0 && held.order[at - 1] > walkIndex) at--
        held.order.splice(at, 0, walkIndex)
        held.sidecars.splice(at, 0, this.sidecarAt(walkIndex))
      }
      held.known.push({
        sidecar: this.sidecarAt(walkIndex),
        offset: receipt.offset,
        length: receipt.length,
        hash: receipt.hash
      })
    }
  }

  /** The scan found a receipt of `slot`'s job. */
  hasReceipts(slot: number): boolean {
    return this.receiptIn[slot] !== NO_RECEIPT || this.several.has(slot)
  }

  /** The sidecars holding receipts of `slot`'s job, in walk order, and those receipts; `undefined` when none. */
  receiptsOf(
    slot: number
  ): { readonly sidecars: ReadonlyArray<string>; readonly known: ReadonlyArray<KnownReceipt> } | undefined {
    const walkIndex = this.receiptIn[slot]
    if (walkIndex === NO_RECEIPT) return this.several.get(slot)
    const sidecar = this.sidecarAt(walkIndex)
    return { sidecars: [sidecar], known: [this.knownAt(slot, sidecar)] }
  }

  /**
   * Adds the report of `slot`'s claim, verified in the sidecar of the one
   * receipt of its job, to `reports`: only for a slot that `verifiesAtOnce`.
   */
  pushVerified(slot: number, reports: ClaimReportList): void {
    if (!this.verifiesAtOnce(slot)) throw new Error(`the claim at ${slot} does not verify at once`)
    reports.pushVerified(
      this.ids,
      slot * 64,
      this.ranges[slot * 2],
      this.ranges[slot * 2 + 1],
      this.sidecarAt(this.receiptIn[slot])
    )
  }

  /**
   * `slot`'s claim is packed and its pointer names exactly the one receipt
   * of its job: the pointer check would report it verified in that
   * receipt's sidecar without reading anything.
   */
  verifiesAtOnce(slot: number): boolean {
    const walkIndex = this.receiptIn[slot]
    return this.kinds[slot] === PACKED && walkIndex !== NO_RECEIPT &&
      this.ranges[slot * 2] === this.receiptRanges[slot * 2] &&
      this.ranges[slot * 2 + 1] === this.receiptRanges[slot * 2 + 1] &&
      equalBytes(this.ids, slot * 64 + 32, this.receiptHashes, slot * 32, 32)
  }

  private knownAt(slot: number, sidecar: string): KnownReceipt {
    return {
      sidecar,
      offset: this.receiptRanges[slot * 2],
      length: this.receiptRanges[slot * 2 + 1],
      hash: unpackHex(this.receiptHashes, slot * 32)
    }
  }

  private severalOf(slot: number): JobReceipts {
    const held = this.several.get(slot)
    if (held !== undefined) return held
    const walkIndex = this.receiptIn[slot]
    const made: JobReceipts = walkIndex === NO_RECEIPT
      ? { sidecars: [], order: [], known: [] }
      : {
        sidecars: [this.sidecarAt(walkIndex)],
        order: [walkIndex],
        known: [this.knownAt(slot, this.sidecarAt(walkIndex))]
      }
    this.receiptIn[slot] = NO_RECEIPT
    this.several.set(slot, made)
    return made
  }

  /**
   * A settled claim with a well-formed pointer and nothing wrong with it,
   * its path `<jobsDirectory>/<jobId>.json`, its report's keys in the order
   * `inspected` writes them, and its pointer as found the three fields
   * reported, in that order: it is made back equal.
   */
  private packs(slot: number, inspected: InspectedClaim): boolean {
    const { report } = inspected
    const ref = report.receiptRef
    const found = inspected.receiptRef as Record<string, unknown> | null | undefined
    return inspected.findings.length === 0 && report.state === "settled" && ref !== null &&
      report.pointer === null && report.sidecar === null && report.detail === null &&
      report.claimedAt === null && report.leaseMs === null && report.expiresAt === null && report.expired === null &&
      equalsHex(this.ids, slot * 64, report.jobId) && report.path === `${this.jobsDirectory}/${report.jobId}.json` &&
      HEX64.test(ref.receiptHash) && hasSettledReportKeys(report) &&
      typeof found === "object" && found !== null && !Array.isArray(found) && hasReceiptRefKeys(found) &&
      found.receiptHash === ref.receiptHash && found.receiptOffset === ref.receiptOffset &&
      found.receiptLength === ref.receiptLength
  }
}
