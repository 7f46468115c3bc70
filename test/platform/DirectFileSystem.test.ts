import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, FileSystem, Option, PlatformError } from "effect"
import fc from "fast-check"
import { execFileSync, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { readFile, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { smallRegularReadOf } from "../../src/io/NonBlockingOpen.js"
import * as DirectFileSystem from "../../src/platform/DirectFileSystem.js"
import { fileIdentity, modifiedMs } from "../../src/protocol/internal/FileInfo.js"
import { fuzzRuns } from "../support/FuzzRuns.js"

const direct = Effect.provide(DirectFileSystem.layer)
const threadpool = Effect.provide(NodeFileSystem.layer)

const bytesOf = (length: number, seed: number): Uint8Array => {
  const bytes = new Uint8Array(length)
  for (let index = 0; index < length; index++) bytes[index] = (index * 31 + seed) & 0xff
  return bytes
}

/** After this long a writer in another process opens the FIFO, ending a wait that blocked the event loop. */
const FALLBACK_MS = 5_000

/**
 * A writer in another process that opens `fifo` after `FALLBACK_MS`. A blocked
 * event loop cannot write to the FIFO itself, so without this a regression
 * would hang the worker instead of failing the test.
 */
const fallbackWriter = (fifo: string) =>
  Effect.acquireRelease(
    Effect.sync(() =>
      spawn("sh", ["-c", `sleep ${FALLBACK_MS / 1000}; printf fallback > "$0"`, fifo], {
        stdio: "ignore",
        detached: true
      })
    ),
    // The whole group, so the `sleep` does not outlive the test either.
    (child) => Effect.sync(() => child.pid !== undefined && process.kill(-child.pid, "SIGKILL"))
  )

/** Like `fallbackWriter`, for a write to `fifo` that waits for a reader. */
const fallbackReader = (fifo: string) =>
  Effect.acquireRelease(
    Effect.sync(() =>
      spawn("sh", ["-c", `sleep ${FALLBACK_MS / 1000}; cat "$0" > /dev/null`, fifo], {
        stdio: "ignore",
        detached: true
      })
    ),
    (child) => Effect.sync(() => child.pid !== undefined && process.kill(-child.pid, "SIGKILL"))
  )

/** How long a 20 ms timer really took: far longer only when something held the event loop. */
const timerDelay = Effect.promise(() => {
  const start = performance.now()
  return new Promise<number>((resolve) => setTimeout(() => resolve(Math.round(performance.now() - start)), 20))
})

const withTempDirectory = <A, E, R>(body: (root: string) => Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "rarebit-direct-"))),
    body,
    (root) => Effect.sync(() => rmSync(root, { recursive: true, force: true }))
  )

/** The parts of an outcome both file systems must agree on. */
const normalize = (root: string, exit: Exit.Exit<unknown, unknown>): unknown => {
  if (Exit.isSuccess(exit)) {
    const value = exit.value
    if (value instanceof Uint8Array) return { ok: Array.from(value) }
    if (typeof value === "object" && value !== null && "type" in value && "size" in value) {
      const info = value as FileSystem.File.Info
      return {
        ok: {
          type: info.type,
          size: Number(info.size),
          mode: info.mode & 0o7777,
          nlink: Option.getOrUndefined(info.nlink)
        }
      }
    }
    return { ok: value ?? null }
  }
  const error = exit.cause.reasons.find((reason) => reason._tag === "Fail")?.error
  if (!PlatformError.isPlatformError(error)) return { defect: String(exit.cause) }
  const reason = error.reason
  return {
    failed: reason._tag,
    method: reason.method,
    ...(reason._tag === "BadArgument" ? {} : {
      syscall: reason.syscall,
      path: typeof reason.pathOrDescriptor === "string"
        ? reason.pathOrDescriptor.replace(root, "<root>")
        : typeof reason.pathOrDescriptor,
      code: (reason.cause as { readonly code?: unknown } | undefined)?.code
    })
  }
}

type Op =
  | { readonly op: "writeFile"; readonly name: string; readonly length: number; readonly flag: "w" | "wx" | "a" }
  | {
    readonly op:
      | "readFile"
      | "stat"
      | "lstat"
      | "exists"
      | "access"
      | "remove"
      | "removeForce"
      | "mkdir"
      | "mkdirRecursive"
    readonly name: string
  }
  | { readonly op: "link" | "rename" | "symlink"; readonly name: string; readonly to: string }
  | { readonly op: "chmod"; readonly name: string; readonly mode: number }
  | { readonly op: "openReadAt"; readonly name: string; readonly position: number; readonly length: number }
  | { readonly op: "openAppend"; readonly name: string; readonly length: number }

const names = fc.constantFrom("a", "b", "d", "d/e", "d/e/f", "missing/x")
const ops: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    op: fc.constant("writeFile" as const),
    name: names,
    length: fc.nat(300),
    flag: fc.constantFrom("w" as const, "wx" as const, "a" as const)
  }),
  fc.record({
    op: fc.constantFrom(
      "readFile" as const,
      "stat" as const,
      "lstat" as const,
      "exists" as const,
      "access" as const,
      "remove" as const,
      "removeForce" as const,
      "mkdir" as const,
      "mkdirRecursive" as const
    ),
    name: names
  }),
  fc.record({ op: fc.constantFrom("link" as const, "rename" as const, "symlink" as const), name: names, to: names }),
  fc.record({ op: fc.constant("chmod" as const), name: names, mode: fc.constantFrom(0o600, 0o700, 0o644) }),
  fc.record({ op: fc.constant("openReadAt" as const), name: names, position: fc.nat(400), length: fc.nat(200) }),
  fc.record({ op: fc.constant("openAppend" as const), name: names, length: fc.nat(100) })
)

const run = (
  root: string,
  op: Op,
  index: number
): Effect.Effect<unknown, PlatformError.PlatformError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const at = (name: string) => join(root, name)
    switch (op.op) {
      case "writeFile":
        return yield* fs.writeFile(at(op.name), bytesOf(op.length, index), { flag: op.flag, mode: 0o600 })
      case "readFile":
        return yield* fs.readFile(at(op.name))
      case "stat":
        return yield* fs.stat(at(op.name))
      case "lstat":
        return yield* fs.lstat(at(op.name))
      case "exists":
        return yield* fs.exists(at(op.name))
      case "access":
        return yield* fs.access(at(op.name))
      case "remove":
        return yield* fs.remove(at(op.name))
      case "removeForce":
        return yield* fs.remove(at(op.name), { force: true })
      case "mkdir":
        return yield* fs.makeDirectory(at(op.name), { mode: 0o700 })
      case "mkdirRecursive":
        // `void` by its type; Node's callback hands back the first directory made, which is not part of the contract.
        return yield* Effect.asVoid(fs.makeDirectory(at(op.name), { recursive: true, mode: 0o700 }))
      case "link":
        return yield* fs.link(at(op.name), at(op.to))
      case "rename":
        return yield* fs.rename(at(op.name), at(op.to))
      case "symlink":
        return yield* fs.symlink(at(op.name), at(op.to))
      case "chmod":
        return yield* fs.chmod(at(op.name), op.mode)
      case "openReadAt":
        return yield* Effect.scoped(Effect.gen(function*() {
          const file = yield* fs.open(at(op.name), { flag: "r", noFollow: true })
          const read = yield* file.readAlloc(op.length, { position: BigInt(op.position) })
          return Option.getOrElse(read, () => new Uint8Array(0))
        }))
      case "openAppend":
        return yield* Effect.scoped(Effect.gen(function*() {
          const file = yield* fs.open(at(op.name), { flag: "a", mode: 0o600 })
          yield* file.writeAll(bytesOf(op.length, index))
          yield* file.sync
          return Number((yield* file.stat).size)
        }))
    }
  })

describe("DirectFileSystem", () => {
  it.effect("agrees with platform-node's file system on generated operation sequences", () =>
    Effect.gen(function*() {
      let compared = 0
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(fc.array(ops, { minLength: 1, maxLength: 25 }), async (sequence) => {
            const outcomes = async (layer: typeof direct) =>
              Effect.runPromise(withTempDirectory((root) =>
                Effect.forEach(sequence, (op, index) =>
                  Effect.map(Effect.exit(run(root, op, index)), (exit) => normalize(root, exit)))
                  .pipe(layer)
              ))
            const mine = await outcomes(direct)
            const theirs = await outcomes(threadpool)
            assert.deepStrictEqual(mine, theirs, JSON.stringify(sequence))
            compared += sequence.length
          }),
          { numRuns: fuzzRuns(150) }
        )
      )
      assert.isAbove(compared, 150)
    }), 120_000)

  it.effect("transfers over the direct limit go through the thread pool and read back whole", () =>
    withTempDirectory((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const large = bytesOf(DirectFileSystem.DIRECT_IO_LIMIT * 2 + 17, 5)
        yield* fs.writeFile(join(root, "large"), large)
        assert.deepStrictEqual(yield* fs.readFile(join(root, "large")), new Uint8Array(large))
        const readBack = yield* Effect.scoped(Effect.gen(function*() {
          const file = yield* fs.open(join(root, "large"), { flag: "r" })
          const buffer = new Uint8Array(large.length)
          const count = yield* file.read(buffer)
          return { count, buffer }
        }))
        assert.strictEqual(readBack.count, large.length)
        assert.deepStrictEqual(readBack.buffer, new Uint8Array(large))
        yield* Effect.scoped(Effect.gen(function*() {
          const file = yield* fs.open(join(root, "large"), { flag: "a" })
          yield* file.writeAll(large)
        }))
        assert.strictEqual(Number((yield* fs.stat(join(root, "large"))).size), 2 * large.length)
      }).pipe(direct)
    ))

  it.effect(
    "a FIFO is opened, read and written on the thread pool, so waiting for its peer never stops the event loop",
    () =>
      withTempDirectory((root) =>
        Effect.gen(function*() {
          const fifo = join(root, "pipe")
          execFileSync("mkfifo", [fifo])
          const fs = yield* FileSystem.FileSystem
          // Without a writer, opening the FIFO for reading waits; the timer must still fire meanwhile.
          // A blocked event loop could neither fire it nor write, so another process ends the wait.
          // (Checked before writing: after a blocked read there is no reader left and the write would wait forever.)
          const read = yield* Effect.scoped(Effect.gen(function*() {
            yield* fallbackWriter(fifo)
            const reading = yield* Effect.forkChild(fs.readFileString(fifo))
            const elapsed = yield* timerDelay
            assert.isBelow(
              elapsed,
              FALLBACK_MS,
              `a 20 ms timer fired after ${elapsed} ms: reading the FIFO blocked the event loop`
            )
            yield* Effect.promise(() => writeFile(fifo, "through the pipe"))
            return yield* Fiber.join(reading)
          }))
          assert.strictEqual(read, "through the pipe", "the read did not wait for this test's writer")
          // Opening a handle waits on the pool too (platform-node's handles read at a
          // position, which a pipe refuses, so only the open itself is checked here).
          yield* Effect.scoped(Effect.gen(function*() {
            yield* fallbackWriter(fifo)
            const opening = yield* Effect.forkChild(Effect.scoped(Effect.asVoid(fs.open(fifo, { flag: "r" }))))
            const elapsed = yield* timerDelay
            assert.isBelow(
              elapsed,
              FALLBACK_MS,
              `a 20 ms timer fired after ${elapsed} ms: opening the FIFO blocked the event loop`
            )
            // The reader may close before the write lands (EPIPE): only the open matters here.
            yield* Effect.promise(() => writeFile(fifo, "again").catch(() => undefined))
            yield* Fiber.join(opening)
          }))
          // Writing a whole file to a FIFO without a reader waits on the pool as well.
          const written = yield* Effect.scoped(Effect.gen(function*() {
            yield* fallbackReader(fifo)
            const writing = yield* Effect.forkChild(fs.writeFileString(fifo, "to this test's reader"))
            const elapsed = yield* timerDelay
            assert.isBelow(
              elapsed,
              FALLBACK_MS,
              `a 20 ms timer fired after ${elapsed} ms: writing the FIFO blocked the event loop`
            )
            const received = yield* Effect.promise(() => readFile(fifo, "utf8"))
            yield* Fiber.join(writing)
            return received
          }))
          assert.strictEqual(written, "to this test's reader", "the write did not wait for this test's reader")
        }).pipe(direct)
      ),
    20_000
  )

  it.effect("a failed direct call is the same typed failure platform-node reports", () =>
    withTempDirectory((root) =>
      Effect.gen(function*() {
        const missing = join(root, "nowhere", "file")
        const mine = yield* Effect.flip(
          Effect.flatMap(Effect.service(FileSystem.FileSystem), (fs) => fs.stat(missing)).pipe(direct)
        )
        const theirs = yield* Effect.flip(
          Effect.flatMap(Effect.service(FileSystem.FileSystem), (fs) => fs.stat(missing)).pipe(threadpool)
        )
        assert.strictEqual(mine.reason._tag, "NotFound")
        assert.deepStrictEqual(normalize(root, Exit.fail(mine)), normalize(root, Exit.fail(theirs)))
      })
    ))

  it.effect(
    "the small-file read returns a regular file's bytes and refuses everything else at once",
    () =>
      withTempDirectory((root) =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const read = smallRegularReadOf(fs)
          assert.isDefined(read)
          const small = bytesOf(300, 3)
          yield* fs.writeFile(join(root, "small"), small)
          const whole = read!(join(root, "small"), { limit: 300, noFollow: true })
          assert.deepStrictEqual(whole && { size: whole.size, bytes: new Uint8Array(whole.bytes) }, {
            size: 300,
            bytes: small
          })
          assert.deepStrictEqual(read!(join(root, "empty-missing"), { limit: 300, noFollow: true }), undefined)
          // Larger than the limit: refused from the handle's fstat, nothing read.
          assert.strictEqual(read!(join(root, "small"), { limit: 299, noFollow: true }), undefined)
          // A final symlink is refused when asked, followed otherwise.
          yield* fs.symlink(join(root, "small"), join(root, "link"))
          assert.strictEqual(read!(join(root, "link"), { limit: 300, noFollow: true }), undefined)
          assert.strictEqual(read!(join(root, "link"), { limit: 300, noFollow: false })?.size, 300)
          yield* fs.makeDirectory(join(root, "directory"))
          assert.strictEqual(read!(join(root, "directory"), { limit: 300, noFollow: true }), undefined)
          // A FIFO without a writer: the open must not wait for one (another
          // process ends the wait of a regression instead of hanging the worker).
          const fifo = join(root, "pipe")
          execFileSync("mkfifo", [fifo])
          yield* Effect.scoped(Effect.gen(function*() {
            yield* fallbackWriter(fifo)
            const start = performance.now()
            assert.strictEqual(read!(fifo, { limit: 300, noFollow: true }), undefined)
            assert.isBelow(performance.now() - start, FALLBACK_MS, "reading the FIFO waited for a writer")
          }))
          assert.strictEqual(read!("/dev/zero", { limit: 300, noFollow: false }), undefined)
        }).pipe(direct)
      ),
    20_000
  )

  it.effect("the small-file read shows a file that grew while it was read, and reads at most one byte past its size", () =>
    withTempDirectory((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const read = smallRegularReadOf(fs)!
        // /proc files say they are empty and hold more: the read must stop one byte past the size fstat gave.
        // (Linux only: other platforms have no such file, and the grown file below covers them.)
        if (process.platform === "linux") {
          const proc = read("/proc/self/status", { limit: 300, noFollow: false })
          assert.deepStrictEqual(proc && { size: proc.size, length: proc.bytes.length }, { size: 0, length: 1 })
        }
        yield* fs.writeFileString(join(root, "file"), "abc")
        assert.strictEqual(read(join(root, "file"), { limit: 300, noFollow: true })?.bytes.length, 3)
      }).pipe(direct)
    ))

  it.effect("the small-file read reads a file's end and head with the identity and mtime its stat gives", () =>
    withTempDirectory((root) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const read = smallRegularReadOf(fs)!
        const path = join(root, "file")
        const bytes = bytesOf(5000, 7)
        yield* fs.writeFile(path, bytes)
        const info = yield* fs.stat(path)
        const end = read(path, { limit: 1000, noFollow: true, from: 4000, head: 16 })
        assert.isDefined(end)
        assert.deepStrictEqual(
          { size: end!.size, identity: end!.identity, mtimeMs: end!.mtimeMs },
          { size: 5000, identity: fileIdentity(info), mtimeMs: modifiedMs(info) }
        )
        assert.deepStrictEqual(new Uint8Array(end!.bytes), bytes.subarray(4000))
        assert.deepStrictEqual(new Uint8Array(end!.head!), bytes.subarray(0, 16))
        assert.strictEqual(read(path, { limit: 1000, noFollow: true })?.head, undefined)
        // More than the limit from `from` on, or `from` past the end: refused.
        assert.strictEqual(read(path, { limit: 999, noFollow: true, from: 4000 }), undefined)
        assert.strictEqual(read(path, { limit: 1000, noFollow: true, from: 5001 }), undefined)
        assert.strictEqual(read(path, { limit: 0, noFollow: true, from: 5000 })?.bytes.length, 0)
      }).pipe(direct)
    ))

  it.effect("the thread-pool layer has no small-file read: its reads never run on the event loop", () =>
    Effect.map(Effect.service(FileSystem.FileSystem), (fs) => assert.strictEqual(smallRegularReadOf(fs), undefined))
      .pipe(
        Effect.provide(DirectFileSystem.threadpoolLayer)
      ))
})
