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
 * never with sidecar size: a sidecar's summary and path, and each claim's
 * report and the receipts of its job (plain objects, about 1.5 KB a claim
 * from its read to the report). The audit reads a store that writers may be
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
import { smallRegularReadOf } from "../../io/NonBlockingOpen.js"
import { describeType } from "../../io/RegularFile.js"
import { DEFAULT_STALE_AFTER_MS, inspectCommitLock, type LockReport } from "../lock/CommitLockRepair.js"
import { JOBS_DIR, MATERIALIZATIONS_DIR } from "../MirroredPath.js"
import { type AuditFinding, finding, judgedStrictly } from "./AuditFinding.js"
import {
  checkClaimPointer,
  type ClaimReport,
  inspectClaimEntry,
  type InspectedClaim,
  type KnownReceipt
} from "./ClaimInspection.js"
import { ageText, describeError, modifiedAt } from "./ReportFields.js"
import { type ScannedReceipt, scanSidecar, type SidecarScan, type SidecarSummary } from "./SidecarScan.js"

// What an audit reports and takes, from the modules that make each part.
export { DEFAULT_STALE_AFTER_MS, type LockReport, type OwnerLiveness } from "../lock/CommitLockRepair.js"
export { type AuditFinding, type FindingKind, type Severity } from "./AuditFinding.js"
export { type ClaimReport, type KnownReceipt, type PointerStatus, type ReportedReceiptRef } from "./ClaimInspection.js"
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
 * How many files the audit reads at once on a file system whose reads wait
 * (the thread-pool layer): this keeps its threads busy while the scan
 * parses what they read. Where reads return at once (`SmallRegularRead`,
 * the direct layer) they are made one after another: a fiber per file
 * gains nothing there and cost a tenth of the audit. Findings and reports
 * keep the order of the files whatever order the reads end in.
 */
const AUDIT_READ_CONCURRENCY = 16

/** Files read between two yields of the audit (each takes well under a millisecond). */
const FILES_PER_YIELD = 32

/**
 * `f` over `items`, the results in the items' order. Every
 * `FILES_PER_YIELD`th item starts with a yield: on the direct file system
 * every read returns at once, so without it a whole store would be audited
 * in one turn of the event loop, with timers and signals (Ctrl-C) waiting.
 * (A yield before every item was another tenth of the audit.)
 */
const forEachRead = <A, B>(
  fs: FileSystem,
  items: ReadonlyArray<A>,
  f: (item: A, index: number) => Effect.Effect<B>
): Effect.Effect<ReadonlyArray<B>> =>
  Effect.forEach(
    items,
    (item, index) => (index % FILES_PER_YIELD === 0
      ? Effect.flatMap(Effect.yieldNow, () => f(item, index))
      : f(item, index)),
    { concurrency: smallRegularReadOf(fs) === undefined ? AUDIT_READ_CONCURRENCY : 1 }
  )

/** The sidecars that hold receipts of one claim's job, in walk order, and those receipts. */
interface JobReceipts {
  /** Each sidecar's place in the walk. */
  readonly order: Array<number>
  readonly sidecars: Array<string>
  readonly known: Array<KnownReceipt>
}

/**
 * The claims an audit read, by slot (the claim's place in the sorted
 * listing of `jobs-v4`), and the receipts of their jobs the scan finds.
 */
interface ClaimsRead {
  /** `undefined` for a claim released before it could be read. */
  readonly inspected: ReadonlyArray<InspectedClaim | undefined>
  readonly slotOf: ReadonlyMap<string, number>
  readonly receipts: Map<number, JobReceipts>
  readonly claimLeftovers: ReadonlyArray<string>
}

/** Every claim under `jobsDir`, inspected, and the claims' leftover temp files. */
const inspectClaims = (fs: FileSystem, path: Path, jobsDir: string, now: number, findings: Array<AuditFinding>) =>
  Effect.flatMap(listStoreDirectory(fs, jobsDir), (listed) => {
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
    const claimPath = childPaths(path, jobsDir)
    const jobIds = claimFiles.map((name) => name.slice(0, -".json".length))
    return Effect.map(
      forEachRead(
        fs,
        jobIds,
        (jobId, slot) => inspectClaimEntry(fs, claimPath(claimFiles[slot]), jobId, entryTypes[slot], now)
      ),
      (inspected): ClaimsRead => ({
        inspected,
        slotOf: new Map(jobIds.map((jobId, slot) => [jobId, slot])),
        receipts: new Map(),
        claimLeftovers
      })
    )
  })

/** Notes the receipts of claimed jobs the scan found in `sidecar`, the sidecar at `walkIndex`. */
const noteReceipts = (
  claims: ClaimsRead,
  walkIndex: number,
  sidecar: string,
  receipts: ReadonlyArray<ScannedReceipt>
) => {
  for (const receipt of receipts) {
    const slot = claims.slotOf.get(receipt.jobId)
    if (slot === undefined) continue
    let held = claims.receipts.get(slot)
    if (held === undefined) {
      held = { order: [], sidecars: [], known: [] }
      claims.receipts.set(slot, held)
    }
    if (!held.order.includes(walkIndex)) {
      // Scans end in about walk order; the sidecars of a job are kept in walk order exactly.
      let at = held.order.length
      while (at > 0 && held.order[at - 1] > walkIndex) at--
      held.order.splice(at, 0, walkIndex)
      held.sidecars.splice(at, 0, sidecar)
    }
    held.known.push({ sidecar, offset: receipt.offset, length: receipt.length, hash: receipt.hash })
  }
}

const byPathAndOffset = (a: AuditFinding, b: AuditFinding) =>
  a.path < b.path ? -1 : a.path > b.path ? 1 : (a.offset ?? -1) - (b.offset ?? -1)

/** The store's files to audit: the whole tree, or one sidecar and its lock's files. */
const filesToAudit = (fs: FileSystem, path: Path, rarebitRoot: string, findings: Array<AuditFinding>, only?: string) =>
  Effect.gen(function*() {
    if (only === undefined) {
      const tree = yield* walkMaterializations(fs, path, path.join(rarebitRoot, MATERIALIZATIONS_DIR))
      findings.push(...tree.findings)
      return tree.files
    }
    const sidecar = path.resolve(only)
    const directory = path.dirname(sidecar)
    const base = path.basename(sidecar)
    const entries = yield* fs.readDirectoryEntries(directory).pipe(Effect.catch(() => Effect.succeed([])))
    return entries
      .filter((entry) => entry.name === base || entry.name.startsWith(`${base}${LOCK_SUFFIX}`))
      .sort((a, b) => (a.name < b.name ? -1 : 1))
      .map((entry) => classify(path.join(directory, entry.name), entry.type === "File"))
      .filter((file) => file._tag !== "Sidecar" || file.path === sidecar)
  })

/**
 * Audits a whole store, or one sidecar with its lock and the claims of its
 * jobs. `FindingKind` says what each finding means.
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
  const claims = yield* inspectClaims(fs, path, jobsDir, now, findings)
  const wanted = {
    has: (jobId: string) => {
      const slot = claims.slotOf.get(jobId)
      return slot !== undefined && claims.inspected[slot] !== undefined
    }
  }

  // Sidecars, locks and leftovers.
  const scope = options.sidecar === undefined ? "store" : "sidecar"
  const files = yield* filesToAudit(fs, path, rarebitRoot, findings, options.sidecar)
  const sidecarFiles = files.filter((file) => file._tag === "Sidecar")
  // Sized up front: each scan lands at its file's index, in whatever order the scans end.
  // oxlint-disable-next-line unicorn/no-new-array
  const sidecars = new Array<SidecarSummary>(sidecarFiles.length)
  const fold = (index: number, scan: SidecarScan) => {
    sidecars[index] = scan.summary
    // Findings are sorted by path and offset at the end; a sidecar's own keep their order.
    for (const found of scan.findings) findings.push(found)
    noteReceipts(claims, index, scan.summary.path, scan.receipts)
  }
  let scanned = 0
  const onProgress = options.onProgress
  yield* forEachRead(fs, sidecarFiles, (file, index) => {
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
    for (const leftover of claims.claimLeftovers) {
      findings.push(yield* leftoverFinding(fs, leftover, "temp_file_leftover", now, staleAfterMs))
    }
  }

  // Settled claims against the sidecars that hold receipts of their jobs.
  const attributed: Array<InspectedClaim> = []
  const candidates: Array<JobReceipts | undefined> = []
  let present = 0
  claims.inspected.forEach((inspected, slot) => {
    if (inspected === undefined) return
    present++
    if (scope === "store" || claims.receipts.has(slot)) {
      attributed.push(inspected)
      candidates.push(claims.receipts.get(slot))
    }
  })
  const checked = yield* forEachRead(
    fs,
    attributed,
    (inspected, index) => checkClaimPointer(fs, inspected, candidates[index]?.sidecars ?? [], candidates[index]?.known)
  )
  const reports: Array<ClaimReport> = []
  attributed.forEach((inspected, index) => {
    findings.push(...inspected.findings)
    reports.push(checked[index].report)
    findings.push(...checked[index].findings)
  })

  const judged = options.strict === true ? judgedStrictly(findings) : findings
  judged.sort(byPathAndOffset)
  const damage = judged.filter((item) => item.severity === "damage").length
  return {
    ok: damage === 0,
    scope,
    rarebitRoot,
    sidecars,
    claims: reports,
    unattributedClaims: present - attributed.length,
    locks,
    findings: judged,
    counts: { damage, notices: judged.length - damage }
  } satisfies AuditReport
})
