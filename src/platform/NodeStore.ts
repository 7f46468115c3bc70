/**
 * The store on the real disk, and the Node services it runs on: Node's file
 * system and path, tokens from `node:crypto`'s `randomFillSync` through
 * Effect's `SecureRandom`, and the platform's owner evidence for commit locks
 * (`ProcessOwner`: `/proc` on Linux, the boot session and `kill`/`ps` on
 * macOS, none that proves an owner dead elsewhere).
 *
 * `layer(config)` is the one layer an Effect program provides: it gives the
 * program `RarebitStore` and the `FileSystem` and `Path` the store uses, so
 * the program's own file work (`Session.readSession`, writing a Session)
 * type-checks under it without a second layer. Its `SecureRandom` stays
 * inside the store, and the program's `Random` is left alone.
 *
 * The file system is {@link DirectFileSystem} (short calls on the calling
 * thread, `fsync` and large transfers on libuv's pool); the `threadpool`
 * variants use `@effect/platform-node`'s as it is, for disks where a stat can
 * stall (network file systems).
 *
 * @since 0.1.0
 */
import * as NodePath from "@effect/platform-node/NodePath"
import { type FileSystem, Layer, type Path } from "effect"
import * as SecureRandom from "effect/crypto/SecureRandom"
import { randomFillSync } from "node:crypto"
import { RarebitStore } from "../store/RarebitStore.js"
import type { StoreConfig } from "../store/StoreConfig.js"
import * as DirectFileSystem from "./DirectFileSystem.js"
import * as ProcessOwner from "./ProcessOwner.js"

/**
 * Node's file system (direct short calls) and path.
 *
 * **Details**
 *
 * `Path` is Node's own `node:path`, not Effect's portable one: given a root
 * that is not a string, it throws the same `TypeError`
 * (`ERR_INVALID_ARG_TYPE`) at the same step as the reference, which calls
 * `node:path` itself.
 *
 * @category layers
 * @since 0.1.0
 */
export const fileLayer = Layer.mergeAll(DirectFileSystem.layer, NodePath.layer)

/**
 * Node's file system with every call on libuv's thread pool, and path.
 *
 * @category layers
 * @since 0.1.0
 */
export const threadpoolFileLayer = Layer.mergeAll(DirectFileSystem.threadpoolLayer, NodePath.layer)

/**
 * `SecureRandom` from `node:crypto`'s `randomFillSync`, for lease and lock
 * tokens.
 *
 * **Details**
 *
 * Not `NodeCrypto.layerSecureRandom`, which draws from WebCrypto's
 * `getRandomValues`: reading `globalThis.crypto` makes Node load its
 * WebCrypto module (about 60 KiB of heap and 130 KiB resident in a process
 * that only reads), and a layer's build reads it. `randomFillSync` is the
 * same kernel source, from `node:crypto`, which the store loads anyway for
 * its hashes, and nothing is touched until a token is drawn.
 *
 * @category layers
 * @since 0.1.0
 */
export const secureRandomLayer: Layer.Layer<SecureRandom.SecureRandom> = Layer.sync(
  SecureRandom.SecureRandom,
  () => SecureRandom.make((size) => randomFillSync(new Uint8Array(size)))
)

/**
 * `SecureRandom` from `node:crypto` for lease and lock tokens, and the
 * platform's lock owner probe (`ProcessOwner.layer`).
 *
 * @category layers
 * @since 0.1.0
 */
export const tokenAndOwnerLayer = Layer.mergeAll(secureRandomLayer, ProcessOwner.layer)

/**
 * Everything `RarebitStore.layer` needs on Node, without the store itself.
 *
 * @category layers
 * @since 0.1.0
 */
export const platformLayer = Layer.mergeAll(fileLayer, tokenAndOwnerLayer)

/**
 * The live store over `files`, which the layer also provides.
 *
 * **Details**
 *
 * `SecureRandom` is given to the store only; `LockOwner` is provided to the
 * program because the store reads it when it takes a commit lock.
 */
const storeOver = <E>(config: Partial<StoreConfig>, files: Layer.Layer<FileSystem.FileSystem | Path.Path, E>) =>
  Layer.merge(RarebitStore.layer(config).pipe(Layer.provide(secureRandomLayer)), ProcessOwner.layer).pipe(
    Layer.provideMerge(files)
  )

/**
 * The live store, with the `FileSystem` and `Path` it runs on: provide it
 * and call `RarebitStore` operations, read Sessions, touch files.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (config: Partial<StoreConfig> = {}) => storeOver(config, fileLayer)

/**
 * The live store with every file system call on libuv's thread pool: slower
 * on a local disk, but a stalled network file system never blocks the event
 * loop. Provides the same services as {@link layer}.
 *
 * @category layers
 * @since 0.1.0
 */
export const threadpoolLayer = (config: Partial<StoreConfig> = {}) => storeOver(config, threadpoolFileLayer)
