/**
 * A `Random` service drawn from `node:crypto`.
 *
 * Lease and lock tokens are capabilities: a worker that could guess another
 * worker's token could settle or unlock in its name. Effect's default
 * `Random` is `Math.random`, so the live layer replaces it with this CSPRNG.
 * Bytes are fetched in blocks to keep the per-number cost low.
 *
 * @since 0.1.0
 */
import { randomBytes } from "node:crypto"
import { Layer, Random } from "effect"

const BLOCK_WORDS = 512

/**
 * Makes a `Random` implementation backed by `crypto.randomBytes`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeCryptoRandom = (): Random.Random => {
  let words = new Uint32Array(0)
  let next = 0
  const word = (): number => {
    if (next >= words.length) {
      const bytes = randomBytes(BLOCK_WORDS * 4)
      words = new Uint32Array(bytes.buffer, bytes.byteOffset, BLOCK_WORDS)
      next = 0
    }
    return words[next++]
  }
  // 53 random bits: 27 from one word and 26 from another, as a double in [0, 1).
  const double = (): number => ((word() >>> 5) * 67108864 + (word() >>> 6)) / 9007199254740992
  return {
    nextDoubleUnsafe: double,
    nextIntUnsafe: () => Math.floor(double() * Number.MAX_SAFE_INTEGER)
  }
}

/**
 * Provides the crypto-backed `Random`.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer: Layer.Layer<never> = Layer.succeed(Random.Random, makeCryptoRandom())
