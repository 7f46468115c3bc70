import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, FileSystem, Option, Stream } from "effect"
import { TestClock } from "effect/testing"
import {
  makeMemoryFileSystem,
  MemoryFileSystem,
  type MemoryFileSystemShape
} from "../../src/testing/MemoryFileSystem.js"
import { assertFailure } from "../support/FileSystemSuite.js"

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text)
const text = (data: Uint8Array | undefined): string | undefined =>
  data === undefined ? undefined : new TextDecoder().decode(data)

const on = <A, E>(fs: MemoryFileSystemShape, effect: Effect.Effect<A, E, FileSystem.FileSystem>) =>
  Effect.provideService(effect, FileSystem.FileSystem, fs)

const withFs = <A, E>(f: (fs: FileSystem.FileSystem) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    return yield* f(yield* FileSystem.FileSystem)
  })

const appendSynced = (path: string, data: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* Effect.scoped(Effect.gen(function*() {
      const file = yield* fs.open(path, { flag: "a", mode: 0o600 })
      yield* file.writeAll(bytes(data))
      yield* file.sync
    }))
  })

const append = (path: string, data: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* Effect.scoped(
      Effect.flatMap(fs.open(path, { flag: "a", mode: 0o600 }), (file) => file.writeAll(bytes(data)))
    )
  })

describe("MemoryFileSystem", () => {
  it.effect("every build of the layer starts empty", () =>
    Effect.gen(function*() {
      const write = Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const before = yield* fs.exists("/marker")
        yield* fs.writeFileString("/marker", "x")
        return before
      })
      assert.isFalse(yield* write.pipe(Effect.provide(MemoryFileSystem.layer)))
      assert.isFalse(yield* write.pipe(Effect.provide(MemoryFileSystem.layer)))
      const same = yield* Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const memory = yield* MemoryFileSystem
        yield* fs.writeFileString("/shared", "x")
        return memory.snapshot().some((entry) => entry.path === "/shared")
      }).pipe(Effect.provide(MemoryFileSystem.layer))
      assert.isTrue(same)
    }))

  it.effect("starts with /tmp (sticky) and the cwd; relative paths resolve against the cwd", () =>
    Effect.gen(function*() {
      const fs = makeMemoryFileSystem({ cwd: "/work/project", files: { "seed.txt": "seeded", "/etc/conf": "c" } })
      const entries = fs.snapshot()
      assert.deepStrictEqual(entries.map((entry) => entry.path), [
        "/etc",
        "/etc/conf",
        "/tmp",
        "/work",
        "/work/project",
        "/work/project/seed.txt"
      ])
      assert.strictEqual(entries.find((entry) => entry.path === "/tmp")?.mode, 0o1777)
      const seed = entries.find((entry) => entry.path === "/work/project/seed.txt")
      assert.strictEqual(text(seed?.data), "seeded")
      assert.strictEqual(text(seed?.durable), "seeded")
      assert.strictEqual(seed?.mode, 0o644)
      yield* on(
        fs,
        Effect.gen(function*() {
          const service = yield* FileSystem.FileSystem
          yield* service.writeFileString("sub.txt", "relative")
          assert.strictEqual(yield* service.readFileString("/work/project/sub.txt"), "relative")
          assert.strictEqual(yield* service.realPath("../project/./seed.txt"), "/work/project/seed.txt")
        })
      )
      assert.deepStrictEqual(fs.snapshot("/work/project").map((entry) => entry.path), [
        "/work/project",
        "/work/project/seed.txt",
        "/work/project/sub.txt"
      ])
      assert.deepStrictEqual(fs.snapshot("/nope"), [])
    }))

  it.effect("the umask applies to default and explicit creation modes", () =>
    Effect.gen(function*() {
      const strict = makeMemoryFileSystem()
      const open = makeMemoryFileSystem({ umask: 0 })
      const program = Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFileString("/f", "")
        yield* fs.makeDirectory("/d")
        yield* fs.makeDirectory("/e", { mode: 0o777 })
        return [
          (yield* fs.stat("/f")).mode & 0o777,
          (yield* fs.stat("/d")).mode & 0o777,
          (yield* fs.stat("/e")).mode & 0o777
        ]
      })
      assert.deepStrictEqual(yield* on(strict, program), [0o644, 0o755, 0o755])
      assert.deepStrictEqual(yield* on(open, program), [0o666, 0o777, 0o777])
    }))

  it.effect("sync is counted per path (directories too) and open handles are tracked", () =>
    Effect.gen(function*() {
      const fs = makeMemoryFileSystem()
      yield* on(
        fs,
        Effect.gen(function*() {
          const service = yield* FileSystem.FileSystem
          yield* service.makeDirectory("/data", { mode: 0o700 })
          yield* service.symlink("/data/log", "/link")
          yield* Effect.scoped(Effect.gen(function*() {
            const file = yield* service.open("/link", { flag: "a" })
            assert.deepStrictEqual(fs.openDescriptors().map((d) => [d.path, d.flag]), [["/data/log", "a"]])
            yield* file.sync
            yield* file.sync
            const dir = yield* service.open("/data/", { flag: "r" })
            yield* dir.sync
            assert.strictEqual(fs.openDescriptors().length, 2)
          }))
        })
      )
      assert.strictEqual(fs.syncCount("/data/log"), 2)
      assert.strictEqual(fs.syncCount("/data/./log"), 2)
      assert.strictEqual(fs.syncCount("/data"), 1)
      assert.strictEqual(fs.syncCount("/link"), 0)
      assert.deepStrictEqual(fs.openDescriptors(), [])
    }))

  it.effect("times follow the Clock", () =>
    Effect.gen(function*() {
      const fs = makeMemoryFileSystem()
      yield* TestClock.setTime(5_000)
      yield* on(fs, append("/f", "a"))
      yield* TestClock.adjust("1 second")
      yield* on(fs, append("/f", "b"))
      const info = yield* on(fs, withFs((service) => service.stat("/f")))
      assert.deepStrictEqual(info.birthtime, Option.some(new Date(5_000)))
      assert.deepStrictEqual(info.mtime, Option.some(new Date(6_000)))
    }))

  it.effect("a symlink cycle is ELOOP", () =>
    Effect.gen(function*() {
      const fs = makeMemoryFileSystem()
      const error = yield* on(
        fs,
        Effect.gen(function*() {
          const service = yield* FileSystem.FileSystem
          yield* service.symlink("/b", "/a")
          yield* service.symlink("/a", "/b")
          return yield* Effect.flip(service.readFile("/a"))
        })
      )
      assertFailure(error, {
        reason: "BadResource",
        method: "readFile",
        syscall: "open",
        pathOrDescriptor: "/a",
        code: "ELOOP"
      })
    }))

  it.effect("unimplemented methods die instead of pretending", () =>
    Effect.gen(function*() {
      const fs = makeMemoryFileSystem()
      const copy = yield* Effect.exit(fs.copy("/tmp", "/elsewhere"))
      assert.isTrue(Exit.isFailure(copy) && Cause.hasDies(copy.cause))
      // A recursive watch is not modelled (the store watches single directories).
      const watch = yield* Effect.exit(Stream.runDrain(fs.watch("/tmp", { recursive: true })))
      assert.isTrue(Exit.isFailure(watch) && Cause.hasDies(watch.cause))
    }))

  describe("crash images", () => {
    it.effect("process keeps every completed write; power keeps only synced bytes", () =>
      Effect.gen(function*() {
        const fs = makeMemoryFileSystem()
        yield* on(
          fs,
          Effect.gen(function*() {
            const service = yield* FileSystem.FileSystem
            yield* service.makeDirectory("/store", { mode: 0o700 })
            yield* appendSynced("/store/log", "one\n")
            yield* append("/store/log", "two\n")
            yield* service.writeFileString("/store/never-synced", "lost")
          })
        )
        const snapshotText = (image: MemoryFileSystemShape) =>
          Object.fromEntries(image.snapshot("/store").map((entry) => [entry.path, text(entry.data) ?? entry.type]))
        assert.deepStrictEqual(snapshotText(fs.crashImage("process")), {
          "/store": "Directory",
          "/store/log": "one\ntwo\n",
          "/store/never-synced": "lost"
        })
        assert.deepStrictEqual(snapshotText(fs.crashImage("power")), {
          "/store": "Directory",
          "/store/log": "one\n",
          "/store/never-synced": ""
        })
        const power = fs.crashImage("power")
        const modes = power.snapshot("/store").map((entry) => [entry.path, entry.mode])
        assert.deepStrictEqual(modes, [["/store", 0o700], ["/store/log", 0o600], ["/store/never-synced", 0o644]])
      }))

    it.effect("an image is a separate file system without handles or sync counts", () =>
      Effect.gen(function*() {
        const fs = makeMemoryFileSystem()
        const image = yield* on(
          fs,
          Effect.gen(function*() {
            const service = yield* FileSystem.FileSystem
            yield* appendSynced("/log", "a")
            const file = yield* service.open("/log", { flag: "a" })
            const image = fs.crashImage("process")
            yield* file.writeAll(bytes("b"))
            return image
          }).pipe(Effect.scoped)
        )
        assert.deepStrictEqual(image.openDescriptors(), [])
        assert.strictEqual(image.syncCount("/log"), 0)
        assert.strictEqual(fs.syncCount("/log"), 1)
        yield* on(image, append("/log", "c"))
        const read = (target: MemoryFileSystemShape) => on(target, withFs((service) => service.readFileString("/log")))
        assert.strictEqual(yield* read(fs), "ab")
        assert.strictEqual(yield* read(image), "ac")
        assert.deepStrictEqual(
          image.snapshot().find((entry) => entry.path === "/log")?.ino,
          fs.snapshot().find((entry) => entry.path === "/log")?.ino
        )
      }))

    it.effect("with no directory operation lost (the default), a rename survives power loss, its data only if synced", () =>
      Effect.gen(function*() {
        const fs = makeMemoryFileSystem()
        yield* on(
          fs,
          Effect.gen(function*() {
            const service = yield* FileSystem.FileSystem
            yield* appendSynced("/synced.tmp", "durable")
            yield* service.rename("/synced.tmp", "/synced")
            yield* append("/unsynced.tmp", "volatile")
            yield* service.rename("/unsynced.tmp", "/unsynced")
            yield* appendSynced("/shrunk", "0123456789")
            yield* service.truncate("/shrunk", 3)
            yield* service.link("/synced", "/hardlink")
            yield* service.remove("/hardlink")
            yield* service.link("/synced", "/second")
          })
        )
        const power = fs.crashImage("power")
        const files = Object.fromEntries(
          power.snapshot().filter((entry) => entry.type === "File").map((entry) => [entry.path, text(entry.data)])
        )
        assert.deepStrictEqual(files, {
          "/second": "durable",
          "/shrunk": "0123456789",
          "/synced": "durable",
          "/unsynced": ""
        })
        yield* on(power, append("/second", "+"))
        assert.strictEqual(
          yield* on(power, withFs((service) => service.readFileString("/synced"))),
          "durable+"
        )
      }))

    it.effect("an image can be provided as a layer to restart on", () =>
      Effect.gen(function*() {
        const fs = makeMemoryFileSystem()
        yield* on(fs, appendSynced("/state", "v1"))
        const restarted = yield* Effect.gen(function*() {
          const service = yield* FileSystem.FileSystem
          const memory = yield* MemoryFileSystem
          return [yield* service.readFileString("/state"), memory.snapshot().length] as const
        }).pipe(Effect.provide(MemoryFileSystem.layerFrom(fs.crashImage("power"))))
        assert.deepStrictEqual(restarted, ["v1", 2])
      }))
  })

  describe("special files", () => {
    /** The message of the defect an effect died with, if it died. */
    const deathOf = (exit: Exit.Exit<unknown, unknown>): string | undefined => {
      if (Exit.isSuccess(exit)) return undefined
      const die = exit.cause.reasons.find(Cause.isDieReason)
      return die === undefined ? undefined : String((die.defect as Error).message)
    }

    it.effect("where Linux would block for good, the model dies saying so instead of hanging", () =>
      Effect.gen(function*() {
        const fs = makeMemoryFileSystem()
        yield* fs.makeFifo("/fifo")
        const read = yield* Effect.exit(Effect.scoped(fs.open("/fifo", { flag: "r" })))
        assert.match(deathOf(read) ?? "", /opening the FIFO \/fifo for reading without a writer would block forever/)
        const write = yield* Effect.exit(Effect.scoped(fs.open("/fifo", { flag: "w" })))
        assert.match(deathOf(write) ?? "", /for writing without a reader would block forever/)
        assert.match(deathOf(yield* Effect.exit(fs.readFile("/fifo"))) ?? "", /would block forever/)
        // With a peer open, the blocking opens return at once, as on Linux.
        yield* Effect.scoped(Effect.gen(function*() {
          yield* fs.open("/fifo", { flag: "r+" })
          yield* fs.open("/fifo", { flag: "r" })
          yield* fs.open("/fifo", { flag: "a" })
          assert.match(
            deathOf(yield* Effect.exit(fs.readFile("/fifo"))) ?? "",
            /reading the FIFO \/fifo to its end would block forever/
          )
        }))
      }))

    it.effect("a whole-file read of zero or urandom dies as an unbounded read; null reads empty", () =>
      Effect.gen(function*() {
        const fs = makeMemoryFileSystem()
        yield* fs.makeCharacterDevice("/zero", "zero")
        yield* fs.makeCharacterDevice("/urandom", "urandom")
        yield* fs.makeCharacterDevice("/null", "null")
        yield* fs.symlink("/zero", "/link")
        for (const path of ["/zero", "/urandom", "/link"]) {
          assert.match(deathOf(yield* Effect.exit(fs.readFile(path))) ?? "", /unbounded read/, path)
          assert.match(deathOf(yield* Effect.exit(fs.readFileString(path))) ?? "", /unbounded read/, path)
        }
        assert.deepStrictEqual(yield* fs.readFile("/null"), new Uint8Array(0))
        assert.strictEqual((yield* fs.stat("/zero")).rdev.pipe(Option.getOrThrow), 261n)
      }))

    it.effect("mknod refuses an existing path; snapshots and crash images keep the special nodes", () =>
      Effect.gen(function*() {
        const fs = makeMemoryFileSystem({ uid: 1000 })
        yield* fs.makeFifo("/fifo", 0o600)
        yield* fs.makeSocket("/socket")
        yield* fs.makeCharacterDevice("/zero", "zero")
        assertFailure(yield* Effect.flip(fs.makeFifo("/zero")), {
          reason: "AlreadyExists",
          method: "makeFifo",
          syscall: "mknod",
          pathOrDescriptor: "/zero",
          code: "EEXIST"
        })
        const expected = [
          { path: "/fifo", type: "FIFO", mode: 0o600, uid: 1000 },
          { path: "/socket", type: "Socket", mode: 0o755, uid: 1000 },
          { path: "/zero", type: "CharacterDevice", mode: 0o644, uid: 1000, device: "zero" }
        ]
        const special = (memory: MemoryFileSystemShape) =>
          memory.snapshot().filter((entry) => entry.type !== "Directory").map(({ ino: _ino, ...rest }) => rest)
        assert.deepStrictEqual(special(fs), expected)
        assert.deepStrictEqual(special(fs.crashImage("power")), expected)
      }))

    it.effect("the process's uid owns what it creates; the tree made at construction belongs to root", () =>
      Effect.gen(function*() {
        const fs = makeMemoryFileSystem({ uid: 1000, gid: 100, files: { "/home/u/f": "x" } })
        yield* fs.makeDirectory("/tmp/mine")
        yield* fs.writeFileString("/tmp/mine/file", "y")
        const owner = (path: string) =>
          Effect.map(fs.lstat(path), (info) => [Option.getOrThrow(info.uid), Option.getOrThrow(info.gid)])
        assert.deepStrictEqual(yield* owner("/tmp"), [0, 0])
        assert.deepStrictEqual(yield* owner("/tmp/mine"), [1000, 100])
        assert.deepStrictEqual(yield* owner("/tmp/mine/file"), [1000, 100])
        assert.deepStrictEqual(yield* owner("/home/u/f"), [1000, 100])
        yield* fs.chown("/tmp/mine", 2000, 2000)
        assert.deepStrictEqual(yield* owner("/tmp/mine"), [2000, 2000])
      }))
  })
})
