/**
 * The store on the real disk: Node's file system and path, a crypto-backed
 * `Random` for tokens, and `/proc` owner evidence for commit locks.
 *
 * The file system is {@link DirectFileSystem} (short calls on the calling
 * thread, `fsync` and large transfers on libuv's pool); the `threadpool`
 * variants use `@effect/platform-node`'s as it is, for disks where a stat can
 * stall (network file systems).
 *
 * @since 0.1.0
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Layer, Path } from "effect"
import { RarebitStore } from "../store/RarebitStore.js"
import type { StoreConfig } from "../store/StoreConfig.js"
import * as CryptoRandom from "./CryptoRandom.js"
import * as DirectFileSystem from "./DirectFileSystem.js"
import * as ProcessOwner from "./ProcessOwner.js"

/**
 * Node's file system (direct short calls) and path.
 *
 * @category layers
 * @since 0.1.0
 */
export const fileLayer = Layer.mergeAll(DirectFileSystem.layer, Path.layer)

/**
 * Node's file system with every call on libuv's thread pool, and path.
 *
 * @category layers
 * @since 0.1.0
 */
export const threadpoolFileLayer = Layer.mergeAll(NodeFileSystem.layer, Path.layer)

/**
 * The crypto-backed `Random` for tokens and the `/proc` lock owner probe.
 *
 * @category layers
 * @since 0.1.0
 */
export const tokenAndOwnerLayer = Layer.mergeAll(CryptoRandom.layer, ProcessOwner.layer)

/**
 * Everything the store needs on Node, without the store itself.
 *
 * @category layers
 * @since 0.1.0
 */
export const platformLayer = Layer.mergeAll(fileLayer, tokenAndOwnerLayer)

/**
 * The live store: provide it and call `RarebitStore` operations.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (config: Partial<StoreConfig> = {}) =>
  Layer.mergeAll(RarebitStore.layer(config), tokenAndOwnerLayer).pipe(Layer.provide(fileLayer))

/**
 * The live store with every file system call on libuv's thread pool: slower
 * on a local disk, but a stalled network file system never blocks the event
 * loop.
 *
 * @category layers
 * @since 0.1.0
 */
export const threadpoolLayer = (config: Partial<StoreConfig> = {}) =>
  Layer.mergeAll(RarebitStore.layer(config), tokenAndOwnerLayer).pipe(Layer.provide(threadpoolFileLayer))
