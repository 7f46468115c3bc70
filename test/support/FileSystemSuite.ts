/**
 * One behaviour suite, two worlds: the same test bodies run against the
 * in-memory file system and against the real disk through the file system
 * `NodeStore` uses (`DirectFileSystem`). If the two disagree, the fake is
 * wrong. The file-system conformance suite adds a third world, the disk
 * through `@effect/platform-node`'s own `NodeFileSystem`, which both are
 * held to.
 *
 * The store's cycle suites (reserve, settle, release, current, history and
 * the few around them named in `WIN32_SUITES`) also run in a third world:
 * the memory file system's Windows profile (`platform: "win32"`: directory
 * fsync fails, modes are libuv's 0666, no `O_` flags, case-insensitive
 * names), so the bodies written for Linux show the store working as it
 * would on Windows.
 *
 * Each test gets a fresh world (a new empty memory file system, or the real
 * one) and a fresh root directory from `makeTempDirectoryScoped`, removed when
 * the test's scope closes.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it, type Vitest } from "@effect/vitest"
import { Effect, FileSystem, Layer, Option, Path, PlatformError } from "effect"
import type { Scope } from "effect"
import * as DirectFileSystem from "../../src/platform/DirectFileSystem.js"
import { MemoryFileSystem } from "../../src/testing/MemoryFileSystem.js"

/** A file system to run a suite on; `layer` builds a fresh one each time it is provided. */
export interface World {
  readonly name: "memory" | "memory-win32" | "node" | "node-threadpool" | "node-threadpool-nonblocking"
  readonly layer: Layer.Layer<FileSystem.FileSystem | Path.Path>
}

export const memoryWorld: World = { name: "memory", layer: Layer.merge(MemoryFileSystem.layer, Path.layer) }

export const nodeWorld: World = { name: "node", layer: Layer.merge(DirectFileSystem.layer, Path.layer) }

export const threadpoolWorld: World = { name: "node-threadpool", layer: Layer.merge(NodeFileSystem.layer, Path.layer) }

/** The file system `NodeStore.threadpoolLayer` uses: platform-node's plus the non-blocking open, on the pool. */
export const nonBlockingThreadpoolWorld: World = {
  name: "node-threadpool-nonblocking",
  layer: Layer.merge(DirectFileSystem.threadpoolLayer, Path.layer)
}

export const worlds: ReadonlyArray<World> = [memoryWorld, nodeWorld]

/** The memory file system as Windows presents itself to Node (see `MemoryFileSystem`'s platform profile). */
export const memoryWin32World: World = {
  name: "memory-win32",
  layer: Layer.merge(MemoryFileSystem.layerWith({ platform: "win32" }), Path.layer)
}

/**
 * The suites registered with the default worlds that run in the Windows
 * profile too: the store's whole cycle, whose bodies assume nothing of
 * POSIX. (Suites about modes, `O_NOFOLLOW` or FIFOs stay POSIX-only.)
 */
export const WIN32_SUITES: ReadonlySet<string> = new Set([
  "RarebitStore.reserve",
  "RarebitStore.settle",
  "RarebitStore.release",
  "RarebitStore.withJob",
  "RarebitStore.readCurrent",
  "RarebitStore.readHistory",
  "Commit lock",
  "CommitLockRepair",
  "SidecarAppend",
  "Crash recovery",
  "SettlementRecovery",
  "ClaimInspection"
])

/**
 * Tests of those suites that assert POSIX modes (0700 folders, 0600 files),
 * which Windows does not have: skipped in the Windows profile, where
 * privacy is the profile's ACL (see `store/write/PrivateDirectory`).
 */
const POSIX_MODE_TESTS: ReadonlySet<string> = new Set([
  "claims and sidecar folders are private: 0700 folders, 0600 claims",
  "a current Summary is appended with a new head, and the claim points at it",
  "a sidecar that exists with looser modes is tightened to 0600",
  "bytes land at the end, at the offset build was given, in a private file",
  "an existing sidecar is made private",
  // Its symlink is refused there too; only its last assertion is a mode (0644 kept).
  "a symlink or a FIFO at the path is refused, and nothing is written through it"
])

/** A fresh, empty directory (symlinks resolved), removed when the enclosing scope closes. */
export const withRoot: Effect.Effect<string, PlatformError.PlatformError, FileSystem.FileSystem | Scope.Scope> = Effect
  .gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const directory = yield* fs.makeTempDirectoryScoped({ prefix: "rarebit-test-" })
    return yield* fs.realPath(directory)
  })

/** What every suite test receives. */
export interface WorldContext {
  readonly world: World
  readonly root: string
}

/** The services a suite body may use. */
export type WorldServices = FileSystem.FileSystem | Path.Path | Scope.Scope

type PropOptions = Parameters<typeof it.effect.prop>[3]

/** `it.effect` and `it.effect.prop`, bound to one world. */
export interface WorldIt {
  readonly effect: <A, E>(
    name: string,
    self: (ctx: WorldContext) => Effect.Effect<A, E, WorldServices>,
    timeout?: number
  ) => void
  /** Each generated case runs on its own fresh world and root. */
  readonly prop: <const Arbs extends Vitest.Arbitraries, A, E>(
    name: string,
    arbitraries: Arbs,
    self: (
      values: { [K in keyof Arbs]: Vitest.ArbitraryValue<Arbs[K]> },
      ctx: WorldContext
    ) => Effect.Effect<A, E, WorldServices>,
    options?: PropOptions
  ) => void
}

const inWorld = <A, E>(world: World, self: (ctx: WorldContext) => Effect.Effect<A, E, WorldServices>) =>
  Effect.gen(function*() {
    const root = yield* withRoot
    return yield* self({ world, root })
  }).pipe(Effect.provide(world.layer))

const bind = (world: World): WorldIt => ({
  effect: (name, self, timeout) =>
    world === memoryWin32World && POSIX_MODE_TESTS.has(name)
      ? it.effect.skip(`${name} (POSIX modes)`, () => inWorld(world, self), timeout)
      : it.effect(name, () => inWorld(world, self), timeout),
  prop: (name, arbitraries, self, options) =>
    it.effect.prop(name, arbitraries, (values) => Effect.scoped(inWorld(world, (ctx) => self(values, ctx))), options)
})

/**
 * Registers `body` once per world, under `describe(name)` / `describe(world.name)`.
 *
 * @example
 * fileSystemSuite("RarebitStore", (it) => {
 *   it.effect("appends a receipt", ({ root }) => Effect.gen(function*() { ... }))
 * })
 */
export const fileSystemSuite = (
  name: string,
  body: (it: WorldIt, world: World) => void,
  inWorlds: ReadonlyArray<World> = worlds
): void => {
  const all = inWorlds === worlds && WIN32_SUITES.has(name) ? [...inWorlds, memoryWin32World] : inWorlds
  describe(name, () => {
    for (const world of all) {
      describe(world.name, () => {
        body(bind(world), world)
      })
    }
  })
}

/** The fields of a `PlatformError` worth comparing across worlds. */
export interface ExpectedFailure {
  readonly reason: PlatformError.SystemErrorTag | "BadArgument"
  readonly method: string
  readonly syscall?: string
  readonly pathOrDescriptor?: string | "fd"
  /** The errno code of the Node-style `cause`. */
  readonly code?: string
}

/** Asserts a `PlatformError` has the shape `NodeFileSystem` gives it. */
export const assertFailure = (error: unknown, expected: ExpectedFailure): void => {
  assert.isTrue(PlatformError.isPlatformError(error), `expected a PlatformError, got ${String(error)}`)
  const failure = error as PlatformError.PlatformError
  assert.strictEqual(failure._tag, "PlatformError")
  const reason = failure.reason
  assert.strictEqual(reason._tag, expected.reason, reason.message)
  assert.strictEqual(reason.module, "FileSystem")
  assert.strictEqual(reason.method, expected.method)
  if (reason._tag === "BadArgument") return
  if (expected.syscall !== undefined) assert.strictEqual(reason.syscall, expected.syscall)
  if (expected.pathOrDescriptor === "fd") assert.strictEqual(typeof reason.pathOrDescriptor, "number")
  else if (expected.pathOrDescriptor !== undefined) {
    assert.strictEqual(reason.pathOrDescriptor, expected.pathOrDescriptor)
  }
  if (expected.code !== undefined) {
    assert.strictEqual((reason.cause as { readonly code?: unknown } | undefined)?.code, expected.code)
  }
}

/**
 * Rewrites a file in place (same inode) and puts its modification time back,
 * so only its bytes tell the rewrite apart from no change at all.
 */
export const rewriteInPlace = (fs: FileSystem.FileSystem, file: string, text: string) =>
  Effect.gen(function*() {
    const before = yield* fs.stat(file)
    const mtimeMs = Option.getOrThrow(before.mtime).getTime()
    yield* fs.writeFileString(file, text)
    // In seconds, aimed at the middle of the millisecond so float rounding cannot move it.
    const seconds = (mtimeMs + 0.5) / 1000
    yield* fs.utimes(file, seconds, seconds)
    const after = yield* fs.stat(file)
    assert.strictEqual(Option.getOrThrow(after.mtime).getTime(), mtimeMs, "mtime restored")
    assert.deepStrictEqual(after.ino, before.ino, "same inode")
  })
