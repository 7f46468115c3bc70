/**
 * Where a Session's sidecar lives: its path relative to `sessionRoot`,
 * mirrored under `<rarebitRoot>/materializations-v4/`, and which spelling of
 * a Session path that is computed from.
 *
 * The path rule (`materializationPath`) is pure: it takes the `Path`
 * implementation as an argument (POSIX or win32 semantics follow from it),
 * and only `resolve` reads the working directory. A Session outside the root
 * is refused unless external Sessions are allowed; then its sidecar is keyed
 * by the SHA-256 of its resolved path in Unicode NFC, so no outside path is
 * ever joined into the store. Where the reference's rule is defined, the
 * sidecar is the reference's. Under win32 semantics, a Session on another
 * drive or share, or in the `\\?\` or `\\.\` namespaces, is outside the
 * root: the reference joins such a path under the store as it is (`relative`
 * returns it absolute). An external Session's path given in NFD (as macOS
 * may spell it) hashes as its NFC spelling, where the reference hashes the
 * bytes given.
 *
 * One identity per Session file (`makeSessionIdentity`, which asks the file
 * system): every store operation first takes the canonical spelling of the
 * Session path and its root, and keys everything on it (the sidecar path,
 * hence the commit-lock queue and the sidecar cache; the Session cache),
 * whatever spelling the caller used.
 * - The Session root is taken at its real path (symlinks resolved, once per
 *   root and store instance), so `/tmp/…` and `/private/tmp/…` spellings of a
 *   Session are both under a root given either way, and get one sidecar.
 * - On a volume that folds case (probed once per root: the root spelled in
 *   the other case is the same directory; always under win32 semantics), the
 *   Session is taken at its real path, which the native realpath answers
 *   with the spelling on disk, so two spellings of one file get one sidecar.
 * - Elsewhere a Session lexically under the root keeps its spelling below
 *   the root, with no call to the file system: on Linux a poll pays nothing.
 * - A Session whose real path leaves the root through a symlink keeps the
 *   sidecar the reference gives its spelling; an external Session is taken
 *   at its real path. A Session not there yet is spelled by its directory's
 *   real path.
 * The sidecar of the canonical spelling is the one the reference writes for
 * that spelling. Nothing here is durable, and nothing here fails: a path the
 * file system cannot resolve is left as spelled, and the path rule decides.
 *
 * @since 0.1.0
 */
import { Effect, Result } from "effect"
import type { FileSystem } from "effect/FileSystem"
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

/** A Session path and its location, canonical. @category models @since 0.1.0 */
export interface SessionSpelling<S = unknown> {
  /** The canonical Session path, or the caller's value where it is not a path (the path rule refuses it). */
  readonly sessionFile: S
  readonly location: StoreLocation
}

/** The canonical spelling of Session paths of one store instance. @category models @since 0.1.0 */
export interface SessionIdentity {
  /** Whatever the caller passed: the path rule checks it afterwards. */
  readonly canonical: <S>(sessionFile: S, location: StoreLocation) => Effect.Effect<SessionSpelling<S>>
  /** How many roots are remembered. */
  readonly roots: () => number
}

interface RootIdentity {
  readonly real: string
  /** `real` ending with a separator. */
  readonly realPrefix: string
  readonly foldsCase: boolean
}

const swapCase = (text: string): string => {
  let out = ""
  for (const char of text) {
    const lower = char.toLowerCase()
    out += lower === char ? char.toUpperCase() : lower
  }
  return out
}

const sameName = (a: string, b: string): boolean =>
  a === b || a.normalize("NFC").toLowerCase() === b.normalize("NFC").toLowerCase()

/**
 * Makes the Session identity of one store instance: see the module's
 * docblock for what it guarantees.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeSessionIdentity = (fs: FileSystem, path: Path): SessionIdentity => {
  const roots = new Map<string, RootIdentity>()

  const foldsCase = Effect.fnUntraced(function*(real: string) {
    // NTFS folds case by default, and the native realpath answers with the spelling on disk.
    if (path.sep === "\\") return true
    const swapped = swapCase(real)
    if (swapped === real) return false
    const [self, other] = yield* Effect.all([fs.stat(real), fs.stat(swapped)])
    return self.ino._tag === "Some" && other.ino._tag === "Some" && self.ino.value === other.ino.value &&
      self.dev === other.dev
  }, Effect.orElseSucceed(() => false))

  const withSeparator = (directory: string) => directory.endsWith(path.sep) ? directory : `${directory}${path.sep}`
  const rootIdentity = (real: string, folds: boolean): RootIdentity => ({
    real,
    realPrefix: withSeparator(real),
    foldsCase: folds
  })
  const givenPrefix = (sessionRoot: string) => withSeparator(path.resolve(sessionRoot))

  const rootOf = Effect.fnUntraced(function*(sessionRoot: string) {
    const resolved = path.resolve(sessionRoot)
    const known = roots.get(resolved)
    if (known !== undefined) return known
    const real = yield* Effect.option(fs.realPath(resolved))
    // A root that is not there yet is taken as spelled, and asked again next time.
    if (real._tag === "None") return rootIdentity(resolved, path.sep === "\\")
    const identity = rootIdentity(real.value, yield* foldsCase(real.value))
    roots.set(resolved, identity)
    // An absolute root is also remembered as spelled, for the lookup without `resolve` below.
    if (path.isAbsolute(sessionRoot)) roots.set(sessionRoot, identity)
    return identity
  })

  const realSpelling = Effect.fnUntraced(function*(resolved: string) {
    const real = yield* Effect.option(fs.realPath(resolved))
    // A Session that is itself a symlink to another name keeps its own name.
    if (real._tag === "Some" && sameName(path.basename(real.value), path.basename(resolved))) return real.value
    const directory = yield* Effect.option(fs.realPath(path.dirname(resolved)))
    return directory._tag === "Some" ? path.join(directory.value, path.basename(resolved)) : resolved
  })

  const atRealRoot = (location: StoreLocation, root: RootIdentity): StoreLocation =>
    root.real === location.sessionRoot ? location : { ...location, sessionRoot: root.real }

  /** The spelling of a Session under either spelling of its root: the rest of its path, below the real root. */
  const below = (location: StoreLocation, root: RootIdentity, resolved: string): string | undefined =>
    relativeWithin(path, location.sessionRoot, resolved) ??
      (root.real === location.sessionRoot ? undefined : relativeWithin(path, root.real, resolved))

  const slow = Effect.fnUntraced(function*<S>(sessionFile: S & string, location: StoreLocation) {
    const root = yield* rootOf(location.sessionRoot)
    const resolved = path.resolve(sessionFile)
    const rest = below(location, root, resolved)
    if (rest !== undefined && !root.foldsCase) {
      return { sessionFile: path.join(root.real, rest) as S, location: atRealRoot(location, root) }
    }
    const real = yield* realSpelling(resolved)
    if (rest === undefined || relativeWithin(path, root.real, real) !== undefined) {
      return { sessionFile: real as S, location: atRealRoot(location, root) }
    }
    // Its real path leaves the root (a symlink out of it): the reference's sidecar for its spelling.
    return { sessionFile: path.join(root.real, rest) as S, location: atRealRoot(location, root) }
  })

  const canonical = <S>(sessionFile: S, location: StoreLocation): Effect.Effect<SessionSpelling<S>> => {
    if (
      typeof sessionFile !== "string" || !sessionFile.trim() || typeof location.sessionRoot !== "string" ||
      isNamespaced(path, sessionFile)
    ) return Effect.succeed({ sessionFile, location })
    // The polling path: a known root on a volume that keeps case, and a Session
    // under it. A resolved path is under a root exactly when it extends the
    // root's spelling by a separator and a name (POSIX: win32 roots fold case).
    const root = roots.get(location.sessionRoot)
    if (root !== undefined && !root.foldsCase) {
      const resolved = path.resolve(sessionFile)
      if (resolved.length > root.realPrefix.length && resolved.startsWith(root.realPrefix)) {
        return Effect.succeed({ sessionFile: resolved as S, location: atRealRoot(location, root) })
      }
      const given = givenPrefix(location.sessionRoot)
      if (resolved.length > given.length && resolved.startsWith(given)) {
        const canonicalFile = root.realPrefix + resolved.slice(given.length)
        return Effect.succeed({ sessionFile: canonicalFile as S, location: atRealRoot(location, root) })
      }
    }
    return slow(sessionFile, location)
  }

  return { canonical, roots: () => roots.size }
}
