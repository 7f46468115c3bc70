/**
 * The operator's overview of a store: every Session under the Session root
 * with the state a reader would see for it, the sidecars whose Session is
 * gone, and how many leases are live.
 *
 * What it guarantees:
 * - Each Session (`*.jsonl`, found recursively, symlinked directories not
 *   followed) is reported once, with `availability` and `syncState` exactly
 *   as the store's own `readCurrent` reports them: this module reads through
 *   the store's operations and never judges a file itself.
 * - Nothing found on disk fails the overview: an unreadable Session or a
 *   damaged sidecar is an entry with that state. Only a Session root that is
 *   not a directory fails it (`SessionRootNotFound`).
 * - Memory is constant in the number of Sessions: the walk holds one
 *   directory's listing per level, and entries are streamed.
 * - Reads only; nothing is written.
 *
 * The title is the newest Title receipt that carries one, read with
 * `readHistory` over the sidecar's last `MAX_HISTORY_BYTES` (the bound one
 * history page reads), so an overview never reads a whole long sidecar.
 * `settledAt` is the modification time of the settled claim whose pointer
 * names the current receipt (the protocol records no settle time; that claim
 * is rewritten by the settle and never again), `null` once the claim is gone.
 *
 * The following form watches the Sessions the walk found (`watchSessions`);
 * a Session created afterwards is not followed.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Schema, Stream } from "effect"
import type { FileSystem } from "effect/FileSystem"
import type { Path } from "effect/Path"
import { readBounded } from "../../io/RegularFile.js"
import { modifiedMs } from "../../protocol/internal/FileInfo.js"
import { isoTimestampOf } from "../../protocol/internal/IsoTimestamp.js"
import { claimExpired, settledReceiptRef } from "../../protocol/JobClaim.js"
import { MAX_HISTORY_BYTES, MAX_HISTORY_RECORDS, MAX_TAIL_BYTES } from "../../protocol/Limits.js"
import type { ArtifactSyncState, ProjectionInputInvalid } from "../../state/ArtifactState.js"
import type { HistoryBoundsInvalid } from "../Errors.js"
import { claimPath, JOBS_DIR, MATERIALIZATIONS_DIR, type PathError } from "../MirroredPath.js"
import { locate, type LocationOverrides, type StoreLocation } from "../StoreConfig.js"
import type { WatchedCurrent, WatchSessionsOptions, WatchTuning } from "../watch/CurrentWatch.js"
import { readClaim } from "../write/JobClaims.js"
import type { Availability, HistoryPage } from "./SidecarReader.js"
import type { CurrentRead, ReadCurrentOptions, ReadHistoryOptions } from "./StoreReads.js"

/**
 * The Session root to list is not a directory (absent, or a file).
 *
 * @category errors
 * @since 0.1.0
 */
export class SessionRootNotFound extends Schema.TaggedError<SessionRootNotFound>()("SessionRootNotFound", {
  sessionRoot: Schema.String
}) {
  override get message() {
    return `no Session root at ${this.sessionRoot}`
  }
}

/**
 * One Session as the overview reports it.
 *
 * **Details**
 *
 * `availability` and `syncState` are the current read's (`availability`,
 * `artifactState.syncState`). `summary` is the first line of the current
 * `ok` receipt's summary; `title` the newest titled Title receipt's title;
 * `settledAt` when the current receipt was settled; `modifiedAt` when the
 * Session file last changed (what "recently active" sorts by). Each is
 * `null` where there is none.
 *
 * @category models
 * @since 0.1.0
 */
export interface SessionOverviewEntry {
  readonly sessionFile: string
  readonly sessionId: string | null
  readonly availability: Availability
  readonly syncState: ArtifactSyncState
  readonly summary: string | null
  readonly title: string | null
  readonly settledAt: string | null
  readonly modifiedAt: string | null
}

/**
 * Options of `sessions` and `followSessions`: the roots (the store's by
 * default), and for the following form the watch's tuning.
 *
 * @category models
 * @since 0.1.0
 */
export interface SessionOverviewOptions extends LocationOverrides, WatchTuning {}

/**
 * What the overview needs of a store instance: its public reads and
 * `watchSessions`, and the file system they run on.
 *
 * @internal
 */
export interface OverviewDependencies {
  readonly location: StoreLocation
  readonly fs: FileSystem
  readonly path: Path
  readonly readCurrent: (options: ReadCurrentOptions) => Effect.Effect<CurrentRead, PathError | ProjectionInputInvalid>
  readonly readHistory: (options: ReadHistoryOptions) => Effect.Effect<HistoryPage, PathError | HistoryBoundsInvalid>
  readonly watchSessions: (
    options: WatchSessionsOptions
  ) => Stream.Stream<WatchedCurrent, PathError | ProjectionInputInvalid>
}

/** The first line of a summary, trimmed; `null` for none. */
const firstLine = (text: unknown): string | null => {
  if (typeof text !== "string") return null
  const line = text.trim().split("\n", 1)[0]!.trim()
  return line === "" ? null : line
}

const mtimeOf = (fs: FileSystem, file: string) =>
  fs.stat(file).pipe(
    Effect.map((info) => modifiedMs(info) ?? null),
    Effect.catch(() => Effect.succeed(null))
  )

/** Every `*.jsonl` under `root`, depth first, names sorted; only real directories are entered. */
const walkJsonl = (fs: FileSystem, path: Path, root: string, skip?: string): Stream.Stream<string> =>
  Stream.unwrap(Effect.map(
    fs.readDirectoryEntries(root).pipe(Effect.catch(() => Effect.succeed([]))),
    (entries) =>
      Stream.flatMap(
        Stream.fromIterable([...entries].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))),
        (entry) => {
          const child = path.join(root, entry.name)
          if (entry.type === "Directory") return child === skip ? Stream.empty : walkJsonl(fs, path, child, skip)
          return (entry.type === "File" || entry.type === "Unknown") && entry.name.endsWith(".jsonl")
            ? Stream.succeed(child)
            : Stream.empty
        }
      )
  ))

/**
 * Fails with `SessionRootNotFound` unless `sessionRoot` is a directory.
 *
 * @category constructors
 * @since 0.1.0
 */
export const requireSessionRoot = (fs: FileSystem, sessionRoot: string): Effect.Effect<void, SessionRootNotFound> =>
  fs.stat(sessionRoot).pipe(
    Effect.map((info) => info.type === "Directory"),
    Effect.catch(() => Effect.succeed(false)),
    Effect.flatMap((isDirectory) => isDirectory ? Effect.void : Effect.fail(new SessionRootNotFound({ sessionRoot })))
  )

const PREFILTER_BYTES = MAX_TAIL_BYTES

const TITLE_TYPE = new TextEncoder().encode("\"rarebit_title\"")

/** Whether `bytes` hold `needle` anywhere. */
const includesBytes = (bytes: Uint8Array, needle: Uint8Array): boolean => {
  const last = bytes.length - needle.length
  for (let at = bytes.indexOf(needle[0]!); at >= 0 && at <= last; at = bytes.indexOf(needle[0]!, at + 1)) {
    let index = 1
    while (index < needle.length && bytes[at + index] === needle[index]) index++
    if (index === needle.length) return true
  }
  return false
}

/** The newest titled Title receipt within the sidecar's last history window. */
const titleOf = Effect.fnUntraced(function*(deps: OverviewDependencies, sessionFile: string, sidecar: string) {
  // Most sidecars are small and hold no Title receipt: one bounded read and a byte search tell, and
  // only a sidecar that may hold one is parsed, by the history reader. (The bound is small because
  // the read allocates all of it.)
  const read = yield* readBounded(deps.fs, sidecar, { maxBytes: PREFILTER_BYTES, followSymlinks: false }).pipe(
    Effect.catch(() => Effect.succeed(null))
  )
  if (read === null) return null
  if (read._tag === "Read" && !includesBytes(read.bytes, TITLE_TYPE)) return null
  const size = read._tag === "Read" ? read.bytes.length : yield* deps.fs.stat(sidecar).pipe(
    Effect.map((info) => Number(info.size)),
    Effect.catch(() => Effect.succeed(0))
  )
  if (size === 0) return null
  let offset: number | null = Math.max(0, size - MAX_HISTORY_BYTES)
  let title: string | null = null
  // The window is at most one page of bytes; a page that stops at the record limit goes on from there.
  while (offset !== null && offset < size) {
    const page: HistoryPage | null = yield* deps.readHistory({
      sessionFile,
      ...deps.location,
      fromOffset: offset,
      limit: MAX_HISTORY_RECORDS
    }).pipe(Effect.catch(() => Effect.succeed(null)))
    if (page === null) return title
    for (const { record } of page.records) {
      if (record.type === "rarebit_title" && typeof record.title === "string") title = record.title
    }
    offset = page.nextOffset
  }
  return title
})

/** When the current receipt was settled: the mtime of the settled claim that points at it. */
const settledAtOf = Effect.fnUntraced(function*(deps: OverviewDependencies, current: CurrentRead) {
  if (current.availability !== "available") return null
  const file = claimPath(deps.path, deps.location.rarebitRoot, current.receipt.jobId)
  const read = yield* readClaim(deps.fs, file).pipe(Effect.catch(() => Effect.succeed(null)))
  if (read === null || read._tag !== "Parsed") return null
  const ref = settledReceiptRef(read.claim) as { receiptOffset?: unknown; receiptHash?: unknown } | undefined
  if (
    ref === undefined || ref.receiptOffset !== current.head.receiptOffset ||
    ref.receiptHash !== current.head.receiptHash
  ) return null
  const mtime = yield* mtimeOf(deps.fs, file)
  return mtime === null ? null : isoTimestampOf(mtime)
})

/** An entry from a current read of `sessionFile`. */
const entryOf = Effect.fnUntraced(function*(deps: OverviewDependencies, sessionFile: string, current: CurrentRead) {
  const [title, settledAt, modified] = yield* Effect.all([
    current.availability === "missing" && current.diagnostics.reason === "sidecar_missing"
      ? Effect.succeed(null)
      : titleOf(deps, sessionFile, current.path),
    settledAtOf(deps, current),
    mtimeOf(deps.fs, sessionFile)
  ])
  const entry: SessionOverviewEntry = {
    sessionFile,
    sessionId: current.artifactState.nativeRef?.sessionId ?? current.head?.sessionId ?? null,
    availability: current.availability,
    syncState: current.artifactState.syncState,
    summary: current.availability === "available" && current.receipt.status === "ok"
      ? firstLine(current.receipt.summary)
      : null,
    title,
    settledAt,
    modifiedAt: modified === null ? null : isoTimestampOf(modified)
  }
  return entry
})

/** How many Sessions are read at once: the reads are short, but some wait on the disk. */
const CONCURRENCY = 4

const located = (deps: OverviewDependencies, options: SessionOverviewOptions): OverviewDependencies => {
  const location = locate(deps.location, options)
  return {
    ...deps,
    location: {
      ...location,
      sessionRoot: deps.path.resolve(location.sessionRoot),
      rarebitRoot: deps.path.resolve(location.rarebitRoot)
    }
  }
}

/**
 * Every Session under the Session root, in walk order (directories depth
 * first, names sorted), as overview entries.
 *
 * @category constructors
 * @since 0.1.0
 */
export const sessions = (
  dependencies: OverviewDependencies,
  options: SessionOverviewOptions = {}
): Stream.Stream<SessionOverviewEntry, SessionRootNotFound> => {
  const deps = located(dependencies, options)
  const { rarebitRoot, sessionRoot } = deps.location
  return Stream.unwrap(Effect.as(requireSessionRoot(deps.fs, sessionRoot), walkJsonl(deps.fs, deps.path, sessionRoot)))
    .pipe(Stream.mapEffect(
      (sessionFile) =>
        deps.readCurrent({ sessionFile, sessionRoot, rarebitRoot }).pipe(
          Effect.flatMap((current) => entryOf(deps, sessionFile, current)),
          // Only a caller's mistake fails a read, and the walk makes none: a Session it found is inside the root.
          Effect.orDie
        ),
      { concurrency: CONCURRENCY }
    ))
}

/**
 * The overview kept live: every Session's entry at start, then an entry each
 * time a Session's current read changes (`watchSessions`, with its
 * coalescing and latency).
 *
 * @category constructors
 * @since 0.1.0
 */
export const followSessions = (
  dependencies: OverviewDependencies,
  options: SessionOverviewOptions = {}
): Stream.Stream<SessionOverviewEntry, SessionRootNotFound> => {
  const deps = located(dependencies, options)
  const { rarebitRoot, sessionRoot } = deps.location
  return Stream.unwrap(Effect.gen(function*() {
    yield* requireSessionRoot(deps.fs, sessionRoot)
    // The watch needs every path up front: a list of strings, not of reads.
    const sessionFiles = yield* Stream.runCollect(walkJsonl(deps.fs, deps.path, sessionRoot))
    return deps.watchSessions({
      sessionFiles,
      sessionRoot,
      rarebitRoot,
      debounce: options.debounce,
      mode: options.mode,
      pollInterval: options.pollInterval,
      maxPollInterval: options.maxPollInterval
    }).pipe(
      Stream.mapEffect((state) => entryOf(deps, state.sessionFile, state.current)),
      Stream.orDie
    )
  }))
}

/**
 * Sidecars under the Rarebit root whose Session file is gone (sidecar paths
 * mirror Session paths): each sidecar's
 * mirrored Session path does not exist. Externally keyed sidecars
 * (`external/`, named by a hash) cannot be traced back and are not listed.
 *
 * @category constructors
 * @since 0.1.0
 */
export const orphanSidecars = (fs: FileSystem, path: Path, location: StoreLocation): Stream.Stream<string> => {
  const materializations = path.join(path.resolve(location.rarebitRoot), MATERIALIZATIONS_DIR)
  const sessionRoot = path.resolve(location.sessionRoot)
  return walkJsonl(fs, path, materializations, path.join(materializations, "external")).pipe(
    Stream.filterEffect((sidecar) =>
      fs.exists(path.join(sessionRoot, path.relative(materializations, sidecar))).pipe(
        Effect.map((exists) => !exists),
        Effect.catch(() => Effect.succeed(false))
      )
    )
  )
}

/**
 * How many claims under the Rarebit root hold a live lease now: active and
 * not expired, as `reserve` decides it. Claims do not name their Session, so
 * this is for the whole store.
 *
 * @category constructors
 * @since 0.1.0
 */
export const activeClaims = Effect.fnUntraced(function*(
  fs: FileSystem,
  path: Path,
  location: Pick<StoreLocation, "rarebitRoot">
) {
  const nowMs = yield* Clock.currentTimeMillis
  const jobs = path.join(path.resolve(location.rarebitRoot), JOBS_DIR)
  const entries = yield* fs.readDirectoryEntries(jobs).pipe(Effect.catch(() => Effect.succeed([])))
  let live = 0
  for (const entry of entries) {
    if (!entry.name.endsWith(".json")) continue
    const read = yield* readClaim(fs, path.join(jobs, entry.name)).pipe(
      Effect.catch(() => Effect.succeed(null))
    )
    // A torn claim holds no lease anyone could name: not counted.
    if (read !== null && read._tag === "Parsed" && isActive(read.claim) && !claimExpired(read.claim, nowMs)) live++
  }
  return live
})

const isActive = (claim: unknown): boolean =>
  typeof claim === "object" && claim !== null && (claim as { state?: unknown }).state === "active"
