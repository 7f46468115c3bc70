/**
 * The store on an in-memory disk: one layer for testing a program that uses
 * `RarebitStore`, without touching the real file system.
 *
 * It gives the program `RarebitStore` and what the store runs on: a fresh,
 * empty `MemoryFileSystem` (also as `FileSystem`, so the test writes its
 * Session files there) and `Path`. Tokens come from a
 * {@link TestSecureRandom} seeded with `seed`, so a test's tokens and temp
 * names are the same on every run; nothing is durable beyond the layer.
 *
 * @since 0.1.0
 */
import { type FileSystem, Layer, Path } from "effect"
import { RarebitStore } from "../store/RarebitStore.js"
import type { StoreConfig } from "../store/StoreConfig.js"
import { MemoryFileSystem } from "./MemoryFileSystem.js"
import * as TestSecureRandom from "./TestSecureRandom.js"

/**
 * Options of {@link layer}.
 *
 * @category models
 * @since 0.1.0
 */
export interface MemoryStoreOptions {
  /** Seed of the store's token stream; default `"rarebit-store"`. */
  readonly seed?: string | undefined
}

/**
 * A store over a fresh in-memory disk, with that disk and `Path`.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (
  config: Partial<StoreConfig> = {},
  options: MemoryStoreOptions = {}
): Layer.Layer<RarebitStore | FileSystem.FileSystem | MemoryFileSystem | Path.Path> =>
  RarebitStore.layer(config).pipe(
    Layer.provide(TestSecureRandom.layer(options.seed ?? "rarebit-store")),
    Layer.provideMerge(Layer.mergeAll(MemoryFileSystem.layer, Path.layer))
  )
