/**
 * Shared set-up of the store behaviour suite: a Session and a store on a
 * fresh root of either world, raw views of the files the store writes, and a
 * driver that moves the `TestClock` exactly when a fiber has started one of
 * its retry waits (so the same body works on the memory world, where every
 * step is a scheduler task, and on the real disk, where I/O completes outside
 * the scheduler).
 */
import { assert } from "@effect/vitest"
import {
  Clock,
  Duration,
  Effect,
  type Exit,
  Fiber,
  FileSystem,
  Option,
  Path,
  type PlatformError,
  Queue,
  Scope
} from "effect"
import { SecureRandom } from "effect/crypto/SecureRandom"
import { TestClock } from "effect/testing"
import { HandleChmodTypeId, NonBlockingOpenTypeId } from "../../src/io/NonBlockingOpen.js"
import { sha256Hex } from "../../src/protocol/CanonicalJson.js"
import type { Head } from "../../src/protocol/Head.js"
import { make, type RarebitStore } from "../../src/store/RarebitStore.js"
import { makeStoreConfig, type StoreConfig } from "../../src/store/StoreConfig.js"
import type { Acquired, Reservation } from "../../src/store/write/Reservation.js"
import type { MemoryFileSystemShape } from "../../src/testing/MemoryFileSystem.js"
import { jobId, type Json, sessionText } from "../support/Receipts.js"
import { tokensSeededFromRandom } from "../support/Tokens.js"

export type Store = RarebitStore["Service"]

/** Short enough for tests to pass it with `now`, long enough that nothing expires by accident. */
export const LEASE_MS = 60_000

/** A retry schedule that gives up quickly, so `LockHeld` tests need a handful of waits. */
export const FAST_RETRY = { intervalMs: 5, attempts: 4 } as const

export interface Kit {
  readonly fs: FileSystem.FileSystem
  readonly path: Path.Path
  readonly root: string
  readonly sessionRoot: string
  readonly rarebitRoot: string
  readonly sessionFile: string
  readonly sessionId: string
  readonly branch: ReadonlyArray<Json>
  readonly sidecar: string
  readonly lockPath: string
  readonly jobsDir: string
  readonly config: StoreConfig
  readonly store: Store
  readonly claimPath: (jobId: string) => string
  /** A second store on the same roots, with its own in-process lock queues, as another process would have. */
  readonly otherStore: () => Effect.Effect<Store>
}

export interface KitOptions {
  readonly config?: Partial<StoreConfig>
  readonly sessionId?: string
  readonly branch?: ReadonlyArray<Json>
  /** Default true: write the Session file. */
  readonly writeSession?: boolean
  /** Use this file system instead of the world's (e.g. a fault wrapper around it). */
  readonly fs?: FileSystem.FileSystem
}

/**
 * A Session at `<root>/sessions/project/trace.jsonl` and a store whose roots
 * are under `root`.
 */
export const setup = (root: string, options: KitOptions = {}) =>
  Effect.gen(function*() {
    const fs = options.fs ?? (yield* FileSystem.FileSystem)
    const path = yield* Path.Path
    const sessionRoot = path.join(root, "sessions")
    const rarebitRoot = path.join(root, "rarebit")
    const sessionFile = path.join(sessionRoot, "project", "trace.jsonl")
    const sessionId = options.sessionId ?? "s"
    const { branch, text } = sessionText(sessionId, options.branch)
    if (options.writeSession !== false) {
      yield* fs.makeDirectory(path.dirname(sessionFile), { recursive: true })
      yield* fs.writeFileString(sessionFile, text)
    }
    const config = makeStoreConfig({ rarebitRoot, sessionRoot, leaseMs: LEASE_MS, ...options.config })
    // Every store of a kit, the second ones included, lives as long as the test's scope.
    const scope = yield* Effect.scope
    // One token stream for the kit's stores, so a second store never draws the first one's tokens.
    const tokens = yield* tokensSeededFromRandom
    const build = make(config).pipe(
      Effect.provideService(FileSystem.FileSystem, fs),
      Effect.provideService(Path.Path, path),
      Effect.provideService(SecureRandom, tokens),
      Scope.provide(scope)
    )
    const store = yield* build
    const sidecar = path.join(rarebitRoot, "materializations-v4", "project", "trace.jsonl")
    const kit: Kit = {
      fs,
      path,
      root,
      sessionRoot,
      rarebitRoot,
      sessionFile,
      sessionId,
      branch,
      sidecar,
      lockPath: `${sidecar}.commit-lock`,
      jobsDir: path.join(rarebitRoot, "jobs-v4"),
      config,
      store,
      claimPath: (jobId) => path.join(rarebitRoot, "jobs-v4", `${jobId}.json`),
      otherStore: () => build
    }
    return kit
  })

const encoder = new TextEncoder()

export const bytesOf = (text: string): Uint8Array => encoder.encode(text)

/** A file's text, or `undefined` when it does not exist. */
export const readIfExists = (fs: FileSystem.FileSystem, file: string) =>
  fs.readFileString(file).pipe(
    Effect.map((text): string | undefined => text),
    Effect.catchIf((error) => error.reason._tag === "NotFound", () => Effect.succeed(undefined))
  )

/** The parsed claim of a job, `undefined` when there is none. */
export const claimOf = (kit: Kit, jobId: string) =>
  Effect.map(readIfExists(kit.fs, kit.claimPath(jobId)), (text) => (text === undefined ? undefined : JSON.parse(text)))

/** The sidecar's complete lines, parsed. */
export const sidecarRecords = (kit: Kit) =>
  Effect.map(
    readIfExists(kit.fs, kit.sidecar),
    (text) => (text ?? "").split("\n").filter((line) => line.length > 0).map((line) => JSON.parse(line) as Json)
  )

/** Appends raw text to the sidecar (creating it and its folder 0700/0600 like the store). */
export const appendRaw = (kit: Kit, text: string | Uint8Array) =>
  Effect.gen(function*() {
    yield* kit.fs.makeDirectory(kit.path.dirname(kit.sidecar), { recursive: true, mode: 0o700 })
    const data = typeof text === "string" ? bytesOf(text) : text
    yield* kit.fs.writeFile(kit.sidecar, data, { flag: "a", mode: 0o600 })
  })

/** The size of a file in bytes. */
export const sizeOf = (fs: FileSystem.FileSystem, file: string) =>
  Effect.map(fs.stat(file), (info) => Number(info.size))

/** A receipt line exactly as settle writes it. */
export const receiptLine = (receipt: Json): string => `${JSON.stringify(receipt)}\n`

/** The head a settle writes for the receipt line at `offset`. */
export const headFor = (sessionId: string, offset: number, line: string): Head => ({
  type: "rarebit_head",
  protocolVersion: 1,
  sessionId,
  receiptOffset: offset,
  receiptLength: bytesOf(line).length,
  receiptHash: sha256Hex(bytesOf(line))
})

export const headLine = (head: Json): string => `${JSON.stringify(head)}\n`

/** Appends `receipt` and a head pointing at it, as a settle would; returns the receipt's offset. */
export const appendReceiptWithHead = (kit: Kit, receipt: Json, options: { readonly head?: boolean } = {}) =>
  Effect.gen(function*() {
    const offset = yield* sizeOf(kit.fs, kit.sidecar).pipe(Effect.catch(() => Effect.succeed(0)))
    const line = receiptLine(receipt)
    const head = headFor(String(receipt.sessionId), offset, line)
    yield* appendRaw(kit, options.head === false ? line : line + headLine(head))
    return { offset, line, head }
  })

/** Every file under `dir` (recursively), relative to it; empty when `dir` does not exist. */
export const filesUnder = (fs: FileSystem.FileSystem, dir: string) =>
  fs.readDirectory(dir, { recursive: true }).pipe(
    Effect.catchIf((error) => error.reason._tag === "NotFound", () => Effect.succeed([] as Array<string>)),
    Effect.map((entries) => [...entries].sort())
  )

/** Temp files (`*.tmp`) and break files left anywhere under the Rarebit root. */
export const strayFiles = (kit: Kit) =>
  Effect.map(
    filesUnder(kit.fs, kit.rarebitRoot),
    (files) => files.filter((file) => file.endsWith(".tmp") || file.includes(".break-"))
  )

/** Permission bits of a path (not following symlinks). */
export const modeOf = (fs: FileSystem.FileSystem, file: string) =>
  Effect.map(fs.stat(file), (info) => info.mode & 0o777)

/**
 * In the memory world, asserts that no file handle is open; on the real disk
 * there is nothing to ask, so it does nothing.
 */
export const assertNoOpenHandles = (fs: FileSystem.FileSystem, label = "") =>
  Effect.sync(() => {
    const memory = fs as Partial<MemoryFileSystemShape>
    if (typeof memory.openDescriptors === "function") {
      // The store's caches hold no file open between reads: nothing may stay open.
      assert.deepStrictEqual(memory.openDescriptors(), [], `open descriptors ${label}`)
    }
  })

/** Whether this world can tell us about open handles. */
export const tracksHandles = (fs: FileSystem.FileSystem): boolean =>
  typeof (fs as Partial<MemoryFileSystemShape>).openDescriptors === "function"

/** Narrows a reservation to `Acquired`, failing the test on any other outcome. */
export const acquired = (reservation: Reservation): Acquired => {
  assert.strictEqual(reservation._tag, "Acquired")
  return reservation as Acquired
}

/** Reserves `job` (by default the suites' `jobId(1)`) and insists that it was acquired. */
export const reserveAcquired = (kit: Kit, job = jobId(1)) =>
  Effect.map(kit.store.reserve({ jobId: job, sessionFile: kit.sessionFile }), acquired)

/** No lock, no temp or break files, no open handles: what every settle or failure must leave. */
export const assertNoLeftovers = (kit: Kit, label: string) =>
  Effect.gen(function*() {
    assert.isFalse(yield* kit.fs.exists(kit.lockPath), `no lock ${label}`)
    assert.deepStrictEqual(yield* strayFiles(kit), [], `no temp files ${label}`)
    yield* assertNoOpenHandles(kit.fs, label)
  })

/** Asserts the claim is settled and its pointer is the exact receipt line in the sidecar; returns the claim. */
export const assertSettledPointer = (kit: Kit, job: string, receipt: Json) =>
  Effect.gen(function*() {
    const claim = yield* claimOf(kit, job)
    const line = bytesOf(receiptLine(receipt))
    assert.strictEqual(claim.state, "settled")
    assert.deepStrictEqual(Object.keys(claim), ["jobId", "state", "leaseToken", "receiptRef"])
    assert.deepStrictEqual(Object.keys(claim.receiptRef), ["receiptOffset", "receiptLength", "receiptHash"])
    assert.strictEqual(claim.receiptRef.receiptLength, line.length)
    assert.strictEqual(claim.receiptRef.receiptHash, sha256Hex(line))
    const bytes = yield* kit.fs.readFile(kit.sidecar)
    const at = claim.receiptRef.receiptOffset
    assert.deepStrictEqual([...bytes.subarray(at, at + line.length)], [...line])
    return claim
  })

/** Writes a foreign commit lock (another process's, or the reference's). */
export const writeLock = (kit: Kit, lock: Json) =>
  Effect.gen(function*() {
    yield* kit.fs.makeDirectory(kit.path.dirname(kit.sidecar), { recursive: true, mode: 0o700 })
    yield* kit.fs.writeFileString(kit.lockPath, `${JSON.stringify(lock)}\n`, { flag: "wx", mode: 0o600 })
  })

// ---------------------------------------------------------------------------
// Driving retry waits with the TestClock
// ---------------------------------------------------------------------------

/** Reports every `sleep` the instrumented effect starts, then lets the `TestClock` run it. */
export interface SleepProbe {
  /** Runs `self` with a clock that announces each sleep before it starts waiting. */
  readonly instrument: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** The next announced sleep, in milliseconds. */
  readonly next: Effect.Effect<number>
}

export const makeSleepProbe: Effect.Effect<SleepProbe> = Effect.gen(function*() {
  const queue = yield* Queue.unbounded<number>()
  const clock = yield* Clock.clockWith(Effect.succeed)
  const instrumented: Clock.Clock = {
    ...clock,
    sleep: (duration) => Effect.andThen(Queue.offer(queue, Duration.toMillis(duration)), clock.sleep(duration))
  }
  return {
    instrument: (self) => Effect.provideService(self, Clock.Clock, instrumented),
    next: Queue.take(queue)
  }
})

/**
 * Advances the `TestClock` by each sleep `fiber` announces, as soon as it
 * announces it, until the fiber ends. Returns its exit and the sleeps.
 */
export const driveSleeps = <A, E>(fiber: Fiber.Fiber<A, E>, probe: SleepProbe) =>
  Effect.gen(function*() {
    const sleeps: Array<number> = []
    while (true) {
      const next = yield* Effect.raceFirst(
        Effect.map(probe.next, Option.some),
        Effect.as(Fiber.await(fiber), Option.none<number>())
      )
      if (Option.isNone(next)) break
      sleeps.push(next.value)
      yield* TestClock.adjust(next.value)
    }
    const exit: Exit.Exit<A, E> = yield* Fiber.await(fiber)
    return { exit, sleeps }
  })

/** Forks `self` instrumented, drives its sleeps, and returns its exit and sleeps. */
export const runDriven = <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const probe = yield* makeSleepProbe
    const fiber = yield* Effect.forkChild(probe.instrument(self))
    return yield* driveSleeps(fiber, probe)
  })

// ---------------------------------------------------------------------------
// Intercepting file-system calls
// ---------------------------------------------------------------------------

/**
 * A view of `inner` that runs `before(method, args)` ahead of every
 * file-system call, including the methods of the handles it opens; a
 * failure of `before` is the call's failure.
 */
export const interceptFileSystem = (
  inner: FileSystem.FileSystem,
  before: (method: string, args: ReadonlyArray<unknown>) => Effect.Effect<void, PlatformError.PlatformError>
): FileSystem.FileSystem => {
  // The capabilities of `io/NonBlockingOpen` are reported as the calls they stand for.
  const nameOf = (property: string | symbol): string =>
    property === NonBlockingOpenTypeId ? "open" : property === HandleChmodTypeId ? "chmod" : String(property)
  const wrap = <T extends object>(target: T, prefix: string, onResult: (name: string, value: unknown) => unknown): T =>
    new Proxy(target, {
      get(object, property, receiver) {
        const value = Reflect.get(object, property, receiver)
        const name = `${prefix}${nameOf(property)}`
        if (Effect.isEffect(value)) return Effect.andThen(before(name, []), value)
        if (typeof value !== "function") return value
        return (...args: Array<unknown>) => {
          const result = value.apply(object, args)
          if (!Effect.isEffect(result)) return result
          return Effect.andThen(before(name, args), result).pipe(Effect.map((out) => onResult(name, out)))
        }
      }
    })
  const wrapFile = (file: FileSystem.File) => wrap(file, "File.", (_, out) => out)
  return wrap(inner, "", (name, out) => (name === "open" ? wrapFile(out as FileSystem.File) : out))
}
