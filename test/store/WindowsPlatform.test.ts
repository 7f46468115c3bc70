/**
 * The store on what Windows offers, on the memory file system's Windows
 * profile (and on POSIX, where the behaviour must not change), and the
 * exclusive create where a file system has no hard links.
 *
 * The profile itself is held to what libuv reports on Windows: directory
 * fsync and `fchmod` of a directory fail `EPERM`, modes are 0666, opens have
 * no `O_NOFOLLOW`, names are case-insensitive. On it, no chmod is attempted
 * and no directory is fsynced, symlinks are still refused (by comparing the
 * path's `lstat` with the handle's `fstat`), and the whole cycle commits
 * without an error after its commit. A file system whose `link` fails as
 * FAT's does still creates claims and locks exclusively, never exposing a
 * partial one.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem, Layer, Path, PlatformError } from "effect"
import { errnoOf } from "../../src/io/ErrnoCode.js"
import { handleChmodOf, platformTraitsOf, POSIX_TRAITS, WIN32_TRAITS } from "../../src/io/NonBlockingOpen.js"
import { openDirectory, openRegular, readBounded } from "../../src/io/RegularFile.js"
import * as DirectFileSystem from "../../src/platform/DirectFileSystem.js"
import { lockTempPath } from "../../src/store/lock/CommitLock.js"
import { installExclusive, syncDirectory, writeDurableTemp } from "../../src/store/write/DurableFile.js"
import { readClaim } from "../../src/store/write/JobClaims.js"
import { ensurePrivateDirectories } from "../../src/store/write/PrivateDirectory.js"
import { errnoError } from "../../src/testing/Errno.js"
import { makeMemoryFileSystem, MemoryFileSystem } from "../../src/testing/MemoryFileSystem.js"
import { jobId, summaryReceipt } from "../support/Receipts.js"
import { assertNoLeftovers, claimOf, reserveAcquired, setup } from "./StoreKit.js"

const win32Layer = Layer.merge(MemoryFileSystem.layerWith({ platform: "win32" }), Path.layer)

describe("the memory file system's Windows profile", () => {
  it.effect("reports libuv's Windows answers: 0666 modes, EPERM directory fsync and fchmod, no O_NOFOLLOW", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      assert.deepStrictEqual(platformTraitsOf(fs), WIN32_TRAITS)
      yield* fs.makeDirectory("/tmp/dir", { mode: 0o700 })
      assert.strictEqual((yield* fs.stat("/tmp/dir")).mode & 0o777, 0o666)
      yield* fs.writeFileString("/tmp/dir/file", "x", { mode: 0o600 })
      assert.strictEqual((yield* fs.stat("/tmp/dir/file")).mode & 0o777, 0o666)
      yield* fs.chmod("/tmp/dir/file", 0o400)
      assert.strictEqual((yield* fs.stat("/tmp/dir/file")).mode & 0o777, 0o444, "chmod only sets read-only")
      yield* Effect.scoped(Effect.gen(function*() {
        const directory = yield* fs.open("/tmp/dir", { flag: "r" })
        assert.strictEqual(errnoOf(yield* Effect.flip(directory.sync)), "EPERM")
        assert.strictEqual(errnoOf(yield* Effect.flip(handleChmodOf(directory)!(0o700))), "EPERM")
      }))
      yield* fs.symlink("/tmp/dir/file", "/tmp/link")
      const followed = yield* Effect.scoped(Effect.flatMap(fs.open("/tmp/link", { noFollow: true }), (f) => f.stat))
      assert.strictEqual(followed.type, "File", "noFollow is not there to refuse the symlink")
    }).pipe(Effect.provide(win32Layer)))

  it.effect("looks names up without regard to case, keeping the spelling they were made with", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.makeDirectory("/tmp/Project")
      yield* fs.writeFileString("/tmp/Project/Trace.jsonl", "one\n")
      assert.strictEqual(yield* fs.readFileString("/tmp/PROJECT/trace.JSONL"), "one\n")
      assert.strictEqual((yield* Effect.flip(fs.makeDirectory("/tmp/project"))).reason._tag, "AlreadyExists")
      yield* fs.rename("/tmp/project/TRACE.jsonl", "/tmp/project/other.jsonl")
      assert.deepStrictEqual(yield* fs.readDirectory("/tmp/Project"), ["other.jsonl"])
    }).pipe(Effect.provide(win32Layer)))

  it.effect("an open file can be renamed and deleted (share-delete), and its folder removed", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.makeDirectory("/tmp/session")
      yield* fs.writeFileString("/tmp/session/trace.jsonl", "x")
      yield* Effect.scoped(Effect.gen(function*() {
        yield* fs.open("/tmp/session/trace.jsonl", { flag: "r" })
        yield* fs.rename("/tmp/session/trace.jsonl", "/tmp/session/renamed.jsonl")
        yield* fs.remove("/tmp/session", { recursive: true })
        assert.isFalse(yield* fs.exists("/tmp/session"))
      }))
    }).pipe(Effect.provide(win32Layer)))
})

describe("the store's file steps on Windows", () => {
  it.effect("the Node file systems carry the host's traits: POSIX's here, Windows' under win32", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      assert.deepStrictEqual(platformTraitsOf(fs), process.platform === "win32" ? WIN32_TRAITS : POSIX_TRAITS)
    }).pipe(Effect.provide(DirectFileSystem.layer)))

  it.effect("private directories are made without any chmod, and a symlinked component is still refused", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      yield* ensurePrivateDirectories(fs, path, "/tmp/rarebit", ["/tmp/rarebit/jobs-v4", "/tmp/rarebit/a/b"])
      assert.strictEqual((yield* fs.stat("/tmp/rarebit/a/b")).type, "Directory")
      // Outside the root, as the reference makes it: mkdir -p, and no chmod where modes mean nothing.
      yield* ensurePrivateDirectories(fs, path, "/tmp/rarebit", ["/tmp/elsewhere/c"])
      assert.strictEqual((yield* fs.stat("/tmp/elsewhere/c")).type, "Directory")
      yield* fs.makeDirectory("/tmp/target")
      yield* fs.symlink("/tmp/target", "/tmp/rarebit/planted")
      const error = yield* Effect.flip(
        ensurePrivateDirectories(fs, path, "/tmp/rarebit", ["/tmp/rarebit/planted/x"])
      )
      assert.strictEqual(error._tag, "UnsafeDirectory")
      assert.isFalse(yield* fs.exists("/tmp/target/x"), "nothing made through the symlink")
    }).pipe(Effect.provide(win32Layer)))

  it.effect("a directory fsync is skipped where a directory cannot be fsynced, and still made on POSIX", () =>
    Effect.gen(function*() {
      const win32 = makeMemoryFileSystem({ platform: "win32" })
      yield* win32.makeDirectory("/tmp/jobs")
      yield* syncDirectory(win32, "/tmp/jobs")
      assert.strictEqual(win32.syncCount("/tmp/jobs"), 0)
      const posix = makeMemoryFileSystem()
      assert.deepStrictEqual(platformTraitsOf(posix), POSIX_TRAITS)
      yield* posix.makeDirectory("/tmp/jobs")
      yield* syncDirectory(posix, "/tmp/jobs")
      assert.strictEqual(posix.syncCount("/tmp/jobs"), 1)
    }))

  it.effect("without O_NOFOLLOW a symlink is refused by identity: regular files, claims and directories", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString("/tmp/target.json", "{\"jobId\":\"x\"}\n")
      yield* fs.symlink("/tmp/target.json", "/tmp/claim.json")
      yield* fs.makeDirectory("/tmp/dir")
      yield* fs.symlink("/tmp/dir", "/tmp/junction")
      const opened = yield* Effect.flip(
        Effect.scoped(openRegular(fs, "/tmp/claim.json", { flag: "r", followSymlinks: false }))
      )
      assert.strictEqual(opened._tag, "FileNotRegular")
      assert.strictEqual((opened as { readonly type?: string }).type, "SymbolicLink")
      const appended = yield* Effect.flip(
        Effect.scoped(openRegular(fs, "/tmp/claim.json", { flag: "a+", followSymlinks: false }))
      )
      assert.strictEqual((appended as { readonly type?: string }).type, "SymbolicLink")
      const read = yield* Effect.flip(readBounded(fs, "/tmp/claim.json", { maxBytes: 100, followSymlinks: false }))
      assert.strictEqual((read as { readonly type?: string }).type, "SymbolicLink")
      const claim = yield* readClaim(fs, "/tmp/claim.json")
      assert.strictEqual(claim._tag, "Torn")
      assert.strictEqual(claim._tag === "Torn" ? claim.unreadable : undefined, "a symlink, not a regular file")
      const directory = yield* Effect.flip(Effect.scoped(openDirectory(fs, "/tmp/junction")))
      assert.strictEqual(directory._tag, "NotDirectory")
      // Followed where the caller asks for it (Sessions), and the target is untouched by all of the above.
      const followed = yield* Effect.scoped(openRegular(fs, "/tmp/claim.json", { flag: "r", followSymlinks: true }))
      assert.strictEqual(followed.info.type, "File")
      assert.strictEqual(yield* fs.readFileString("/tmp/target.json"), "{\"jobId\":\"x\"}\n")
    }).pipe(Effect.provide(win32Layer)))

  it.effect("reserve, settle, a duplicate and a release commit on Windows without an error after the commit", () =>
    Effect.gen(function*() {
      const kit = yield* setup("/tmp/store")
      const reservation = yield* reserveAcquired(kit)
      const receipt = summaryReceipt(kit.branch, "s")
      yield* kit.store.settle(reservation, receipt)
      assert.strictEqual((yield* claimOf(kit, jobId(1))).state, "settled")
      const again = yield* kit.store.reserve({ jobId: jobId(1), sessionFile: kit.sessionFile })
      assert.strictEqual(again._tag, "Duplicate")
      // Through another spelling of the same Session, on a case-insensitive volume.
      const current = yield* kit.store.readCurrent({ sessionFile: "/tmp/store/sessions/PROJECT/Trace.JSONL" })
      assert.strictEqual(current.availability, "available")
      const second = yield* reserveAcquired(kit, jobId(2))
      yield* kit.store.release(second)
      assert.strictEqual((yield* reserveAcquired(kit, jobId(2)))._tag, "Acquired")
      yield* assertNoLeftovers(kit, "after the cycle")
    }).pipe(Effect.provide(win32Layer)))

  it("lock temp paths split on both separators only where backslash is one", () => {
    const long = `C:\\Users\\pi\\rarebit\\materializations-v4\\${"s".repeat(230)}.jsonl.commit-lock`
    assert.strictEqual(
      lockTempPath(long, "tok", true),
      "C:\\Users\\pi\\rarebit\\materializations-v4\\.commit-lock.tok.tmp"
    )
    assert.strictEqual(
      lockTempPath("C:\\r\\trace.jsonl.commit-lock", "tok", true),
      "C:\\r\\trace.jsonl.commit-lock.tok.tmp"
    )
    // On POSIX a backslash is part of a name: the temp stays beside the lock, named after the last `/`.
    const posix = `/r/a\\${"s".repeat(240)}.commit-lock`
    assert.strictEqual(lockTempPath(posix, "tok"), "/r/.commit-lock.tok.tmp")
  })
})

/** The memory file system whose `link` fails as it does on FAT or an SMB share without hard links. */
const withoutHardLinks = (code: "EPERM" | "EXDEV") => {
  const memory = makeMemoryFileSystem()
  const fs: FileSystem.FileSystem = FileSystem.make({
    ...memory,
    link: (fromPath) => Effect.fail(errnoError({ code, method: "link", syscall: "link", pathOrDescriptor: fromPath }))
  })
  return { memory, fs }
}

describe("exclusive creates without hard links", () => {
  it.effect("falls back to a wx placeholder and a rename: the target is whole, an existing one is kept", () =>
    Effect.gen(function*() {
      const { fs, memory } = withoutHardLinks("EPERM")
      yield* writeDurableTemp(fs, "/tmp/claim.json.a.tmp", "{\"first\":true}\n")
      assert.isTrue(yield* installExclusive(fs, "/tmp/claim.json.a.tmp", "/tmp/claim.json"))
      assert.strictEqual(yield* fs.readFileString("/tmp/claim.json"), "{\"first\":true}\n")
      assert.isFalse(yield* fs.exists("/tmp/claim.json.a.tmp"), "the rename used the temp file")
      yield* writeDurableTemp(fs, "/tmp/claim.json.b.tmp", "{\"second\":true}\n")
      assert.isFalse(yield* installExclusive(fs, "/tmp/claim.json.b.tmp", "/tmp/claim.json"))
      assert.strictEqual(yield* fs.readFileString("/tmp/claim.json"), "{\"first\":true}\n")
      assert.strictEqual(memory.syncCount("/tmp/claim.json.b.tmp"), 1, "the losing temp was written whole too")
    }))

  it.effect("the store reserves, settles and sees duplicates on a file system without hard links", () => {
    const { fs } = withoutHardLinks("EXDEV")
    return Effect.gen(function*() {
      const kit = yield* setup("/tmp/store", { fs })
      const reservation = yield* reserveAcquired(kit)
      const taken = yield* kit.store.reserve({ jobId: jobId(1), sessionFile: kit.sessionFile })
      assert.strictEqual(taken._tag, "InFlight")
      yield* kit.store.settle(reservation, summaryReceipt(kit.branch, "s"))
      assert.strictEqual((yield* claimOf(kit, jobId(1))).state, "settled")
      const again = yield* kit.store.reserve({ jobId: jobId(1), sessionFile: kit.sessionFile })
      assert.strictEqual(again._tag, "Duplicate")
      yield* assertNoLeftovers(kit, "after the cycle")
    }).pipe(Effect.provideService(FileSystem.FileSystem, fs), Effect.provide(Path.layer))
  })

  it.effect("a link failure that is not about hard links is reported, not worked around", () =>
    Effect.gen(function*() {
      const memory = makeMemoryFileSystem()
      const fs = FileSystem.make({
        ...memory,
        link: (fromPath) =>
          Effect.fail(errnoError({ code: "EACCES", method: "link", syscall: "link", pathOrDescriptor: fromPath }))
      })
      yield* writeDurableTemp(fs, "/tmp/c.tmp", "x")
      const error = yield* Effect.flip(installExclusive(fs, "/tmp/c.tmp", "/tmp/c"))
      assert.isTrue(PlatformError.isPlatformError(error))
      assert.strictEqual(errnoOf(error), "EACCES")
      assert.isFalse(yield* fs.exists("/tmp/c"))
    }))
})
