/**
 * Where a Session's sidecar lives: its path relative to `sessionRoot`,
 * mirrored under `<rarebitRoot>/materializations-v4/`.
 *
 * A Session outside the root is refused unless external Sessions are
 * allowed; then its sidecar is keyed by the SHA-256 of its resolved path in
 * Unicode NFC, so no outside path is ever joined into the store. Pure: it
 * takes the `Path` implementation as an argument (POSIX or win32 semantics
 * follow from it), and only `resolve` reads the working directory.
 *
 * Where the reference's rule is defined, the sidecar is the reference's.
 * Under win32 semantics, a Session on another drive or share, or in the
 * `\\?\` or `\\.\` namespaces, is outside the root: the reference joins
 * such a path under the store as it is (`relative` returns it absolute).
 * An external Session's path given in NFD (as macOS may spell it) hashes
 * as its NFC spelling, where the reference would hash the bytes given.
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
  const relativePath = relativeWithin(path, location.sessionRoot, source)
  if (relativePath !== undefined) return Result.succeed(path.join(outputRoot, relativePath))
  if (!location.allowExternalSession) {
    return Result.fail(new SessionOutsideRoot({ sessionFile, sessionRoot: location.sessionRoot }))
  }
  return Result.succeed(path.join(outputRoot, "external", `${externalKey(source)}.jsonl`))
}

/**
 * The path of `file` relative to `sessionRoot`, or `undefined` when it is
 * not strictly under it by the sidecar rule.
 *
 * **Details**
 *
 * Under win32 semantics `relative` answers with the target itself when it
 * is on another drive or share, and Windows does not collapse `..` in a
 * `\\?\` path, so lexical containment proves nothing there: all of these
 * are outside, whatever the root.
 *
 * @category paths
 * @since 0.1.0
 */
export const relativeWithin = (path: Path, sessionRoot: string, file: string): string | undefined => {
  const relativePath = path.relative(path.resolve(sessionRoot), path.resolve(file))
  const up = `..${path.sep}`
  const outside = !relativePath || relativePath === ".." || relativePath.startsWith(up) ||
    relativePath.includes(`${path.sep}${up}`) || path.isAbsolute(relativePath) || isNamespaced(path, file)
  return outside ? undefined : relativePath
}

/**
 * Whether `file` is a win32 `\\?\` (no normalization) or `\\.\` (device)
 * path, with either separator; never under POSIX semantics, where these are
 * plain names.
 *
 * @category paths
 * @since 0.1.0
 */
export const isNamespaced = (path: Path, file: string): boolean => path.sep === "\\" && /^[\\/]{2}[?.][\\/]/.test(file)

/**
 * The name of an external Session's sidecar: the SHA-256 of its resolved
 * path in NFC, so the composed and decomposed spellings of one name (macOS
 * hands out either) share a sidecar, the one the reference writes for the
 * NFC spelling.
 *
 * @category paths
 * @since 0.1.0
 */
export const externalKey = (resolvedSession: string): string => sha256Hex(resolvedSession.normalize("NFC"))

/** The claim file of a job. @category paths @since 0.1.0 */
export const claimPath = (path: Path, rarebitRoot: string, jobId: string): string =>
  path.join(path.resolve(rarebitRoot), JOBS_DIR, `${jobId}.json`)
