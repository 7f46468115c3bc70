/**
 * Runs a bundled entry of this package (the `rarebit-store` executable, the
 * Promise API) with a V8 code cache, so that a new process does not compile
 * the same code again.
 *
 * The build (`scripts/bundle.mjs`) turns an entry into one CommonJS file,
 * `<entry>.bundle.cjs`, holding the entry, this package's modules and the
 * Effect modules they use, and replaces the entry's own module with a
 * launcher: this module's code and a call to {@link loadBundle}. The bundle
 * is compiled as a `vm.Script` in the process's own context (the same
 * globals and built-in classes as the caller), wrapped in the function Node
 * wraps CommonJS modules in.
 *
 * Why not Node's `module.enableCompileCache()`: Node writes its cache when
 * it compiles a module, before the module runs, so the cache holds only what
 * V8 compiled eagerly, and every function the program calls is compiled
 * again in every process. `createCachedData()` on a script that has run
 * holds every function that run compiled. It works on Node 20 too, and it
 * changes nothing for the other modules of the caller's program. Measured
 * on Node 22.23 with the bundle `require`d under `enableCompileCache`:
 * Node's cache of the executable's bundle is half the size of this one
 * (431 against 873 KB), and `current --json` costs 1.56× the reference's
 * CPU time against 1.32× with this loader (no cache: 1.9×), over the 1.5×
 * the cold-start row allows.
 *
 * Guarantees: a cache only ever saves compile time. A cache file is used only
 * for the bundle it was made from (the build's content hash, the file's size
 * and modification time) on the same Node version and architecture, and V8
 * rejects data made under other flags. A cache that is missing or rejected is
 * written anew when the process exits, to a temporary name that is then
 * renamed, so no reader ever sees part of a file; a directory keeps the four
 * newest caches of a bundle for each Node version. Anything else that goes
 * wrong (no home for the cache, a directory that other users could write
 * to, a failed write) means compiling from source, as without a cache, and
 * is never reported. A process killed before it exits writes no cache.
 *
 * Where: `RAREBIT_STORE_CODE_CACHE` names the directory (`off` or `0`
 * disables the cache); by default `rarebit-store-code-cache-<uid>` under the
 * system's temporary directory. `NODE_DISABLE_COMPILE_CACHE` disables it
 * too, as it does Node's own.
 *
 * @since 0.1.0
 */
import type { Script as VmScript } from "node:vm"

// Built-in modules through `process.getBuiltinModule`, not `import`: an ESM
// import of a built-in builds a module facade of all its exports, which cost
// more (about 2 ms for these five) than the rest of this module.
const fs = process.getBuiltinModule("node:fs")
const os = process.getBuiltinModule("node:os")
const path = process.getBuiltinModule("node:path")
const url = process.getBuiltinModule("node:url")
const vm = process.getBuiltinModule("node:vm")

/** The parameters Node gives a CommonJS module, in Node's order. */
const WRAPPER_HEAD = "(function (exports, require, module, __filename, __dirname) {\n"
const WRAPPER_TAIL = "\n})"

const disabled = (value: string | undefined) => value === "off" || value === "0" || value === ""

/**
 * The cache directory, created if need be, or `undefined` when there is to
 * be no cache or the directory is not this user's alone (another user could
 * plant code in it).
 */
const cacheDirectory = (): string | undefined => {
  const configured = process.env.RAREBIT_STORE_CODE_CACHE
  const nodeDisabled = process.env.NODE_DISABLE_COMPILE_CACHE
  if (disabled(configured) || (nodeDisabled !== undefined && nodeDisabled !== "")) return undefined
  const uid = process.getuid?.()
  const directory = configured ??
    path.join(os.tmpdir(), `rarebit-store-code-cache${uid === undefined ? "" : `-${uid}`}`)
  try {
    fs.mkdirSync(directory, { recursive: true, mode: 0o700 })
    const info = fs.lstatSync(directory)
    if (!info.isDirectory()) return undefined
    if (uid !== undefined && (info.uid !== uid || (info.mode & 0o022) !== 0)) return undefined
    return directory
  } catch {
    return undefined
  }
}

const readCache = (file: string): Buffer | undefined => {
  try {
    return fs.readFileSync(file)
  } catch {
    return undefined
  }
}

/**
 * How many caches of one bundle (and Node) a directory keeps: each build of
 * the bundle has its own, and two installed copies used in turn should not
 * evict each other's.
 */
const CACHES_KEPT = 4

/**
 * Writes the script's cache for the next process, and removes the oldest
 * caches of the same bundle. It runs as the process exits, so it never
 * throws: an exception here would end the process with exit code 1.
 */
const writeCache = (script: VmScript, directory: string, file: string, prefix: string) => {
  const temporary = `${file}.${process.pid}.tmp`
  try {
    fs.writeFileSync(temporary, script.createCachedData(), { mode: 0o600 })
    fs.renameSync(temporary, file)
    const caches = fs.readdirSync(directory)
      .filter((name) => name.startsWith(prefix) && name.endsWith(".v8cache"))
      .map((name) => ({ name, written: fs.lstatSync(path.join(directory, name)).mtimeMs }))
      .sort((a, b) => b.written - a.written)
    for (const { name } of caches.slice(CACHES_KEPT)) fs.rmSync(path.join(directory, name), { force: true })
  } catch {
    try {
      fs.rmSync(temporary, { force: true })
    } catch {
      // Nothing was written, or the directory refuses us: the next run tries again.
    }
  }
}

/**
 * Frees a buffer's bytes now rather than at some later collection: the
 * bundle's text and its cache are each a fifth or so of the heap of a
 * process that has just loaded the bundle, and neither is needed once the
 * text is decoded and the script built. Running the bundle makes young
 * collections, which would move a buffer still referenced to the old
 * generation, where it stays until a full one. Where
 * `ArrayBuffer.prototype.transfer` exists (Node 22), transferring to a
 * length of 0 releases the memory at once; elsewhere the buffer is only
 * unreachable, which the next young collection frees. Only a buffer that
 * owns its whole `ArrayBuffer` is released: a small file's may share
 * Node's pool with other buffers.
 */
const release = (bytes: Buffer) => {
  const whole = bytes.buffer as ArrayBuffer & { transfer?: (length: number) => ArrayBuffer }
  if (whole.transfer !== undefined && bytes.byteOffset === 0 && bytes.byteLength === whole.byteLength) {
    whole.transfer(0)
  }
}

/**
 * The bundle's code wrapped as a CommonJS module, and the size and
 * modification time of the file it was read from.
 *
 * The file is read into one buffer between the wrapper's head and tail,
 * and decoded once: the wrapped text is a single string. Concatenating the
 * file's text with the wrapper instead makes V8 flatten the result into a
 * second copy when it compiles it, and a string this size lives in the
 * large-object space, where the first copy stays until a full collection
 * (the size of the bundle, some 0.3 MiB, in a process that has just loaded
 * it).
 */
const readBundle = (filename: string) => {
  const descriptor = fs.openSync(filename, "r")
  try {
    const { mtimeMs, size } = fs.fstatSync(descriptor)
    const bytes = Buffer.allocUnsafeSlow(WRAPPER_HEAD.length + size + WRAPPER_TAIL.length)
    bytes.write(WRAPPER_HEAD, 0, "latin1")
    let read = 0
    while (read < size) {
      const count = fs.readSync(descriptor, bytes, WRAPPER_HEAD.length + read, size - read, read)
      if (count === 0) break
      read += count
    }
    const end = bytes.write(WRAPPER_TAIL, WRAPPER_HEAD.length + read, "latin1") + WRAPPER_HEAD.length + read
    // The build writes ASCII only, so Latin-1 decodes it exactly, and faster than UTF-8.
    const code = bytes.toString("latin1", 0, end)
    release(bytes)
    return { mtimeMs, size, code }
  } finally {
    fs.closeSync(descriptor)
  }
}

/**
 * The bundle compiled with the cache at `cacheFile` if there is one V8
 * accepts. In a function of its own, so that nothing refers to the cache's
 * bytes once it returns.
 */
const compile = (code: string, filename: string, cacheFile: string | undefined) => {
  const cachedData = cacheFile === undefined ? undefined : readCache(cacheFile)
  const script = new vm.Script(code, {
    filename,
    // The wrapper's first line is not the bundle's: positions stay the file's.
    lineOffset: -1,
    ...(cachedData === undefined ? {} : { cachedData })
  })
  const cacheUsed = cachedData !== undefined && script.cachedDataRejected !== true
  if (cachedData !== undefined) release(cachedData)
  return { script, cacheUsed }
}

/**
 * `require` for the bundle, which imports nothing but Node's built-in
 * modules (the build checks): without `createRequire`, which would load
 * Node's CommonJS resolution for nothing.
 */
const requireBuiltin = (id: string): unknown => {
  const builtin = process.getBuiltinModule(id)
  if (builtin === undefined) {
    throw new Error(`a bundle of rarebit-store asked for ${id}, which is not a built-in module`)
  }
  return builtin
}

/**
 * Which cache a run uses, and what decides what it holds.
 *
 * @category models
 * @since 0.1.0
 */
export interface BundleCacheKey {
  /** The hash of the bundle's content, as built. */
  readonly build: string
  /**
   * The kind of run, when runs of one bundle differ a lot in what they
   * compile (the executable's commands): each kind has a cache of its own,
   * made by its first run.
   */
  readonly variant?: string | undefined
}

/**
 * Runs the bundle at `bundle` (a CommonJS file written by the build) and
 * returns its exports.
 *
 * **Details**
 *
 * A cache holds what the run that wrote it compiled; what later runs use
 * beyond that is compiled as it would be without a cache.
 *
 * Under `--enable-source-maps` (or `process.setSourceMapsEnabled(true)`
 * before the entry is imported) the bundle is `require`d as the CommonJS
 * module it is, without a cache: Node applies source maps to the modules it
 * loads itself, so stack traces then point into `src/`.
 *
 * @category loading
 * @since 0.1.0
 */
export const loadBundle = (bundle: URL, key: BundleCacheKey): Record<string, unknown> => {
  const filename = url.fileURLToPath(bundle)
  // Node maps the stack traces of the modules it loads, not of `vm` scripts.
  if (process.sourceMapsEnabled) {
    return process.getBuiltinModule("node:module").createRequire(filename)(filename) as Record<string, unknown>
  }
  const { code, mtimeMs, size } = readBundle(filename)
  const directory = cacheDirectory()
  // Caches for other Node versions stay: one machine may run the bundle on several.
  const prefix = `${path.basename(filename)}-${key.variant ?? "all"}-${process.version}-${process.arch}-`
  const cacheFile = directory === undefined
    ? undefined
    : path.join(directory, `${prefix}${key.build}-${size}-${Math.trunc(mtimeMs)}.v8cache`)
  const { script, cacheUsed } = compile(code, filename, cacheFile)
  if (cacheFile !== undefined && !cacheUsed) {
    process.once("exit", () => writeCache(script, directory!, cacheFile, prefix))
  }
  const module = { exports: {} as Record<string, unknown> }
  const wrapped = script.runInThisContext() as (
    exports: Record<string, unknown>,
    require: (id: string) => unknown,
    module: { exports: Record<string, unknown> },
    __filename: string,
    __dirname: string
  ) => void
  wrapped(module.exports, requireBuiltin, module, filename, path.dirname(filename))
  return module.exports
}

/**
 * The cache variant of an executable run: the first argument that names one
 * of `commands`, or `"other"` (help, version, a mistyped command).
 *
 * @category loading
 * @since 0.1.0
 */
export const commandVariant = (args: ReadonlyArray<string>, commands: ReadonlyArray<string>): string =>
  args.find((arg) => commands.includes(arg)) ?? "other"
