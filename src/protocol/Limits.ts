/**
 * The fixed numbers of the Rarebit sidecar protocol.
 *
 * Every bound a reader or writer enforces lives here, so a reader's worst-case
 * cost can be read off one page. Most are protocol constants shared with the
 * reference implementation: changing one breaks interoperability. The read
 * bounds of lock and claim files are ours alone (the reference reads them
 * whole): far above anything either implementation writes, they only cap
 * what a hostile file at those paths can make us read.
 *
 * @since 0.1.0
 */

/** Sidecar head protocol version written in every `rarebit_head`. @category constants @since 0.1.0 */
export const SIDECAR_PROTOCOL_VERSION = 1 as const

/** The current reader looks at no more than this many trailing bytes. @category constants @since 0.1.0 */
export const MAX_TAIL_BYTES = 64 * 1024

/** A receipt line, newline included, is at most this long. @category constants @since 0.1.0 */
export const MAX_RECEIPT_BYTES = 48 * 1024

/** A head line, newline included, is at most this long. @category constants @since 0.1.0 */
export const MAX_HEAD_BYTES = 8 * 1024

/** One history page reads at most this many bytes. @category constants @since 0.1.0 */
export const MAX_HISTORY_BYTES = 1024 * 1024

/** One history page returns at most this many records. @category constants @since 0.1.0 */
export const MAX_HISTORY_RECORDS = 1_000

/** Milliseconds between two attempts to create the commit lock. @category constants @since 0.1.0 */
export const COMMIT_LOCK_RETRY_MS = 5

/** Attempts to create the commit lock before giving up with `LockHeld`. @category constants @since 0.1.0 */
export const COMMIT_LOCK_ATTEMPTS = 2_000

/** Default job lease: ten minutes. @category constants @since 0.1.0 */
export const DEFAULT_LEASE_MS = 10 * 60_000

/**
 * A commit lock file is read only up to this many bytes; a longer one is
 * treated like a torn lock (held, never broken automatically).
 *
 * **Details**
 *
 * Our largest lock is `{token, claimedAt, owner}` with a 48-hex-digit token,
 * an ISO time and owner evidence (pid, a hostname of at most 255 bytes, a
 * boot id, start ticks): under 600 bytes. The reference writes only
 * `{token, claimedAt}`, about 100. 4 KiB leaves room for more evidence
 * fields while bounding what a hostile file (`/dev/zero`, a huge file) can
 * make a waiter read on every retry.
 *
 * @category constants
 * @since 0.1.0
 */
export const MAX_LOCK_FILE_BYTES = 4 * 1024

/**
 * A job claim is read only up to this many bytes; a longer one cannot be
 * read and counts as in flight, like a torn claim, until its modification
 * time is older than the lease.
 *
 * **Details**
 *
 * The largest claim either implementation writes is a settled one (a
 * 64-digit job id, a lease token, the receipt pointer with its 64-digit
 * hash, times and the lease length): about 400 bytes. 4 KiB is ten times
 * that, and small enough to read on every reserve without a thought.
 *
 * @category constants
 * @since 0.1.0
 */
export const MAX_CLAIM_BYTES = 4 * 1024
