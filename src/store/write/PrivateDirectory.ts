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
 *   creation raced by another process is checked like any other), and its
 *   parent fsynced, so a power cut cannot lose the directory with claims
 *   or receipts later made durable inside it. One with
 *   another mode is made 0700 through a handle opened with `O_DIRECTORY |
 *   O_NOFOLLOW` (`fchmod`), after checking that the handle is the directory
 *   that was checked, so the mode change cannot land on anything swapped in
 *   at the path meanwhile.
 * - The rarebit root itself is the user's choice: it may be a symlink and
 *   may belong to someone else (`/tmp`-like); it is created (with its
 *   parents) if missing, and otherwise not checked.
 * - A failure of the file system is the one the reference's recursive
 *   `mkdir` meets on the same tree, at the same path (the plain API
 *   reports it as that `mkdir`): the walk looks from the target up for the
 *   deepest component that exists, as Node's `mkdir -p` does, with `lstat`
 *   (which fails where `mkdir` would, for any reason but a missing last
 *   name); it checks everything from the root down to that component, and
 *   only then creates what is missing below it. A path the file system
 *   refuses (too long, not searchable, through a file) is refused before
 *   anything is created, as by the reference.
 * - A check that creates nothing (`create: false`: a release, and a
 *   settle for the claim's directory, which the reference does not make)
 *   stops at the first missing component, and at one whose path cannot be
 *   resolved, since every later call through it fails the same way.
 * - A directory that is not under the rarebit root (only a hand-made
 *   reservation can name one) is not the store's: it is made and chmodded
 *   0700 by path, exactly as the reference makes it.
 *
 * On Windows (a file system whose `PlatformTraits` say modes are not POSIX)
 * there is no mode to set: libuv reports every directory as 0666 and
 * `fchmod` of a directory fails `EPERM`. The walk still refuses symlinks,
 * junctions and non-directories, creates what is missing, and changes no
 * mode; privacy there is the ACL a directory inherits, which under the
 * user's profile (`%USERPROFILE%`, where Pi keeps its sessions) grants only
 * that user, SYSTEM and Administrators. A root placed elsewhere gets
 * whatever ACL its parent passes down.
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
import { errnoOf } from "../../io/ErrnoCode.js"
import { handleChmodOf, platformTraitsOf, processUidOf } from "../../io/NonBlockingOpen.js"
import { describeType, type NotDirectory, openDirectory } from "../../io/RegularFile.js"
import { fileIdentity } from "../../protocol/internal/FileInfo.js"
import { type StoreIo, storeIo, UnsafeDirectory } from "../Errors.js"
import { syncDirectory } from "./DurableFile.js"

// Failures in resolving a path: every later call through the same
// components fails the same way, so a check can leave them to that call.
const RESOLUTION_ERRNOS: ReadonlySet<unknown> = new Set(["EACCES", "ENOTDIR", "ENAMETOOLONG", "ELOOP"])
const isResolutionFailure = (error: PlatformError) => RESOLUTION_ERRNOS.has(errnoOf(error))

/**
 * The `StoreIo` operation of a failed creation. Its cause is what the
 * reference's recursive `mkdir` fails with at that path, or (when the
 * walk's `lstat` found it) the same failure from the `lstat`.
 *
 * @category constants
 * @since 0.1.0
 */
export const CREATE_PRIVATE_DIRECTORY = "create private directory"

/** The `lstat` of `path`, or `undefined` when nothing is there. */
const lstatIfPresent = (fs: FileSystem, path: string): Effect.Effect<File.Info | undefined, PlatformError> =>
  fs.lstat(path).pipe(Effect.catchReason("PlatformError", "NotFound", () => Effect.succeed(undefined)))

/** Why `info` (an `lstat`) is not a directory the store may use, or `undefined` when it is. */
const refusalOf = (info: File.Info, uid: number | undefined): string | undefined => {
  if (info.type === "SymbolicLink") return "a symlink"
  if (info.type !== "Directory") return `${describeType(info.type)}, not a directory`
  const owner = Option.getOrUndefined(info.uid)
  if (uid !== undefined && owner !== undefined && owner !== uid) return `owned by uid ${owner}, not by uid ${uid}`
  return undefined
}

/** The component lists of recent calls: a store asks for the same few directories again and again. */
const componentCache = new Map<string, ReadonlyArray<string> | undefined>()
const COMPONENT_CACHE_SIZE = 256

/**
 * The directories from just below `root` down to `target`, parents first;
 * `undefined` when `target` is not below `root`.
 */
const componentsOf = (path: Path, root: string, target: string): ReadonlyArray<string> | undefined => {
  const key = `${path.sep}${root}\u0000${target}`
  if (componentCache.has(key)) return componentCache.get(key)
  const components = computeComponents(path, root, target)
  const oldest = componentCache.keys().next()
  if (componentCache.size >= COMPONENT_CACHE_SIZE && !oldest.done) componentCache.delete(oldest.value)
  componentCache.set(key, components)
  return components
}

const computeComponents = (path: Path, root: string, target: string): ReadonlyArray<string> | undefined => {
  const relative = path.relative(root, target)
  if (relative === "" || relative.startsWith("..") || path.isAbsolute(relative)) return undefined
  const components: Array<string> = []
  let current = root
  for (const part of relative.split(path.sep)) {
    current = path.join(current, part)
    components.push(current)
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
      Effect.catchTag(
        "NotDirectory",
        (error) =>
          Effect.fail(new UnsafeDirectory({ path: directory, reason: `${describeType(error.type)}, not a directory` }))
      )
    )
    const refusal = refusalOf(info, uid) ??
      (fileIdentity(info) !== fileIdentity(checked) ? "replaced while it was being checked" : undefined)
    if (refusal !== undefined) return yield* new UnsafeDirectory({ path: directory, reason: refusal })
    const chmod = handleChmodOf(file)
    yield* chmod !== undefined ? chmod(0o700) : fs.chmod(directory, 0o700)
  }))

type Walk = Effect.Effect<void, UnsafeDirectory | StoreIo>

/**
 * The rarebit root and its parents may be symlinks (the user's choice, or
 * the system's, as `/tmp` on macOS): their directory is fsynced through
 * `<dir>/.`, which the no-follow open of `syncDirectory` resolves.
 */
const throughLinks = (directory: string): string => `${directory}/.`

/**
 * Accepts `info` (an `lstat` of `directory`) as one of ours, making it 0700
 * if it is not (where modes are POSIX modes: elsewhere there is nothing a
 * chmod could do).
 */
const checkFound = (
  fs: FileSystem,
  directory: string,
  info: File.Info,
  uid: number | undefined,
  operation: string
): Walk => {
  const refusal = refusalOf(info, uid)
  if (refusal !== undefined) return Effect.fail(new UnsafeDirectory({ path: directory, reason: refusal }))
  if ((info.mode & 0o777) === 0o700 || !platformTraitsOf(fs).posixModes) return Effect.void
  return Effect.mapError(
    makePrivate(fs, directory, info, uid),
    (error) => error._tag === "UnsafeDirectory" ? error : storeIo(operation, directory)(error)
  )
}

/**
 * Checks the components that exist, parents first, creating nothing: stops
 * at the first missing one (nothing below it exists), and at one whose path
 * cannot be resolved (nothing can be written below it either, and the
 * operation that tries fails as the reference's does).
 */
const checkExisting = (
  fs: FileSystem,
  components: ReadonlyArray<string>,
  uid: number | undefined,
  operation: string
): Walk =>
  Effect.suspend(() => {
    const step = (index: number): Walk =>
      index >= components.length
        ? Effect.void
        : Effect.matchEffect(lstatIfPresent(fs, components[index]), {
          onSuccess: (info) =>
            info === undefined
              ? Effect.void
              : Effect.andThen(checkFound(fs, components[index], info, uid, operation), step(index + 1)),
          onFailure: (error) =>
            isResolutionFailure(error) ? Effect.void : Effect.fail(storeIo(operation, components[index])(error))
        })
    return step(0)
  })

/**
 * Makes every one of `components` (the directories from just below the
 * root down to the target) exist as a private directory; see the module
 * documentation for the order of the steps.
 */
const ensureComponents: (
  fs: FileSystem,
  root: string,
  components: ReadonlyArray<string>,
  uid: number | undefined,
  createRoot: Effect.Effect<void, PlatformError | NotDirectory>
) => Walk = Effect.fnUntraced(function*(
  fs: FileSystem,
  root: string,
  components: ReadonlyArray<string>,
  uid: number | undefined,
  createRoot: Effect.Effect<void, PlatformError | NotDirectory>
) {
  const io = (directory: string) => storeIo(CREATE_PRIVATE_DIRECTORY, directory)
  // From the target up to the deepest component that is there: one `lstat`
  // when the target exists (the usual case, on every reserve and settle).
  let deepest = components.length - 1
  let found: File.Info | undefined
  for (; deepest >= 0; deepest--) {
    const looked = yield* Effect.result(lstatIfPresent(fs, components[deepest]))
    if (looked._tag === "Success") {
      if (looked.success === undefined) continue
      found = looked.success
      break
    }
    // A path the file system refuses: nothing is created. A planted
    // component above it is still named as such.
    yield* checkExisting(fs, components.slice(0, deepest), uid, CREATE_PRIVATE_DIRECTORY)
    return yield* io(components[deepest])(looked.failure)
  }
  // Everything down to the deepest existing one must be ours before anything is made below it.
  for (let index = 0; index < deepest; index++) {
    const info = yield* Effect.mapError(fs.lstat(components[index]), io(components[index]))
    yield* checkFound(fs, components[index], info, uid, CREATE_PRIVATE_DIRECTORY)
  }
  if (found !== undefined) yield* checkFound(fs, components[deepest], found, uid, CREATE_PRIVATE_DIRECTORY)
  else yield* Effect.mapError(createRoot, io(components[0]))
  for (let index = deepest + 1; index < components.length; index++) {
    const directory = components[index]
    // Created here, or by a racing process: either way it is checked as found.
    const created = yield* fs.makeDirectory(directory, { mode: 0o700 }).pipe(
      Effect.as(true),
      Effect.catchReason("PlatformError", "AlreadyExists", () => Effect.succeed(false)),
      Effect.mapError(io(directory))
    )
    const info = yield* Effect.mapError(fs.lstat(directory), io(directory))
    yield* checkFound(fs, directory, info, uid, CREATE_PRIVATE_DIRECTORY)
    // A power cut may lose a new directory's name, and with it every claim or
    // receipt later made durable inside it, until its parent is fsynced.
    if (created) {
      const parent = index === 0 ? throughLinks(root) : components[index - 1]
      yield* Effect.mapError(syncDirectory(fs, parent), io(parent))
    }
  }
})

/**
 * A directory outside the rarebit root, made as the reference makes it:
 * `mkdir -p` and `chmod 0700` by path (skipped when it already is a 0700
 * directory; without POSIX modes, only `mkdir -p`, skipped when it is a
 * directory).
 */
const makeAsReference = (fs: FileSystem, directory: string): Walk => {
  const posixModes = platformTraitsOf(fs).posixModes
  return fs.stat(directory).pipe(
    Effect.map((info) => info.type === "Directory" && (!posixModes || (info.mode & 0o777) === 0o700)),
    Effect.orElseSucceed(() => false),
    Effect.flatMap((ready) =>
      ready ? Effect.void : fs.makeDirectory(directory, { recursive: true, mode: 0o700 }).pipe(
        Effect.andThen(posixModes ? fs.chmod(directory, 0o700) : Effect.void),
        Effect.mapError(storeIo(CREATE_PRIVATE_DIRECTORY, directory))
      )
    )
  )
}

/**
 * Makes sure every directory from the rarebit root down to each of
 * `directories` (in that order) exists and is private to this user,
 * creating what is missing; with `create: false`, only checks what exists
 * and creates nothing. See the module documentation for what is checked.
 * Without a root (a hand-made reservation that names none), every
 * directory is outside it.
 *
 * @category constructors
 * @since 0.1.0
 */
export const ensurePrivateDirectories = (
  fs: FileSystem,
  path: Path,
  rarebitRoot: string | undefined,
  directories: ReadonlyArray<string>,
  options: { readonly create: boolean } = { create: true }
): Effect.Effect<void, UnsafeDirectory | StoreIo> =>
  Effect.suspend(() => {
    const root = rarebitRoot === undefined ? undefined : path.resolve(rarebitRoot)
    const uid = processUidOf(fs)
    // The root (and its parents) are made only when a directory right under it is missing:
    // the usual call, on an existing store, costs one `lstat` per component and nothing more.
    let rootExists = false
    const createRoot = Effect.suspend(() =>
      rootExists || root === undefined ? Effect.void : Effect.gen(function*() {
        // The root and any missing parents: each new name is durable only once its parent is fsynced.
        const missing: Array<string> = []
        for (let at = root; (yield* lstatIfPresent(fs, at)) === undefined; at = path.dirname(at)) {
          missing.unshift(at)
          if (path.dirname(at) === at) break
        }
        yield* fs.makeDirectory(root, { recursive: true, mode: 0o700 })
        for (const created of missing) yield* syncDirectory(fs, throughLinks(path.dirname(created)))
        rootExists = true
      })
    )
    return Effect.forEach(directories, (directory) => {
      const components = root === undefined ? undefined : componentsOf(path, root, directory)
      if (components === undefined) return options.create ? makeAsReference(fs, directory) : Effect.void
      return options.create
        ? ensureComponents(fs, root!, components, uid, createRoot)
        : checkExisting(fs, components, uid, "check private directory")
    }, { discard: true })
  })
