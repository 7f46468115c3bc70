/**
 * An in-memory `FileSystem` with POSIX semantics and a crash model.
 *
 * The tree is made of inodes: directories map names to nodes, so `rename` is an
 * atomic pointer swap, an open handle keeps writing to its inode after the name
 * is unlinked or replaced, and hard links share data. Paths are resolved one
 * component at a time like the kernel does (a `..` after a symlink goes to the
 * target's parent, `file/..` is `ENOTDIR`, a trailing slash demands a
 * directory). Failures are `PlatformError`s with the same reason, method,
 * `pathOrDescriptor` and syscall as `NodeFileSystem` (see `Errno.ts`); the
 * conformance suite in `test/testing` runs the same bodies against both.
 *
 * What it does not model: permissions are stored and reported but never
 * enforced (the process may act as any `uid`, but behaves like root), there
 * is no size limit, times come from the `Clock` (the `TestClock` inside
 * `it.effect`), and recursive `readDirectory` does not descend into
 * symlinked directories (Node does). `copy` and a recursive `watch` are
 * outside what the store uses: they die with a message that says so.
 *
 * `watch` reports what Node's `fs.watch` reports on Linux, through Effect's
 * `watch` (a `rename` becomes `Create` or `Remove` by a `stat` of the name):
 * a watched directory reports each entry created, removed or renamed, and
 * each write, truncation or attribute change through one of its entries
 * (under the entry's current name, even after a rename or unlink of it);
 * a watched file reports its own writes. Watches are on inodes, as
 * inotify's are: a watched directory that is deleted reports its entries,
 * then itself twice, then nothing, and its stream stays open until its
 * scope closes. Events are delivered when the step that caused them is
 * done, one per change (Linux may fold repeats). `openWatchers` lists the
 * watches whose scope is still open.
 *
 * Special files (the hostile things a store may find at a path it expects
 * to be a regular file): `makeFifo`, `makeCharacterDevice` (`zero`,
 * `urandom`, `null`) and `makeSocket` create them, with Linux's answers to
 * `stat`, `lstat`, directory listings and opens: a non-blocking open of a
 * FIFO succeeds for reading and fails `ENXIO` for writing without a reader,
 * a read-write open succeeds, a socket never opens (`ENXIO`), a handle's
 * read of a FIFO is positional and fails `ESPIPE` (as Node's handles do).
 * Where Linux would hang — a blocking open of a FIFO with no peer, or
 * `readFile` of a FIFO — the model dies with a message saying "would block
 * forever", and a whole-file read of `zero` or `urandom` (which never reach
 * end of file) dies with "unbounded read": a test then fails at once instead
 * of hanging or exhausting memory. Positional reads of the devices return as
 * many zero or random bytes as asked. Data written into a FIFO is not
 * modelled (such a write dies saying so).
 *
 * Crash model: file data is durable only up to the last `File.sync` on a
 * handle to that file; a directory operation (create, mkdir, link, symlink,
 * mknod, unlink, rename) only once a directory it changed is fsynced (a
 * `File.sync` on a handle to that directory), as on ext4, XFS, btrfs and
 * APFS. A rename changes two entries and is lost or kept whole; across
 * directories, an fsync of either one makes it durable. Attributes (mode,
 * owner, times) are kept. `crashImage("process")` is what a SIGKILL leaves
 * (every completed write and operation, since the kernel keeps its caches);
 * `crashImage("power", loss)` is what a power cut leaves: each file holds its
 * last synced bytes (a never-synced file is empty), and of the directory
 * operations still pending (`pendingDirectoryOperations`), those `loss`
 * names are undone: each entry they changed names what the last kept one
 * left there, or, when all are lost, what it named before them. The log of
 * pending operations lives as long as the file system (an fsync of a
 * directory empties it of that directory's). A lost unlink brings a name
 * back; a file or directory whose every name is lost vanishes, its data and
 * contents with it. Both return a fresh file system with no open handles,
 * zeroed sync counters and nothing pending.
 *
 * Platform profile (`platform: "win32"`): Windows as Node's libuv shows it,
 * for running the store's bodies as they would run there. Names are looked
 * up case-insensitively (an existing entry keeps its spelling); modes are
 * what libuv reports (0666, or 0444 when `chmod` clears the write bit, which
 * is all `chmod` does; directories included, and no umask); `fchmod` of a
 * directory handle and `fsync` of a directory fail `EPERM`; opens ignore
 * `noFollow` and `directory` (Windows has no `O_NOFOLLOW`, `O_DIRECTORY`),
 * so a final symlink is followed; no process uid is reported; and the
 * `PlatformTraits` say so. Open handles have share-delete semantics, as
 * Node's opens ask for: an open file can be renamed or deleted, and its
 * name is gone at once (the POSIX delete of current NTFS); this is the
 * POSIX model unchanged. Paths stay `/`-separated.
 *
 * Why one module of this size: every `FileSystem` method (some forty, a few
 * lines each) works on the same private volume of inodes, handles, watches
 * and sync counters. Split up, the volume would become an internal other
 * modules share and could each leave inconsistent.
 *
 * @since 0.1.0
 */
// oxlint-disable max-lines -- the docblock says why this module stays whole
import { ByteSize, Clock, Context, Effect, FileSystem, Layer, Option, PlatformError, Queue, Stream } from "effect"
import type { Scope } from "effect"
import {
  type HandleChmodCapable,
  HandleChmodTypeId,
  type NonBlockingOpenCapable,
  NonBlockingOpenTypeId,
  type PlatformTraitsCapable,
  PlatformTraitsTypeId,
  POSIX_TRAITS,
  type ProcessUidCapable,
  ProcessUidTypeId,
  WIN32_TRAITS
} from "../io/NonBlockingOpen.js"
import { type ErrnoCode, errnoError } from "./Errno.js"

/**
 * Construction options for `makeMemoryFileSystem`.
 *
 * @category models
 * @since 0.1.0
 */
export interface MemoryFileSystemOptions {
  /** Directory that relative paths resolve against; created if missing. Default `"/"`. */
  readonly cwd?: string | undefined
  /** Bits cleared from the mode of every created file and directory. Default `0o022`. */
  readonly umask?: number | undefined
  /** Where `makeTempDirectory` creates directories; created if missing. Default `"/tmp"`. */
  readonly tmpdir?: string | undefined
  /** Files to start with (parents are created 0755, files 0644); their contents count as synced. */
  readonly files?: Readonly<Record<string, string | Uint8Array>> | undefined
  /**
   * The user id the process acts as: every node it creates is owned by it,
   * and the store checks its directories against it. Default 0; the
   * directories made at construction (`/`, `tmpdir`, `cwd`) are owned by 0.
   */
  readonly uid?: number | undefined
  /** The group id of the nodes the process creates. Default 0. */
  readonly gid?: number | undefined
  /** The platform profile: `"posix"` (Linux, the default) or `"win32"` (see the module documentation). */
  readonly platform?: MemoryPlatform | undefined
  /**
   * Look names up ignoring case, as APFS and NTFS do by default: a name
   * finds an entry spelled in another case, and `realPath` answers with the
   * spelling the entry was created with. Default `false`.
   */
  readonly caseInsensitive?: boolean | undefined
  /**
   * Store names decomposed (`"NFD"`, as HFS+ does) and look them up whatever
   * their normalization (as APFS does): `realPath` answers in NFD. Default:
   * names are bytes, as on Linux.
   */
  readonly normalization?: "NFD" | undefined
  /** How watches deliver their events. Default: inotify's way, at once and one per change. */
  readonly watchEvents?: WatchEventProfile | undefined
}

/**
 * The platform a memory file system behaves like.
 *
 * @category models
 * @since 0.1.0
 */
export type MemoryPlatform = "posix" | "win32"

/**
 * How a watch delivers events, for modelling platforms whose events are
 * hints: macOS's FSEvents delays them (its latency), folds several changes
 * of one name into one, and drops some (whenever a watch opens or closes,
 * or its buffer overflows, as Windows' `ReadDirectoryChangesW` can too).
 *
 * @category models
 * @since 0.1.0
 */
export interface WatchEventProfile {
  /** How long (on the `Clock`) an event waits before it is delivered, with any that follow it meanwhile. */
  readonly latencyMs?: number | undefined
  /** Whether the events a latency gathers are folded into one per name (the last one). */
  readonly coalesce?: boolean | undefined
  /** Whether to drop `event` of the watch of `watchedPath`; called once per event, in order. */
  readonly drop?: ((event: FileSystem.WatchEvent, watchedPath: string) => boolean) | undefined
}

/**
 * An FSEvents-like profile: 30 ms latency, coalesced, dropping what `drop`
 * says (nothing by default).
 *
 * @category constructors
 * @since 0.1.0
 */
export const darwinWatchEvents = (drop?: WatchEventProfile["drop"]): WatchEventProfile => ({
  latencyMs: 30,
  coalesce: true,
  drop
})

/**
 * The character devices the model can create: `/dev/zero` (endless zeros),
 * `/dev/urandom` (endless random bytes) and `/dev/null` (empty, swallows
 * writes).
 *
 * @category models
 * @since 0.1.0
 */
export type CharacterDeviceKind = "zero" | "urandom" | "null"

/**
 * What survives a simulated crash: `"process"` keeps every completed write,
 * `"power"` keeps only synced file data.
 *
 * @category models
 * @since 0.1.0
 */
export type CrashMode = "process" | "power"

/**
 * Which directory operations a `"power"` image loses, of those no directory
 * fsync had made durable (`pendingDirectoryOperations`): `"none"` (the
 * default), `"all"`, or the ones at the given indices.
 *
 * @category models
 * @since 0.1.0
 */
export type DirectoryLoss = "none" | "all" | { readonly lost: ReadonlyArray<number> }

/**
 * A directory operation no fsync of a directory it changed has made durable
 * yet, as `pendingDirectoryOperations` lists it.
 *
 * @category models
 * @since 0.1.0
 */
export interface PendingDirectoryOperation {
  /** Its position in the list, as a `DirectoryLoss` names it. */
  readonly index: number
  readonly method: "create" | "mkdir" | "link" | "symlink" | "mknod" | "unlink" | "rename"
  /** The entries it changed (for a rename, the source then the target), by their directory's path now. */
  readonly paths: ReadonlyArray<string>
}

/**
 * One node of the tree as `snapshot` reports it.
 *
 * @category models
 * @since 0.1.0
 */
export interface MemoryEntry {
  readonly path: string
  readonly type: "File" | "Directory" | "SymbolicLink" | "FIFO" | "CharacterDevice" | "Socket"
  /** Permission bits only (e.g. `0o600`); `File.Info.mode` adds the type bits. */
  readonly mode: number
  readonly ino: bigint
  /** The owner's user id. */
  readonly uid: number
  /** Character devices: which one. */
  readonly device?: CharacterDeviceKind
  /** Files: the current contents. */
  readonly data?: Uint8Array
  /** Files: the contents a power cut would leave. */
  readonly durable?: Uint8Array
  /** Symbolic links: the stored target. */
  readonly target?: string
}

/**
 * An open handle as `openDescriptors` reports it.
 *
 * @category models
 * @since 0.1.0
 */
export interface MemoryDescriptor {
  readonly fd: number
  readonly path: string
  readonly flag: FileSystem.OpenFlag
}

/**
 * A watcher as `openWatchers` reports it.
 *
 * @category models
 * @since 0.1.0
 */
export interface MemoryWatcherInfo {
  /** The watched path, absolute. */
  readonly path: string
  /** False once what it watches was deleted: it reports nothing more, but stays open until its scope closes. */
  readonly active: boolean
}

/**
 * A `FileSystem` plus the inspection and crash tools of the in-memory model.
 *
 * @category models
 * @since 0.1.0
 */
export interface MemoryFileSystemShape extends FileSystem.FileSystem {
  /** Every node at or below `under` (default `/`; the root itself is never listed), sorted by path. */
  readonly snapshot: (under?: string) => ReadonlyArray<MemoryEntry>
  /** How many times `File.sync` ran on handles opened at `path` (symlinks resolved at open time). */
  readonly syncCount: (path: string) => number
  /** Handles whose scope has not closed yet. */
  readonly openDescriptors: () => ReadonlyArray<MemoryDescriptor>
  /** Watchers (`watch` streams) whose scope has not closed yet, in the order they were made. */
  readonly openWatchers: () => ReadonlyArray<MemoryWatcherInfo>
  /**
   * A new file system holding what a crash of the given kind leaves behind;
   * a `"power"` image also loses the directory operations `loss` names
   * (default `"none"`; a `"process"` image ignores it).
   */
  readonly crashImage: (mode: CrashMode, loss?: DirectoryLoss) => MemoryFileSystemShape
  /** The directory operations a power cut now may lose, oldest first. */
  readonly pendingDirectoryOperations: () => ReadonlyArray<PendingDirectoryOperation>
  /** `mkfifo(path, mode)`: a named pipe (default mode 0644 before the umask); `EEXIST` if the path exists. */
  readonly makeFifo: (path: string, mode?: number) => Effect.Effect<void, PlatformError.PlatformError>
  /** `mknod` of a character device behaving like `/dev/<kind>` (mode 0666); `EEXIST` if the path exists. */
  readonly makeCharacterDevice: (
    path: string,
    kind: CharacterDeviceKind
  ) => Effect.Effect<void, PlatformError.PlatformError>
  /** A Unix socket file, as a `bind` leaves it (mode 0755 before the umask); `EEXIST` if the path exists. */
  readonly makeSocket: (path: string) => Effect.Effect<void, PlatformError.PlatformError>
}

interface Stamps {
  atime: number
  mtime: number
  birthtime: number
  uid: number
  gid: number
}

interface FileNode extends Stamps {
  readonly kind: "File"
  readonly ino: bigint
  mode: number
  links: number
  bytes: Uint8Array
  size: number
  durable: Uint8Array
}

interface DirNode extends Stamps {
  readonly kind: "Directory"
  readonly ino: bigint
  mode: number
  readonly entries: Map<string, Node>
}

interface LinkNode extends Stamps {
  readonly kind: "SymbolicLink"
  readonly ino: bigint
  mode: number
  links: number
  readonly target: string
}

interface SpecialNode extends Stamps {
  readonly kind: "FIFO" | "CharacterDevice" | "Socket"
  readonly ino: bigint
  mode: number
  links: number
  readonly device: CharacterDeviceKind | undefined
}

type Node = FileNode | DirNode | LinkNode | SpecialNode

type OpenNode = FileNode | DirNode | SpecialNode

/** A node `openNode` opened, and the entry it was found or created at. */
interface OpenedNode {
  readonly node: OpenNode
  readonly path: string
  readonly parent: DirNode | undefined
  readonly name: string
}

interface Handle {
  readonly fd: number
  readonly node: OpenNode
  readonly path: string
  /**
   * The directory entry the handle was opened through, where Linux reports
   * its writes: it follows a rename of that entry, and stays after an unlink.
   */
  parent: DirNode | undefined
  name: string
  readonly flag: FileSystem.OpenFlag
  readonly readable: boolean
  readonly writable: boolean
  readonly append: boolean
  position: bigint
  closed: boolean
}

interface Volume {
  readonly root: DirNode
  nextIno: bigint
  nextFd: number
  nameCounter: number
  readonly syncs: Map<string, number>
  readonly handles: Map<number, Handle>
  readonly cwd: string
  readonly umask: number
  readonly tmpdir: string
  uid: number
  gid: number
  readonly watchers: Map<number, MemoryWatcher>
  nextWatcherId: number
  readonly platform: MemoryPlatform
  /** What the step running now changed, reported to watchers once it is done. */
  readonly notices: Array<Notice>
  /** How a name compares with the entries' (case, normalization), when not byte for byte. */
  readonly fold: ((name: string) => string) | undefined
  /** The spelling a new entry is stored under. */
  readonly stored: (name: string) => string
  /** Directory operations no directory fsync has made durable yet, oldest first (see `crashImage`). */
  readonly pending: Array<DirectoryOperation>
  /** How watches deliver events; inotify's way when absent. */
  readonly watchEvents?: WatchEventProfile | undefined
}

/** One entry of a directory set by an operation: what it named before and after. */
interface EntryChange {
  readonly dir: DirNode
  readonly name: string
  readonly before: Node | undefined
  readonly after: Node | undefined
}

/**
 * A directory operation a power cut may lose, whole: every entry it changed
 * keeps its old value, or every one its new value (a rename is both its
 * unlink of the source and its link of the target).
 */
interface DirectoryOperation {
  readonly method: PendingDirectoryOperation["method"]
  changes: Array<EntryChange>
}

/**
 * One `watch` of a directory or file, on its inode as inotify watches: it
 * keeps reporting after a rename of what it watches, and falls silent once
 * that is deleted (the stream stays open, as Node's watcher does).
 */
interface MemoryWatcher {
  readonly id: number
  readonly path: string
  readonly node: Node
  /** Where reported names are looked up: the watched directory, or a watched file's directory. */
  readonly directory: string
  readonly deliver: (event: FileSystem.WatchEvent) => void
  active: boolean
}

/**
 * A change as inotify sees it, before Node turns it into an event: `rename`
 * (an entry created, removed or renamed) or `change` (data or attributes),
 * for an entry of a directory or for a watched node itself.
 */
type Notice =
  | { readonly on: "entry"; readonly directory: DirNode; readonly name: string; readonly kind: "rename" | "change" }
  | { readonly on: "self"; readonly node: Node; readonly kind: "rename" | "change"; readonly last: boolean }

interface Found {
  readonly found: true
  readonly node: Node
  readonly parent: DirNode | undefined
  readonly name: string
  readonly path: string
  readonly ancestors: ReadonlyArray<DirNode>
  readonly trailing: boolean
}

interface Missing {
  readonly found: false
  readonly parent: DirNode
  readonly name: string
  readonly path: string
  readonly ancestors: ReadonlyArray<DirNode>
  readonly trailing: boolean
}

// Thrown inside the synchronous core and turned into a PlatformError at the
// Effect boundary; `syscall` overrides the method's default when one call goes
// through several syscalls (readFile: open, then read).
class Errno {
  constructor(readonly code: ErrnoCode, readonly syscall?: string) {}
}

const raise = (code: ErrnoCode, syscall?: string): never => {
  throw new Errno(code, syscall)
}

const DEVICE = 1n
const BLOCK = 4096
const MAX_SYMLINK_HOPS = 40
const TYPE_BITS = {
  File: 0o100000,
  Directory: 0o040000,
  SymbolicLink: 0o120000,
  FIFO: 0o010000,
  CharacterDevice: 0o020000,
  Socket: 0o140000
} as const
/** `makedev(1, minor)` of the memory devices, as Linux numbers them. */
const DEVICE_NUMBERS: Record<CharacterDeviceKind, bigint> = { null: 259n, zero: 261n, urandom: 265n }
const NAME_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

const FLAGS: Record<FileSystem.OpenFlag, {
  readonly read: boolean
  readonly write: boolean
  readonly append: boolean
  readonly create: boolean
  readonly exclusive: boolean
  readonly truncate: boolean
}> = {
  "r": { read: true, write: false, append: false, create: false, exclusive: false, truncate: false },
  "r+": { read: true, write: true, append: false, create: false, exclusive: false, truncate: false },
  "w": { read: false, write: true, append: false, create: true, exclusive: false, truncate: true },
  "wx": { read: false, write: true, append: false, create: true, exclusive: true, truncate: true },
  "w+": { read: true, write: true, append: false, create: true, exclusive: false, truncate: true },
  "wx+": { read: true, write: true, append: false, create: true, exclusive: true, truncate: true },
  "a": { read: false, write: true, append: true, create: true, exclusive: false, truncate: false },
  "ax": { read: false, write: true, append: true, create: true, exclusive: true, truncate: false },
  "a+": { read: true, write: true, append: true, create: true, exclusive: false, truncate: false },
  "ax+": { read: true, write: true, append: true, create: true, exclusive: true, truncate: false }
}

const segments = (path: string): Array<string> => path.split("/").filter((segment) => segment !== "")

// Lexical normalization, used only where Node itself is lexical (mkdtemp
// templates) or for keys that users type (syncCount, snapshot).
const normalize = (path: string): string => {
  const absolute = path.startsWith("/")
  const out: Array<string> = []
  for (const segment of segments(path)) {
    if (segment === ".") continue
    if (segment === "..") {
      if (out.length > 0 && out[out.length - 1] !== "..") out.pop()
      else if (!absolute) out.push("..")
      continue
    }
    out.push(segment)
  }
  const joined = out.join("/")
  return absolute ? `/${joined}` : joined === "" ? "." : joined
}

const absoluteFrom = (cwd: string, path: string): string => normalize(path.startsWith("/") ? path : `${cwd}/${path}`)

const basenameOf = (path: string): string => path.slice(path.lastIndexOf("/") + 1)

const dirnameOf = (path: string): string => {
  const index = path.lastIndexOf("/")
  return index <= 0 ? (path.startsWith("/") ? "/" : ".") : path.slice(0, index)
}

const byteLength = (text: string): number => new TextEncoder().encode(text).length

const newStamps = (volume: Volume, now: number): Stamps => ({
  atime: now,
  mtime: now,
  birthtime: now,
  uid: volume.uid,
  gid: volume.gid
})

const allocIno = (volume: Volume): bigint => {
  const ino = volume.nextIno
  volume.nextIno = ino + 1n
  return ino
}

/** The mode libuv reports on Windows for a node given `mode`: only the write bit counts (read-only or not). */
const win32Mode = (mode: number): number => (mode & 0o200) === 0 ? 0o444 : 0o666

const newDirectory = (volume: Volume, mode: number, now: number): DirNode => ({
  kind: "Directory",
  ino: allocIno(volume),
  mode: volume.platform === "win32" ? 0o666 : mode,
  entries: new Map(),
  ...newStamps(volume, now)
})

const newFile = (volume: Volume, mode: number, now: number): FileNode => ({
  kind: "File",
  ino: allocIno(volume),
  mode: volume.platform === "win32" ? win32Mode(mode) : mode,
  links: 1,
  bytes: new Uint8Array(0),
  size: 0,
  durable: new Uint8Array(0),
  ...newStamps(volume, now)
})

const newSpecial = (
  volume: Volume,
  kind: SpecialNode["kind"],
  mode: number,
  device: CharacterDeviceKind | undefined,
  now: number
): SpecialNode => ({
  kind,
  ino: allocIno(volume),
  mode,
  links: 1,
  device,
  ...newStamps(volume, now)
})

const contents = (file: FileNode): Uint8Array => file.bytes.slice(0, file.size)

// Bytes past `size` are kept zeroed so that growing a file (truncate up, or a
// write past EOF) exposes a hole of zeros, as on disk.
const ensureCapacity = (file: FileNode, needed: number): void => {
  if (file.bytes.length >= needed) return
  let capacity = Math.max(64, file.bytes.length * 2)
  while (capacity < needed) capacity *= 2
  const next = new Uint8Array(capacity)
  next.set(file.bytes.subarray(0, file.size))
  file.bytes = next
}

const writeAt = (file: FileNode, position: number, data: Uint8Array, now: number): void => {
  ensureCapacity(file, position + data.length)
  file.bytes.set(data, position)
  file.size = Math.max(file.size, position + data.length)
  file.mtime = now
}

const resize = (file: FileNode, length: number, now: number): void => {
  if (length < file.size) file.bytes.fill(0, length, file.size)
  else ensureCapacity(file, length)
  file.size = length
  file.mtime = now
}

const sizeOf = (node: Node): number =>
  node.kind === "File"
    ? node.size
    : node.kind === "Directory"
    ? BLOCK
    : node.kind === "SymbolicLink"
    ? byteLength(node.target)
    : 0

const linkCount = (node: Node): number => {
  if (node.kind !== "Directory") return node.links
  let count = 2
  for (const child of node.entries.values()) if (child.kind === "Directory") count++
  return count
}

const infoOf = (node: Node): FileSystem.File.Info => {
  const size = sizeOf(node)
  return {
    type: node.kind,
    mtime: Option.some(new Date(node.mtime)),
    atime: Option.some(new Date(node.atime)),
    birthtime: Option.some(new Date(node.birthtime)),
    dev: DEVICE,
    ino: Option.some(node.ino),
    mode: TYPE_BITS[node.kind] | node.mode,
    nlink: Option.some(BigInt(linkCount(node))),
    uid: Option.some(node.uid),
    gid: Option.some(node.gid),
    rdev: Option.some(node.kind === "CharacterDevice" && node.device !== undefined ? DEVICE_NUMBERS[node.device] : 0n),
    size: ByteSize.bytes(size),
    blksize: Option.some(ByteSize.bytes(BLOCK)),
    blocks: Option.some(BigInt(Math.ceil(size / BLOCK) * (BLOCK / 512)))
  }
}

// The key of the entry `name` finds in `dir`: its own spelling where names
// compare byte for byte, else the existing entry's, else how a new one is stored.
const entryKey = (volume: Volume, dir: DirNode, name: string): string => {
  if (volume.fold === undefined || dir.entries.has(name)) return name
  const wanted = volume.fold(name)
  for (const key of dir.entries.keys()) if (volume.fold(key) === wanted) return key
  return volume.stored(name)
}

// Walks `input` component by component from the root. Intermediate symlinks
// are always followed; the final one only with `follow` or a trailing slash.
const resolve = (volume: Volume, input: string, follow: boolean): Found | Missing => {
  if (input === "") return raise("ENOENT")
  const absolute = input.startsWith("/") ? input : `${volume.cwd}/${input}`
  const trailing = input.endsWith("/") && segments(input).length > 0
  let pending = segments(absolute)
  let index = 0
  let hops = 0
  const stack: Array<{ readonly name: string; readonly dir: DirNode }> = []
  const top = (): DirNode => stack.length === 0 ? volume.root : stack[stack.length - 1].dir
  const pathOf = (name: string): string => `/${[...stack.map((entry) => entry.name), name].join("/")}`
  const ancestors = (): Array<DirNode> => [volume.root, ...stack.map((entry) => entry.dir)]
  while (index < pending.length) {
    const last = index === pending.length - 1
    if (pending[index] === ".") {
      index++
      continue
    }
    if (pending[index] === "..") {
      stack.pop()
      index++
      continue
    }
    const dir = top()
    const name = entryKey(volume, dir, pending[index])
    const child = dir.entries.get(name)
    if (child === undefined) {
      if (last) return { found: false, parent: dir, name, path: pathOf(name), ancestors: ancestors(), trailing }
      return raise("ENOENT")
    }
    if (child.kind === "SymbolicLink" && (!last || follow || trailing)) {
      if (++hops > MAX_SYMLINK_HOPS) return raise("ELOOP")
      if (child.target.startsWith("/")) stack.length = 0
      pending = [...segments(child.target), ...pending.slice(index + 1)]
      index = 0
      continue
    }
    if (last) {
      if (trailing && child.kind !== "Directory") return raise("ENOTDIR")
      return { found: true, node: child, parent: dir, name, path: pathOf(name), ancestors: ancestors(), trailing }
    }
    if (child.kind !== "Directory") return raise("ENOTDIR")
    stack.push({ name, dir: child })
    index++
  }
  // The path ended on a directory reference: "/", "." or "..".
  const self = stack.pop()
  if (self === undefined) {
    return { found: true, node: volume.root, parent: undefined, name: "", path: "/", ancestors: [], trailing }
  }
  return {
    found: true,
    node: self.dir,
    parent: top(),
    name: self.name,
    path: pathOf(self.name),
    ancestors: ancestors(),
    trailing
  }
}

const existing = (volume: Volume, path: string, follow: boolean): Found => {
  const result = resolve(volume, path, follow)
  return result.found ? result : raise("ENOENT")
}

// ---- watch notices: only recorded while someone watches ---------------------

const watching = (volume: Volume): boolean => volume.watchers.size > 0

const noticeEntry = (volume: Volume, directory: DirNode | undefined, name: string, kind: "rename" | "change") => {
  if (directory !== undefined && watching(volume)) volume.notices.push({ on: "entry", directory, name, kind })
}

const noticeSelf = (volume: Volume, node: Node, kind: "rename" | "change", last = false) => {
  if (watching(volume)) volume.notices.push({ on: "self", node, kind, last })
}

/**
 * Data or attributes of `node` changed through the entry `name` of `parent`:
 * a `change` for both (a watched directory's own attributes are reported as
 * `rename` by Node).
 */
const noticeChange = (volume: Volume, parent: DirNode | undefined, name: string, node: Node) => {
  if (!watching(volume)) return
  noticeEntry(volume, parent, name, "change")
  noticeSelf(volume, node, node.kind === "Directory" ? "rename" : "change")
}

/**
 * `node` is gone from the tree: a deleted file reports its link count
 * (`change`) then its deletion; a deleted directory, each entry it held
 * (as `rm -r` removes them) then its own deletion. Either is reported twice
 * (`IN_DELETE_SELF`, then `IN_IGNORED`), after which its watchers fall silent.
 */
const noticeDropped = (volume: Volume, node: Node) => {
  if (!watching(volume)) return
  if (node.kind === "Directory") {
    for (const [name, child] of node.entries) {
      noticeEntry(volume, node, name, "rename")
      if (child.kind === "Directory" || child.links <= 1) noticeDropped(volume, child)
    }
  } else {
    noticeSelf(volume, node, "change")
  }
  noticeSelf(volume, node, "rename")
  noticeSelf(volume, node, "rename", true)
}

// ---- directory durability: what a power cut may lose -----------------------

/** Records a directory operation as pending until a directory it changed is fsynced. */
const recordPending = (
  volume: Volume,
  method: PendingDirectoryOperation["method"],
  changes: Array<EntryChange>
): void => {
  volume.pending.push({ method, changes })
}

const methodOfCreation = (node: Node): PendingDirectoryOperation["method"] =>
  node.kind === "Directory"
    ? "mkdir"
    : node.kind === "SymbolicLink"
    ? "symlink"
    : node.kind === "File"
    ? node.links > 1 ? "link" : "create"
    : "mknod"

/**
 * An fsync of `dir`: every pending operation that changed it is durable
 * now (a rename across directories by an fsync of either, as on ext4). An
 * earlier pending operation no longer decides an entry a durable one set
 * later, so that entry is dropped from it.
 */
const commitDirectory = (volume: Volume, dir: DirNode): void => {
  const settled = new Map<DirNode, Set<string>>()
  const kept: Array<DirectoryOperation> = []
  for (let index = volume.pending.length - 1; index >= 0; index--) {
    const operation = volume.pending[index]
    if (operation.changes.some((change) => change.dir === dir)) {
      for (const change of operation.changes) {
        const names = settled.get(change.dir) ?? new Set<string>()
        names.add(change.name)
        settled.set(change.dir, names)
      }
      continue
    }
    operation.changes = operation.changes.filter((change) => settled.get(change.dir)?.has(change.name) !== true)
    if (operation.changes.length > 0) kept.push(operation)
  }
  volume.pending.length = 0
  volume.pending.push(...kept.reverse())
}

/** Where each directory of the tree is, for naming pending operations. */
const directoryPaths = (volume: Volume): Map<DirNode, string> => {
  const paths = new Map<DirNode, string>([[volume.root, ""]])
  const visit = (dir: DirNode, path: string): void => {
    for (const [name, child] of dir.entries) {
      if (child.kind === "Directory" && !paths.has(child)) {
        paths.set(child, `${path}/${name}`)
        visit(child, `${path}/${name}`)
      }
    }
  }
  visit(volume.root, "")
  return paths
}

const pendingOperations = (volume: Volume): ReadonlyArray<PendingDirectoryOperation> => {
  const paths = directoryPaths(volume)
  return volume.pending.map((operation, index) => ({
    index,
    method: operation.method,
    paths: operation.changes.map((change) => `${paths.get(change.dir) ?? "(gone)"}/${change.name}`)
  }))
}

/**
 * The entries a power cut changes back, per directory: for each entry a
 * pending operation changed, the value the last kept operation gave it, or
 * the one it had before the first of them when all of them are lost.
 */
const lostEntries = (volume: Volume, loss: DirectoryLoss): Map<DirNode, Map<string, Node | undefined>> => {
  const overrides = new Map<DirNode, Map<string, Node | undefined>>()
  if (loss === "none") return overrides
  const lost = loss === "all" ? undefined : new Set(loss.lost)
  volume.pending.forEach((operation, index) => {
    const kept = lost !== undefined && !lost.has(index)
    for (const change of operation.changes) {
      const entries = overrides.get(change.dir) ?? new Map<string, Node | undefined>()
      overrides.set(change.dir, entries)
      if (!entries.has(change.name)) entries.set(change.name, change.before)
      if (kept) entries.set(change.name, change.after)
    }
  })
  return overrides
}

const attach = (volume: Volume, parent: DirNode, name: string, node: Node, now: number): void => {
  recordPending(volume, methodOfCreation(node), [{ dir: parent, name, before: parent.entries.get(name), after: node }])
  parent.entries.set(name, node)
  parent.mtime = now
  noticeEntry(volume, parent, name, "rename")
}

const detach = (volume: Volume, parent: DirNode, name: string, now: number): void => {
  const node = parent.entries.get(name)
  recordPending(volume, "unlink", [{ dir: parent, name, before: node, after: undefined }])
  parent.entries.delete(name)
  parent.mtime = now
  noticeEntry(volume, parent, name, "rename")
  if (node === undefined) return
  if (node.kind !== "Directory") {
    node.links--
    if (node.links > 0) noticeSelf(volume, node, "change")
    else noticeDropped(volume, node)
  } else {
    noticeDropped(volume, node)
  }
}

const makeDirectoryPath = (volume: Volume, path: string, mode: number, now: number): void => {
  const absolute = absoluteFrom(volume.cwd, path)
  const parts = segments(absolute)
  for (let depth = 1; depth <= parts.length; depth++) {
    const prefix = `/${parts.slice(0, depth).join("/")}`
    const result = resolve(volume, prefix, true)
    if (result.found) {
      if (result.node.kind === "Directory") continue
      return raise(depth === parts.length ? "EEXIST" : "ENOTDIR")
    }
    attach(volume, result.parent, result.name, newDirectory(volume, mode, now), now)
  }
}

const uniqueName = (volume: Volume, length: number): string => {
  // A scrambled counter: names look arbitrary but every run produces the same ones.
  let state = (Math.imul(++volume.nameCounter, 0x9e3779b1) ^ 0x5bd1e995) >>> 0
  let name = ""
  for (let i = 0; i < length; i++) {
    state = (Math.imul(state ^ (state >>> 15), 0x2c1b3c6d) + i) >>> 0
    name += NAME_ALPHABET[state % NAME_ALPHABET.length]
  }
  return name
}

const cloneVolume = (volume: Volume, mode: CrashMode, loss: DirectoryLoss = "none"): Volume => {
  const copies = new Map<Node, Node>()
  const overrides = mode === "power" ? lostEntries(volume, loss) : new Map<DirNode, Map<string, Node | undefined>>()
  // Link counts are those of the image: a lost link or unlink changes them.
  const links = new Map<Node, number>()
  const copy = (node: Node): Node => {
    const known = copies.get(node)
    if (known !== undefined) return known
    switch (node.kind) {
      case "File": {
        const bytes = mode === "power" ? node.durable.slice() : contents(node)
        const file: FileNode = { ...node, bytes, size: bytes.length, durable: node.durable.slice() }
        copies.set(node, file)
        return file
      }
      case "SymbolicLink": {
        const link: LinkNode = { ...node }
        copies.set(node, link)
        return link
      }
      case "FIFO":
      case "CharacterDevice":
      case "Socket": {
        const special: SpecialNode = { ...node }
        copies.set(node, special)
        return special
      }
      case "Directory": {
        const dir: DirNode = { ...node, entries: new Map() }
        copies.set(node, dir)
        const entries = new Map(node.entries)
        for (const [name, value] of overrides.get(node) ?? []) {
          if (value === undefined) entries.delete(name)
          else entries.set(name, value)
        }
        for (const [name, child] of entries) {
          const copied = copy(child)
          links.set(copied, (links.get(copied) ?? 0) + 1)
          dir.entries.set(name, copied)
        }
        return dir
      }
    }
  }
  const root = copy(volume.root) as DirNode
  for (const [node, count] of links) if (node.kind !== "Directory") node.links = count
  return {
    root,
    nextIno: volume.nextIno,
    nextFd: volume.nextFd,
    nameCounter: volume.nameCounter,
    syncs: new Map(),
    handles: new Map(),
    cwd: volume.cwd,
    umask: volume.umask,
    tmpdir: volume.tmpdir,
    uid: volume.uid,
    gid: volume.gid,
    watchers: new Map(),
    nextWatcherId: 1,
    platform: volume.platform,
    notices: [],
    fold: volume.fold,
    stored: volume.stored,
    pending: []
  }
}

const badArgument = (method: string, description: string) =>
  Effect.fail(PlatformError.badArgument({ module: "FileSystem", method, description }))

const unsupported = (method: string) => Effect.die(new Error(`MemoryFileSystem does not implement ${method}`))

const fromVolume = (volume: Volume): MemoryFileSystemShape => {
  // Runs one synchronous step of the model at the current Clock time; an
  // Errno thrown inside becomes the PlatformError Node would report.
  const attempt = <A>(
    method: string,
    syscall: string,
    target: string | number,
    body: (now: number) => A,
    dest?: string
  ): Effect.Effect<A, PlatformError.PlatformError> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      // Node refuses such a path before any system call, as a bad argument.
      if ((typeof target === "string" && target.includes("\0")) || dest?.includes("\0")) {
        return badArgument(method, "The argument 'path' must be a string, Uint8Array, or URL without null bytes")
      }
      try {
        return Effect.succeed(body(now))
      } catch (error) {
        if (error instanceof Errno) {
          return Effect.fail(errnoError({
            code: error.code,
            method,
            syscall: error.syscall ?? syscall,
            pathOrDescriptor: target,
            dest
          }))
        }
        throw error
      } finally {
        deliverNotices()
      }
    })

  /**
   * Hands what the step just done changed to the watchers, as Node's
   * `fs.watch` callback and Effect's `watch` report it: a `change` is an
   * `Update`; a `rename` is a `Create` if the reported name now resolves
   * (following symlinks, as Effect's `stat` does) and a `Remove` if not.
   * Names are resolved once the step is done, as Node resolves them after
   * the fact.
   */
  const deliverNotices = (): void => {
    if (volume.notices.length === 0) return
    const notices = volume.notices.splice(0)
    for (const notice of notices) {
      // A copy: a delivery may start or end a watch while the others are told.
      // oxlint-disable-next-line unicorn/no-useless-spread
      for (const watcher of [...volume.watchers.values()]) {
        if (!watcher.active) continue
        let name: string
        if (notice.on === "entry") {
          if (watcher.node !== notice.directory) continue
          name = notice.name
        } else {
          if (watcher.node !== notice.node) continue
          name = basenameOf(watcher.path)
          if (notice.last) watcher.active = false
        }
        if (notice.kind === "change") {
          watcher.deliver({ _tag: "Update", path: name })
          continue
        }
        let exists = false
        try {
          exists = resolve(volume, `${watcher.directory}/${name}`, true).found
        } catch {
          exists = false
        }
        watcher.deliver({ _tag: exists ? "Create" : "Remove", path: name })
      }
    }
  }

  /**
   * A watcher's delivery under `profile`: straight to `offer` without one;
   * else dropped as the profile says, or held for its latency (a fiber of
   * the watch's scope) and then handed over, folded per name if asked.
   */
  const profiled = (
    profile: WatchEventProfile | undefined,
    watchedPath: string,
    offer: (event: FileSystem.WatchEvent) => void
  ): Effect.Effect<(event: FileSystem.WatchEvent) => void, never, Scope.Scope> =>
    Effect.gen(function*() {
      if (profile === undefined) return offer
      const latencyMs = profile.latencyMs ?? 0
      const held = yield* Queue.unbounded<FileSystem.WatchEvent>()
      yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
        const gathered = yield* Queue.takeAll(held)
        if (latencyMs > 0) yield* Effect.sleep(latencyMs)
        const batch = [...gathered, ...(yield* Queue.clear(held))]
        const byName = new Map(batch.map((event) => [event.path, event]))
        for (const event of profile.coalesce === true ? byName.values() : batch) offer(event)
      })))
      return (event) => {
        if (profile.drop?.(event, watchedPath) === true) return
        Queue.offerUnsafe(held, event)
      }
    })

  /**
   * `watch`: Effect's Node implementation over the model. The path is
   * `stat`ed first (so a missing one fails as Node's does), then watched by
   * inode until the stream's scope closes.
   */
  const watch = (path: string, options?: FileSystem.WatchOptions) => {
    if (options?.recursive === true) {
      return Stream.die(new Error("MemoryFileSystem does not model recursive watch"))
    }
    return Stream.unwrap(Effect.map(
      attempt("stat", "stat", path, () => existing(volume, path, true).node),
      (node) =>
        Stream.callback<FileSystem.WatchEvent, PlatformError.PlatformError>((queue) =>
          Effect.gen(function*() {
            const absolute = absoluteFrom(volume.cwd, path)
            const deliver = yield* profiled(volume.watchEvents, absolute, (event) => Queue.offerUnsafe(queue, event))
            return yield* Effect.acquireRelease(
              Effect.sync(() => {
                const watcher: MemoryWatcher = {
                  id: volume.nextWatcherId++,
                  path: absolute,
                  node,
                  directory: node.kind === "Directory" ? absolute : dirnameOf(absolute),
                  deliver,
                  active: true
                }
                volume.watchers.set(watcher.id, watcher)
                options?.onReady?.()
                return watcher
              }),
              (watcher) => Effect.sync(() => void volume.watchers.delete(watcher.id))
            )
          })
        )
    ))
  }

  /** Open handles on `node` that can read (`"read"`) or write (`"write"`): a FIFO's peers. */
  const peers = (node: Node, side: "read" | "write"): number => {
    let count = 0
    for (const handle of volume.handles.values()) {
      if (handle.node === node && !handle.closed && (side === "read" ? handle.readable : handle.writable)) count++
    }
    return count
  }

  /**
   * Where Linux would wait for good, the model dies instead, so a test that
   * reaches it fails at once rather than hanging.
   */
  const wouldBlock = (what: string): never => {
    throw new Error(`MemoryFileSystem: ${what} would block forever`)
  }

  /** Data through a FIFO is not modelled: nothing the store does needs it. */
  const unmodelled = (what: string): never => {
    throw new Error(`MemoryFileSystem does not model ${what}`)
  }

  /** Opens a FIFO or a device as Linux does (see the module documentation). */
  const openSpecial = (node: SpecialNode, path: string, flag: FileSystem.OpenFlag, nonBlocking: boolean): void => {
    if (node.kind === "Socket") return raise("ENXIO")
    if (node.kind !== "FIFO") return
    const { read, write } = FLAGS[flag]
    if (read && write) return
    if (read) {
      if (!nonBlocking && peers(node, "write") === 0) {
        wouldBlock(`opening the FIFO ${path} for reading without a writer`)
      }
      return
    }
    if (peers(node, "read") === 0) {
      if (nonBlocking) return raise("ENXIO")
      wouldBlock(`opening the FIFO ${path} for writing without a reader`)
    }
  }

  const openNode = (
    path: string,
    flag: FileSystem.OpenFlag,
    mode: number,
    askedNoFollow: boolean,
    now: number,
    nonBlocking = false,
    askedDirectory = false
  ): OpenedNode => {
    // Windows has neither flag: the open follows a final symlink and opens whatever is there.
    const noFollow = askedNoFollow && volume.platform !== "win32"
    const directory = askedDirectory && volume.platform !== "win32"
    const flags = FLAGS[flag]
    // O_CREAT|O_EXCL never follows a final symlink: the link itself "exists".
    const result = resolve(volume, path, !noFollow && !(flags.create && flags.exclusive))
    if (!result.found) {
      if (!flags.create) return raise("ENOENT")
      if (result.trailing) return raise("EISDIR")
      const file = newFile(volume, mode & 0o7777 & ~volume.umask, now)
      attach(volume, result.parent, result.name, file, now)
      return { node: file, path: result.path, parent: result.parent, name: result.name }
    }
    if (flags.create && flags.exclusive) return raise("EEXIST")
    const node = result.node
    // Linux checks O_DIRECTORY before O_NOFOLLOW on a final symlink.
    if (node.kind === "SymbolicLink") return raise(directory ? "ENOTDIR" : "ELOOP")
    const opened = { node, path: result.path, parent: result.parent, name: result.name }
    if (node.kind === "Directory") {
      if (flags.write) return raise("EISDIR")
      return { ...opened, node }
    }
    if (directory) return raise("ENOTDIR")
    if (node.kind !== "File") {
      // O_TRUNC means nothing to a FIFO or a device.
      openSpecial(node, result.path, flag, nonBlocking)
      return { ...opened, node }
    }
    if (flags.truncate) {
      resize(node, 0, now)
      noticeChange(volume, result.parent, result.name, node)
    }
    return { ...opened, node }
  }

  /** `mknod`: a special file at a path that must not exist yet. */
  const makeSpecial = (
    method: string,
    path: string,
    kind: SpecialNode["kind"],
    mode: number,
    device: CharacterDeviceKind | undefined
  ) =>
    attempt(method, "mknod", path, (now) => {
      const result = resolve(volume, path, false)
      if (result.found) return raise("EEXIST")
      if (result.trailing) return raise("ENOENT")
      attach(
        volume,
        result.parent,
        result.name,
        newSpecial(volume, kind, mode & 0o7777 & ~volume.umask, device, now),
        now
      )
    })

  const removeTree = (method: string, path: string, options?: {
    readonly recursive?: boolean | undefined
    readonly force?: boolean | undefined
  }) =>
    attempt(method, "lstat", path, (now) => {
      let result: Found | Missing
      try {
        result = resolve(volume, path, false)
      } catch (error) {
        if (error instanceof Errno && error.code === "ENOENT" && options?.force === true) return
        throw error
      }
      if (!result.found) {
        if (options?.force === true) return
        return raise("ENOENT")
      }
      if (result.node.kind === "Directory" && options?.recursive !== true) return raise("ERR_FS_EISDIR", "rm")
      if (result.parent === undefined) return raise("EPERM", "rm")
      detach(volume, result.parent, result.name, now)
    })

  const makeTemp = (method: string, options?: {
    readonly directory?: string | undefined
    readonly prefix?: string | undefined
  }) => {
    const directory = options?.directory === undefined ? volume.tmpdir : normalize(options.directory)
    const prefix = options?.prefix ?? ""
    const template = prefix === "" ? `${directory}/` : normalize(`${directory}/${prefix}`)
    return attempt(method, "mkdtemp", template, (now) => {
      for (;;) {
        const candidate = template + uniqueName(volume, 6)
        const result = resolve(volume, candidate, false)
        if (result.found) continue
        attach(volume, result.parent, result.name, newDirectory(volume, 0o700 & ~volume.umask, now), now)
        return candidate
      }
    })
  }

  const writeFile = (method: string, path: string, data: Uint8Array, options?: {
    readonly flag?: FileSystem.OpenFlag | undefined
    readonly mode?: number | undefined
  }) =>
    attempt(method, "open", path, (now) => {
      const flag = options?.flag ?? "w"
      const opened = openNode(path, flag, options?.mode ?? 0o666, false, now)
      const node = opened.node
      if (!FLAGS[flag].write || node.kind === "Directory") return raise("EBADF", "write")
      if (data.length === 0) return
      if (node.kind === "File") {
        writeAt(node, FLAGS[flag].append ? node.size : 0, data, now)
        return noticeChange(volume, opened.parent, opened.name, node)
      }
      if (node.kind === "FIFO") return unmodelled(`writing to the FIFO ${opened.path}`)
    })

  const makeTempFile = (method: string, options?: {
    readonly directory?: string | undefined
    readonly prefix?: string | undefined
    readonly suffix?: string | undefined
  }) =>
    Effect.flatMap(makeTemp(method, options), (directory) => {
      const path = `${directory}/${uniqueName(volume, 12)}${options?.suffix ?? ""}`
      return Effect.as(writeFile(method, path, new Uint8Array(0)), path)
    })

  const makeFile = (handle: Handle): FileSystem.File => {
    const ensureOpen = (syscall: string): void => {
      if (handle.closed) raise("EBADF", syscall)
    }
    const readInto = (buffer: Uint8Array, position: bigint): number => {
      ensureOpen("read")
      if (!handle.readable) return raise("EBADF")
      const node = handle.node
      if (node.kind === "Directory") return raise("EISDIR")
      if (node.kind !== "File") return readSpecial(node, buffer)
      const start = Number(position)
      if (start >= node.size) return 0
      const count = Math.min(buffer.length, node.size - start)
      buffer.set(node.bytes.subarray(start, start + count))
      return count
    }
    // Handle reads are positional (`pread`), which a FIFO refuses; the devices never run dry, except null.
    const readSpecial = (node: SpecialNode, buffer: Uint8Array): number => {
      if (node.kind === "FIFO") return raise("ESPIPE")
      if (buffer.length === 0) return 0
      if (node.device === "zero") {
        buffer.fill(0)
        return buffer.length
      }
      if (node.device === "urandom") {
        for (let offset = 0; offset < buffer.length; offset += 65536) {
          globalThis.crypto.getRandomValues(buffer.subarray(offset, Math.min(buffer.length, offset + 65536)))
        }
        return buffer.length
      }
      return 0
    }
    const writeChunk = (buffer: Uint8Array, now: number): number => {
      ensureOpen("write")
      const node = handle.node
      if (!handle.writable || node.kind === "Directory") return raise("EBADF")
      if (node.kind !== "File") {
        if (node.kind === "FIFO") return unmodelled(`writing to the FIFO ${handle.path}`)
        return buffer.length
      }
      if (buffer.length === 0) return 0
      // O_APPEND: every write lands at the current EOF and leaves the cursor alone.
      const position = handle.append ? node.size : Number(handle.position)
      writeAt(node, position, buffer, now)
      noticeChange(volume, handle.parent, handle.name, node)
      if (!handle.append) handle.position += BigInt(buffer.length)
      return buffer.length
    }
    // `fd` is not part of `File`, but Node's handles carry it too and
    // FaultFileSystem reads it to report failures against the descriptor.
    const file: FileSystem.File & HandleChmodCapable & { readonly fd: number } = {
      [FileSystem.FileTypeId]: FileSystem.FileTypeId,
      [HandleChmodTypeId]: (mode) =>
        attempt("chmod", "fchmod", handle.fd, () => {
          ensureOpen("fchmod")
          if (volume.platform === "win32") {
            if (handle.node.kind === "Directory") return raise("EPERM")
            handle.node.mode = win32Mode(mode)
            return noticeChange(volume, handle.parent, handle.name, handle.node)
          }
          handle.node.mode = mode & 0o7777
          noticeChange(volume, handle.parent, handle.name, handle.node)
        }),
      fd: handle.fd,
      stat: attempt("stat", "fstat", handle.fd, () => {
        ensureOpen("fstat")
        return infoOf(handle.node)
      }),
      sync: attempt("sync", "fsync", handle.fd, () => {
        ensureOpen("fsync")
        // Windows cannot flush a directory handle.
        if (volume.platform === "win32" && handle.node.kind === "Directory") return raise("EPERM")
        volume.syncs.set(handle.path, (volume.syncs.get(handle.path) ?? 0) + 1)
        if (handle.node.kind === "File") handle.node.durable = contents(handle.node)
        if (handle.node.kind === "Directory") commitDirectory(volume, handle.node)
      }),
      seek: (offset, from) =>
        Effect.suspend(() => {
          const position = from === "start" ? offset : handle.position + offset
          if (position < 0n) return badArgument("seek", "Cannot seek before the start of the file")
          handle.position = position
          return Effect.succeed(position)
        }),
      read: (buffer, options) => {
        const explicit = options?.position
        if (explicit !== undefined && explicit < 0n) {
          return badArgument("read", "Cannot read before the start of the file")
        }
        return attempt("read", "read", handle.fd, () => {
          const position = explicit ?? handle.position
          const count = readInto(buffer, position)
          if (explicit === undefined) handle.position = position + BigInt(count)
          return count
        })
      },
      readAlloc: (size, options) => {
        if (!Number.isInteger(size) || size < 0) return badArgument("readAlloc", "size must be a non-negative integer")
        const explicit = options?.position
        if (explicit !== undefined && explicit < 0n) {
          return badArgument("readAlloc", "Cannot read before the start of the file")
        }
        return attempt("readAlloc", "read", handle.fd, () => {
          const position = explicit ?? handle.position
          const buffer = new Uint8Array(size)
          const count = readInto(buffer, position)
          if (count === 0) return Option.none()
          if (explicit === undefined) handle.position = position + BigInt(count)
          return Option.some(count === size ? buffer : buffer.slice(0, count))
        })
      },
      truncate: (length) => {
        if (length !== undefined && (!Number.isInteger(length) || length < 0)) {
          return badArgument("truncate", "length must be a non-negative integer")
        }
        return attempt("truncate", "ftruncate", handle.fd, (now) => {
          ensureOpen("ftruncate")
          const node = handle.node
          if (!handle.writable || node.kind !== "File") return raise("EINVAL")
          const size = length ?? 0
          resize(node, size, now)
          noticeChange(volume, handle.parent, handle.name, node)
          if (!handle.append && handle.position > BigInt(size)) handle.position = BigInt(size)
        })
      },
      write: (buffer) => attempt("write", "write", handle.fd, (now) => writeChunk(buffer, now)),
      writeAll: (buffer) =>
        buffer.length === 0 ? Effect.void : attempt("writeAll", "write", handle.fd, (now) => {
          writeChunk(buffer, now)
        })
    }
    return file
  }

  const open = (path: string, options?: {
    readonly flag?: FileSystem.OpenFlag | undefined
    readonly mode?: number | undefined
    readonly noFollow?: boolean | undefined
    readonly nonBlocking?: boolean | undefined
    readonly directory?: boolean | undefined
  }): Effect.Effect<FileSystem.File, PlatformError.PlatformError, Scope.Scope> => {
    const flag = options?.flag ?? "r"
    const nonBlocking = options?.nonBlocking === true
    const acquire = attempt("open", "open", path, (now): Handle => {
      const opened = openNode(
        path,
        flag,
        options?.mode ?? 0o666,
        options?.noFollow === true,
        now,
        nonBlocking,
        options?.directory === true
      )
      const handle: Handle = {
        fd: volume.nextFd++,
        node: opened.node,
        path: opened.path,
        parent: opened.parent,
        name: opened.name,
        flag,
        readable: FLAGS[flag].read,
        writable: FLAGS[flag].write,
        append: FLAGS[flag].append,
        position: 0n,
        closed: false
      }
      volume.handles.set(handle.fd, handle)
      return handle
    })
    return Effect.map(
      Effect.acquireRelease(acquire, (handle) =>
        Effect.sync(() => {
          handle.closed = true
          volume.handles.delete(handle.fd)
        })),
      makeFile
    )
  }

  const base = FileSystem.make({
    access: (path) => attempt("access", "access", path, () => void existing(volume, path, true)),
    chmod: (path, mode) =>
      attempt("chmod", "chmod", path, () => {
        const found = existing(volume, path, true)
        found.node.mode = volume.platform === "win32" ? win32Mode(mode) : mode & 0o7777
        noticeChange(volume, found.parent, found.name, found.node)
      }),
    chown: (path, uid, gid) =>
      attempt("chown", "chown", path, () => {
        const found = existing(volume, path, true)
        found.node.uid = uid
        found.node.gid = gid
        noticeChange(volume, found.parent, found.name, found.node)
      }),
    copy: () => unsupported("copy"),
    copyFile: (fromPath, toPath) =>
      attempt("copyFile", "copyfile", fromPath, (now) => {
        const source = existing(volume, fromPath, true).node
        if (source.kind === "Directory") return raise("EISDIR")
        if (source.kind !== "File") return raise("EINVAL")
        const target = resolve(volume, toPath, true)
        if (target.found) {
          if (target.node.kind !== "File") return raise("EISDIR")
          if (target.node === source) return
          resize(target.node, 0, now)
          writeAt(target.node, 0, contents(source), now)
          target.node.mode = source.mode
          return noticeChange(volume, target.parent, target.name, target.node)
        }
        if (target.trailing) return raise("EISDIR")
        const file = newFile(volume, source.mode, now)
        attach(volume, target.parent, target.name, file, now)
        writeAt(file, 0, contents(source), now)
        if (file.size > 0) noticeChange(volume, target.parent, target.name, file)
      }, toPath),
    link: (fromPath, toPath) =>
      attempt("link", "link", fromPath, (now) => {
        const source = existing(volume, fromPath, false).node
        if (source.kind === "Directory") return raise("EPERM")
        const target = resolve(volume, toPath, false)
        if (target.found) return raise("EEXIST")
        source.links++
        attach(volume, target.parent, target.name, source, now)
      }, toPath),
    lstat: (path) => attempt("lstat", "lstat", path, () => infoOf(existing(volume, path, false).node)),
    makeDirectory: (path, options) =>
      attempt("makeDirectory", "mkdir", path, (now) => {
        const mode = (options?.mode ?? 0o777) & 0o1777 & ~volume.umask
        if (options?.recursive === true) return makeDirectoryPath(volume, path, mode, now)
        const result = resolve(volume, path, false)
        if (result.found) return raise("EEXIST")
        attach(volume, result.parent, result.name, newDirectory(volume, mode, now), now)
      }),
    makeTempDirectory: (options) => makeTemp("makeTempDirectory", options),
    makeTempDirectoryScoped: (options) =>
      Effect.acquireRelease(
        makeTemp("makeTempDirectoryScoped", options),
        (directory) => Effect.orDie(removeTree("makeTempDirectoryScoped", directory, { recursive: true, force: true }))
      ),
    makeTempFile: (options) => makeTempFile("makeTempFile", options),
    makeTempFileScoped: (options) =>
      Effect.acquireRelease(
        makeTempFile("makeTempFileScoped", options),
        (file) => Effect.orDie(removeTree("makeTempFileScoped", dirnameOf(file), { recursive: true, force: true }))
      ),
    open,
    readDirectory: (path, options) =>
      attempt("readDirectory", "scandir", path, () => {
        const node = existing(volume, path, true).node
        if (node.kind !== "Directory") return raise("ENOTDIR")
        const names: Array<string> = []
        // Breadth first like Node's recursive readdir; symlinked directories are listed, not entered.
        const queue: Array<{ readonly prefix: string; readonly dir: DirNode }> = [{ prefix: "", dir: node }]
        for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
          for (const name of [...next.dir.entries.keys()].sort()) {
            const child = next.dir.entries.get(name)!
            const relative = next.prefix + name
            names.push(relative)
            if (options?.recursive === true && child.kind === "Directory") {
              queue.push({ prefix: `${relative}/`, dir: child })
            }
          }
        }
        return names
      }),
    readDirectoryEntries: (path) =>
      attempt("readDirectoryEntries", "scandir", path, () => {
        const node = existing(volume, path, true).node
        if (node.kind !== "Directory") return raise("ENOTDIR")
        return [...node.entries.keys()].sort().map((name) => ({ name, type: node.entries.get(name)!.kind }))
      }),
    readFile: (path) =>
      attempt("readFile", "open", path, (now) => {
        const opened = openNode(path, "r", 0o666, false, now)
        const node = opened.node
        if (node.kind === "Directory") return raise("EISDIR", "read")
        if (node.kind === "File") return contents(node)
        if (node.kind === "FIFO") return wouldBlock(`reading the FIFO ${opened.path} to its end`)
        if (node.device === "null") return new Uint8Array(0)
        throw new Error(`MemoryFileSystem: unbounded read of ${opened.path} (/dev/${node.device} never ends)`)
      }),
    readLink: (path) =>
      attempt("readLink", "readlink", path, () => {
        const node = existing(volume, path, false).node
        return node.kind === "SymbolicLink" ? node.target : raise("EINVAL")
      }),
    realPath: (path) =>
      attempt("realPath", "lstat", path, () => {
        const result = resolve(volume, path, true)
        if (result.found) return result.path
        // Node's realpath walks with lstat, then stats the final link target.
        const unfollowed = resolve(volume, path, false)
        return raise("ENOENT", unfollowed.found && unfollowed.node.kind === "SymbolicLink" ? "stat" : "lstat")
      }),
    remove: (path, options) => removeTree("remove", path, options),
    rename: (oldPath, newPath) =>
      attempt("rename", "rename", oldPath, (now) => {
        const source = existing(volume, oldPath, false)
        const target = resolve(volume, newPath, false)
        if (source.parent === undefined) return raise("EBUSY")
        const node = source.node
        if (target.trailing && node.kind !== "Directory") return raise("ENOTDIR")
        if (target.found) {
          if (target.node === node) return
          if (target.parent === undefined) return raise("EBUSY")
          if (node.kind === "Directory") {
            if (target.node.kind !== "Directory") return raise("ENOTDIR")
            if (target.node.entries.size > 0) return raise("ENOTEMPTY")
          } else if (target.node.kind === "Directory") {
            return raise("EISDIR")
          }
        }
        if (node.kind === "Directory" && target.ancestors.includes(node)) return raise("EINVAL")
        // The replaced entry is dropped and the new one attached in one step, so
        // no observer ever sees the target name missing.
        const replaced = target.found ? target.node : undefined
        if (replaced !== undefined && replaced.kind !== "Directory") replaced.links--
        recordPending(volume, "rename", [
          { dir: source.parent, name: source.name, before: node, after: undefined },
          { dir: target.parent!, name: target.name, before: replaced, after: node }
        ])
        target.parent!.entries.set(target.name, node)
        target.parent!.mtime = now
        source.parent.entries.delete(source.name)
        source.parent.mtime = now
        // Handles report their writes where their entry is now, as Linux's dentries do.
        for (const handle of volume.handles.values()) {
          if (handle.node === node && handle.parent === source.parent && handle.name === source.name) {
            handle.parent = target.parent
            handle.name = target.name
          }
        }
        noticeEntry(volume, source.parent, source.name, "rename")
        noticeEntry(volume, target.parent, target.name, "rename")
        noticeSelf(volume, node, "rename")
        if (replaced !== undefined) {
          if (replaced.kind === "Directory" || replaced.links === 0) noticeDropped(volume, replaced)
          else noticeSelf(volume, replaced, "change")
        }
      }, newPath),
    stat: (path) => attempt("stat", "stat", path, () => infoOf(existing(volume, path, true).node)),
    symlink: (target, path) =>
      attempt("symlink", "symlink", target, (now) => {
        const result = resolve(volume, path, false)
        if (result.found) return raise("EEXIST")
        const link: LinkNode = {
          kind: "SymbolicLink",
          ino: allocIno(volume),
          mode: 0o777,
          links: 1,
          target,
          ...newStamps(volume, now)
        }
        attach(volume, result.parent, result.name, link, now)
      }, path),
    truncate: (path, length) =>
      attempt("truncate", "open", path, (now) => {
        const opened = openNode(path, "r+", 0o666, false, now)
        if (opened.node.kind === "Directory") return raise("EISDIR")
        if (opened.node.kind !== "File") return raise("EINVAL")
        if (length !== undefined && length < 0) return raise("EINVAL", "ftruncate")
        resize(opened.node, length ?? 0, now)
        noticeChange(volume, opened.parent, opened.name, opened.node)
      }),
    utimes: (path, atime, mtime) =>
      attempt("utime", "utime", path, () => {
        const found = existing(volume, path, true)
        const node = found.node
        // Node reads numeric times as seconds since the epoch.
        node.atime = typeof atime === "number" ? atime * 1000 : atime.getTime()
        node.mtime = typeof mtime === "number" ? mtime * 1000 : mtime.getTime()
        noticeChange(volume, found.parent, found.name, node)
      }),
    watch,
    writeFile: (path, data, options) => writeFile("writeFile", path, data, options)
  })

  const snapshot = (under?: string): ReadonlyArray<MemoryEntry> => {
    const start = absoluteFrom(volume.cwd, under ?? "/")
    let origin: Found | Missing
    try {
      origin = resolve(volume, start, false)
    } catch {
      return []
    }
    if (!origin.found) return []
    const entries: Array<MemoryEntry> = []
    const visit = (path: string, node: Node): void => {
      switch (node.kind) {
        case "File":
          entries.push({
            path,
            type: "File",
            mode: node.mode,
            ino: node.ino,
            uid: node.uid,
            data: contents(node),
            durable: node.durable.slice()
          })
          return
        case "SymbolicLink":
          entries.push({
            path,
            type: "SymbolicLink",
            mode: node.mode,
            ino: node.ino,
            uid: node.uid,
            target: node.target
          })
          return
        case "FIFO":
        case "CharacterDevice":
        case "Socket":
          entries.push({
            path,
            type: node.kind,
            mode: node.mode,
            ino: node.ino,
            uid: node.uid,
            ...(node.device === undefined ? {} : { device: node.device })
          })
          return
        case "Directory":
          entries.push({ path, type: "Directory", mode: node.mode, ino: node.ino, uid: node.uid })
          for (const name of [...node.entries.keys()].sort()) {
            visit(path === "/" ? `/${name}` : `${path}/${name}`, node.entries.get(name)!)
          }
      }
    }
    visit(origin.path, origin.node)
    return entries.filter((entry) => entry.path !== "/")
  }

  const capabilities: NonBlockingOpenCapable & ProcessUidCapable & PlatformTraitsCapable = {
    [NonBlockingOpenTypeId]: (path, options) =>
      open(path, {
        flag: options.flag,
        mode: options.mode,
        noFollow: options.noFollow,
        directory: options.directory,
        nonBlocking: true
      }),
    // Windows has no uid to check ownership against.
    [ProcessUidTypeId]: () => volume.platform === "win32" ? undefined : volume.uid,
    [PlatformTraitsTypeId]: volume.platform === "win32" ? WIN32_TRAITS : POSIX_TRAITS
  }

  return {
    ...base,
    ...capabilities,
    makeFifo: (path, mode) => makeSpecial("makeFifo", path, "FIFO", mode ?? 0o644, undefined),
    makeCharacterDevice: (path, kind) => makeSpecial("makeCharacterDevice", path, "CharacterDevice", 0o666, kind),
    makeSocket: (path) => makeSpecial("makeSocket", path, "Socket", 0o755, undefined),
    snapshot,
    syncCount: (path) => volume.syncs.get(absoluteFrom(volume.cwd, path)) ?? 0,
    openDescriptors: () => [...volume.handles.values()].map(({ fd, flag, path }) => ({ fd, path, flag })),
    openWatchers: () => [...volume.watchers.values()].map(({ active, path }) => ({ path, active })),
    crashImage: (mode, loss) => fromVolume(cloneVolume(volume, mode, loss)),
    pendingDirectoryOperations: () => pendingOperations(volume)
  }
}

const nameRules = (options: MemoryFileSystemOptions | undefined): Pick<Volume, "fold" | "stored"> => {
  // Windows' names compare without regard to case unless told otherwise, as NTFS's do by default.
  const caseInsensitive = options?.caseInsensitive ?? options?.platform === "win32"
  const decomposed = options?.normalization === "NFD"
  if (!caseInsensitive && !decomposed) return { fold: undefined, stored: (name) => name }
  return {
    // Decomposed first, so a case mapping that composes (or not) compares alike.
    fold: (name) => caseInsensitive ? name.normalize("NFD").toLowerCase().normalize("NFD") : name.normalize("NFD"),
    stored: decomposed ? (name) => name.normalize("NFD") : (name) => name
  }
}

/**
 * Creates an empty in-memory file system (holding only `/`, the `tmpdir` and
 * the `cwd`, plus any `files` given).
 *
 * **Details**
 *
 * Every method of `FileSystem` behaves like `NodeFileSystem` on Linux, failing
 * with the same `PlatformError` reasons; `copy` and a recursive `watch` die
 * as unimplemented. The derived methods (`exists`, `readFileString`,
 * `writeFileString`, `stream`, `sink`, `glob`) come from `FileSystem.make`,
 * exactly as in the Node layer.
 *
 * **Gotchas**
 *
 * Mode bits are never enforced, `File.Info.dev` is always `1n`, and times come
 * from the `Clock` service, so under `it.effect` they follow the `TestClock`.
 * With `caseInsensitive` or `normalization`, names are matched as a Darwin
 * volume matches them; `readDirectory` lists the stored spellings.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeMemoryFileSystem = (options?: MemoryFileSystemOptions): MemoryFileSystemShape => {
  const umask = options?.umask ?? 0o022
  const platform = options?.platform ?? "posix"
  const root: DirNode = {
    kind: "Directory",
    ino: 2n,
    mode: platform === "win32" ? 0o666 : 0o755,
    entries: new Map(),
    atime: 0,
    mtime: 0,
    birthtime: 0,
    uid: 0,
    gid: 0
  }
  const cwd = normalize(options?.cwd === undefined ? "/" : `/${options.cwd}`)
  const volume: Volume = {
    root,
    nextIno: 3n,
    nextFd: 3,
    nameCounter: 0,
    syncs: new Map(),
    handles: new Map(),
    cwd,
    umask,
    tmpdir: normalize(`/${options?.tmpdir ?? "/tmp"}`),
    // The tree made here belongs to root; what the process makes from now on, to its uid.
    uid: 0,
    gid: 0,
    watchers: new Map(),
    nextWatcherId: 1,
    platform,
    notices: [],
    ...nameRules(options),
    pending: [],
    watchEvents: options?.watchEvents
  }
  makeDirectoryPath(volume, volume.tmpdir, 0o755, 0)
  if (volume.tmpdir === "/tmp" && platform === "posix") (root.entries.get("tmp") as DirNode).mode = 0o1777
  makeDirectoryPath(volume, cwd, 0o755, 0)
  volume.uid = options?.uid ?? 0
  volume.gid = options?.gid ?? 0
  for (const [path, data] of Object.entries(options?.files ?? {})) {
    const absolute = absoluteFrom(cwd, path)
    makeDirectoryPath(volume, dirnameOf(absolute), 0o755, 0)
    const result = resolve(volume, absolute, true)
    if (result.found) throw new Error(`MemoryFileSystem: initial file ${absolute} clashes with an existing path`)
    const file = newFile(volume, 0o644, 0)
    writeAt(file, 0, typeof data === "string" ? new TextEncoder().encode(data) : data, 0)
    file.durable = contents(file)
    attach(volume, result.parent, result.name, file, 0)
  }
  // The tree a file system starts with is on disk already.
  volume.pending.length = 0
  return fromVolume(volume)
}

/**
 * The in-memory file system as a service, so tests can reach `snapshot`,
 * `syncCount` and `crashImage` next to the plain `FileSystem`.
 *
 * @category services
 * @since 0.1.0
 */
export class MemoryFileSystem extends Context.Service<MemoryFileSystem, MemoryFileSystemShape>()(
  "rarebit-store/testing/MemoryFileSystem"
) {
  /**
   * Provides `FileSystem` and `MemoryFileSystem` from one existing instance,
   * e.g. a `crashImage` to "restart" a program on.
   *
   * @category layers
   * @since 0.1.0
   */
  static readonly layerFrom = (fs: MemoryFileSystemShape): Layer.Layer<FileSystem.FileSystem | MemoryFileSystem> =>
    Layer.succeedContext(Context.make(FileSystem.FileSystem, fs).pipe(Context.add(MemoryFileSystem, fs)))

  /**
   * Like `layer`, with construction options.
   *
   * @category layers
   * @since 0.1.0
   */
  static readonly layerWith = (
    options: MemoryFileSystemOptions
  ): Layer.Layer<FileSystem.FileSystem | MemoryFileSystem> =>
    Layer.syncContext(() => {
      const fs = makeMemoryFileSystem(options)
      return Context.make(FileSystem.FileSystem, fs).pipe(Context.add(MemoryFileSystem, fs))
    })

  /**
   * A fresh, empty in-memory file system on every build.
   *
   * @category layers
   * @since 0.1.0
   */
  static readonly layer: Layer.Layer<FileSystem.FileSystem | MemoryFileSystem> = MemoryFileSystem.layerWith({})
}
