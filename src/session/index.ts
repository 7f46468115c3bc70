/**
 * Pi Session evidence: parsing a Session, walking its active branch,
 * selecting and measuring Rarebits, job identities, and the Effect reader
 * that finds and reads Sessions on disk.
 *
 * @since 0.1.0
 */
export * from "./JobIdentity.js"
export * from "./Measurement.js"
export * from "./Selector.js"
export * from "./SessionErrors.js"
export * from "./SessionParse.js"
export * from "./SessionProjection.js"
export * from "./SessionReader.js"
export * from "./SessionStream.js"
// The streaming decoder the scanner uses, public here since the scanner is.
export { Utf8Pieces } from "../protocol/internal/Utf8.js"
