/**
 * Fingerprints of a Session's parsed prefix: the bytes the Session cache
 * compares to know that a grown file still starts with what it parsed.
 *
 * A Session is append-only, so a grown file that still holds the same
 * first 4 KiB and the same 8 KiB just before the old end of its last
 * complete line is taken to hold the whole old prefix. Both are kept as
 * plain copies of those bytes, and compared with bytes read again from the
 * file on every incremental read.
 *
 * @since 0.1.0
 */
import { concatBytes } from "../protocol/internal/Bytes.js"

/** Bytes of the head print. @category constants @since 0.1.0 */
export const HEAD_PRINT_BYTES = 4 * 1024

/** Bytes of the tail print. @category constants @since 0.1.0 */
export const TAIL_PRINT_BYTES = 8 * 1024

/**
 * The bytes a parsed prefix was built from, kept to recognise it later.
 *
 * @category models
 * @since 0.1.0
 */
export interface Prints {
  /** The first `min(4 KiB, committedEnd)` bytes. */
  readonly head: Uint8Array
  /** The last `min(8 KiB, committedEnd)` bytes before `committedEnd`. */
  readonly tail: Uint8Array
}

/** The prints of an empty prefix. @category constants @since 0.1.0 */
export const emptyPrints: Prints = { head: new Uint8Array(0), tail: new Uint8Array(0) }

/**
 * Prints after `piece` was committed at offset `committedEnd`. Pieces come
 * in order; a gap between two is allowed only past the head print and
 * before a piece that holds at least the whole tail print (the scan reports
 * at least a run's first 64 KiB and last 8 KiB, see `CommitListener`).
 *
 * @category constructors
 * @since 0.1.0
 */
export const extendPrints = (prints: Prints, committedEnd: number, piece: Uint8Array): Prints => {
  if (piece.length === 0) return prints
  // `piece` lies in the scan's reused buffer: what is kept of it is copied (two pieces always are).
  const head = committedEnd >= HEAD_PRINT_BYTES
    ? prints.head
    : concatBytes([prints.head, piece.subarray(0, HEAD_PRINT_BYTES - committedEnd)])
  const tail = piece.length >= TAIL_PRINT_BYTES
    ? piece.slice(piece.length - TAIL_PRINT_BYTES)
    : concatBytes([prints.tail.subarray(Math.max(0, prints.tail.length + piece.length - TAIL_PRINT_BYTES)), piece])
  return { head, tail }
}
