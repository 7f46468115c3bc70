/**
 * One identity per Session file: the spelling of a Session path, and of its
 * Session root, that every store operation keys on (the sidecar path, hence
 * the commit-lock queue and the sidecar cache; the Session cache; the
 * watches), whatever spelling a caller used.
 *
 * Guarantees:
 * - The Session root is taken at its real path (symlinks resolved, once per
 *   root and store instance), so `/tmp/…` and `/private/tmp/…` spellings of a
 *   Session are both under a root given either way, and get one sidecar.
 * - On a volume that folds case (probed once per root: the root spelled in
 *   the other case is the same directory; always under win32 semantics), the
 *   Session is taken at its real path, which the file system answers with
 *   the spelling on disk, so two spellings of one file get one sidecar.
 * - Elsewhere a Session lexically under the root keeps its spelling below
 *   the root, with no call to the file system: on Linux a poll pays nothing.
 * - A Session whose real path leaves the root through a symlink keeps the
 *   sidecar the reference gives its spelling; an external Session is taken
 *   at its real path (and hashed in NFC, see `MirroredPath`).
 * - A Session that does not exist yet is spelled by its directory's real path.
 *
 * The sidecar of the canonical spelling is the one the reference writes for
 * that spelling. Nothing here is durable, and nothing here fails: a path the
 * file system cannot resolve is left as spelled, and the path rule
 * (`MirroredPath`) decides.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import type { FileSystem } from "effect/FileSystem"
import type { Path } from "effect/Path"
import { isNamespaced, relativeWithin } from "./MirroredPath.js"
import type { StoreLocation } from "./StoreConfig.js"

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
 * Makes the Session identity of one store instance.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (fs: FileSystem, path: Path): SessionIdentity => {
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
