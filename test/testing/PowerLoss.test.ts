/**
 * The power-loss half of the in-memory crash model: a directory operation
 * survives a power cut only once a directory it changed was fsynced, and a
 * `DirectoryLoss` chooses which pending ones an image loses.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem } from "effect"
import {
  type DirectoryLoss,
  makeMemoryFileSystem,
  type MemoryFileSystemShape
} from "../../src/testing/MemoryFileSystem.js"

const encoder = new TextEncoder()
const decoder = new TextDecoder()

const on = <A, E>(fs: MemoryFileSystemShape, effect: Effect.Effect<A, E, FileSystem.FileSystem>) =>
  Effect.provideService(effect, FileSystem.FileSystem, fs)

/** Writes a file whole and fsyncs it (its data durable, its name not yet). */
const writeSynced = (path: string, text: string) =>
  Effect.scoped(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = yield* fs.open(path, { flag: "w" })
    yield* file.writeAll(encoder.encode(text))
    yield* file.sync
  }))

const syncDirectory = (path: string) =>
  Effect.scoped(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = yield* fs.open(path, { flag: "r" })
    yield* dir.sync
  }))

/** The files under `under` with their contents, and the directories as "dir". */
const tree = (image: MemoryFileSystemShape, under = "/d") =>
  Object.fromEntries(
    image.snapshot(under).map((entry) => [entry.path, entry.type === "File" ? decoder.decode(entry.data) : "dir"])
  )

const power = (fs: MemoryFileSystemShape, loss: DirectoryLoss) => tree(fs.crashImage("power", loss))

describe("power loss of directory entries", () => {
  it.effect("a new file survives only once its directory is fsynced; with its name goes its data", () =>
    Effect.gen(function*() {
      const fs = makeMemoryFileSystem({ files: { "/d/.keep": "" } })
      yield* on(fs, writeSynced("/d/new", "data"))
      assert.deepStrictEqual(power(fs, "none"), { "/d": "dir", "/d/.keep": "", "/d/new": "data" })
      assert.deepStrictEqual(power(fs, "all"), { "/d": "dir", "/d/.keep": "" })
      assert.deepStrictEqual(tree(fs.crashImage("process", "all")), power(fs, "none"), "a SIGKILL loses nothing")
      yield* on(fs, syncDirectory("/d"))
      assert.deepStrictEqual(fs.pendingDirectoryOperations(), [])
      assert.deepStrictEqual(power(fs, "all"), power(fs, "none"))
    }))

  it.effect("a rename over a file is lost or kept whole, never half", () =>
    Effect.gen(function*() {
      const fs = makeMemoryFileSystem({ files: { "/d/claim": "old" } })
      yield* on(
        fs,
        Effect.gen(function*() {
          yield* writeSynced("/d/claim.tmp", "new")
          yield* syncDirectory("/d")
          yield* (yield* FileSystem.FileSystem).rename("/d/claim.tmp", "/d/claim")
        })
      )
      assert.deepStrictEqual(fs.pendingDirectoryOperations(), [
        { index: 0, method: "rename", paths: ["/d/claim.tmp", "/d/claim"] }
      ])
      assert.deepStrictEqual(power(fs, "none"), { "/d": "dir", "/d/claim": "new" })
      assert.deepStrictEqual(power(fs, { lost: [0] }), { "/d": "dir", "/d/claim": "old", "/d/claim.tmp": "new" })
    }))

  it.effect("a lost unlink brings the name back with its synced data; a lost link takes one away", () =>
    Effect.gen(function*() {
      const fs = makeMemoryFileSystem({ files: { "/d/a": "kept", "/d/b": "gone" } })
      yield* on(
        fs,
        Effect.gen(function*() {
          const service = yield* FileSystem.FileSystem
          yield* service.remove("/d/b")
          yield* service.link("/d/a", "/d/a2")
        })
      )
      assert.deepStrictEqual(fs.pendingDirectoryOperations().map(({ method, paths }) => [method, ...paths]), [
        ["unlink", "/d/b"],
        ["link", "/d/a2"]
      ])
      assert.deepStrictEqual(power(fs, { lost: [0] }), { "/d": "dir", "/d/a": "kept", "/d/a2": "kept", "/d/b": "gone" })
      const image = fs.crashImage("power", { lost: [1] })
      assert.deepStrictEqual(tree(image), { "/d": "dir", "/d/a": "kept" })
      // The image's link counts are its own: the lost link is not counted.
      const nlink = (yield* image.stat("/d/a")).nlink
      assert.deepStrictEqual(nlink._tag === "Some" ? nlink.value : undefined, 1n)
    }))

  it.effect("a lost mkdir takes the whole new tree with it, even what was fsynced inside it", () =>
    Effect.gen(function*() {
      const fs = makeMemoryFileSystem({ files: { "/d/.keep": "" } })
      yield* on(
        fs,
        Effect.gen(function*() {
          yield* (yield* FileSystem.FileSystem).makeDirectory("/d/sub/deeper", { recursive: true })
          yield* writeSynced("/d/sub/deeper/file", "x")
          yield* syncDirectory("/d/sub/deeper")
          yield* syncDirectory("/d/sub")
        })
      )
      assert.deepStrictEqual(fs.pendingDirectoryOperations().map(({ method, paths }) => [method, ...paths]), [
        ["mkdir", "/d/sub"]
      ])
      assert.deepStrictEqual(power(fs, "all"), { "/d": "dir", "/d/.keep": "" })
      assert.deepStrictEqual(power(fs, "none")["/d/sub/deeper/file"], "x")
    }))

  it.effect("a rename across directories is made durable by an fsync of either one", () =>
    Effect.gen(function*() {
      for (const synced of ["/d/from", "/d/to"]) {
        const fs = makeMemoryFileSystem({ files: { "/d/from/f": "x", "/d/to/.keep": "" } })
        yield* on(
          fs,
          Effect.gen(function*() {
            yield* (yield* FileSystem.FileSystem).rename("/d/from/f", "/d/to/f")
            yield* syncDirectory(synced)
          })
        )
        assert.deepStrictEqual(fs.pendingDirectoryOperations(), [], synced)
        assert.deepStrictEqual(power(fs, "all"), {
          "/d": "dir",
          "/d/from": "dir",
          "/d/to": "dir",
          "/d/to/.keep": "",
          "/d/to/f": "x"
        }, synced)
      }
    }))

  it.effect("an fsync makes the pending operations of that directory durable, not those of others", () =>
    Effect.gen(function*() {
      const fs = makeMemoryFileSystem({ files: { "/d/one/.keep": "", "/d/two/.keep": "" } })
      yield* on(
        fs,
        Effect.gen(function*() {
          yield* writeSynced("/d/one/a", "a")
          yield* writeSynced("/d/two/b", "b")
          yield* syncDirectory("/d/one")
          // A name set again after an fsync: a loss brings back the durable value, not the older one.
          yield* (yield* FileSystem.FileSystem).remove("/d/one/a")
        })
      )
      assert.deepStrictEqual(fs.pendingDirectoryOperations().map(({ method, paths }) => [method, ...paths]), [
        ["create", "/d/two/b"],
        ["unlink", "/d/one/a"]
      ])
      const all = power(fs, "all")
      assert.strictEqual(all["/d/one/a"], "a")
      assert.isUndefined(all["/d/two/b"])
      assert.deepStrictEqual(power(fs, { lost: [0] })["/d/one/a"], undefined)
    }))

  it.effect("an image has nothing pending: what it holds is on disk", () =>
    Effect.gen(function*() {
      const fs = makeMemoryFileSystem({ files: { "/d/.keep": "" } })
      yield* on(fs, writeSynced("/d/new", "data"))
      const image = fs.crashImage("power", "none")
      assert.deepStrictEqual(image.pendingDirectoryOperations(), [])
      assert.deepStrictEqual(tree(image.crashImage("power", "all")), tree(image))
    }))
})
