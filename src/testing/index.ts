/**
 * The public testing kit: the store on an in-memory disk in one layer
 * (`MemoryStore`), an in-memory file system with a crash model, a
 * fault-injecting wrapper for any file system, crash-point exploration, a
 * deterministic `SecureRandom` for reproducible tokens, valid receipt
 * builders, and the Node-shaped errno failures they share.
 *
 * @since 0.1.0
 */
export * from "./CrashPoints.js"
export * from "./Errno.js"
export * from "./FaultFileSystem.js"
export * from "./MemoryFileSystem.js"
export * as MemoryStore from "./MemoryStore.js"
export * as Receipts from "./Receipts.js"
export * as TestSecureRandom from "./TestSecureRandom.js"
