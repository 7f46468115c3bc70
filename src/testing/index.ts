/**
 * The public testing kit: an in-memory file system with a crash model, a
 * fault-injecting wrapper for any file system, crash-point exploration, and the
 * Node-shaped errno failures they share.
 *
 * @since 0.1.0
 */
export * from "./CrashPoints.js"
export * from "./Errno.js"
export * from "./FaultFileSystem.js"
export * from "./MemoryFileSystem.js"
export * as Receipts from "./Receipts.js"
