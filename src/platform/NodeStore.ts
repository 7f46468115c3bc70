/**
 * The store on the real disk: Node's file system and path, a crypto-backed
 * `Random` for tokens, and `/proc` owner evidence for commit locks.
 *
 * @since 0.1.0
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Layer, Path } from "effect"
import { RarebitStore } from "../store/RarebitStore.js"
import type { StoreConfig } from "../store/StoreConfig.js"
import * as CryptoRandom from "./CryptoRandom.js"
import * as ProcessOwner from "./ProcessOwner.js"

/**
 * Everything the store needs on Node, without the store itself.
 *
 * @category layers
 * @since 0.1.0
 */
export const platformLayer = Layer.mergeAll(NodeFileSystem.layer, Path.layer, CryptoRandom.layer, ProcessOwner.layer)

/**
 * Node's file system and path.
 *
 * @category layers
 * @since 0.1.0
 */
export const fileLayer = Layer.mergeAll(NodeFileSystem.layer, Path.layer)

/**
 * The crypto-backed `Random` for tokens and the `/proc` lock owner probe.
 *
 * @category layers
 * @since 0.1.0
 */
export const tokenAndOwnerLayer = Layer.mergeAll(CryptoRandom.layer, ProcessOwner.layer)

/**
 * The live store: provide it and call `RarebitStore` operations.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (config: Partial<StoreConfig> = {}) =>
  Layer.mergeAll(RarebitStore.layer(config), tokenAndOwnerLayer).pipe(Layer.provide(fileLayer))
