/**
 * Artifact state: the pure projection of native Session evidence and sidecar
 * receipts onto what a reader may show.
 *
 * @since 0.1.0
 */
export * from "./ArtifactState.js"
