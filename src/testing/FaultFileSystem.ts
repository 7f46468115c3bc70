/**
 * A `FileSystem` wrapper that counts every operation and injects faults.
 *
 * Each call through the wrapper, including the methods of the `File` handles it
 * opens, is logged with a coarse `kind`, the method, the path and whether it
 * can change the disk. A `FaultPlan` picks operations by position, kind or
 * path and makes them fail with a Node-shaped errno `PlatformError`, write only
 * a prefix of their bytes, or crash.
 *
 * A crash means the chosen operation does not happen and the wrapper is dead
 * from then on: every later call dies with a `SimulatedCrash` defect, so the
 * program under test stops at that point (defects pass through the usual
 * error handlers). Pair it with `MemoryFileSystem.crashImage` to look at what
 * a SIGKILL or a power cut would have left, and with `exploreCrashPoints` to try
 * every point in turn.
 *
 * The wrapper never changes what the inner file system does for operations it
 * lets through; `stream`, `sink`, `glob` and `watch` are counted once as a
 * whole, and handle closes are logged but cannot be faulted. The
 * capabilities of `io/NonBlockingOpen` are forwarded when the inner file
 * system has them: the non-blocking open is an `open` step and a handle's
 * `fchmod` a `chmod` step, logged and faulted like the ones they stand for.
 *
 * @since 0.1.0
 */
import { Cause, Context, Data, Effect, FileSystem, Layer, type PlatformError, Sink, Stream } from "effect"
import {
  handleChmodOf,
  HandleChmodTypeId,
  type NonBlockingOpen,
  nonBlockingOpenOf,
  NonBlockingOpenTypeId,
  SmallRegularReadTypeId
} from "../io/NonBlockingOpen.js"
import { errnoError } from "./Errno.js"

/**
 * The errno codes a `Fail` action can inject.
 *
 * @category models
 * @since 0.1.0
 */
export type FaultErrno = "EIO" | "ENOSPC" | "EACCES" | "EPERM" | "EROFS" | "EBUSY" | "EMFILE"

/**
 * What happens to an operation a rule picks.
 *
 * **Details**
 *
 * - `Fail`: the operation does not run and fails with the `PlatformError`
 *   Node reports for `error` (`EIO`/`ENOSPC` are reason `"Unknown"`, `EACCES`
 *   is `"PermissionDenied"`).
 * - `TornWrite`: for write operations (`File.write`, `File.writeAll`,
 *   `writeFile`, `writeFileString`), only the first `bytes` bytes are written,
 *   then the call fails with `EIO` (`then: "fail"`, the default) or the file
 *   system crashes (`then: "crash"`). On any other operation it acts as its
 *   `then` alone.
 * - `Crash`: the operation does not run; it and every later operation die
 *   with `SimulatedCrash`.
 *
 * @category models
 * @since 0.1.0
 */
export type FaultAction =
  | { readonly _tag: "Fail"; readonly error: FaultErrno }
  | { readonly _tag: "TornWrite"; readonly bytes: number; readonly then?: "fail" | "crash" | undefined }
  | { readonly _tag: "Crash" }

/**
 * The coarse operation classes rules match on.
 *
 * **Details**
 *
 * `mkdir` is `makeDirectory`; `mkdtemp` covers the four temp constructors;
 * `readDirectory` covers `readDirectoryEntries`; `readFile` and `writeFile`
 * cover their `String` variants; `access` covers `exists`. The handle methods
 * are `read` (`read`, `readAlloc`), `write` (`write`, `writeAll`), `sync`,
 * `truncate` (also the path-based one), `stat` (also the path-based one),
 * `seek` and `close`.
 *
 * @category models
 * @since 0.1.0
 */
export type FaultKind =
  | "access"
  | "chmod"
  | "chown"
  | "close"
  | "copy"
  | "copyFile"
  | "glob"
  | "link"
  | "lstat"
  | "mkdir"
  | "mkdtemp"
  | "open"
  | "read"
  | "readDirectory"
  | "readFile"
  | "readLink"
  | "realPath"
  | "remove"
  | "rename"
  | "seek"
  | "sink"
  | "stat"
  | "stream"
  | "symlink"
  | "sync"
  | "truncate"
  | "utimes"
  | "watch"
  | "write"
  | "writeFile"

/**
 * One selector plus the action to take on what it selects.
 *
 * **Details**
 *
 * `kind`, `path` (a substring or a predicate) and `mutating` filter the
 * operations the rule looks at. Among those, `nth` (0-based) picks one by
 * position; `index` picks one by its position in the whole log. With neither,
 * every matching operation is hit, at most `times` times. When several rules
 * pick the same operation, the first one in the plan wins.
 *
 * @category models
 * @since 0.1.0
 */
export interface FaultRule {
  readonly kind?: FaultKind | ReadonlyArray<FaultKind> | undefined
  readonly path?: string | ((path: string) => boolean) | undefined
  readonly mutating?: boolean | undefined
  readonly nth?: number | undefined
  readonly index?: number | undefined
  readonly times?: number | undefined
  readonly action: FaultAction
}

/**
 * Options of `FaultPlan.random`.
 *
 * @category models
 * @since 0.1.0
 */
export interface RandomFaults {
  /** The same seed and the same sequence of operations give the same faults. */
  readonly seed: number | string
  /** Chance, per eligible operation, of injecting a fault. */
  readonly probability: number
  /** Eligible kinds; by default every mutating operation is eligible. */
  readonly kinds?: ReadonlyArray<FaultKind> | undefined
  /** What to inject, picked uniformly; default `Fail` with `EIO`. */
  readonly actions?: ReadonlyArray<FaultAction> | undefined
}

/**
 * Which faults to inject: explicit rules first, then optional seeded noise.
 *
 * @category models
 * @since 0.1.0
 */
export interface FaultPlan {
  readonly rules: ReadonlyArray<FaultRule>
  readonly random?: RandomFaults | undefined
}

/**
 * Constructors for `FaultPlan`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const FaultPlan = {
  /** Injects nothing; the wrapper only records. */
  none: { rules: [] } as FaultPlan,
  /** A plan from explicit rules. */
  make: (...rules: ReadonlyArray<FaultRule>): FaultPlan => ({ rules }),
  /** Crash at the `n`th (0-based) mutating operation. */
  crashAt: (n: number): FaultPlan => ({ rules: [{ mutating: true, nth: n, action: { _tag: "Crash" } }] }),
  /** Fail the `n`th (0-based) mutating operation with `error` (default `EIO`). */
  failAt: (n: number, error: FaultErrno = "EIO"): FaultPlan => ({
    rules: [{ mutating: true, nth: n, action: { _tag: "Fail", error } }]
  }),
  /** Seeded random faults, deterministic for a seed and a program. */
  random: (options: RandomFaults): FaultPlan => ({ rules: [], random: options })
}

/**
 * One logged operation.
 *
 * @category models
 * @since 0.1.0
 */
export interface FaultOperation {
  /** Position among all logged operations. */
  readonly index: number
  /** Position among mutating operations, when this one is mutating. */
  readonly mutatingIndex: number | undefined
  readonly kind: FaultKind
  /** The `FileSystem` method, or `File.<method>` for handle methods. */
  readonly method: string
  /** The path passed in; for handle methods, the path the handle was opened with. */
  readonly path: string
  readonly mutating: boolean
  /** The fault injected into this operation, if any. */
  readonly fault: FaultAction | undefined
}

/**
 * The defect every operation dies with once the wrapper has crashed.
 *
 * @category errors
 * @since 0.1.0
 */
export class SimulatedCrash extends Data.TaggedError("SimulatedCrash")<{
  readonly operation: FaultOperation | undefined
}> {
  override get message(): string {
    const op = this.operation
    return op === undefined
      ? "simulated crash"
      : `simulated crash at operation #${op.index} (${op.method} ${op.path})`
  }
}

/**
 * Whether a `Cause` contains a `SimulatedCrash` defect.
 *
 * @category guards
 * @since 0.1.0
 */
export const isSimulatedCrash = (cause: Cause.Cause<unknown>): boolean =>
  cause.reasons.some((reason) => Cause.isDieReason(reason) && reason.defect instanceof SimulatedCrash)

/**
 * A `FileSystem` plus the fault wrapper's log and crash state.
 *
 * @category models
 * @since 0.1.0
 */
export interface FaultFileSystemShape extends FileSystem.FileSystem {
  /** Whether a `Crash` (or `crash()`) has happened. */
  readonly crashed: boolean
  /** The operation the crash hit, if any. */
  readonly crashPoint: () => FaultOperation | undefined
  /** Every operation attempted before and including the crash, in order. */
  readonly operations: () => ReadonlyArray<FaultOperation>
  /** Crashes now, between operations. */
  readonly crash: () => void
}

interface Descriptor {
  readonly kind: FaultKind
  readonly method: string
  /** The `method` Node would name in its error. */
  readonly errorMethod: string
  readonly syscall: string
  readonly path: string
  readonly target: string | number
  readonly dest?: string | undefined
  readonly mutating: boolean
}

// mulberry32: tiny, fast and good enough to spread faults deterministically.
const prng = (seed: number | string): () => number => {
  let state = typeof seed === "number" ? seed >>> 0 : 0x811c9dc5
  if (typeof seed === "string") {
    for (let i = 0; i < seed.length; i++) state = Math.imul(state ^ seed.charCodeAt(i), 0x01000193) >>> 0
  }
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const kindMatches = (rule: FaultRule, kind: FaultKind): boolean =>
  rule.kind === undefined || (typeof rule.kind === "string" ? rule.kind === kind : rule.kind.includes(kind))

const pathMatches = (rule: FaultRule, path: string): boolean =>
  rule.path === undefined || (typeof rule.path === "string" ? path.includes(rule.path) : rule.path(path))

/**
 * Wraps a file system so that its operations are logged and faulted per `plan`.
 *
 * **Details**
 *
 * Works over any `FileSystem`, the Node one included. Injected failures are
 * built like Node's (`_tag: "PlatformError"`, `reason._tag` from the errno,
 * `module: "FileSystem"`, the method Node names, the path, or the descriptor
 * for handle methods when the inner handle exposes one).
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeFaultFileSystem = (inner: FileSystem.FileSystem, plan: FaultPlan): FaultFileSystemShape => {
  const log: Array<FaultOperation> = []
  const candidates = plan.rules.map(() => 0)
  const fired = plan.rules.map(() => 0)
  const random = plan.random
  const draw = random === undefined ? undefined : prng(random.seed)
  let mutatingCount = 0
  let crashPoint: FaultOperation | undefined
  let crashed = false

  const record = (descriptor: Descriptor, decide: boolean): FaultOperation => {
    const index = log.length
    const mutatingIndex = descriptor.mutating ? mutatingCount++ : undefined
    let fault: FaultAction | undefined
    if (decide) {
      plan.rules.forEach((rule, position) => {
        if (!kindMatches(rule, descriptor.kind) || !pathMatches(rule, descriptor.path)) return
        if (rule.mutating !== undefined && rule.mutating !== descriptor.mutating) return
        const candidate = candidates[position]++
        if (fault !== undefined) return
        if (rule.index !== undefined && rule.index !== index) return
        if (rule.nth !== undefined && rule.nth !== candidate) return
        if (rule.times !== undefined && fired[position] >= rule.times) return
        fired[position]++
        fault = rule.action
      })
      if (random !== undefined && draw !== undefined) {
        const eligible = random.kinds === undefined ? descriptor.mutating : random.kinds.includes(descriptor.kind)
        // Draw for every eligible operation, hit or not, so the sequence of
        // draws depends only on the sequence of operations.
        if (eligible && draw() < random.probability && fault === undefined) {
          const actions = random.actions ?? [{ _tag: "Fail", error: "EIO" }]
          fault = actions[Math.floor(draw() * actions.length)]
        }
      }
    }
    const operation: FaultOperation = {
      index,
      mutatingIndex,
      kind: descriptor.kind,
      method: descriptor.method,
      path: descriptor.path,
      mutating: descriptor.mutating,
      fault
    }
    log.push(operation)
    return operation
  }

  const dead = () => Effect.die(new SimulatedCrash({ operation: crashPoint }))

  const crashOn = (operation: FaultOperation | undefined) => {
    crashed = true
    crashPoint = operation
    return dead()
  }

  const failure = (descriptor: Descriptor, error: FaultErrno): PlatformError.PlatformError =>
    errnoError({
      code: error,
      method: descriptor.errorMethod,
      syscall: descriptor.syscall,
      pathOrDescriptor: descriptor.target,
      dest: descriptor.dest
    })

  const guard = <A, E, R>(
    descriptor: Descriptor,
    effect: Effect.Effect<A, E, R>,
    torn?: (bytes: number) => Effect.Effect<unknown, E, R>
  ): Effect.Effect<A, E | PlatformError.PlatformError, R> =>
    Effect.suspend((): Effect.Effect<A, E | PlatformError.PlatformError, R> => {
      if (crashed) return dead()
      const operation = record(descriptor, true)
      const fault = operation.fault
      if (fault === undefined) return effect
      switch (fault._tag) {
        case "Fail":
          return Effect.fail(failure(descriptor, fault.error))
        case "Crash":
          return crashOn(operation)
        case "TornWrite": {
          const finish = fault.then === "crash"
            ? Effect.suspend(() => crashOn(operation))
            : Effect.fail(failure(descriptor, "EIO"))
          return torn === undefined
            ? finish
            : Effect.andThen(torn(Math.max(0, Math.floor(fault.bytes))), finish)
        }
      }
    })

  const at = (
    kind: FaultKind,
    method: string,
    syscall: string,
    path: string,
    mutating: boolean,
    extra?: { readonly errorMethod?: string; readonly dest?: string }
  ): Descriptor => ({
    kind,
    method,
    errorMethod: extra?.errorMethod ?? method,
    syscall,
    path,
    target: path,
    dest: extra?.dest,
    mutating
  })

  const wrapFile = (file: FileSystem.File, path: string): FileSystem.File => {
    const fd = (file as { readonly fd?: unknown }).fd
    const target = typeof fd === "number" ? fd : path
    const on = (kind: FaultKind, method: string, syscall: string, mutating: boolean): Descriptor => ({
      kind,
      method: `File.${method}`,
      errorMethod: method,
      syscall,
      path,
      target,
      mutating
    })
    const chmod = handleChmodOf(file)
    return {
      [FileSystem.FileTypeId]: FileSystem.FileTypeId,
      // fchmod is a chmod step like any other: counted, faulted and crashed on the same way.
      ...(chmod === undefined ? {} : {
        [HandleChmodTypeId]: (mode: number) => guard(on("chmod", "chmod", "fchmod", true), chmod(mode))
      }),
      stat: guard(on("stat", "stat", "fstat", false), file.stat),
      sync: guard(on("sync", "sync", "fsync", true), file.sync),
      seek: (offset, from) => guard(on("seek", "seek", "lseek", false), file.seek(offset, from)),
      read: (buffer, options) => guard(on("read", "read", "read", false), file.read(buffer, options)),
      readAlloc: (size, options) => guard(on("read", "readAlloc", "read", false), file.readAlloc(size, options)),
      truncate: (length) => guard(on("truncate", "truncate", "ftruncate", true), file.truncate(length)),
      write: (buffer) =>
        guard(
          on("write", "write", "write", true),
          file.write(buffer),
          (bytes) => file.writeAll(buffer.subarray(0, bytes))
        ),
      writeAll: (buffer) =>
        guard(
          on("write", "writeAll", "write", true),
          file.writeAll(buffer),
          (bytes) => file.writeAll(buffer.subarray(0, bytes))
        )
    }
  }

  const logClose = (path: string) =>
    Effect.sync(() => {
      if (!crashed) record(at("close", "File.close", "close", path, false), false)
    })

  const encode = (data: string) => new TextEncoder().encode(data)

  const openInner = nonBlockingOpenOf(inner)
  // The non-blocking open is an open step like `open`, with the same faults.
  const nonBlockingOpen: NonBlockingOpen | undefined = openInner === undefined ?
    undefined :
    (path, options) =>
      Effect.flatMap(
        guard(at("open", "open", "open", path, options.flag !== "r"), openInner(path, options)),
        (file) => Effect.as(Effect.addFinalizer(() => logClose(path)), wrapFile(file, path))
      )

  const base: FileSystem.FileSystem & { readonly [SmallRegularReadTypeId]: undefined } = {
    ...inner,
    ...(nonBlockingOpen === undefined ? {} : { [NonBlockingOpenTypeId]: nonBlockingOpen }),
    // Its open and reads would pass no fault point: callers take their
    // ordinary path, where every step can fail or crash.
    [SmallRegularReadTypeId]: undefined,
    access: (path, options) => guard(at("access", "access", "access", path, false), inner.access(path, options)),
    chmod: (path, mode) => guard(at("chmod", "chmod", "chmod", path, true), inner.chmod(path, mode)),
    chown: (path, uid, gid) => guard(at("chown", "chown", "chown", path, true), inner.chown(path, uid, gid)),
    copy: (fromPath, toPath, options) =>
      guard(at("copy", "copy", "cp", fromPath, true, { dest: toPath }), inner.copy(fromPath, toPath, options)),
    copyFile: (fromPath, toPath) =>
      guard(at("copyFile", "copyFile", "copyfile", fromPath, true, { dest: toPath }), inner.copyFile(fromPath, toPath)),
    exists: (path) =>
      guard(at("access", "exists", "access", path, false, { errorMethod: "access" }), inner.exists(path)),
    glob: (pattern, options) => guard(at("glob", "glob", "scandir", pattern, false), inner.glob(pattern, options)),
    link: (fromPath, toPath) =>
      guard(at("link", "link", "link", fromPath, true, { dest: toPath }), inner.link(fromPath, toPath)),
    lstat: (path) => guard(at("lstat", "lstat", "lstat", path, false), inner.lstat(path)),
    makeDirectory: (path, options) =>
      guard(at("mkdir", "makeDirectory", "mkdir", path, true), inner.makeDirectory(path, options)),
    makeTempDirectory: (options) =>
      guard(
        at("mkdtemp", "makeTempDirectory", "mkdtemp", options?.directory ?? "<tmpdir>", true),
        inner.makeTempDirectory(options)
      ),
    makeTempDirectoryScoped: (options) =>
      guard(
        at("mkdtemp", "makeTempDirectoryScoped", "mkdtemp", options?.directory ?? "<tmpdir>", true),
        inner.makeTempDirectoryScoped(options)
      ),
    makeTempFile: (options) =>
      guard(
        at("mkdtemp", "makeTempFile", "mkdtemp", options?.directory ?? "<tmpdir>", true),
        inner.makeTempFile(options)
      ),
    makeTempFileScoped: (options) =>
      guard(
        at("mkdtemp", "makeTempFileScoped", "mkdtemp", options?.directory ?? "<tmpdir>", true),
        inner.makeTempFileScoped(options)
      ),
    open: (path, options) =>
      Effect.flatMap(
        guard(at("open", "open", "open", path, (options?.flag ?? "r") !== "r"), inner.open(path, options)),
        (file) => Effect.as(Effect.addFinalizer(() => logClose(path)), wrapFile(file, path))
      ),
    readDirectory: (path, options) =>
      guard(at("readDirectory", "readDirectory", "scandir", path, false), inner.readDirectory(path, options)),
    readDirectoryEntries: (path) =>
      guard(at("readDirectory", "readDirectoryEntries", "scandir", path, false), inner.readDirectoryEntries(path)),
    readFile: (path) => guard(at("readFile", "readFile", "read", path, false), inner.readFile(path)),
    readFileString: (path, encoding) =>
      guard(
        at("readFile", "readFileString", "read", path, false, { errorMethod: "readFile" }),
        inner.readFileString(path, encoding)
      ),
    readLink: (path) => guard(at("readLink", "readLink", "readlink", path, false), inner.readLink(path)),
    realPath: (path) => guard(at("realPath", "realPath", "lstat", path, false), inner.realPath(path)),
    remove: (path, options) => guard(at("remove", "remove", "rm", path, true), inner.remove(path, options)),
    rename: (oldPath, newPath) =>
      guard(at("rename", "rename", "rename", oldPath, true, { dest: newPath }), inner.rename(oldPath, newPath)),
    sink: (path, options) =>
      Sink.unwrap(guard(at("sink", "sink", "write", path, true), Effect.sync(() => inner.sink(path, options)))),
    stat: (path) => guard(at("stat", "stat", "stat", path, false), inner.stat(path)),
    stream: (path, options) =>
      Stream.unwrap(guard(at("stream", "stream", "read", path, false), Effect.sync(() => inner.stream(path, options)))),
    symlink: (fromPath, toPath) =>
      guard(
        { ...at("symlink", "symlink", "symlink", toPath, true, { dest: toPath }), target: fromPath },
        inner.symlink(fromPath, toPath)
      ),
    truncate: (path, length) =>
      guard(at("truncate", "truncate", "ftruncate", path, true), inner.truncate(path, length)),
    utimes: (path, atime, mtime) =>
      guard(at("utimes", "utimes", "utime", path, true, { errorMethod: "utime" }), inner.utimes(path, atime, mtime)),
    watch: (path, options) =>
      Stream.unwrap(guard(at("watch", "watch", "watch", path, false), Effect.sync(() => inner.watch(path, options)))),
    writeFile: (path, data, options) =>
      guard(
        at("writeFile", "writeFile", "write", path, true),
        inner.writeFile(path, data, options),
        (bytes) => inner.writeFile(path, data.subarray(0, bytes), options)
      ),
    writeFileString: (path, data, options) =>
      guard(
        at("writeFile", "writeFileString", "write", path, true, { errorMethod: "writeFile" }),
        inner.writeFileString(path, data, options),
        (bytes) => inner.writeFile(path, encode(data).subarray(0, bytes), options)
      )
  }

  return {
    ...base,
    get crashed() {
      return crashed
    },
    crashPoint: () => crashPoint,
    operations: () => log.slice(),
    crash: () => {
      crashed = true
    }
  }
}

/**
 * The fault wrapper as a service, so a test can read its log and crash state.
 *
 * @category services
 * @since 0.1.0
 */
export class FaultFileSystem extends Context.Service<FaultFileSystem, FaultFileSystemShape>()(
  "rarebit-store/testing/FaultFileSystem"
) {
  /**
   * Replaces the `FileSystem` it is given with a fault-injecting wrapper of it.
   *
   * @category layers
   * @since 0.1.0
   */
  static readonly layer = (
    plan: FaultPlan
  ): Layer.Layer<FileSystem.FileSystem | FaultFileSystem, never, FileSystem.FileSystem> =>
    Layer.effectContext(Effect.gen(function*() {
      const fs = makeFaultFileSystem(yield* FileSystem.FileSystem, plan)
      return Context.make(FileSystem.FileSystem, fs).pipe(Context.add(FaultFileSystem, fs))
    }))
}
