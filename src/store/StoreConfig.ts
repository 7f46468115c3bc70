/**
 * Where the store keeps its files and how long it waits.
 *
 * A `StoreConfig` is plain data given to `RarebitStore.layer`. Every
 * operation may also name its own roots (the Promise facade does, to keep
 * the reference's per-call parameters), and those win over the layer's.
 *
 * @since 0.1.0
 */
import { homedir } from "node:os"
import { join } from "node:path"
import { COMMIT_LOCK_ATTEMPTS, COMMIT_LOCK_RETRY_MS, DEFAULT_LEASE_MS } from "../protocol/Limits.js"

/** `~/.pi/agent/rarebit`. @category constants @since 0.1.0 */
export const DEFAULT_RAREBIT_ROOT = join(homedir(), ".pi", "agent", "rarebit")

/** `~/.pi/agent/sessions`. @category constants @since 0.1.0 */
export const DEFAULT_RAREBIT_SESSION_ROOT = join(homedir(), ".pi", "agent", "sessions")

/**
 * How to wait for a commit lock held by someone else.
 *
 * **Details**
 *
 * `attempts` creations are tried, `intervalMs` apart on average, before
 * `LockHeld`: each attempt may come up to half an interval early (drawn
 * from `Random`), never late, and the waits together are exactly
 * `(attempts - 1) × intervalMs`. The protocol's values
 * (5 ms × 2000) are the default; the waits go through `Clock`, so
 * `TestClock` drives them.
 *
 * @category models
 * @since 0.1.0
 */
export interface LockRetry {
  readonly intervalMs: number
  readonly attempts: number
}

/** The roots that locate one Session's files. @category models @since 0.1.0 */
export interface StoreLocation {
  readonly rarebitRoot: string
  readonly sessionRoot: string
  readonly allowExternalSession: boolean
}

/** Layer configuration of `RarebitStore`. @category models @since 0.1.0 */
export interface StoreConfig extends StoreLocation {
  readonly leaseMs: number
  readonly lockRetry: LockRetry
  /**
   * Break a commit lock whose owner evidence proves its process is gone
   * (written in this process's host, boot, PID and time namespace, pid no
   * longer that process there). Locks without our evidence, such as the
   * reference's, or from another namespace, are never broken automatically.
   */
  readonly breakDeadLocks: boolean
  /**
   * Read Sessions through the incremental cache, which parses only what a
   * Session appended since the last read. It trusts that Sessions are
   * append-only (as Pi writes them): it checks identity, size, modification
   * time and the bytes at the head and before the old end, but a rewrite
   * that grows the file in place and changes only bytes between those is not
   * seen. Turn it off for Sessions other programs rewrite.
   */
  readonly cacheSessions: boolean
  /**
   * What the store's read caches may keep, together: the Session cache (the
   * reduced parse of each Session read, or for an idle one only what its
   * artifact state reads) and the sidecar cache (the digest and offsets of
   * the bytes each current answer rests on). Past `maxBytes` of estimated
   * state, the least recently read Sessions and sidecars are dropped (their
   * next read is a full read). No file is held open between reads. See
   * `io/ByteCache` and docs/memory.md.
   */
  readonly cacheBudget: CacheBudgetConfig
}

/**
 * The bound of the store's read caches, shared by the Session and sidecar
 * caches.
 *
 * **Details**
 *
 * An idle Session polled by `readCurrent` (last written more than 2 s
 * before it was read) keeps only its evidence (its id and its selection's
 * manifest, no texts), charged about 1 KiB plus 400 bytes per selected
 * message, and its sidecar about 0.5 KiB, each besides its entry (96 bytes
 * plus twice its path's length). A Session being written keeps its reduced
 * parse and projection instead, to extend it as it grows (about 19 KiB for
 * a 60 KiB Session with five selected messages, plus up to 12 KiB of
 * fingerprints; it grows with the selected messages' text and the number
 * of entries, not with tool outputs). `maxBytes: 0` keeps nothing: every
 * read is a full read.
 *
 * @category models
 * @since 0.1.0
 */
export interface CacheBudgetConfig {
  /** Estimated bytes of cached state, over both caches. Default 32 MiB. */
  readonly maxBytes: number
}

/** The default cache budget: 32 MiB. @category constants @since 0.1.0 */
export const DEFAULT_CACHE_BUDGET: CacheBudgetConfig = { maxBytes: 32 * 1024 * 1024 }

/** The protocol's defaults. @category constructors @since 0.1.0 */
export const defaultStoreConfig: StoreConfig = {
  rarebitRoot: DEFAULT_RAREBIT_ROOT,
  sessionRoot: DEFAULT_RAREBIT_SESSION_ROOT,
  allowExternalSession: false,
  leaseMs: DEFAULT_LEASE_MS,
  lockRetry: { intervalMs: COMMIT_LOCK_RETRY_MS, attempts: COMMIT_LOCK_ATTEMPTS },
  breakDeadLocks: true,
  cacheSessions: true,
  cacheBudget: DEFAULT_CACHE_BUDGET
}

/** Fills the unspecified fields of a partial config with the defaults. @category constructors @since 0.1.0 */
export const makeStoreConfig = (overrides: Partial<StoreConfig> = {}): StoreConfig => ({
  ...defaultStoreConfig,
  ...overrides
})

/** Per-call overrides of the layer's roots. @category models @since 0.1.0 */
export interface LocationOverrides {
  readonly rarebitRoot?: string | undefined
  readonly sessionRoot?: string | undefined
  readonly allowExternalSession?: boolean | undefined
}

/** Resolves per-call overrides against the layer's configuration. @category constructors @since 0.1.0 */
export const locate = (config: StoreLocation, overrides: LocationOverrides): StoreLocation => ({
  rarebitRoot: overrides.rarebitRoot ?? config.rarebitRoot,
  sessionRoot: overrides.sessionRoot ?? config.sessionRoot,
  allowExternalSession: overrides.allowExternalSession ?? config.allowExternalSession
})
