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
 * never with sidecar size: a sidecar's summary and path (a few hundred
 * bytes), and for a claim with nothing wrong whose job has one receipt,
 * about 150 bytes from its read to its pointer check (`AuditClaimTable`),
 * then 84 in the report (`ClaimReportList`). The audit reads a store that writers may be
 * using; a finding about something a writer was doing at that instant is
 * possible only for the tail of a sidecar being appended to, and for the
 * young files reported as notices.
 *
 * @since 0.1.0
 */
import { Clock, Effect, type Result } from "effect"
import { FileSystem } from "effect/FileSystem"
import { Path } from "effect/Path"
import { isPlatformError, type PlatformError } from "effect/PlatformError"
import { describeType } from "../io/RegularFile.js"
import { AuditClaimTable } from "./AuditClaimTable.js"
import { type AuditFinding, finding, judgedStrictly } from "./AuditFinding.js"
import { forEachBounded } from "./BoundedForEach.js"
import { checkClaimPointer, type CheckedClaim, type ClaimReport, inspectClaimEntry } from "./ClaimInspection.js"
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
const CLAIM_FILE = /^[a-f0-9]{64}\.json$/
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

/**
 * `path.join(directory, name)` for the entries of one directory, without
 * normalising each: a name read from a directory is one segment, so its
 * join is the directory's joined prefix and the name (tens of thousands of
 * `path.join` calls were a tenth of what an audit allocated). A name that
 * could be anything else is joined as usual.
 */
const childPaths = (path: Path, directory: string) => {
  const prefix = path.join(directory, "x").slice(0, -1)
  return (name: string): string =>
    name === "" || name === "." || name === ".." || name.includes("/") || name.includes("\\")
      ? path.join(directory, name)
      : `${prefix}${name}`
}

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
        const childOf = childPaths(path, directory)
        for (const entry of entries) {
          const child = childOf(entry.name)
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
 * Every claim under `jobsDir`, inspected into a table (`AuditClaimTable`),
 * and the claims' leftover temp files. What the listing made is dropped
 * before the first claim is read: only the table is kept through the audit.
 */
const inspectClaims = (
  fs: FileSystem,
  path: Path,
  jobsDir: string,
  now: number,
  findings: Array<AuditFinding>,
  sidecarAt: (walkIndex: number) => string
) =>
  Effect.flatMap(listStoreDirectory(fs, jobsDir), (listed) => {
    // Only what this returns outlives the listing: nothing of it is held while the claims are read.
    const { claimLeftovers, entryTypes, table } = tableOfListing(path, jobsDir, listed, findings, sidecarAt)
    const slots = Array.from({ length: table.size }, (_, slot) => slot)
    const claimPath = childPaths(path, jobsDir)
    // Each claim is packed into the table as its read ends, so what the
    // read made dies young instead of being promoted with twenty thousand others.
    const inspected = forEachBounded(slots, AUDIT_READ_CONCURRENCY, (slot) => {
      // The path and job id are made here, so the only copies are the ones a kept report holds.
      const jobId = table.jobIdAt(slot)
      return Effect.map(
        inspectClaimEntry(fs, claimPath(`${jobId}.json`), jobId, entryTypes[slot], now),
        (claim) => table.record(slot, claim)
      )
    })
    return Effect.as(inspected, { claimLeftovers, table })
  })

const tableOfListing = (
  path: Path,
  jobsDir: string,
  listed: Result.Result<StoreDirectory, PlatformError>,
  findings: Array<AuditFinding>,
  sidecarAt: (walkIndex: number) => string
) => {
  const claimFiles: Array<string> = []
  const entryTypes: Array<string> = []
  const claimLeftovers: Array<string> = []
  if (listed._tag === "Failure") {
    findings.push(finding("directory_unreadable", "damage", jobsDir, describeError(listed.failure)))
  } else if (listed.success._tag === "Unsafe") {
    findings.push(unsafeDirectoryFinding(jobsDir, listed.success.type))
  } else {
    const entries = [...listed.success.entries].sort((a, b) => (a.name < b.name ? -1 : 1))
    for (const entry of entries) {
      if (CLAIM_FILE.test(entry.name)) {
        claimFiles.push(entry.name)
        entryTypes.push(entry.type)
      } else if (CLAIM_TEMP.test(entry.name)) claimLeftovers.push(path.join(jobsDir, entry.name))
    }
  }
  return { claimLeftovers, entryTypes, table: new AuditClaimTable(jobsDir, claimFiles, sidecarAt) }
}

/** The pointer check of a claim the table verified at once: nothing to read, nothing to report yet. */
const VERIFIED_AT_ONCE: Effect.Effect<CheckedClaim | undefined> = Effect.succeed(undefined)

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
  let sidecars: Array<SidecarSummary> = []
  const { claimLeftovers, table } = yield* inspectClaims(
    fs,
    path,
    jobsDir,
    now,
    findings,
    (walkIndex) => sidecars[walkIndex].path
  )

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
  sidecars = new Array<SidecarSummary>(sidecarFiles.length)
  const fold = (index: number, scan: SidecarScan) => {
    sidecars[index] = scan.summary
    // Findings are sorted by path and offset at the end; a sidecar's own keep their order.
    for (const found of scan.findings) findings.push(found)
    table.noteReceipts(index, scan.receipts)
  }
  let scanned = 0
  const onProgress = options.onProgress
  const indices = Array.from({ length: sidecarFiles.length }, (_, index) => index)
  yield* forEachBounded(indices, AUDIT_READ_CONCURRENCY, (index) => {
    const file = sidecarFiles[index]
    const scan = Effect.map(scanSidecar(fs, file.path, table), (scan) => {
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
  const attributed: Array<number> = []
  for (let slot = 0; slot < table.size; slot++) {
    if (table.isPresent(slot) && (scope === "store" || table.hasReceipts(slot))) attributed.push(slot)
  }
  const checkedClaims = yield* forEachBounded(attributed, AUDIT_READ_CONCURRENCY, (slot) => {
    if (table.verifiesAtOnce(slot)) return VERIFIED_AT_ONCE
    const held = table.receiptsOf(slot)
    return checkClaimPointer(fs, table.inspected(slot), held?.sidecars ?? [], held?.known)
  })
  const claims = new ClaimReportList(jobsDir, attributed.length)
  for (let index = 0; index < attributed.length; index++) {
    const slot = attributed[index]
    const checked = checkedClaims[index]
    if (checked === undefined) {
      table.pushVerified(slot, claims)
      continue
    }
    findings.push(...table.inspected(slot).findings)
    claims.push(checked.report)
    findings.push(...checked.findings)
  }
  const unattributedClaims = table.present - attributed.length

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
