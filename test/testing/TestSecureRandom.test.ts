/**
 * The testing kit's deterministic `SecureRandom`: one seed, one stream of
 * bytes, restarted by every build of its layer; other seeds, other streams.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SecureRandom } from "effect/crypto/SecureRandom"
import * as TestSecureRandom from "../../src/testing/TestSecureRandom.js"

const hex = (bytes: Uint8Array) => Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("")

const draws = (random: SecureRandom["Service"]) =>
  Effect.all([random.randomBytes(24), random.randomBytes(24), random.randomBytes(7)]).pipe(
    Effect.map((all) => all.map(hex))
  )

describe("TestSecureRandom", () => {
  it.effect("the same seed gives the same bytes in the same order; each draw differs", () =>
    Effect.gen(function*() {
      const first = yield* draws(TestSecureRandom.make("seed"))
      const again = yield* draws(TestSecureRandom.make("seed"))
      assert.deepStrictEqual(first, again)
      assert.strictEqual(new Set(first).size, 3)
      assert.strictEqual(first[2]!.length, 14)
    }))

  it.effect("other seeds give other bytes", () =>
    Effect.gen(function*() {
      const seeds = ["a", "b", "seed", "seed2", "random-1", "random-2"]
      const firsts = yield* Effect.forEach(seeds, (seed) =>
        TestSecureRandom.make(seed).randomBytes(24).pipe(Effect.map(hex)))
      assert.strictEqual(new Set(firsts).size, seeds.length)
    }))

  it.effect("every build of the layer restarts the seed's stream", () =>
    Effect.gen(function*() {
      const draw = SecureRandom.use((random) => random.randomBytes(24)).pipe(Effect.map(hex))
      const layer = TestSecureRandom.layer("layer-seed")
      const one = yield* Effect.all([draw, draw]).pipe(Effect.provide(layer))
      const two = yield* Effect.all([draw, draw]).pipe(Effect.provide(layer))
      assert.deepStrictEqual(one, two)
      assert.notStrictEqual(one[0], one[1])
    }))

  it.effect("bytes cover the whole range: no byte value is missing from 64 KiB", () =>
    Effect.gen(function*() {
      const bytes = yield* TestSecureRandom.make("spread").randomBytes(65536)
      assert.strictEqual(new Set(bytes).size, 256)
    }))
})
