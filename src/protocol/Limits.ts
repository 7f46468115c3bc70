/**
 * The fixed numbers of the Rarebit sidecar protocol.
 *
 * Every bound a reader or writer enforces lives here, so a reader's worst-case
 * cost can be read off one page. They are protocol constants shared with the
 * reference implementation: changing one breaks interoperability.
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
