import { assert } from "@effect/vitest"
import { ByteSize, Effect, FileSystem, Option, Schema } from "effect"
import fc from "fast-check"
import { handleChmodOf, nonBlockingOpenOf, processUidOf } from "../../src/io/NonBlockingOpen.js"
import {
  assertFailure,
  fileSystemSuite,
  memoryWorld,
  nodeWorld,
  nonBlockingThreadpoolWorld,
  threadpoolWorld
} from "../support/FileSystemSuite.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import { makeSpecial, specialKinds } from "../support/SpecialFiles.js"

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text)
const text = (data: Uint8Array): string => new TextDecoder().decode(data)
const permissions = (info: FileSystem.File.Info): number => info.mode & 0o7777
const typeBits = (info: FileSystem.File.Info): number => info.mode & 0o170000
const optionText = (data: Option.Option<Uint8Array>): string | undefined =>
  Option.match(data, { onNone: () => undefined, onSome: text })

fileSystemSuite("FileSystem conformance", (it) => {
  it.effect("makeDirectory applies the mode; chmod changes it; Info.mode carries the type bits", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.makeDirectory(`${root}/a/b`, { recursive: true, mode: 0o700 })
      const a = yield* fs.stat(`${root}/a`)
      const b = yield* fs.stat(`${root}/a/b`)
      assert.strictEqual(a.type, "Directory")
      assert.strictEqual(typeBits(a), 0o040000)
      assert.strictEqual(permissions(a), 0o700)
      assert.strictEqual(permissions(b), 0o700)
      yield* fs.chmod(`${root}/a`, 0o750)
      assert.strictEqual(permissions(yield* fs.stat(`${root}/a`)), 0o750)
      yield* fs.chmod(`${root}/a`, 0o700)
      assert.strictEqual(permissions(yield* fs.stat(`${root}/a`)), 0o700)
    }))

  it.effect("makeDirectory: recursive is idempotent, plain fails on existing, missing parent or file", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.makeDirectory(`${root}/d`)
      yield* fs.makeDirectory(`${root}/d`, { recursive: true })
      assertFailure(yield* Effect.flip(fs.makeDirectory(`${root}/d`)), {
        reason: "AlreadyExists",
        method: "makeDirectory",
        syscall: "mkdir",
        pathOrDescriptor: `${root}/d`,
        code: "EEXIST"
      })
      assertFailure(yield* Effect.flip(fs.makeDirectory(`${root}/x/y`)), {
        reason: "NotFound",
        method: "makeDirectory",
        syscall: "mkdir",
        pathOrDescriptor: `${root}/x/y`,
        code: "ENOENT"
      })
      yield* fs.writeFileString(`${root}/f`, "x")
      assertFailure(yield* Effect.flip(fs.makeDirectory(`${root}/f`, { recursive: true })), {
        reason: "AlreadyExists",
        method: "makeDirectory",
        code: "EEXIST"
      })
      assertFailure(yield* Effect.flip(fs.makeDirectory(`${root}/f/g`, { recursive: true })), {
        reason: "BadResource",
        method: "makeDirectory",
        syscall: "mkdir",
        code: "ENOTDIR"
      })
      yield* fs.makeDirectory(`${root}/trailing/`)
      assert.strictEqual((yield* fs.stat(`${root}/trailing`)).type, "Directory")
    }))

  it.effect("open applies the create mode only on creation", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = `${root}/f`
      yield* Effect.scoped(fs.open(path, { flag: "wx", mode: 0o600 }))
      const created = yield* fs.stat(path)
      assert.strictEqual(created.type, "File")
      assert.strictEqual(typeBits(created), 0o100000)
      assert.strictEqual(permissions(created), 0o600)
      yield* Effect.scoped(fs.open(path, { flag: "a", mode: 0o644 }))
      yield* fs.writeFileString(path, "again", { mode: 0o644 })
      assert.strictEqual(permissions(yield* fs.stat(path)), 0o600)
      yield* fs.chmod(path, 0o644)
      assert.strictEqual(permissions(yield* fs.stat(path)), 0o644)
      yield* fs.writeFileString(`${root}/g`, "", { mode: 0o600 })
      assert.strictEqual(permissions(yield* fs.stat(`${root}/g`)), 0o600)
    }))

  it.effect("open flags: r needs the file, wx/ax refuse an existing one, w truncates, r+ overwrites in place", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = `${root}/f`
      for (const flag of ["r", "r+"] as const) {
        assertFailure(yield* Effect.flip(Effect.scoped(fs.open(path, { flag }))), {
          reason: "NotFound",
          method: "open",
          syscall: "open",
          pathOrDescriptor: path,
          code: "ENOENT"
        })
      }
      yield* fs.writeFileString(path, "hello world")
      for (const flag of ["wx", "ax", "wx+", "ax+"] as const) {
        assertFailure(yield* Effect.flip(Effect.scoped(fs.open(path, { flag }))), {
          reason: "AlreadyExists",
          method: "open",
          syscall: "open",
          pathOrDescriptor: path,
          code: "EEXIST"
        })
      }
      yield* Effect.scoped(Effect.flatMap(fs.open(path, { flag: "r+" }), (file) => file.writeAll(bytes("J"))))
      assert.strictEqual(yield* fs.readFileString(path), "Jello world")
      yield* Effect.scoped(Effect.flatMap(fs.open(path, { flag: "w" }), (file) => file.writeAll(bytes("new"))))
      assert.strictEqual(yield* fs.readFileString(path), "new")
      yield* Effect.scoped(fs.open(`${root}/created`, { flag: "w" }))
      assert.strictEqual(ByteSize.toBigInt((yield* fs.stat(`${root}/created`)).size), 0n)
      assertFailure(yield* Effect.flip(Effect.scoped(fs.open(`${root}/missing/f`, { flag: "w" }))), {
        reason: "NotFound",
        method: "open",
        code: "ENOENT"
      })
    }))

  it.effect("a and a+ append at EOF whatever the cursor; a+ reads from the cursor", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = `${root}/log`
      const result = yield* Effect.scoped(Effect.gen(function*() {
        const file = yield* fs.open(path, { flag: "a+", mode: 0o600 })
        yield* file.writeAll(bytes("abc"))
        const first = optionText(yield* file.readAlloc(10))
        yield* file.seek(1n, "start")
        yield* file.writeAll(bytes("XY"))
        const second = optionText(yield* file.readAlloc(10))
        const written = yield* file.write(bytes("!"))
        return { first, second, written }
      }))
      assert.deepStrictEqual(result, { first: "abc", second: "bcXY", written: 1 })
      yield* Effect.scoped(Effect.gen(function*() {
        const file = yield* fs.open(path, { flag: "a" })
        yield* file.seek(0n, "start")
        yield* file.writeAll(bytes("+"))
      }))
      assert.strictEqual(yield* fs.readFileString(path), "abcXY!+")
    }))

  it.effect("reads: positional reads keep the cursor, reads at or past EOF return nothing", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = `${root}/f`
      yield* fs.writeFileString(path, "0123456789")
      yield* Effect.scoped(Effect.gen(function*() {
        const file = yield* fs.open(path, { flag: "r" })
        assert.strictEqual(optionText(yield* file.readAlloc(3, { position: 4n })), "456")
        assert.strictEqual(optionText(yield* file.readAlloc(3)), "012")
        assert.strictEqual(optionText(yield* file.readAlloc(100)), "3456789")
        assert.isTrue(Option.isNone(yield* file.readAlloc(4)))
        assert.isTrue(Option.isNone(yield* file.readAlloc(4, { position: 10n })))
        assert.isTrue(Option.isNone(yield* file.readAlloc(4, { position: 1000n })))
        assert.isTrue(Option.isNone(yield* file.readAlloc(0, { position: 0n })))
        const buffer = new Uint8Array(4)
        assert.strictEqual(yield* file.read(buffer, { position: 8n }), 2)
        assert.strictEqual(text(buffer.subarray(0, 2)), "89")
        assert.strictEqual(yield* file.read(buffer, { position: 99n }), 0)
        yield* file.seek(2n, "start")
        assert.strictEqual(yield* file.read(buffer), 4)
        assert.strictEqual(text(buffer), "2345")
        assert.strictEqual(yield* file.seek(1n, "current"), 7n)
        assert.strictEqual(optionText(yield* file.readAlloc(10)), "789")
        assertFailure(yield* Effect.flip(file.read(buffer, { position: -1n })), {
          reason: "BadArgument",
          method: "read"
        })
        assertFailure(yield* Effect.flip(file.seek(-1n, "start")), { reason: "BadArgument", method: "seek" })
      }))
    }))

  it.effect("handles refuse what their flag does not allow", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = `${root}/f`
      yield* fs.writeFileString(path, "data")
      yield* Effect.scoped(Effect.gen(function*() {
        const reader = yield* fs.open(path, { flag: "r" })
        assertFailure(yield* Effect.flip(reader.writeAll(bytes("x"))), {
          reason: "Unknown",
          method: "writeAll",
          syscall: "write",
          pathOrDescriptor: "fd",
          code: "EBADF"
        })
        assertFailure(yield* Effect.flip(reader.write(bytes("x"))), {
          reason: "Unknown",
          method: "write",
          code: "EBADF"
        })
        assertFailure(yield* Effect.flip(reader.truncate(0)), {
          reason: "Unknown",
          method: "truncate",
          syscall: "ftruncate",
          code: "EINVAL"
        })
        yield* reader.sync
        const writer = yield* fs.open(path, { flag: "a" })
        assertFailure(yield* Effect.flip(writer.readAlloc(4)), {
          reason: "Unknown",
          method: "readAlloc",
          syscall: "read",
          pathOrDescriptor: "fd",
          code: "EBADF"
        })
      }))
    }))

  it.effect("a closed handle fails", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(`${root}/f`, "data")
      const file = yield* Effect.scoped(fs.open(`${root}/f`, { flag: "r+" }))
      assertFailure(yield* Effect.flip(file.readAlloc(4)), { reason: "Unknown", method: "readAlloc", code: "EBADF" })
      assertFailure(yield* Effect.flip(file.stat), {
        reason: "Unknown",
        method: "stat",
        syscall: "fstat",
        code: "EBADF"
      })
      assertFailure(yield* Effect.flip(file.sync), {
        reason: "Unknown",
        method: "sync",
        syscall: "fsync",
        code: "EBADF"
      })
      assertFailure(yield* Effect.flip(file.writeAll(bytes("x"))), {
        reason: "Unknown",
        method: "writeAll",
        code: "EBADF"
      })
      assert.strictEqual(yield* fs.readFileString(`${root}/f`), "data")
    }))

  it.effect("a directory opens read-only, syncs and stats, but cannot be read or written", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = `${root}/d`
      yield* fs.makeDirectory(dir, { mode: 0o700 })
      yield* Effect.scoped(Effect.gen(function*() {
        const handle = yield* fs.open(dir, { flag: "r" })
        yield* handle.sync
        const info = yield* handle.stat
        assert.strictEqual(info.type, "Directory")
        assert.strictEqual(permissions(info), 0o700)
        assertFailure(yield* Effect.flip(handle.readAlloc(10)), {
          reason: "BadResource",
          method: "readAlloc",
          syscall: "read",
          pathOrDescriptor: "fd",
          code: "EISDIR"
        })
      }))
      for (const flag of ["w", "r+", "a", "a+"] as const) {
        assertFailure(yield* Effect.flip(Effect.scoped(fs.open(dir, { flag }))), {
          reason: "BadResource",
          method: "open",
          syscall: "open",
          pathOrDescriptor: dir,
          code: "EISDIR"
        })
      }
      assertFailure(yield* Effect.flip(fs.readFile(dir)), {
        reason: "BadResource",
        method: "readFile",
        syscall: "read",
        pathOrDescriptor: dir,
        code: "EISDIR"
      })
      assertFailure(yield* Effect.flip(fs.writeFileString(dir, "x")), {
        reason: "BadResource",
        method: "writeFile",
        syscall: "open",
        code: "EISDIR"
      })
      assertFailure(yield* Effect.flip(fs.truncate(dir)), { reason: "BadResource", method: "truncate", code: "EISDIR" })
    }))

  it.effect("a file in the middle of a path is ENOTDIR; a missing path is ENOENT", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const file = `${root}/f`
      yield* fs.writeFileString(file, "x")
      assertFailure(yield* Effect.flip(fs.stat(`${file}/x`)), {
        reason: "BadResource",
        method: "stat",
        syscall: "stat",
        pathOrDescriptor: `${file}/x`,
        code: "ENOTDIR"
      })
      assertFailure(yield* Effect.flip(fs.readFile(`${file}/`)), {
        reason: "BadResource",
        method: "readFile",
        syscall: "open",
        code: "ENOTDIR"
      })
      assertFailure(yield* Effect.flip(fs.stat(`${file}/../f`)), { reason: "BadResource", method: "stat" })
      assertFailure(yield* Effect.flip(fs.exists(`${file}/x`)), { reason: "BadResource", method: "access" })
      assertFailure(yield* Effect.flip(fs.readDirectory(file)), {
        reason: "BadResource",
        method: "readDirectory",
        syscall: "scandir",
        code: "ENOTDIR"
      })
      assertFailure(yield* Effect.flip(fs.readFile(`${root}/nope`)), {
        reason: "NotFound",
        method: "readFile",
        syscall: "open",
        pathOrDescriptor: `${root}/nope`,
        code: "ENOENT"
      })
      assertFailure(yield* Effect.flip(fs.lstat(`${root}/nope`)), {
        reason: "NotFound",
        method: "lstat",
        syscall: "lstat",
        code: "ENOENT"
      })
      assertFailure(yield* Effect.flip(fs.access(`${root}/nope`)), { reason: "NotFound", method: "access" })
      assertFailure(yield* Effect.flip(fs.chmod(`${root}/nope`, 0o600)), {
        reason: "NotFound",
        method: "chmod",
        syscall: "chmod"
      })
      assertFailure(yield* Effect.flip(fs.readDirectory(`${root}/nope`)), {
        reason: "NotFound",
        method: "readDirectory",
        syscall: "scandir"
      })
      assert.isFalse(yield* fs.exists(`${root}/nope`))
      assert.isTrue(yield* fs.exists(file))
      assert.strictEqual((yield* fs.stat(`${root}/./d/../f`).pipe(Effect.flip)).reason._tag, "NotFound")
      assert.strictEqual((yield* fs.stat(`${root}/./f`)).type, "File")
    }))

  it.effect("symlinks: lstat sees the link, stat and open follow it, noFollow refuses it", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(`${root}/target`, "hello")
      yield* fs.symlink("target", `${root}/link`)
      const link = yield* fs.lstat(`${root}/link`)
      assert.strictEqual(link.type, "SymbolicLink")
      assert.strictEqual(typeBits(link), 0o120000)
      assert.strictEqual(ByteSize.toBigInt(link.size), BigInt("target".length))
      assert.strictEqual((yield* fs.stat(`${root}/link`)).type, "File")
      assert.strictEqual(yield* fs.readLink(`${root}/link`), "target")
      assert.strictEqual(yield* fs.realPath(`${root}/link`), `${root}/target`)
      assert.strictEqual(yield* fs.readFileString(`${root}/link`), "hello")
      const viaLink = yield* Effect.scoped(Effect.flatMap(fs.open(`${root}/link`), (file) => file.readAlloc(10)))
      assert.strictEqual(optionText(viaLink), "hello")
      for (const flag of ["r", "a", "w"] as const) {
        assertFailure(yield* Effect.flip(Effect.scoped(fs.open(`${root}/link`, { flag, noFollow: true }))), {
          reason: "BadResource",
          method: "open",
          syscall: "open",
          pathOrDescriptor: `${root}/link`,
          code: "ELOOP"
        })
      }
      const plain = yield* Effect.scoped(Effect.flatMap(fs.open(`${root}/target`, { noFollow: true }), (f) => f.stat))
      assert.strictEqual(plain.type, "File")
      assertFailure(yield* Effect.flip(fs.symlink("elsewhere", `${root}/link`)), {
        reason: "AlreadyExists",
        method: "symlink",
        syscall: "symlink",
        pathOrDescriptor: "elsewhere",
        code: "EEXIST"
      })
      assertFailure(yield* Effect.flip(fs.readLink(`${root}/target`)), {
        reason: "Unknown",
        method: "readLink",
        syscall: "readlink",
        code: "EINVAL"
      })
      yield* fs.makeDirectory(`${root}/dir`)
      yield* fs.symlink(`${root}/dir`, `${root}/dirlink`)
      yield* fs.writeFileString(`${root}/dirlink/inner`, "via")
      assert.deepStrictEqual(yield* fs.readDirectory(`${root}/dir`), ["inner"])
      assert.strictEqual(yield* fs.readFileString(`${root}/dirlink/../target`), "hello")
      const throughParent = yield* Effect.scoped(
        Effect.flatMap(fs.open(`${root}/dirlink/inner`, { noFollow: true }), (file) => file.readAlloc(10))
      )
      assert.strictEqual(optionText(throughParent), "via")
      assertFailure(yield* Effect.flip(fs.symlink("x", `${root}/missing/link`)), {
        reason: "NotFound",
        method: "symlink",
        syscall: "symlink",
        pathOrDescriptor: "x",
        code: "ENOENT"
      })
      assertFailure(yield* Effect.flip(fs.realPath(`${root}/missing`)), {
        reason: "NotFound",
        method: "realPath",
        syscall: "lstat",
        pathOrDescriptor: `${root}/missing`
      })
      assertFailure(yield* Effect.flip(fs.link(`${root}/dir`, `${root}/dirhard`)), {
        reason: "PermissionDenied",
        method: "link",
        syscall: "link",
        code: "EPERM"
      })
      yield* fs.remove(`${root}/link`)
      assert.strictEqual(yield* fs.readFileString(`${root}/target`), "hello")
    }))

  it.effect("dangling symlinks: listed and lstat-able, NotFound through, created through by w, EEXIST for wx", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.symlink("missing", `${root}/dangling`)
      assert.deepStrictEqual(yield* fs.readDirectory(root), ["dangling"])
      assert.deepStrictEqual(yield* fs.readDirectoryEntries(root), [{ name: "dangling", type: "SymbolicLink" }])
      assert.strictEqual((yield* fs.lstat(`${root}/dangling`)).type, "SymbolicLink")
      assertFailure(yield* Effect.flip(fs.stat(`${root}/dangling`)), {
        reason: "NotFound",
        method: "stat",
        syscall: "stat",
        code: "ENOENT"
      })
      assertFailure(yield* Effect.flip(fs.realPath(`${root}/dangling`)), {
        reason: "NotFound",
        method: "realPath",
        syscall: "stat"
      })
      assertFailure(yield* Effect.flip(fs.readDirectoryEntries(`${root}/dangling`)), {
        reason: "NotFound",
        method: "readDirectoryEntries",
        syscall: "scandir"
      })
      assert.isFalse(yield* fs.exists(`${root}/dangling`))
      assertFailure(yield* Effect.flip(Effect.scoped(fs.open(`${root}/dangling`, { flag: "wx" }))), {
        reason: "AlreadyExists",
        method: "open",
        code: "EEXIST"
      })
      assertFailure(yield* Effect.flip(Effect.scoped(fs.open(`${root}/dangling`, { flag: "w", noFollow: true }))), {
        reason: "BadResource",
        method: "open",
        code: "ELOOP"
      })
      yield* fs.writeFileString(`${root}/dangling`, "created")
      assert.strictEqual(yield* fs.readFileString(`${root}/missing`), "created")
      assert.deepStrictEqual((yield* fs.readDirectory(root)).sort(), ["dangling", "missing"])
    }))

  it.effect("rename replaces a file atomically and moves directories", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(`${root}/old`, "old")
      yield* fs.writeFileString(`${root}/tmp`, "new")
      const inode = (yield* fs.stat(`${root}/tmp`)).ino
      yield* fs.rename(`${root}/tmp`, `${root}/old`)
      assert.strictEqual(yield* fs.readFileString(`${root}/old`), "new")
      assert.deepStrictEqual((yield* fs.stat(`${root}/old`)).ino, inode)
      assert.isFalse(yield* fs.exists(`${root}/tmp`))
      yield* fs.rename(`${root}/old`, `${root}/old`)
      assert.strictEqual(yield* fs.readFileString(`${root}/old`), "new")

      yield* fs.makeDirectory(`${root}/a/b`, { recursive: true })
      yield* fs.writeFileString(`${root}/a/b/leaf`, "leaf")
      yield* fs.rename(`${root}/a`, `${root}/moved`)
      assert.strictEqual(yield* fs.readFileString(`${root}/moved/b/leaf`), "leaf")
      assert.isFalse(yield* fs.exists(`${root}/a`))
      yield* fs.makeDirectory(`${root}/empty`)
      yield* fs.rename(`${root}/moved`, `${root}/empty`)
      assert.deepStrictEqual(yield* fs.readDirectory(`${root}/empty`), ["b"])
    }))

  it.effect("rename failures match Node", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(`${root}/f`, "f")
      yield* fs.makeDirectory(`${root}/d/inner`, { recursive: true })
      yield* fs.makeDirectory(`${root}/e`)
      assertFailure(yield* Effect.flip(fs.rename(`${root}/nope`, `${root}/z`)), {
        reason: "NotFound",
        method: "rename",
        syscall: "rename",
        pathOrDescriptor: `${root}/nope`,
        code: "ENOENT"
      })
      assertFailure(yield* Effect.flip(fs.rename(`${root}/f`, `${root}/missing/f`)), {
        reason: "NotFound",
        method: "rename",
        pathOrDescriptor: `${root}/f`
      })
      assertFailure(yield* Effect.flip(fs.rename(`${root}/f`, `${root}/d`)), {
        reason: "BadResource",
        method: "rename",
        code: "EISDIR"
      })
      assertFailure(yield* Effect.flip(fs.rename(`${root}/e`, `${root}/f`)), {
        reason: "BadResource",
        method: "rename",
        code: "ENOTDIR"
      })
      assertFailure(yield* Effect.flip(fs.rename(`${root}/e`, `${root}/d`)), {
        reason: "Unknown",
        method: "rename",
        code: "ENOTEMPTY"
      })
      assertFailure(yield* Effect.flip(fs.rename(`${root}/d`, `${root}/d/inner/d`)), {
        reason: "Unknown",
        method: "rename",
        code: "EINVAL"
      })
      assertFailure(yield* Effect.flip(fs.rename(`${root}/f`, `${root}/g/`)), {
        reason: "BadResource",
        method: "rename",
        code: "ENOTDIR"
      })
    }))

  it.effect("an open handle keeps its inode across rename and unlink", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* Effect.scoped(Effect.gen(function*() {
        const file = yield* fs.open(`${root}/a`, { flag: "w" })
        yield* file.writeAll(bytes("one"))
        yield* fs.rename(`${root}/a`, `${root}/b`)
        yield* file.writeAll(bytes("two"))
        yield* file.sync
        assert.strictEqual(yield* fs.readFileString(`${root}/b`), "onetwo")
        yield* fs.remove(`${root}/b`)
        yield* file.writeAll(bytes("three"))
        assert.strictEqual(ByteSize.toBigInt((yield* file.stat).size), 11n)
      }))
      assert.deepStrictEqual(yield* fs.readDirectory(root), [])
    }))

  it.effect("remove: files, links, recursive directories; non-recursive directory and missing paths fail", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.makeDirectory(`${root}/d/e`, { recursive: true })
      yield* fs.writeFileString(`${root}/d/e/f`, "x")
      assertFailure(yield* Effect.flip(fs.remove(`${root}/d`)), {
        reason: "Unknown",
        method: "remove",
        syscall: "rm",
        pathOrDescriptor: `${root}/d`,
        code: "ERR_FS_EISDIR"
      })
      assertFailure(yield* Effect.flip(fs.remove(`${root}/nope`)), {
        reason: "NotFound",
        method: "remove",
        syscall: "lstat",
        pathOrDescriptor: `${root}/nope`,
        code: "ENOENT"
      })
      assertFailure(yield* Effect.flip(fs.remove(`${root}/d/e/f/`)), {
        reason: "BadResource",
        method: "remove",
        code: "ENOTDIR"
      })
      yield* fs.remove(`${root}/nope`, { force: true })
      yield* fs.remove(`${root}/nope/deeper`, { force: true })
      yield* fs.remove(`${root}/d/e/f`)
      assert.deepStrictEqual(yield* fs.readDirectory(`${root}/d/e`), [])
      yield* fs.writeFileString(`${root}/d/e/g`, "x")
      yield* fs.remove(`${root}/d`, { recursive: true })
      assert.deepStrictEqual(yield* fs.readDirectory(root), [])
    }))

  it.effect("readDirectory: names, recursive relative paths, entry types", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.makeDirectory(`${root}/a/b/c`, { recursive: true })
      yield* fs.writeFileString(`${root}/a/one`, "1")
      yield* fs.writeFileString(`${root}/a/b/two`, "2")
      yield* fs.writeFileString(`${root}/a/b/c/three`, "3")
      yield* fs.writeFileString(`${root}/top`, "t")
      assert.deepStrictEqual((yield* fs.readDirectory(root)).sort(), ["a", "top"])
      assert.deepStrictEqual((yield* fs.readDirectory(`${root}/`)).sort(), ["a", "top"])
      assert.deepStrictEqual(
        (yield* fs.readDirectory(root, { recursive: true })).sort(),
        ["a", "a/b", "a/b/c", "a/b/c/three", "a/b/two", "a/one", "top"]
      )
      const entries = [...yield* fs.readDirectoryEntries(`${root}/a`)].sort((x, y) => x.name.localeCompare(y.name))
      assert.deepStrictEqual(entries, [{ name: "b", type: "Directory" }, { name: "one", type: "File" }])
    }))

  it.effect("truncate shrinks and zero-extends; a handle's cursor is clamped; writes past EOF leave zeros", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = `${root}/f`
      yield* fs.writeFileString(path, "hello")
      yield* fs.truncate(path, 2)
      assert.strictEqual(yield* fs.readFileString(path), "he")
      yield* fs.truncate(path, 4)
      assert.deepStrictEqual([...yield* fs.readFile(path)], [104, 101, 0, 0])
      yield* fs.truncate(path)
      assert.strictEqual(yield* fs.readFileString(path), "")
      assertFailure(yield* Effect.flip(fs.truncate(`${root}/nope`)), {
        reason: "NotFound",
        method: "truncate",
        syscall: "open"
      })
      const cursor = yield* Effect.scoped(Effect.gen(function*() {
        const file = yield* fs.open(path, { flag: "w" })
        yield* file.seek(5n, "start")
        yield* file.writeAll(bytes("Z"))
        yield* file.truncate(3)
        const position = yield* file.seek(0n, "current")
        yield* file.writeAll(bytes("Q"))
        return position
      }))
      assert.strictEqual(cursor, 3n)
      assert.deepStrictEqual([...yield* fs.readFile(path)], [0, 0, 0, 81])
      yield* Effect.scoped(Effect.gen(function*() {
        const file = yield* fs.open(path, { flag: "a+" })
        yield* file.seek(4n, "start")
        yield* file.truncate(1)
        assert.strictEqual(yield* file.seek(0n, "current"), 4n)
      }))
      assert.strictEqual(ByteSize.toBigInt((yield* fs.stat(path)).size), 1n)
    }))

  it.effect("writeFile flags: w replaces, a appends, wx refuses, r+ overwrites the start", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = `${root}/f`
      yield* fs.writeFileString(path, "hello")
      yield* fs.writeFileString(path, " world", { flag: "a" })
      assert.strictEqual(yield* fs.readFileString(path), "hello world")
      yield* fs.writeFile(path, bytes("J"), { flag: "r+" })
      assert.strictEqual(yield* fs.readFileString(path), "Jello world")
      assertFailure(yield* Effect.flip(fs.writeFileString(path, "x", { flag: "wx" })), {
        reason: "AlreadyExists",
        method: "writeFile",
        syscall: "open",
        pathOrDescriptor: path,
        code: "EEXIST"
      })
      assertFailure(yield* Effect.flip(fs.writeFileString(path, "x", { flag: "r" })), {
        reason: "Unknown",
        method: "writeFile",
        syscall: "write",
        code: "EBADF"
      })
      yield* fs.writeFileString(path, "ünïcødé")
      assert.strictEqual(yield* fs.readFileString(path), "ünïcødé")
      assertFailure(yield* Effect.flip(fs.writeFileString(`${root}/newdir/`, "x")), {
        reason: "BadResource",
        method: "writeFile",
        code: "EISDIR"
      })
    }))

  it.effect("File.Info: bigint size, distinct inodes, one device, link counts, times", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(`${root}/a`, "12345")
      yield* fs.writeFileString(`${root}/b`, "")
      const a = yield* fs.stat(`${root}/a`)
      const b = yield* fs.stat(`${root}/b`)
      assert.strictEqual(ByteSize.toBigInt(a.size), 5n)
      assert.strictEqual(typeof ByteSize.toBigInt(a.size), "bigint")
      assert.isTrue(Option.isSome(a.ino) && Option.isSome(b.ino))
      assert.notDeepEqual(a.ino, b.ino)
      assert.strictEqual(a.dev, b.dev)
      assert.deepStrictEqual(a.nlink, Option.some(1n))
      assert.isTrue(Option.isSome(a.mtime))
      yield* fs.link(`${root}/a`, `${root}/hard`)
      assert.deepStrictEqual((yield* fs.stat(`${root}/a`)).nlink, Option.some(2n))
      assert.deepStrictEqual((yield* fs.stat(`${root}/hard`)).ino, a.ino)
      yield* fs.writeFileString(`${root}/hard`, "changed")
      assert.strictEqual(yield* fs.readFileString(`${root}/a`), "changed")
    }))

  it.effect("utimes sets times (numbers are seconds); a write moves mtime", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = `${root}/f`
      yield* fs.writeFileString(path, "x")
      yield* fs.utimes(path, 1000, new Date(2_000_000))
      const set = yield* fs.stat(path)
      assert.deepStrictEqual(set.atime, Option.some(new Date(1_000_000)))
      assert.deepStrictEqual(set.mtime, Option.some(new Date(2_000_000)))
      yield* Effect.scoped(Effect.flatMap(fs.open(path, { flag: "a" }), (file) => file.writeAll(bytes("y"))))
      assert.notDeepEqual((yield* fs.stat(path)).mtime, Option.some(new Date(2_000_000)))
      assertFailure(yield* Effect.flip(fs.utimes(`${root}/nope`, 1, 1)), {
        reason: "NotFound",
        method: "utime",
        syscall: "utime"
      })
    }))

  it.effect("copyFile copies bytes and mode; missing source and directory targets fail", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(`${root}/src`, "payload", { mode: 0o600 })
      yield* fs.copyFile(`${root}/src`, `${root}/dst`)
      assert.strictEqual(yield* fs.readFileString(`${root}/dst`), "payload")
      assert.strictEqual(permissions(yield* fs.stat(`${root}/dst`)), 0o600)
      assertFailure(yield* Effect.flip(fs.copyFile(`${root}/nope`, `${root}/x`)), {
        reason: "NotFound",
        method: "copyFile",
        syscall: "copyfile",
        pathOrDescriptor: `${root}/nope`
      })
      yield* fs.makeDirectory(`${root}/d`)
      assertFailure(yield* Effect.flip(fs.copyFile(`${root}/d`, `${root}/x`)), {
        reason: "BadResource",
        method: "copyFile",
        code: "EISDIR"
      })
    }))

  it.effect("temporary directories: scoped ones vanish with their scope", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const kept = yield* fs.makeTempDirectory({ directory: root, prefix: "keep-" })
      assert.isTrue(kept.startsWith(`${root}/keep-`))
      assert.strictEqual(permissions(yield* fs.stat(kept)), 0o700)
      const scoped = yield* Effect.scoped(Effect.gen(function*() {
        const dir = yield* fs.makeTempDirectoryScoped({ directory: root })
        yield* fs.writeFileString(`${dir}/inside`, "x")
        return dir
      }))
      assert.isFalse(yield* fs.exists(scoped))
      assert.deepStrictEqual(yield* fs.readDirectory(root), [kept.slice(root.length + 1)])
      assertFailure(yield* Effect.flip(fs.makeTempDirectory({ directory: `${root}/nope` })), {
        reason: "NotFound",
        method: "makeTempDirectory",
        syscall: "mkdtemp",
        pathOrDescriptor: `${root}/nope/`
      })
    }))

  it.effect("random positional writes read back like an array model", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const cases = fc.sample(
        fc.array(fc.tuple(fc.nat(64), fc.uint8Array({ maxLength: 16 })), { maxLength: 12 }),
        { numRuns: fuzzRuns(40), seed: 7 }
      )
      for (const [n, writes] of cases.entries()) {
        const model: Array<number> = []
        yield* Effect.scoped(Effect.gen(function*() {
          const file = yield* fs.open(`${root}/case-${n}`, { flag: "w+" })
          for (const [position, data] of writes) {
            yield* file.seek(BigInt(position), "start")
            yield* file.writeAll(data)
            // An empty write does not extend the file.
            while (data.length > 0 && model.length < position) model.push(0)
            data.forEach((byte, i) => {
              model[position + i] = byte
            })
          }
          const read = yield* file.readAlloc(200, { position: 0n })
          assert.deepStrictEqual(Option.match(read, { onNone: () => [], onSome: (data) => [...data] }), model)
        }))
      }
    }))

  it.prop(
    "writeFile then readFile returns the same bytes",
    [Schema.Uint8Array],
    ([data], { root }) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        yield* fs.writeFile(`${root}/blob`, data, { mode: 0o600 })
        assert.deepStrictEqual([...yield* fs.readFile(`${root}/blob`)], [...data])
        assert.strictEqual(ByteSize.toBigInt((yield* fs.stat(`${root}/blob`)).size), BigInt(data.length))
      }),
    { arbitrary: { runs: fuzzRuns(20) } }
  )
}, [memoryWorld, nodeWorld, threadpoolWorld])

/** The non-blocking open of the world's file system; every world in these suites has one. */
const nonBlocking = (fs: FileSystem.FileSystem) => {
  const open = nonBlockingOpenOf(fs)
  assert.isDefined(open, "the file system carries the non-blocking open")
  return open!
}

fileSystemSuite("FileSystem conformance: special files", (it) => {
  it.effect("stat, lstat and directory listings report FIFOs, sockets and devices", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      for (const kind of specialKinds) yield* makeSpecial(`${root}/${kind}`, kind)
      const listed = new Map((yield* fs.readDirectoryEntries(root)).map((entry) => [entry.name, entry.type]))
      assert.strictEqual(listed.get("fifo"), "FIFO")
      assert.strictEqual(listed.get("socket"), "Socket")
      const fifo = yield* fs.stat(`${root}/fifo`)
      assert.strictEqual(fifo.type, "FIFO")
      assert.strictEqual(typeBits(fifo), 0o010000)
      assert.strictEqual(ByteSize.toBigInt(fifo.size), 0n)
      assert.strictEqual((yield* fs.lstat(`${root}/fifo`)).type, "FIFO")
      const socket = yield* fs.stat(`${root}/socket`)
      assert.strictEqual(socket.type, "Socket")
      assert.strictEqual(typeBits(socket), 0o140000)
      for (const device of ["zero", "urandom", "null"] as const) {
        assert.strictEqual(listed.get(device), "SymbolicLink")
        assert.strictEqual((yield* fs.lstat(`${root}/${device}`)).type, "SymbolicLink")
        const info = yield* fs.stat(`${root}/${device}`)
        assert.strictEqual(info.type, "CharacterDevice", device)
        assert.strictEqual(typeBits(info), 0o020000)
        assert.strictEqual(ByteSize.toBigInt(info.size), 0n)
      }
    }))

  it.effect("a FIFO opened read-write opens at once, a socket never opens", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* makeSpecial(`${root}/fifo`, "fifo")
      yield* makeSpecial(`${root}/socket`, "socket")
      const info = yield* Effect.scoped(Effect.flatMap(fs.open(`${root}/fifo`, { flag: "r+" }), (file) => file.stat))
      assert.strictEqual(info.type, "FIFO")
      assertFailure(yield* Effect.flip(Effect.scoped(fs.open(`${root}/socket`))), {
        reason: "Unknown",
        method: "open",
        syscall: "open",
        pathOrDescriptor: `${root}/socket`,
        code: "ENXIO"
      })
    }))

  it.effect("devices: zero and urandom fill every positional read, null reads nothing and swallows writes", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      for (const device of ["zero", "urandom", "null"] as const) yield* makeSpecial(`${root}/${device}`, device)
      const readOf = (path: string, size: number) =>
        Effect.scoped(Effect.flatMap(fs.open(path), (file) => file.readAlloc(size, { position: 1000n })))
      const zeros = yield* readOf(`${root}/zero`, 4096)
      assert.deepStrictEqual(
        Option.map(zeros, (data) => [data.length, data.every((byte) => byte === 0)]),
        Option.some([4096, true])
      )
      const random = Option.getOrThrow(yield* readOf(`${root}/urandom`, 4096))
      assert.strictEqual(random.length, 4096)
      assert.isAbove(new Set(random).size, 100, "random bytes")
      assert.isTrue(Option.isNone(yield* readOf(`${root}/null`, 10)))
      yield* fs.writeFileString(`${root}/null`, "gone")
      assert.strictEqual(ByteSize.toBigInt((yield* fs.stat(`${root}/null`)).size), 0n)
    }))
}, [memoryWorld, nodeWorld, threadpoolWorld])

fileSystemSuite("FileSystem conformance: the non-blocking open", (it) => {
  it.effect("a FIFO opens for reading at once (a handle's positional read is ESPIPE); for writing it is ENXIO", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const open = nonBlocking(fs)
      yield* makeSpecial(`${root}/fifo`, "fifo")
      const read = yield* Effect.scoped(Effect.gen(function*() {
        const file = yield* open(`${root}/fifo`, { flag: "r", noFollow: true })
        return { info: yield* file.stat, read: yield* Effect.flip(file.read(new Uint8Array(16))) }
      }))
      assert.strictEqual(read.info.type, "FIFO")
      assertFailure(read.read, {
        reason: "Unknown",
        method: "read",
        syscall: "read",
        pathOrDescriptor: "fd",
        code: "ESPIPE"
      })
      const readWrite = yield* Effect.scoped(
        Effect.flatMap(open(`${root}/fifo`, { flag: "a+", noFollow: true }), (f) => f.stat)
      )
      assert.strictEqual(readWrite.type, "FIFO")
      for (const flag of ["a", "w"] as const) {
        assertFailure(yield* Effect.flip(Effect.scoped(open(`${root}/fifo`, { flag, noFollow: true }))), {
          reason: "Unknown",
          method: "open",
          syscall: "open",
          pathOrDescriptor: `${root}/fifo`,
          code: "ENXIO"
        })
      }
    }))

  it.effect("sockets are ENXIO, devices open, final symlinks are ELOOP under noFollow", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const open = nonBlocking(fs)
      yield* makeSpecial(`${root}/socket`, "socket")
      yield* makeSpecial(`${root}/zero`, "zero")
      assertFailure(yield* Effect.flip(Effect.scoped(open(`${root}/socket`, { flag: "r", noFollow: false }))), {
        reason: "Unknown",
        method: "open",
        code: "ENXIO"
      })
      const zero = yield* Effect.scoped(
        Effect.flatMap(open(`${root}/zero`, { flag: "r", noFollow: false }), (f) => f.stat)
      )
      assert.strictEqual(zero.type, "CharacterDevice")
      assertFailure(yield* Effect.flip(Effect.scoped(open(`${root}/zero`, { flag: "r", noFollow: true }))), {
        reason: "BadResource",
        method: "open",
        code: "ELOOP"
      })
    }))

  it.effect("directory: opens a directory, ENOTDIR for a file and for a symlink to a directory", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const open = nonBlocking(fs)
      yield* fs.makeDirectory(`${root}/dir`)
      yield* fs.writeFileString(`${root}/file`, "x")
      yield* fs.symlink(`${root}/dir`, `${root}/link`)
      const info = yield* Effect.scoped(
        Effect.flatMap(open(`${root}/dir`, { flag: "r", noFollow: true, directory: true }), (file) => file.stat)
      )
      assert.strictEqual(info.type, "Directory")
      assertFailure(
        yield* Effect.flip(Effect.scoped(open(`${root}/file`, { flag: "r", noFollow: true, directory: true }))),
        {
          reason: "BadResource",
          method: "open",
          code: "ENOTDIR"
        }
      )
      assertFailure(
        yield* Effect.flip(Effect.scoped(open(`${root}/link`, { flag: "r", noFollow: true, directory: true }))),
        {
          reason: "BadResource",
          method: "open",
          code: "ENOTDIR"
        }
      )
    }))

  it.effect("a+ creates with the mode; reads and appends like open; the handle's chmod lands on the opened file", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const open = nonBlocking(fs)
      yield* fs.writeFileString(`${root}/outside`, "keep")
      yield* fs.chmod(`${root}/outside`, 0o644)
      yield* Effect.scoped(Effect.gen(function*() {
        const file = yield* open(`${root}/f`, { flag: "a+", mode: 0o600, noFollow: true })
        yield* file.writeAll(bytes("one\n"))
        assert.strictEqual(optionText(yield* file.readAlloc(10, { position: 0n })), "one\n")
        assert.strictEqual(permissions(yield* file.stat), 0o600)
        // The path now names a symlink to another file; the chmod still lands on the file that is open.
        yield* fs.rename(`${root}/f`, `${root}/moved`)
        yield* fs.symlink(`${root}/outside`, `${root}/f`)
        const chmod = handleChmodOf(file)
        assert.isDefined(chmod)
        yield* chmod!(0o640)
      }))
      assert.strictEqual(permissions(yield* fs.stat(`${root}/moved`)), 0o640)
      assert.strictEqual(permissions(yield* fs.stat(`${root}/outside`)), 0o644)
      assert.strictEqual(yield* fs.readFileString(`${root}/outside`), "keep")
    }))

  it.effect("files and directories are created owned by the user the file system acts as", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(`${root}/f`, "x")
      yield* fs.makeDirectory(`${root}/d`)
      const uid = processUidOf(fs)
      assert.isDefined(uid)
      assert.deepStrictEqual((yield* fs.stat(`${root}/f`)).uid, Option.some(uid!))
      assert.deepStrictEqual((yield* fs.stat(`${root}/d`)).uid, Option.some(uid!))
    }))
}, [memoryWorld, nodeWorld, nonBlockingThreadpoolWorld])
