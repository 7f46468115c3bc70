/**
 * The full-scan audit of a Rarebit store, for operators.
 *
 * The bounded readers look at one tail window; the audit reads everything,
 * on purpose: every line of every sidecar under
 * `<rarebitRoot>/materializations-v4` (or of one sidecar: `SidecarScan`),
 * every job claim under `jobs-v4` (`ClaimInspection`), and every commit lock
 * (`CommitLockRepair.inspectCommitLock`) and leftover temp or break file.
 * What it finds is returned as data (`AuditFinding`, each kind documented on
 * `FindingKind`), never as a failure: the audit fails only for bugs. It
 * writes nothing; repairing a lock it reports is `CommitLockRepair`'s.
 *
 * Locks are judged here: one that cannot be read as a lock, or whose owner
 * is provably dead, or that is older than `staleAfterMs` is a leftover
 * (damage); a younger one may belong to a commit in progress (a notice).
 * Temp and break files are judged by age the same way.
 *
 * In sidecar scope, only the claims whose job has a receipt in that sidecar
 * are checked (and reported); the rest are counted as unattributed, and a
 * claim's temp file, which names no Session, is not seen.
 *
 * Claims and sidecars are read a bounded number at a time (16), each file
 * once: a settled claim's pointer that names a receipt line the scan
 * already hashed is not read again. The report lists sidecars, claims and
 * findings in the same order whatever order the reads finish in.
 *
 * Whatever a file holds, the report stays small and serialisable
 * (`ReportFields`). Memory grows only with the number of files and claims,
 * never with sidecar size. The audit reads a store that writers may be
 * using; a finding about something a writer was doing at that instant is
 * possible only for the tail of a sidecar being appended to, and for the
 * young files reported as notices.
 *
 * @since 0.1.0
 */
import { Clock, Effect } from "effect"
import { FileSystem } from "effect/FileSystem"
import { Path } from "effect/Path"
import { isPlatformError, type PlatformError } from "effect/PlatformError"
import { describeType } from "../io/RegularFile.js"
import { type AuditFinding, finding, judgedStrictly } from "./AuditFinding.js"
import { forEachBounded } from "./BoundedForEach.js"
import {
  checkClaimPointer,
  type ClaimReport,
  inspectClaimEntry,
  type InspectedClaim,
  type KnownReceipt
} from "./ClaimInspection.js"
import { ClaimReportList } from "./ClaimReportList.js"
import { DEFAULT_STALE_AFTER_MS, inspectCommitLock, type LockReport } from "./CommitLockRepair.js"
import { JOBS_DIR, MATERIALIZATIONS_DIR } from "./MirroredPath.js"
import { ageText, describeError, modifiedAt } from "./ReportFields.js"
import { scanSidecar, type SidecarScan, type SidecarSummary } from "./SidecarScan.js"

// What an audit reports and takes, from the modules that make each part.
export { type AuditFinding, type FindingKind, type Severity } from "./AuditFinding.js"
export { type ClaimReport, type KnownReceipt, type PointerStatus, type ReportedReceiptRef } from "./ClaimInspection.js"
export { type ClaimReportList } from "./ClaimReportList.js"
export { DEFAULT_STALE_AFTER_MS, type LockReport, type OwnerLiveness } from "./CommitLockRepair.js"
export { MAX_DETAIL_CHARS, MAX_FIELD_CHARS } from "./ReportFields.js"
export { type ScannedReceipt, type SidecarSummary } from "./SidecarScan.js"

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

/**
 * An `AuditReport` whose claims are held compactly (`ClaimReportList`): what
 * the CLI prints from, so a store of tens of thousands of claims is never
 * held as that many objects.
 *
 * @category models
 * @since 0.1.0
 */
export interface CompactAuditReport extends Omit<AuditReport, "claims"> {
  readonly claims: ClaimReportList
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
      ? finding(
        kind,
        kind === "temp_file_leftover" ? "crash_trace" : "damage",
        path,
        `${what}, ${age}: its writer crashed`
      )
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
    Effect.catchReason("PlatformError", "NotFound", () =>
      Effect.succeed<StoreDirectory>({ _tag: "Listed", entries: [] })),
    Effect.result
  )

const unsafeDirectoryFinding = (directory: string, type: string) =>
  finding(
    "directory_unsafe",
    "damage",
    directory,
    `is ${
      type === "SymbolicLink" ? "a symlink" : `${describeType(type)}, not a directory`
    }; the store refuses to use it`
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

/**
 * How many files the audit reads at once. On the thread-pool file system
 * this keeps its threads busy while the scan parses what they read; on the
 * direct one (whose reads return at once) it changes little. Findings and
 * reports keep the order of the files whatever order the reads end in.
 */
const AUDIT_READ_CONCURRENCY = 16

/**
 * Every claim under `jobsDir`, inspected, and the claims' leftover temp
 * files. What the listing made is dropped when this returns: only the
 * inspected claims are kept through the audit.
 */
const inspectClaims = (fs: FileSystem, path: Path, jobsDir: string, now: number, findings: Array<AuditFinding>) =>
  Effect.gen(function*() {
    const claimEntries = yield* listStoreDirectory(fs, jobsDir)
    const claimEntriesOfJobs: Array<{ readonly name: string; readonly type: string; readonly jobId: string }> = []
    const claimLeftovers: Array<string> = []
    if (claimEntries._tag === "Failure") {
      findings.push(finding("directory_unreadable", "damage", jobsDir, describeError(claimEntries.failure)))
    } else if (claimEntries.success._tag === "Unsafe") {
      findings.push(unsafeDirectoryFinding(jobsDir, claimEntries.success.type))
    } else {
      const entries = [...claimEntries.success.entries].sort((a, b) => (a.name < b.name ? -1 : 1))
      for (const entry of entries) {
        const match = CLAIM_FILE.exec(entry.name)
        if (match !== null) claimEntriesOfJobs.push({ name: entry.name, type: entry.type, jobId: match[1] })
        else if (CLAIM_TEMP.test(entry.name)) claimLeftovers.push(path.join(jobsDir, entry.name))
      }
    }
    const inspectedClaims: Array<InspectedClaim> = []
    for (
      const inspected of yield* forEachBounded(
        claimEntriesOfJobs,
        AUDIT_READ_CONCURRENCY,
        // The path is made here, so the only copy is the one its report keeps.
        (claim) => inspectClaimEntry(fs, path.join(jobsDir, claim.name), claim.jobId, claim.type, now)
      )
    ) {
      if (inspected !== undefined) inspectedClaims.push(inspected)
    }
    return { claimLeftovers, inspectedClaims }
  })

/** The sidecars that hold receipts of one claimed job, in walk order, and those receipts. */
interface JobReceipts {
  readonly sidecars: Array<string>
  /** Each sidecar's place in the walk. */
  readonly order: Array<number>
  readonly known: Array<KnownReceipt>
}

const byPathAndOffset = (a: AuditFinding, b: AuditFinding) =>
  a.path < b.path ? -1 : a.path > b.path ? 1 : (a.offset ?? -1) - (b.offset ?? -1)

/**
 * Audits a whole store, or one sidecar with its lock and the claims of its
 * jobs. `FindingKind` says what each finding means.
 *
 * @category audit
 * @since 0.1.0
 */
export const auditStore = Effect.fn("SidecarAudit.auditStore")(function*(options: AuditOptions) {
  const { claims, ...report } = yield* auditStoreCompactly(options)
  return {
    ok: report.ok,
    scope: report.scope,
    rarebitRoot: report.rarebitRoot,
    sidecars: report.sidecars,
    claims: claims.toArray(),
    unattributedClaims: report.unattributedClaims,
    locks: report.locks,
    findings: report.findings,
    counts: report.counts
  } satisfies AuditReport
})

/**
 * `auditStore`, its claims held compactly: the same report, but for the
 * form of `claims`.
 *
 * @category audit
 * @since 0.1.0
 */
export const auditStoreCompactly = Effect.fn("SidecarAudit.auditStoreCompactly")(function*(options: AuditOptions) {
  const fs = yield* FileSystem
  const path = yield* Path
  const now = yield* Clock.currentTimeMillis
  const staleAfterMs = options.staleAfterMs ?? DEFAULT_STALE_AFTER_MS
  const rarebitRoot = path.resolve(options.rarebitRoot)
  const findings: Array<AuditFinding> = []

  // Claims first, so the sidecar scan can note which of their jobs it meets.
  const jobsDir = path.join(rarebitRoot, JOBS_DIR)
  const { claimLeftovers, inspectedClaims } = yield* inspectClaims(fs, path, jobsDir, now, findings)
  const wanted = new Set(inspectedClaims.map((inspected) => inspected.report.jobId))

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
  // Each scan is folded in as it ends, so what it made that the report
  // does not keep dies young instead of being promoted to the old
  // generation with ten thousand others.
  // Sized up front: each scan lands at its file's index, in whatever order the scans end.
  // oxlint-disable-next-line unicorn/no-new-array
  const sidecars = new Array<SidecarSummary>(sidecarFiles.length)
  const receiptsByJob = new Map<string, JobReceipts>()
  const fold = (index: number, scan: SidecarScan) => {
    const sidecar = scan.summary.path
    sidecars[index] = scan.summary
    // Findings are sorted by path and offset at the end; a sidecar's own keep their order.
    for (const found of scan.findings) findings.push(found)
    for (const jobId of scan.jobIds) {
      const held = receiptsByJob.get(jobId)
      if (held === undefined) receiptsByJob.set(jobId, { sidecars: [sidecar], order: [index], known: [] })
      else {
        // Scans end in about walk order; the sidecars of a job are kept in walk order exactly.
        let at = held.order.length
        while (at > 0 && held.order[at - 1] > index) at--
        held.order.splice(at, 0, index)
        held.sidecars.splice(at, 0, sidecar)
      }
    }
    for (const receipt of scan.receipts) {
      receiptsByJob.get(receipt.jobId)!.known.push({
        sidecar,
        offset: receipt.offset,
        length: receipt.length,
        hash: receipt.hash
      })
    }
  }
  let scanned = 0
  const onProgress = options.onProgress
  const indices = Array.from({ length: sidecarFiles.length }, (_, index) => index)
  yield* forEachBounded(indices, AUDIT_READ_CONCURRENCY, (index) => {
    const file = sidecarFiles[index]
    const scan = Effect.map(scanSidecar(fs, file.path, wanted), (scan) => {
      scanned++
      fold(index, scan)
    })
    return onProgress === undefined
      ? scan
      : Effect.andThen(onProgress({ done: scanned, total: sidecarFiles.length, path: file.path }), scan)
  })
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
  const attributed = scope === "sidecar"
    ? inspectedClaims.filter((inspected) => receiptsByJob.has(inspected.report.jobId))
    : inspectedClaims
  const checkedClaims = yield* forEachBounded(attributed, AUDIT_READ_CONCURRENCY, (inspected) => {
    const held = receiptsByJob.get(inspected.report.jobId)
    return checkClaimPointer(fs, inspected, held?.sidecars ?? [], held?.known)
  })
  const claims = new ClaimReportList(jobsDir)
  for (let index = 0; index < attributed.length; index++) {
    findings.push(...attributed[index].findings)
    claims.push(checkedClaims[index].report)
    findings.push(...checkedClaims[index].findings)
  }
  const unattributedClaims = inspectedClaims.length - attributed.length

  const judged = options.strict === true ? judgedStrictly(findings) : findings
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
  } satisfies CompactAuditReport
})
