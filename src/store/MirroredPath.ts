/**
 * Where a Session's sidecar lives: its path relative to `sessionRoot`,
 * mirrored under `<rarebitRoot>/materializations-v4/`.
 *
 * A Session outside the root is refused unless external Sessions are
 * allowed; then its sidecar is keyed by the SHA-256 of its resolved path, so
 * no outside path is ever joined into the store. Pure: it takes the `Path`
 * implementation as an argument, and only `resolve` reads the working
 * directory.
 *
 * @since 0.1.0
 */
import { Result } from "effect"
import type { Path } from "effect/Path"
import { sha256Hex } from "../protocol/CanonicalJson.js"
import { SessionFileRequired, SessionOutsideRoot } from "./Errors.js"
import type { StoreLocation } from "./StoreConfig.js"

/**
 * Failures of the path rule: no Session file, or one outside `sessionRoot`
 * while external Sessions are not allowed.
 *
 * @category errors
 * @since 0.1.0
 */
export type PathError = SessionFileRequired | SessionOutsideRoot

/** The folder under `rarebitRoot` that holds sidecars. @category constants @since 0.1.0 */
export const MATERIALIZATIONS_DIR = "materializations-v4"

/** The folder under `rarebitRoot` that holds job claims. @category constants @since 0.1.0 */
export const JOBS_DIR = "jobs-v4"

/** The commit lock of a sidecar. @category paths @since 0.1.0 */
export const commitLockPath = (sidecarPath: string): string => `${sidecarPath}.commit-lock`

/**
 * Computes a Session's sidecar path.
 *
 * @category paths
 * @since 0.1.0
 */
export const materializationPath = (
  path: Path,
  sessionFile: unknown,
  location: StoreLocation
): Result.Result<string, PathError> => {
  if (typeof sessionFile !== "string" || !sessionFile.trim()) return Result.fail(new SessionFileRequired())
  const outputRoot = path.resolve(path.join(location.rarebitRoot, MATERIALIZATIONS_DIR))
  const source = path.resolve(sessionFile)
  const relativePath = path.relative(path.resolve(location.sessionRoot), source)
  const up = `..${path.sep}`
  const outsideRoot = !relativePath || relativePath === ".." || relativePath.startsWith(up) ||
    relativePath.includes(`${path.sep}${up}`)
  if (!outsideRoot) return Result.succeed(path.join(outputRoot, relativePath))
  if (!location.allowExternalSession) {
    return Result.fail(new SessionOutsideRoot({ sessionFile, sessionRoot: location.sessionRoot }))
  }
  return Result.succeed(path.join(outputRoot, "external", `${sha256Hex(source)}.jsonl`))
}

/** The claim file of a job. @category paths @since 0.1.0 */
export const claimPath = (path: Path, rarebitRoot: string, jobId: string): string =>
  path.join(path.resolve(rarebitRoot), JOBS_DIR, `${jobId}.json`)
