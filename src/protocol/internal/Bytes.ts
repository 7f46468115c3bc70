/**
 * Byte comparison for the caches' proofs, and joining pieces of bytes.
 *
 * @internal
 */

/** Whether two byte ranges are equal, compared natively (no copy: a view over `a`). */
export const sameBytes = (a: Uint8Array, b: Uint8Array): boolean =>
  a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.length).equals(b)

/**
 * The pieces joined into one new array of `length` bytes (their total by
 * default). One piece alone is returned as it is, not copied: the caller
 * copies it if it must outlive a reused buffer.
 */
export const concatBytes = (
  pieces: ReadonlyArray<Uint8Array>,
  length: number = pieces.reduce((total, piece) => total + piece.length, 0)
): Uint8Array => {
  if (pieces.length === 1) return pieces[0]
  const out = new Uint8Array(length)
  let at = 0
  for (const piece of pieces) {
    out.set(piece, at)
    at += piece.length
  }
  return out
}
