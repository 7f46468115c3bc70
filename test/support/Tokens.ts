/**
 * Token streams for test stores, seeded from the `Random` service when the
 * store is built. A run under `Random.withSeed` draws the same tokens every
 * time (crash exploration reruns a program and needs that), and every build
 * draws its own seed, so two stores standing for two processes never share
 * a token, as real workers never do.
 */
import { Effect, Random } from "effect"
import * as TestSecureRandom from "../../src/testing/TestSecureRandom.js"

export const tokensSeededFromRandom = Effect.map(Random.nextInt, (seed) => TestSecureRandom.make(`random-${seed}`))
