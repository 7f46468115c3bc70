/**
 * The store's tokens: lease tokens, lock tokens and the suffixes of private
 * temp files, all drawn from the `SecureRandom` service.
 *
 * Lease and lock tokens are capabilities, and fencing is only as good as
 * their uniqueness: a worker holding another's token could settle, release
 * or unlock in its name. They never come from `Random`, which a caller may
 * seed for its own reasons (two reserves under `Random.withSeed(1)` would
 * otherwise get one token) and whose default is not a secure generator.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import * as SecureRandom from "effect/crypto/SecureRandom"

/**
 * A random hex token of `bytes` bytes from the `SecureRandom` service.
 *
 * @category constructors
 * @since 0.1.0
 */
export const randomToken = (bytes: number): Effect.Effect<string, never, SecureRandom.SecureRandom> =>
  SecureRandom.SecureRandom.use((random) => Effect.map(random.randomBytes(bytes), toHex))

const toHex = (bytes: Uint8Array): string => {
  let hex = ""
  for (const byte of bytes) hex += byte.toString(16).padStart(2, "0")
  return hex
}
