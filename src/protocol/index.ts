/**
 * The pure core of the Rarebit sidecar protocol: limits, canonical hashing,
 * receipts, heads, job claims and the commit-lock file.
 *
 * Everything here takes plain values and returns plain values; nothing reads
 * the disk, the clock or randomness.
 *
 * @since 0.1.0
 */
export * from "./CanonicalJson.js"
export * from "./CommitLockFile.js"
export * from "./Head.js"
export * from "./JobClaim.js"
export * from "./JsonLine.js"
export * from "./Limits.js"
export * from "./Receipt.js"
export * from "./ReceiptParts.js"
export * from "./ReceiptValidation.js"
export * from "./SummaryReceipt.js"
export * from "./TitleReceipt.js"
