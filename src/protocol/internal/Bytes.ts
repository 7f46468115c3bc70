/**
 * Byte comparison for the caches' proofs.
 *
 * @internal
 */

/** Whether two byte ranges are equal, compared natively (no copy: a view over `a`). */
export const sameBytes = (a: Uint8Array, b: Uint8Array): boolean =>
  a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.length).equals(b)
