/**
 * `FileSystem.watch` on both worlds: the events Node's `fs.watch` gives on
 * Linux (through Effect's `watch`, which turns a `rename` into `Create` or
 * `Remove` by a `stat` of the name) are the events the in-memory model
 * gives for the same operations.
 *
 * Linux does not promise how many events one operation makes (inotify folds
 * identical events in a row; an overwrite is one `change` or two), nor when
 * Node's `stat` of a renamed name runs, so each step asserts the events that
 * must come and tolerates only named others. A step ends when a sentinel
 * file made after it has been reported; every step uses names of its own,
 * so a late event of one step cannot pass for one of the next.
 */
import { assert } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, FileSystem, Queue, Stream } from "effect"
import type { MemoryFileSystemShape } from "../../src/testing/MemoryFileSystem.js"
import { assertFailure, fileSystemSuite, memoryWorld, nodeWorld, threadpoolWorld } from "../support/FileSystemSuite.js"

type Event = `${FileSystem.WatchEvent["_tag"]} ${string}`

const describeEvent = (event: FileSystem.WatchEvent): Event => `${event._tag} ${event.path}`

/** Watches `path` in a fiber of the test's scope; returns once the watcher is installed. */
const watchInto = (path: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const events = yield* Queue.unbounded<FileSystem.WatchEvent>()
    const ready = yield* Deferred.make<void>()
    const fiber = yield* fs.watch(path, { onReady: () => Deferred.doneUnsafe(ready, Exit.void) }).pipe(
      Stream.runForEach((event) => Queue.offer(events, event)),
      Effect.forkScoped
    )
    yield* Deferred.await(ready)
    return { events, fiber }
  })

/** Watches `path` and returns a way to run a step and collect what it reported. */
const watching = (path: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const { events } = yield* watchInto(path)
    let sentinels = 0
    /**
     * Runs `operation`, then makes a sentinel in `sentinelDirectory`, and
     * collects events until `expected` have all come and the sentinel has
     * been reported; returns what came, the sentinel's events left out.
     */
    const step = <E>(
      operation: Effect.Effect<void, E>,
      expected: ReadonlyArray<Event>,
      sentinelDirectory: string = path
    ) =>
      Effect.gen(function*() {
        yield* operation
        const sentinel = `sentinel-${++sentinels}`
        yield* fs.writeFileString(`${sentinelDirectory}/${sentinel}`, "")
        const seen: Array<Event> = []
        const complete = () => expected.every((event) => seen.includes(event)) && seen.includes(`Create ${sentinel}`)
        while (!complete()) seen.push(describeEvent(yield* Queue.take(events)))
        return seen.filter((event) => !event.endsWith(` ${sentinel}`) && !event.includes(" sentinel-"))
      })
    return { step }
  })

/** Every event in `seen` is one of `allowed`. */
const assertOnly = (seen: ReadonlyArray<Event>, allowed: ReadonlyArray<Event>, label: string) => {
  const unexpected = seen.filter((event) => !allowed.includes(event))
  assert.deepStrictEqual(unexpected, [], `${label}: ${JSON.stringify(seen)}`)
}

fileSystemSuite("FileSystem conformance: watch", (it) => {
  it.effect("a watched directory reports creation, writes, renames and removal of its entries", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = `${root}/watched`
      yield* fs.makeDirectory(dir)
      const { step } = yield* watching(dir)

      const created = yield* step(fs.writeFileString(`${dir}/a`, "x", { flag: "wx" }), ["Create a", "Update a"])
      assertOnly(created, ["Create a", "Update a"], "create with data")

      const empty = yield* step(Effect.scoped(fs.open(`${dir}/e`, { flag: "wx" })), ["Create e"])
      assertOnly(empty, ["Create e"], "exclusive create, nothing written")

      const appended = yield* step(fs.writeFileString(`${dir}/a`, "y", { flag: "a" }), ["Update a"])
      assertOnly(appended, ["Update a"], "append")

      const handle = yield* step(
        Effect.scoped(Effect.flatMap(fs.open(`${dir}/a`, { flag: "a" }), (file) => file.writeAll(new Uint8Array([1])))),
        ["Update a"]
      )
      assertOnly(handle, ["Update a"], "append through a handle")

      const quiet = yield* step(
        Effect.scoped(Effect.flatMap(fs.open(`${dir}/a`, { flag: "r+" }), (file) => file.sync)),
        []
      )
      assertOnly(quiet, [], "open, fsync and close report nothing")

      const attributes = yield* step(
        Effect.andThen(fs.chmod(`${dir}/a`, 0o600), fs.utimes(`${dir}/a`, 1, 1)),
        ["Update a"]
      )
      assertOnly(attributes, ["Update a"], "chmod and utimes")

      const truncated = yield* step(fs.truncate(`${dir}/a`, 1), ["Update a"])
      assertOnly(truncated, ["Update a"], "truncate")

      const renamed = yield* step(fs.rename(`${dir}/a`, `${dir}/b`), ["Remove a", "Create b"])
      assertOnly(renamed, ["Remove a", "Create b"], "rename to a new name")

      yield* fs.writeFileString(`${dir}/t`, "t")
      const replaced = yield* step(fs.rename(`${dir}/t`, `${dir}/b`), ["Remove t", "Create b"])
      // The events of writing `t` may still be on their way.
      assertOnly(replaced, ["Remove t", "Create b", "Create t", "Update t"], "rename over an existing name")

      const removed = yield* step(fs.remove(`${dir}/b`), ["Remove b"])
      // Writing `t` and renaming it each made a `rename` event for `t`; Effect
      // turns each into `Create` or `Remove` by a `stat` that may run after
      // the step's sentinel was reported, so one may arrive here (seen: a
      // second `Remove t`). Nothing in this step touches `t`.
      assertOnly(removed, ["Remove b", "Remove t", "Create t", "Update t"], "unlink")

      const linked = yield* step(fs.link(`${dir}/e`, `${dir}/l`), ["Create l"])
      assertOnly(linked, ["Create l"], "hard link")

      const subdirectory = yield* step(fs.makeDirectory(`${dir}/sub`), ["Create sub"])
      assertOnly(subdirectory, ["Create sub"], "mkdir")

      const nested = yield* step(fs.writeFileString(`${dir}/sub/inner`, "1"), [])
      assertOnly(nested, [], "a write inside a subdirectory is not reported")

      const gone = yield* step(fs.remove(`${dir}/sub`, { recursive: true }), ["Remove sub"])
      assertOnly(gone, ["Remove sub"], "rmdir")
    }))

  it.effect("an open handle reports its writes under the entry's current name, after a rename or an unlink", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = `${root}/watched`
      yield* fs.makeDirectory(dir)
      yield* fs.writeFileString(`${dir}/a`, "x")
      const { step } = yield* watching(dir)
      yield* Effect.scoped(Effect.gen(function*() {
        const file = yield* fs.open(`${dir}/a`, { flag: "a" })
        assertOnly(
          yield* step(fs.rename(`${dir}/a`, `${dir}/b`), ["Remove a", "Create b"]),
          ["Remove a", "Create b"],
          "rename"
        )
        assertOnly(yield* step(file.writeAll(new Uint8Array([1])), ["Update b"]), ["Update b"], "write after rename")
        assertOnly(yield* step(fs.remove(`${dir}/b`), ["Remove b"]), ["Remove b"], "unlink")
        assertOnly(yield* step(file.writeAll(new Uint8Array([2])), ["Update b"]), ["Update b"], "write after unlink")
      }))
    }))

  it.effect("a watched directory that is removed reports its entries, then itself, then falls silent", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = `${root}/watched`
      yield* fs.makeDirectory(dir)
      yield* fs.writeFileString(`${dir}/a`, "x")
      const { events } = yield* watchInto(dir)
      yield* fs.remove(dir, { recursive: true })
      // No sentinel can be reported from a directory that is gone: collect until the expected events came.
      const expected: ReadonlyArray<Event> = ["Remove a", "Remove watched"]
      const seen: Array<Event> = []
      while (!expected.every((event) => seen.includes(event))) seen.push(describeEvent(yield* Queue.take(events)))
      assertOnly(seen, expected, "removal of the watched directory")
      if (tracksWatchers(fs)) {
        // Linux reports the deletion twice (IN_DELETE_SELF, then IN_IGNORED).
        assertOnly((yield* Queue.clear(events)).map(describeEvent), expected, "the deletion's repeats")
        yield* fs.makeDirectory(dir)
        yield* fs.writeFileString(`${dir}/later`, "x")
        assert.deepStrictEqual(fs.openWatchers().map((watcher) => watcher.active), [false])
        assert.deepStrictEqual(yield* Queue.clear(events), [], "a watcher of a deleted directory reports nothing")
      }
    }))

  it.effect("a watched file reports writes; a missing path fails as stat does", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const file = `${root}/f`
      yield* fs.writeFileString(file, "1")
      const { events } = yield* watchInto(file)
      yield* fs.writeFileString(file, "2", { flag: "a" })
      assert.strictEqual(describeEvent(yield* Queue.take(events)), "Update f")

      const missing = yield* Effect.flip(Stream.runDrain(fs.watch(`${root}/missing`)))
      assertFailure(missing, {
        reason: "NotFound",
        method: "stat",
        syscall: "stat",
        pathOrDescriptor: `${root}/missing`,
        code: "ENOENT"
      })
    }))

  it.effect("interrupting the consumer closes the watcher", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const { events, fiber } = yield* watchInto(root)
      if (tracksWatchers(fs)) assert.strictEqual(fs.openWatchers().length, 1)
      yield* fs.writeFileString(`${root}/x`, "")
      assert.strictEqual(describeEvent(yield* Queue.take(events)), "Create x")
      yield* Fiber.interrupt(fiber)
      if (tracksWatchers(fs)) assert.deepStrictEqual(fs.openWatchers(), [])
    }))
}, [memoryWorld, nodeWorld, threadpoolWorld])

const tracksWatchers = (fs: FileSystem.FileSystem): fs is MemoryFileSystemShape =>
  typeof (fs as Partial<MemoryFileSystemShape>).openWatchers === "function"
