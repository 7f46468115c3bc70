/**
 * `openRegular`, `readBounded` and `openDirectory` against every kind of
 * hostile file, on the memory model, on the disk through `DirectFileSystem`
 * (direct and thread-pool) and through platform-node's own file system,
 * which lacks the non-blocking open and so exercises the portable fallback.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem, Option, PlatformError } from "effect"
import { openDirectory, openRegular, readBounded, readToEnd, readUpTo } from "../../src/io/RegularFile.js"
import { makeMemoryFileSystem, type MemoryFileSystemShape } from "../../src/testing/MemoryFileSystem.js"
import {
  fileSystemSuite,
  memoryWorld,
  nodeWorld,
  nonBlockingThreadpoolWorld,
  threadpoolWorld
} from "../support/FileSystemSuite.js"
import { makeSpecial, specialKinds, statTypeOf } from "../support/SpecialFiles.js"

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text)

/** Handles the memory model still has open; the disk worlds report none. */
const openHandles = (fs: FileSystem.FileSystem): ReadonlyArray<string> =>
  (fs as Partial<MemoryFileSystemShape>).openDescriptors?.().map((handle) => handle.path) ?? []

fileSystemSuite("RegularFile", (it) => {
  it.effect("refuses a FIFO, a socket or a device at the path without blocking, and keeps nothing open", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      for (const kind of specialKinds) {
        const path = `${root}/${kind}`
        yield* makeSpecial(path, kind)
        for (const flag of ["r", "a+"] as const) {
          const followed = yield* Effect.flip(Effect.scoped(openRegular(fs, path, { flag, followSymlinks: true })))
          assert.deepStrictEqual([followed._tag, (followed as { type?: string }).type], [
            "FileNotRegular",
            statTypeOf(kind)
          ], `${kind} ${flag}`)
          const unfollowed = yield* Effect.flip(Effect.scoped(openRegular(fs, path, { flag, followSymlinks: false })))
          // The devices are symlinks to /dev/<name>: refused as such when symlinks are not followed.
          const expected = kind === "fifo" || kind === "socket" ? statTypeOf(kind) : "SymbolicLink"
          assert.deepStrictEqual([unfollowed._tag, (unfollowed as { type?: string }).type], [
            "FileNotRegular",
            expected
          ])
        }
        const bounded = yield* Effect.flip(readBounded(fs, path, { maxBytes: 16, followSymlinks: true }))
        assert.strictEqual(bounded._tag, "FileNotRegular")
        assert.deepStrictEqual(openHandles(fs), [], kind)
      }
    }))

  it.effect("a symlink is followed only when asked; a directory is refused", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(`${root}/target`, "hello")
      yield* fs.symlink(`${root}/target`, `${root}/link`)
      yield* fs.makeDirectory(`${root}/dir`)
      const followed = yield* readBounded(fs, `${root}/link`, { maxBytes: 16, followSymlinks: true })
      assert.strictEqual(followed._tag === "Read" ? new TextDecoder().decode(followed.bytes) : followed._tag, "hello")
      const refused = yield* Effect.flip(readBounded(fs, `${root}/link`, { maxBytes: 16, followSymlinks: false }))
      assert.strictEqual(refused.message, `${root}/link is a symlink, not a regular file`)
      for (const flag of ["r", "a+"] as const) {
        const directory = yield* Effect.flip(
          Effect.scoped(openRegular(fs, `${root}/dir`, { flag, followSymlinks: false }))
        )
        assert.deepStrictEqual([directory._tag, (directory as { type?: string }).type], ["FileNotRegular", "Directory"])
      }
      // Appending through a refused symlink changes nothing where it points.
      const append = yield* Effect.flip(
        Effect.scoped(openRegular(fs, `${root}/link`, { flag: "a+", followSymlinks: false }))
      )
      assert.strictEqual(append._tag, "FileNotRegular")
      assert.strictEqual(yield* fs.readFileString(`${root}/target`), "hello")
      const missing = yield* Effect.flip(readBounded(fs, `${root}/missing`, { maxBytes: 16, followSymlinks: false }))
      assert.strictEqual(missing._tag === "PlatformError" ? missing.reason._tag : missing._tag, "NotFound")
    }))

  it.effect("a+ creates a missing file with the mode and appends to it", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const info = yield* Effect.scoped(Effect.gen(function*() {
        const { file, info } = yield* openRegular(fs, `${root}/f`, { flag: "a+", mode: 0o600, followSymlinks: false })
        yield* file.writeAll(bytes("one\n"))
        return info
      }))
      assert.strictEqual(info.type, "File")
      assert.strictEqual(Number(info.size), 0)
      assert.strictEqual((yield* fs.stat(`${root}/f`)).mode & 0o777, 0o600)
      yield* Effect.scoped(Effect.flatMap(
        openRegular(fs, `${root}/f`, { flag: "a+", mode: 0o644, followSymlinks: false }),
        ({ file, info }) =>
          Effect.andThen(Effect.sync(() => assert.strictEqual(Number(info.size), 4)), file.writeAll(bytes("two\n")))
      ))
      assert.strictEqual(yield* fs.readFileString(`${root}/f`), "one\ntwo\n")
      assert.strictEqual((yield* fs.stat(`${root}/f`)).mode & 0o777, 0o600)
    }))

  it.effect("readBounded reads up to the limit and no further, whatever the file's size", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(`${root}/exact`, "x".repeat(100))
      yield* fs.writeFileString(`${root}/over`, "x".repeat(101))
      yield* fs.writeFileString(`${root}/empty`, "")
      const exact = yield* readBounded(fs, `${root}/exact`, { maxBytes: 100, followSymlinks: false })
      assert.strictEqual(exact._tag === "Read" ? exact.bytes.length : -1, 100)
      const over = yield* readBounded(fs, `${root}/over`, { maxBytes: 100, followSymlinks: false })
      assert.strictEqual(over._tag, "TooLarge")
      assert.strictEqual(Number(over.info.size), 101)
      const empty = yield* readBounded(fs, `${root}/empty`, { maxBytes: 100, followSymlinks: false })
      assert.strictEqual(empty._tag === "Read" ? empty.bytes.length : -1, 0)
    }))

  it.effect("readUpTo sizes its buffer to the file, not the bound, and still reads a file that grew", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(`${root}/small`, "x".repeat(300))
      const small = yield* readBounded(fs, `${root}/small`, { maxBytes: 64 * 1024, followSymlinks: false })
      assert.strictEqual(small._tag === "Read" ? small.bytes.length : -1, 300)
      // What the read allocated: about the file, not the 64 KiB the bound allows.
      assert.isAtMost(small._tag === "Read" ? small.bytes.buffer.byteLength : Infinity, 301)
      for (const [grown, limit, expected] of [[5_000, 100_000, 5_300], [5_000, 1_000, 1_000]] as const) {
        const read = yield* Effect.scoped(Effect.gen(function*() {
          yield* fs.writeFileString(`${root}/grows`, "y".repeat(300))
          const { file, info } = yield* openRegular(fs, `${root}/grows`, { flag: "r", followSymlinks: false })
          yield* fs.writeFileString(`${root}/grows`, "z".repeat(grown), { flag: "a" })
          return yield* readUpTo(file, limit, Number(info.size))
        }))
        assert.strictEqual(read.length, expected, `grown by ${grown}, limit ${limit}`)
        assert.strictEqual(new TextDecoder().decode(read), `${"y".repeat(300)}${"z".repeat(grown)}`.slice(0, limit))
      }
    }))

  it.effect("readToEnd reads a file whole, past the size its fstat gave", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const text = "0123456789".repeat(10_000)
      yield* fs.writeFileString(`${root}/big`, text)
      const read = yield* Effect.scoped(Effect.gen(function*() {
        const { file, info } = yield* openRegular(fs, `${root}/big`, { flag: "r", followSymlinks: false })
        // The file grows after the open, as a Session being written does.
        yield* fs.writeFileString(`${root}/big`, "tail", { flag: "a" })
        return yield* readToEnd(file, info)
      }))
      assert.strictEqual(new TextDecoder().decode(read), `${text}tail`)
    }))

  it.effect("openDirectory opens a directory and refuses a symlink, a file or a FIFO", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.makeDirectory(`${root}/dir`)
      yield* fs.symlink(`${root}/dir`, `${root}/link`)
      yield* fs.writeFileString(`${root}/file`, "x")
      yield* makeSpecial(`${root}/fifo`, "fifo")
      const opened = yield* Effect.scoped(Effect.flatMap(openDirectory(fs, `${root}/dir`), ({ file }) => file.sync))
      assert.isUndefined(opened)
      for (const [name, type] of [["link", "SymbolicLink"], ["file", "File"], ["fifo", "FIFO"]] as const) {
        const error = yield* Effect.flip(Effect.scoped(openDirectory(fs, `${root}/${name}`)))
        assert.deepStrictEqual([error._tag, (error as { type?: string }).type], ["NotDirectory", type], name)
      }
      assert.deepStrictEqual(openHandles(fs), [])
      assert.isTrue(Option.isSome((yield* fs.stat(`${root}/dir`)).ino))
    }))
}, [memoryWorld, nodeWorld, nonBlockingThreadpoolWorld, threadpoolWorld])

describe("RegularFile on macOS errors", () => {
  it.effect("a socket that refuses its open with EOPNOTSUPP (macOS) is a socket, not an I/O error", () =>
    Effect.gen(function*() {
      const memory = makeMemoryFileSystem()
      yield* memory.makeDirectory("/store")
      yield* memory.makeSocket("/store/socket")
      // What macOS's open(2) reports for a socket, where Linux reports ENXIO.
      const macFs: FileSystem.FileSystem = {
        ...memory,
        open: (path, options) =>
          path === "/store/socket"
            ? Effect.fail(PlatformError.systemError({
              _tag: "Unknown",
              module: "FileSystem",
              method: "open",
              pathOrDescriptor: path,
              syscall: "open",
              cause: Object.assign(new Error(`EOPNOTSUPP: operation not supported on socket, open '${path}'`), {
                code: "EOPNOTSUPP"
              })
            }))
            : memory.open(path, options)
      }
      const refused = yield* Effect.flip(readBounded(macFs, "/store/socket", { maxBytes: 16, followSymlinks: false }))
      assert.deepStrictEqual([refused._tag, (refused as { type?: string }).type], ["FileNotRegular", "Socket"])
    }))
})
