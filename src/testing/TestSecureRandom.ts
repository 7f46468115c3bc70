/**
 * A deterministic `SecureRandom` for tests.
 *
 * The store draws lease and lock tokens (and temp-file names) from Effect's
 * `SecureRandom`, never from `Random`. A reproducible test needs
 * reproducible tokens: this one draws its bytes from a small seeded
 * generator, so one seed gives the same bytes in the same order on every
 * run. It is not secure and must never back a real store.
 *
 * Every build of {@link layer} starts its seed's stream from the beginning.
 * Two stores that stand for two processes on one disk therefore need two
 * seeds (or one shared instance from {@link make}): with one seed they would
 * draw the same tokens, which real workers never do.
 *
 * @since 0.1.0
 */
import { Layer } from "effect"
import * as SecureRandom from "effect/crypto/SecureRandom"

/** Four 32-bit words of state from a seed string (cyrb128). */
const stateOf = (seed: string): [number, number, number, number] => {
  let h1 = 1779033703, h2 = 3144134277, h3 = 1013904242, h4 = 2773480762
  for (let i = 0; i < seed.length; i++) {
    const k = seed.charCodeAt(i)
    h1 = h2 ^ Math.imul(h1 ^ k, 597399067)
    h2 = h3 ^ Math.imul(h2 ^ k, 2869860233)
    h3 = h4 ^ Math.imul(h3 ^ k, 951274213)
    h4 = h1 ^ Math.imul(h4 ^ k, 2716044179)
  }
  h1 = Math.imul(h3 ^ (h1 >>> 18), 597399067)
  h2 = Math.imul(h4 ^ (h2 >>> 22), 2869860233)
  h3 = Math.imul(h1 ^ (h3 >>> 17), 951274213)
  h4 = Math.imul(h2 ^ (h4 >>> 19), 2716044179)
  return [(h1 ^ h2 ^ h3 ^ h4) >>> 0, (h2 ^ h1) >>> 0, (h3 ^ h1) >>> 0, (h4 ^ h1) >>> 0]
}

/** A byte source from the sfc32 generator: small, fast, and good enough to never repeat a token in a test. */
const seededBytes = (seed: string): (size: number) => Uint8Array => {
  let [a, b, c, d] = stateOf(seed)
  const word = (): number => {
    const t = (((a + b) | 0) + d) | 0
    d = (d + 1) | 0
    a = b ^ (b >>> 9)
    b = (c + (c << 3)) | 0
    c = (c << 21) | (c >>> 11)
    c = (c + t) | 0
    return t >>> 0
  }
  return (size) => {
    const bytes = new Uint8Array(size)
    for (let i = 0; i < size; i += 4) {
      const w = word()
      for (let j = 0; j < 4 && i + j < size; j++) bytes[i + j] = (w >>> (8 * j)) & 0xff
    }
    return bytes
  }
}

/**
 * A deterministic `SecureRandom`: the same seed gives the same bytes, and so
 * the same tokens, in the same order.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (seed: string): SecureRandom.SecureRandom["Service"] => SecureRandom.make(seededBytes(seed))

/**
 * Provides a deterministic `SecureRandom`, restarted from `seed` on every
 * build of the layer.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (seed: string): Layer.Layer<SecureRandom.SecureRandom> =>
  Layer.sync(SecureRandom.SecureRandom, () => make(seed))
