/**
 * The store's private directories under the rarebit root (`jobs-v4/`,
 * `materializations-v4/` and every mirrored directory below it, `external/`
 * included), made and checked one component at a time.
 *
 * Guarantees, for every directory the store creates or writes into:
 * - It is a real directory, not a symlink, and is owned by the user the
 *   store runs as; anything else is refused with `UnsafeDirectory` naming
 *   the path and why, before anything is written there. With a root other
 *   users can write to (a shared, world-writable root), a symlink or a
 *   directory they planted can therefore never make the store change or
 *   create anything outside the root.
 * - A missing one is created with mode 0700, one level at a time (a
 *   creation raced by another process is checked like any other). One with
 *   another mode is made 0700 through a handle opened with `O_DIRECTORY |
 *   O_NOFOLLOW` (`fchmod`), after checking that the handle is the directory
 *   that was checked, so the mode change cannot land on anything swapped in
 *   at the path meanwhile.
 * - The rarebit root itself is the user's choice: it may be a symlink and
 *   may belong to someone else (`/tmp`-like); it is created (with its
 *   parents) if missing, and otherwise not checked.
 *
 * What it cannot promise: the check and the later use of a path are
 * separate system calls. Inside our own 0700 directories only our own user
 * can swap anything. A component directly under a root that others can
 * write to can be renamed away by them between the check and the use
 * unless the root has the sticky bit (as `/tmp` does), which forbids them
 * to rename or remove what they do not own.
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import type { File, FileSystem } from "effect/FileSystem"
import type { Path } from "effect/Path"
import type { PlatformError } from "effect/PlatformError"
import { handleChmodOf, processUidOf } from "../io/NonBlockingOpen.js"
import { describeType, openDirectory } from "../io/RegularFile.js"
import { fileIdentity } from "../protocol/internal/FileInfo.js"
import { type StoreIo, storeIo, UnsafeDirectory } from "./Errors.js"

const isNotFound = (error: PlatformError) => error.reason._tag === "NotFound"
const isAlreadyExists = (error: PlatformError) => error.reason._tag === "AlreadyExists"

/** Why `info` (an `lstat`) is not a directory the store may use, or `undefined` when it is. */
const refusalOf = (info: File.Info, uid: number | undefined): string | undefined => {
  if (info.type === "SymbolicLink") return "a symlink"
  if (info.type !== "Directory") return `${describeType(info.type)}, not a directory`
  const owner = Option.getOrUndefined(info.uid)
  if (uid !== undefined && owner !== undefined && owner !== uid) return `owned by uid ${owner}, not by uid ${uid}`
  return undefined
}

/** The component lists of recent calls: a store asks for the same few directories again and again. */
const componentCache = new Map<string, ReadonlyArray<string>>()
const COMPONENT_CACHE_SIZE = 256

/**
 * The directories from just below `root` down to each of `targets`, parents
 * first, each once.
 */
const componentsOf = (path: Path, root: string, targets: ReadonlyArray<string>): ReadonlyArray<string> => {
  const key = `${path.sep}${root}\u0000${targets.join("\u0000")}`
  const cached = componentCache.get(key)
  if (cached !== undefined) return cached
  const components = computeComponents(path, root, targets)
  if (componentCache.size >= COMPONENT_CACHE_SIZE) componentCache.delete(componentCache.keys().next().value as string)
  componentCache.set(key, components)
  return components
}

const computeComponents = (path: Path, root: string, targets: ReadonlyArray<string>): ReadonlyArray<string> => {
  const seen = new Set<string>()
  const components: Array<string> = []
  for (const target of targets) {
    const relative = path.relative(root, target)
    if (relative === "" || relative.startsWith("..") || path.isAbsolute(relative)) continue
    let current = root
    for (const part of relative.split(path.sep)) {
      current = path.join(current, part)
      if (!seen.has(current)) {
        seen.add(current)
        components.push(current)
      }
    }
  }
  return components
}

/**
 * Makes `directory` 0700 through a handle that cannot be anything but the
 * directory `checked` described. A file system without a handle-level
 * chmod changes the mode by path (the one window it cannot close).
 */
const makePrivate = (fs: FileSystem, directory: string, checked: File.Info, uid: number | undefined) =>
  Effect.scoped(Effect.gen(function*() {
    const { file, info } = yield* openDirectory(fs, directory).pipe(
      Effect.catchTag("NotDirectory", (error) =>
        Effect.fail(new UnsafeDirectory({ path: directory, reason: `${describeType(error.type)}, not a directory` })))
    )
    const refusal = refusalOf(info, uid) ??
      (fileIdentity(info) !== fileIdentity(checked) ? "replaced while it was being checked" : undefined)
    if (refusal !== undefined) return yield* new UnsafeDirectory({ path: directory, reason: refusal })
    const chmod = handleChmodOf(file)
    yield* chmod !== undefined ? chmod(0o700) : fs.chmod(directory, 0o700)
  }))

/**
 * Checks (creating it if missing) one directory below the root. For a
 * directory right under the root, `createRoot` makes the root (and its
 * parents) first if they are missing too (a recursive `mkdir`, which does
 * nothing when they exist).
 */
const ensureComponent = (
  fs: FileSystem,
  directory: string,
  uid: number | undefined,
  create: boolean,
  createRoot: Effect.Effect<void, PlatformError> | undefined
): Effect.Effect<void, UnsafeDirectory | StoreIo> => {
  const io = storeIo("create private directory", directory)
  const check = (info: File.Info): Effect.Effect<void, UnsafeDirectory | StoreIo> => {
    const refusal = refusalOf(info, uid)
    if (refusal !== undefined) return Effect.fail(new UnsafeDirectory({ path: directory, reason: refusal }))
    if ((info.mode & 0o777) === 0o700) return Effect.void
    return Effect.mapError(makePrivate(fs, directory, info, uid), (error) => error._tag === "UnsafeDirectory" ? error : io(error))
  }
  // One step when the directory is there (the usual case, on every reserve, settle and release).
  return Effect.matchEffect(fs.lstat(directory), {
    onSuccess: check,
    onFailure: (error) =>
      !isNotFound(error)
        ? Effect.fail(io(error))
        : !create
        ? Effect.void
        // Created here, or by a racing process: either way it is checked as found.
        : Effect.andThen(createRoot ?? Effect.void, fs.makeDirectory(directory, { mode: 0o700 })).pipe(
          Effect.catchIf(isAlreadyExists, () => Effect.void),
          Effect.andThen(fs.lstat(directory)),
          Effect.mapError(io),
          Effect.flatMap(check)
        )
  })
}

/**
 * Makes sure every directory from the rarebit root down to each of
 * `directories` exists and is private to this user, creating what is
 * missing (or, with `create: false`, only checking what exists). See the
 * module documentation for what is checked.
 *
 * @category constructors
 * @since 0.1.0
 */
export const ensurePrivateDirectories = (
  fs: FileSystem,
  path: Path,
  rarebitRoot: string,
  directories: ReadonlyArray<string>,
  options: { readonly create: boolean } = { create: true }
): Effect.Effect<void, UnsafeDirectory | StoreIo> => {
  const root = path.resolve(rarebitRoot)
  const uid = processUidOf(fs)
  // The root (and its parents) are made only when a directory right under it is missing:
  // the usual call, on an existing store, costs one `lstat` per component and nothing more.
  let rootExists = false
  const createRoot = Effect.suspend(() =>
    rootExists ? Effect.void : Effect.map(fs.makeDirectory(root, { recursive: true, mode: 0o700 }), () => {
      rootExists = true
    })
  )
  return Effect.forEach(
    componentsOf(path, root, directories),
    (directory) =>
      ensureComponent(fs, directory, uid, options.create, path.dirname(directory) === root ? createRoot : undefined),
    { discard: true }
  )
}
