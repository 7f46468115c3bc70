/**
 * Node's file system with the short system calls made on the calling thread.
 *
 * `@effect/platform-node`'s `FileSystem` sends every call through libuv's
 * thread pool. For the store's calls — stats, links, renames, opens and
 * reads of a few kilobytes on a local disk — the syscall takes microseconds
 * and the round trip to the pool and back to the event loop takes ten to a
 * hundred times longer; a settle makes about fifty of them. This layer makes
 * those calls synchronously and keeps the thread pool for the calls that can
 * take milliseconds: `fsync`, reads and writes over {@link DIRECT_IO_LIMIT},
 * recursive removal, directory listings and everything the store does not
 * use. Failures are the same `PlatformError`s, with the same reason, method,
 * syscall and path, as `@effect/platform-node` reports.
 *
 * Durability is unchanged: a call is done when the syscall returned, exactly
 * as on the pool, and `File.sync` is a real `fsync`.
 *
 * The trade: a direct call blocks the event loop for its duration. Opens
 * and whole-file reads and writes never wait on a peer (a FIFO or a device
 * is opened on the pool instead),
 * but on a network file system where any stat can stall, prefer
 * `NodeStore.threadpoolLayer`.
 *
 * Both layers carry the capabilities of `io/NonBlockingOpen`: an `open(2)`
 * with `O_NONBLOCK` (and `O_NOFOLLOW` / `O_DIRECTORY` when asked) whose
 * files can `fchmod` their handle, and the process's uid. The store opens
 * every file through it, so a FIFO planted at one of its paths is refused
 * after a non-blocking open instead of occupying a pool thread forever.
 * They also carry the host's platform traits: on Windows, where libuv has
 * no `O_NOFOLLOW`, `O_NONBLOCK` or `O_DIRECTORY` (the bits are simply
 * absent from the open), `io/RegularFile` checks the path's `lstat` against
 * the handle's `fstat` instead.
 *
 * @since 0.1.0
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { ByteSize, Effect, FileSystem, Layer, Option, PlatformError, type Scope } from "effect"
import * as NFS from "node:fs"
import {
  HandleChmodTypeId,
  HOST_TRAITS,
  type NonBlockingOpen,
  type NonBlockingOpenCapable,
  NonBlockingOpenTypeId,
  type PlatformTraitsCapable,
  PlatformTraitsTypeId,
  type ProcessUidCapable,
  ProcessUidTypeId,
  type SmallRegularRead,
  type SmallRegularReadCapable,
  SmallRegularReadTypeId
} from "../io/NonBlockingOpen.js"
import { errnoReason } from "./ErrnoReason.js"

/**
 * Reads, writes and whole-file reads up to this many bytes are made directly;
 * larger ones go through the thread pool.
 *
 * @category constants
 * @since 0.1.0
 */
export const DIRECT_IO_LIMIT = 1024 * 1024

interface NodeError {
  readonly code?: unknown
  readonly syscall?: unknown
  readonly message?: unknown
}

const failure = (method: string, pathOrDescriptor: string | number, error: unknown): PlatformError.PlatformError => {
  const nodeError = error as NodeError
  if (typeof nodeError?.code === "string" && typeof nodeError.syscall === "string") {
    return PlatformError.systemError({
      _tag: errnoReason(nodeError.code),
      module: "FileSystem",
      method,
      pathOrDescriptor,
      syscall: nodeError.syscall,
      cause: error
    })
  }
  // Node's own TypeError (a NUL byte in a path: ERR_INVALID_ARG_VALUE) is
  // kept, so the plain API can throw exactly what Node threw.
  return PlatformError.badArgument({
    module: "FileSystem",
    method,
    description: typeof nodeError?.message === "string" ? nodeError.message : String(error),
    cause: error
  })
}

/** An error with an errno code (ENOENT, ...), as opposed to an argument Node refused before any syscall. */
const isErrnoError = (error: unknown): boolean => typeof (error as NodeError | null)?.syscall === "string"

const direct = <A>(method: string, pathOrDescriptor: string | number, call: () => A) =>
  Effect.suspend(() => {
    try {
      return Effect.succeed(call())
    } catch (error) {
      return Effect.fail(failure(method, pathOrDescriptor, error))
    }
  })

const fileType = (stats: NFS.BigIntStats): FileSystem.File.Type =>
  stats.isFile()
    ? "File"
    : stats.isDirectory()
    ? "Directory"
    : stats.isSymbolicLink()
    ? "SymbolicLink"
    : stats.isBlockDevice()
    ? "BlockDevice"
    : stats.isCharacterDevice()
    ? "CharacterDevice"
    : stats.isFIFO()
    ? "FIFO"
    : stats.isSocket()
    ? "Socket"
    : "Unknown"

// Node fills bigint stats from a BigInt64Array, so dev_t and ino_t at or above
// 2^63 come back negative; platform-node reports them unsigned.
const unsigned = (value: bigint): bigint => BigInt.asUintN(64, value)

const fileInfo = (stats: NFS.BigIntStats): FileSystem.File.Info => ({
  type: fileType(stats),
  mtime: Option.some(stats.mtime),
  atime: Option.some(stats.atime),
  birthtime: Option.some(stats.birthtime),
  dev: unsigned(stats.dev),
  rdev: Option.some(unsigned(stats.rdev)),
  ino: Option.some(unsigned(stats.ino)),
  mode: Number(stats.mode),
  nlink: Option.some(unsigned(stats.nlink)),
  uid: Option.some(Number(stats.uid)),
  gid: Option.some(Number(stats.gid)),
  size: ByteSize.bytes(stats.size),
  blksize: Option.some(ByteSize.bytes(stats.blksize)),
  blocks: Option.some(stats.blocks)
})

const openFlags = (flag: FileSystem.OpenFlag, noFollow: boolean): number => {
  const { O_APPEND, O_CREAT, O_EXCL, O_NOFOLLOW, O_RDONLY, O_RDWR, O_TRUNC, O_WRONLY } = NFS.constants
  const bits: Record<FileSystem.OpenFlag, number> = {
    "r": O_RDONLY,
    "r+": O_RDWR,
    "w": O_TRUNC | O_CREAT | O_WRONLY,
    "wx": O_TRUNC | O_CREAT | O_WRONLY | O_EXCL,
    "w+": O_TRUNC | O_CREAT | O_RDWR,
    "wx+": O_TRUNC | O_CREAT | O_RDWR | O_EXCL,
    "a": O_APPEND | O_CREAT | O_WRONLY,
    "ax": O_APPEND | O_CREAT | O_WRONLY | O_EXCL,
    "a+": O_APPEND | O_CREAT | O_RDWR,
    "ax+": O_APPEND | O_CREAT | O_RDWR | O_EXCL
  }
  return bits[flag] | (noFollow ? O_NOFOLLOW : 0)
}

/**
 * Opens without ever blocking: a FIFO or a device can make `open(2)` wait
 * for a peer, which on the calling thread would stop the whole event loop.
 * `O_NONBLOCK` makes such opens return at once (or fail with ENXIO); then
 * the file is not ours to open directly and `undefined` sends the call to
 * the thread pool, which waits the way Node always does. On regular files
 * and directories `O_NONBLOCK` changes nothing.
 */
const openWithoutBlocking = (
  path: string,
  flags: number,
  mode?: number
): { readonly fd: number; readonly size: number } | undefined => {
  let fd: number
  try {
    fd = NFS.openSync(path, flags | NFS.constants.O_NONBLOCK, mode)
  } catch (error) {
    if ((error as NodeError).code === "ENXIO") return undefined
    throw error
  }
  let stats: NFS.Stats
  try {
    stats = NFS.fstatSync(fd)
  } catch (error) {
    NFS.closeSync(fd)
    throw error
  }
  if (stats.isFile() || stats.isDirectory()) return { fd, size: stats.size }
  NFS.closeSync(fd)
  return undefined
}

const negativePosition = (method: string) =>
  PlatformError.badArgument({ module: "FileSystem", method, description: "Cannot read before the start of the file" })

const viaPool = <A>(
  method: string,
  pathOrDescriptor: string | number,
  start: (done: (error: unknown, value?: A) => void) => void
) =>
  Effect.callback<A, PlatformError.PlatformError>((resume) => {
    try {
      start((error, value) =>
        resume(error ? Effect.fail(failure(method, pathOrDescriptor, error)) : Effect.succeed(value as A))
      )
    } catch (error) {
      resume(Effect.fail(failure(method, pathOrDescriptor, error)))
    }
  })

const readAt = (method: string, fd: number, buffer: Uint8Array, position: bigint, pooled: boolean) =>
  buffer.length <= DIRECT_IO_LIMIT && !pooled
    ? direct(method, fd, () => NFS.readSync(fd, buffer, 0, buffer.length, position))
    : viaPool<number>(
      method,
      fd,
      (done) => NFS.read(fd, buffer, 0, buffer.length, position, (error, bytes) => done(error, bytes))
    )

const writeAt = (method: string, fd: number, buffer: Uint8Array, position: number | null, pooled: boolean) =>
  buffer.length <= DIRECT_IO_LIMIT && !pooled
    ? direct(method, fd, () => NFS.writeSync(fd, buffer, 0, buffer.length, position))
    : viaPool<number>(
      method,
      fd,
      (done) => NFS.write(fd, buffer, 0, buffer.length, position, (error, bytes) => done(error, bytes))
    )

/**
 * An open file; keeps the same position rules as platform-node's. A
 * `pooled` file (the thread-pool layer's) makes every call on the pool.
 */
class DirectFile implements FileSystem.File {
  readonly [FileSystem.FileTypeId] = FileSystem.FileTypeId
  private position = 0n
  /** The descriptor, exposed as platform-node's files expose it. */
  readonly fd: number
  constructor(descriptor: number, private readonly append: boolean, private readonly pooled = false) {
    this.fd = descriptor
  }

  get stat() {
    return this.pooled
      ? viaPool<FileSystem.File.Info>(
        "stat",
        this.fd,
        (done) =>
          NFS.fstat(this.fd, { bigint: true }, (error, stats) => done(error, error ? undefined : fileInfo(stats)))
      )
      : direct("stat", this.fd, () => fileInfo(NFS.fstatSync(this.fd, { bigint: true })))
  }

  /** `fchmod(2)`: the mode lands on the file this handle has open, whatever its path names now. */
  readonly [HandleChmodTypeId] = (mode: number): Effect.Effect<void, PlatformError.PlatformError> =>
    this.pooled
      ? viaPool<void>("chmod", this.fd, (done) => NFS.fchmod(this.fd, mode, done))
      : direct("chmod", this.fd, () => NFS.fchmodSync(this.fd, mode))

  get sync() {
    // fsync is the one call here that routinely takes milliseconds.
    return viaPool<void>("sync", this.fd, (done) => NFS.fsync(this.fd, done))
  }

  seek(offset: bigint, from: FileSystem.SeekMode) {
    return Effect.suspend(() => {
      const position = from === "start" ? offset : this.position + offset
      if (position < 0n) {
        return Effect.fail(
          PlatformError.badArgument({
            module: "FileSystem",
            method: "seek",
            description: "Cannot seek before the start of the file"
          })
        )
      }
      this.position = position
      return Effect.succeed(position)
    })
  }

  read(buffer: Uint8Array, options?: FileSystem.File.ReadOptions) {
    return Effect.suspend(() => {
      const explicit = options?.position
      if (explicit !== undefined) {
        return explicit < 0n
          ? Effect.fail(negativePosition("read"))
          : readAt("read", this.fd, buffer, explicit, this.pooled)
      }
      const position = this.position
      return Effect.map(readAt("read", this.fd, buffer, position, this.pooled), (bytesRead) => {
        this.position = position + BigInt(bytesRead)
        return bytesRead
      })
    })
  }

  readAlloc(size: number, options?: FileSystem.File.ReadOptions) {
    return Effect.suspend(() => {
      if (!Number.isInteger(size) || size < 0) {
        return Effect.fail(
          PlatformError.badArgument({
            module: "FileSystem",
            method: "readAlloc",
            description: "size must be a non-negative integer"
          })
        )
      }
      const explicit = options?.position
      if (explicit !== undefined && explicit < 0n) return Effect.fail(negativePosition("readAlloc"))
      const position = explicit ?? this.position
      const buffer = Buffer.allocUnsafeSlow(size)
      return Effect.map(readAt("readAlloc", this.fd, buffer, position, this.pooled), (bytesRead) => {
        if (bytesRead === 0) return Option.none<Uint8Array>()
        if (explicit === undefined) this.position = position + BigInt(bytesRead)
        return Option.some<Uint8Array>(bytesRead === size ? buffer : Buffer.from(buffer.subarray(0, bytesRead)))
      })
    })
  }

  truncate(length?: number) {
    const call = this.pooled
      ? viaPool<void>("truncate", this.fd, (done) => NFS.ftruncate(this.fd, length, done))
      : direct("truncate", this.fd, () => NFS.ftruncateSync(this.fd, length))
    return Effect.map(call, () => {
      if (!this.append) {
        const end = BigInt(length ?? 0)
        if (this.position > end) this.position = end
      }
    })
  }

  write(buffer: Uint8Array) {
    return Effect.suspend(() => {
      const position = this.position
      return Effect.map(
        writeAt("write", this.fd, buffer, this.append ? null : Number(position), this.pooled),
        (bytesWritten) => {
          if (!this.append) this.position = position + BigInt(bytesWritten)
          return bytesWritten
        }
      )
    })
  }

  writeAll(buffer: Uint8Array): Effect.Effect<void, PlatformError.PlatformError> {
    if (buffer.length === 0) return Effect.void
    return Effect.suspend(() => {
      const position = this.position
      return Effect.flatMap(
        writeAt("writeAll", this.fd, buffer, this.append ? null : Number(position), this.pooled),
        (bytesWritten) => {
          if (bytesWritten === 0) {
            return Effect.fail(PlatformError.systemError({
              _tag: "WriteZero",
              module: "FileSystem",
              method: "writeAll",
              pathOrDescriptor: this.fd,
              description: "write returned 0 bytes written"
            }))
          }
          if (!this.append) this.position = position + BigInt(bytesWritten)
          return bytesWritten < buffer.length ? this.writeAll(buffer.subarray(bytesWritten)) : Effect.void
        }
      )
    })
  }
}

const nonBlockingFlags = (options: Parameters<NonBlockingOpen>[1]): number =>
  openFlags(options.flag, options.noFollow) | NFS.constants.O_NONBLOCK |
  (options.directory === true ? NFS.constants.O_DIRECTORY : 0)

/**
 * The non-blocking open (see `io/NonBlockingOpen`): `O_NONBLOCK` never waits
 * for a FIFO peer, so the open itself is made on the calling thread, or on
 * the pool for the thread-pool layer, whose files then read on the pool too.
 */
const nonBlockingOpen = (pooled: boolean): NonBlockingOpen => (path, options) => {
  const flags = nonBlockingFlags(options)
  const opened = pooled
    ? viaPool<number>("open", path, (done) => NFS.open(path, flags, options.mode, (error, fd) => done(error, fd)))
    : direct("open", path, () => NFS.openSync(path, flags, options.mode))
  return Effect.map(
    Effect.acquireRelease(opened, (fd) => Effect.orDie(direct("open", path, () => NFS.closeSync(fd)))),
    (fd): FileSystem.File => new DirectFile(fd, options.flag.startsWith("a"), pooled)
  )
}

// Read once: a process's uid does not change under the store (a getuid per directory check adds up).
const processUid = process.getuid?.()

/**
 * A small regular file, or its end, in one call on this thread (see
 * `io/NonBlockingOpen`): the open never waits (`O_NONBLOCK`), the handle's
 * `fstat` must say regular file with at most `limit` bytes from `from`, and
 * the reads stop one byte past that size, so a file that grew shows it
 * without ever being read whole. Anything else gives `undefined`, never an
 * exception.
 */
const readSmallRegular: SmallRegularRead = (path, { from = 0, head, limit, noFollow }) => {
  // Without `O_NOFOLLOW` (Windows) the path's own identity is taken first and
  // the handle must match it, so a symlink or junction is never read through.
  const checkIdentity = noFollow && !HOST_TRAITS.noFollowOpen
  let linkStats: NFS.BigIntStats | undefined
  let fd: number
  try {
    if (checkIdentity) {
      linkStats = NFS.lstatSync(path, { bigint: true })
      if (!linkStats.isFile()) return undefined
    }
    fd = NFS.openSync(path, openFlags("r", noFollow) | NFS.constants.O_NONBLOCK)
  } catch {
    return undefined
  }
  try {
    const stats = NFS.fstatSync(fd, { bigint: true })
    if (linkStats !== undefined && !sameFile(linkStats, stats)) return undefined
    const size = Number(stats.size)
    if (!stats.isFile() || from > size || size - from > limit) return undefined
    return {
      size,
      // As `fileIdentity` and `modifiedMs` read this layer's `File.Info`.
      identity: [unsigned(stats.dev), unsigned(stats.ino)].join(":"),
      mtimeMs: stats.mtime.getTime(),
      bytes: readFrom(fd, from, size - from + 1),
      head: head === undefined ? undefined : readFrom(fd, 0, Math.min(head, size))
    }
  } catch {
    return undefined
  } finally {
    NFS.closeSync(fd)
  }
}

/** Up to `length` bytes at `position`, fewer at end of file. */
const readFrom = (fd: number, position: number, length: number): Uint8Array => {
  const bytes = Buffer.allocUnsafe(length)
  let filled = 0
  while (filled < length) {
    const count = NFS.readSync(fd, bytes, filled, length - filled, position + filled)
    if (count === 0) break
    filled += count
  }
  return bytes.subarray(0, filled)
}

/** Whether two stats describe one file: the same device and inode (volume serial and file index on Windows). */
const sameFile = (a: NFS.BigIntStats, b: NFS.BigIntStats): boolean => a.dev === b.dev && a.ino === b.ino

const capabilities = (
  pooled: boolean
): NonBlockingOpenCapable & ProcessUidCapable & PlatformTraitsCapable & Partial<SmallRegularReadCapable> => ({
  [NonBlockingOpenTypeId]: nonBlockingOpen(pooled),
  [PlatformTraitsTypeId]: HOST_TRAITS,
  [ProcessUidTypeId]: () => processUid,
  // The thread-pool layer promises never to make the event loop wait on a read.
  ...(pooled ? {} : { [SmallRegularReadTypeId]: readSmallRegular })
})

// On macOS and Windows the native realpath answers with each name as it is
// spelled on disk (JavaScript's keeps the caller's case), which is how the
// store gives two spellings of one Session one identity (`makeSessionIdentity` in `MirroredPath`).
// Linux names are bytes, and its JavaScript realpath fails as `lstat` does.
const nativeRealpath = process.platform === "darwin" || process.platform === "win32"
const realpathSync = nativeRealpath ? NFS.realpathSync.native : NFS.realpathSync

/** The same realpath on libuv's pool, for the thread-pool layer. */
const pooledRealPath = (pool: FileSystem.FileSystem): Pick<FileSystem.FileSystem, "realPath"> =>
  nativeRealpath
    ? {
      realPath: (path) =>
        Effect.callback<string, PlatformError.PlatformError>((resume) => {
          NFS.realpath.native(
            path,
            (error, resolved) =>
              resume(error ? Effect.fail(failure("realPath", path, error)) : Effect.succeed(resolved))
          )
        })
    }
    : { realPath: pool.realPath }

const make = (pool: FileSystem.FileSystem): FileSystem.FileSystem =>
  FileSystem.make({
    ...pool,
    ...capabilities(false),
    access: (path, options) =>
      direct("access", path, () =>
        NFS.accessSync(
          path,
          NFS.constants.F_OK | (options?.readable ? NFS.constants.R_OK : 0) |
            (options?.writable ? NFS.constants.W_OK : 0)
        )),
    chmod: (path, mode) => direct("chmod", path, () => NFS.chmodSync(path, mode)),
    link: (fromPath, toPath) => direct("link", fromPath, () => NFS.linkSync(fromPath, toPath)),
    lstat: (path) => direct("lstat", path, () => fileInfo(NFS.lstatSync(path, { bigint: true }))),
    stat: (path) => direct("stat", path, () => fileInfo(NFS.statSync(path, { bigint: true }))),
    makeDirectory: (path, options) =>
      Effect.suspend(() => {
        try {
          NFS.mkdirSync(path, {
            recursive: options?.recursive ?? false,
            ...(options?.mode === undefined ? {} : { mode: options.mode })
          })
          return Effect.void
        } catch (error) {
          // Node's synchronous and asynchronous recursive mkdir report some
          // failures differently (a dangling symlink on the way: ENOENT
          // against ENOTDIR); the pool's call gives the asynchronous answer.
          return options?.recursive && isErrnoError(error)
            ? Effect.asVoid(pool.makeDirectory(path, options))
            : Effect.fail(failure("makeDirectory", path, error))
        }
      }),
    rename: (oldPath, newPath) => direct("rename", oldPath, () => NFS.renameSync(oldPath, newPath)),
    utimes: (path, atime, mtime) => direct("utime", path, () => NFS.utimesSync(path, atime, mtime)),
    readLink: (path) => direct("readLink", path, () => NFS.readlinkSync(path)),
    realPath: (path) => direct("realPath", path, () => realpathSync(path)),
    symlink: (target, path) => direct("symlink", target, () => NFS.symlinkSync(target, path)),
    truncate: (path, length) => direct("truncate", path, () => NFS.truncateSync(path, length)),
    remove: (path, options) => {
      // Only a plain unlink that succeeds is direct. Anything else (a
      // directory, a missing path, recursive removal) goes to Node's own `rm`,
      // so its answer and its errors stay exactly Node's.
      if (options?.recursive) return pool.remove(path, options)
      return Effect.suspend(() => {
        try {
          NFS.unlinkSync(path)
          return Effect.void
        } catch (error) {
          return isErrnoError(error) ? pool.remove(path, options) : Effect.fail(failure("remove", path, error))
        }
      })
    },
    open: (path, options) => {
      const flag = options?.flag ?? "r"
      const noFollow = options?.noFollow === true
      return Effect.flatMap(
        Effect.acquireRelease(
          direct("open", path, () => openWithoutBlocking(path, openFlags(flag, noFollow), options?.mode)),
          (opened) =>
            opened === undefined ? Effect.void : Effect.orDie(direct("open", path, () => NFS.closeSync(opened.fd)))
        ),
        (opened): Effect.Effect<FileSystem.File, PlatformError.PlatformError, Scope.Scope> =>
          opened === undefined
            ? pool.open(path, options)
            : Effect.succeed(new DirectFile(opened.fd, flag.startsWith("a")))
      )
    },
    readFile: (path) =>
      Effect.suspend(() => {
        let fd: number | undefined
        try {
          const opened = openWithoutBlocking(path, NFS.constants.O_RDONLY)
          if (opened === undefined) return pool.readFile(path)
          fd = opened.fd
          if (opened.size > DIRECT_IO_LIMIT) return pool.readFile(path)
          return Effect.succeed<Uint8Array>(NFS.readFileSync(fd))
        } catch (error) {
          return Effect.fail(failure("readFile", path, error))
        } finally {
          if (fd !== undefined) NFS.closeSync(fd)
        }
      }),
    writeFile: (path, data, options) =>
      data.length > DIRECT_IO_LIMIT
        ? pool.writeFile(path, data, options)
        : Effect.suspend(() => {
          let fd: number | undefined
          try {
            // Opened like `open`, so a FIFO without a reader goes to the pool instead of blocking here.
            const opened = openWithoutBlocking(path, openFlags(options?.flag ?? "w", false), options?.mode)
            if (opened === undefined) return pool.writeFile(path, data, options)
            fd = opened.fd
            NFS.writeFileSync(fd, data)
            return Effect.void
          } catch (error) {
            return Effect.fail(failure("writeFile", path, error))
          } finally {
            if (fd !== undefined) NFS.closeSync(fd)
          }
        })
  })

/**
 * The direct `FileSystem`, on top of platform-node's for the calls it leaves
 * to the thread pool.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer: Layer.Layer<FileSystem.FileSystem> = Layer.effect(FileSystem.FileSystem)(
  Effect.map(Effect.service(FileSystem.FileSystem), make)
).pipe(Layer.provide(NodeFileSystem.layer))

/**
 * `@effect/platform-node`'s `FileSystem` as it is, every call on libuv's
 * thread pool, plus the non-blocking open (on the pool, its files reading
 * and writing on the pool) so the store can refuse special files there too.
 *
 * @category layers
 * @since 0.1.0
 */
export const threadpoolLayer: Layer.Layer<FileSystem.FileSystem> = Layer.effect(FileSystem.FileSystem)(
  Effect.map(
    Effect.service(FileSystem.FileSystem),
    (pool) => FileSystem.make({ ...pool, ...capabilities(true), ...pooledRealPath(pool) })
  )
).pipe(Layer.provide(NodeFileSystem.layer))
