import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, FileSystem } from "effect"
import { type CrashPoint, exploreCrashPoints } from "../../src/testing/CrashPoints.js"
import { makeMemoryFileSystem } from "../../src/testing/MemoryFileSystem.js"

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text)

/** Replaces /data/config through a temp file; `durable` adds the fsyncs that make it crash-safe. */
const replaceConfig = (content: string, durable: boolean) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* Effect.scoped(Effect.gen(function*() {
      const file = yield* fs.open("/data/config.tmp", { flag: "w", mode: 0o600 })
      yield* file.writeAll(bytes(content))
      if (durable) yield* file.sync
    }))
    yield* fs.rename("/data/config.tmp", "/data/config")
    if (durable) yield* Effect.scoped(Effect.flatMap(fs.open("/data", { flag: "r" }), (dir) => dir.sync))
  })

/** Appends newline-terminated records, syncing after each. */
const appendRecords = (records: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    for (const record of records) {
      yield* Effect.scoped(Effect.gen(function*() {
        const file = yield* fs.open("/data/log", { flag: "a", mode: 0o600 })
        yield* file.writeAll(bytes(`${record}\n`))
        yield* file.sync
      }))
    }
  })

const readConfig = (point: CrashPoint) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    return yield* fs.readFileString("/data/config")
  }).pipe(Effect.provideService(FileSystem.FileSystem, point.image))

describe("exploreCrashPoints", () => {
  it.effect("atomic replace with fsyncs: every crash leaves the old or the new config", () =>
    Effect.gen(function*() {
      const initial = makeMemoryFileSystem({ files: { "/data/config": "old" } })
      const seen = new Set<string>()
      const result = yield* exploreCrashPoints({
        initial,
        program: replaceConfig("new", true),
        verify: (point) =>
          Effect.map(readConfig(point), (config) => {
            seen.add(`${point.mode}:${config}`)
            assert.include(["old", "new"], config, `${point.mode} crash at ${point.operation?.method ?? "the end"}`)
          })
      })
      // open(w), writeAll, sync, rename, directory sync, and the end
      assert.strictEqual(result.points, 6)
      assert.deepStrictEqual(result.baseline.filter((op) => op.mutating).map((op) => op.method), [
        "open",
        "File.writeAll",
        "File.sync",
        "rename",
        "File.sync"
      ])
      assert.deepStrictEqual([...seen].sort(), ["power:new", "power:old", "process:new", "process:old"])
      assert.strictEqual(
        new TextDecoder().decode(result.completed.snapshot("/data/config")[0]?.data),
        "new"
      )
      assert.strictEqual(initial.snapshot("/data").length, 2)
    }))

  it.effect("without the file fsync, a power cut can leave an empty config", () =>
    Effect.gen(function*() {
      const broken: Array<string> = []
      const result = yield* exploreCrashPoints({
        initial: makeMemoryFileSystem({ files: { "/data/config": "old" } }),
        program: replaceConfig("new", false),
        verify: (point) =>
          Effect.map(readConfig(point), (config) => {
            const at = point.operation === undefined ? "end" : point.operation.method
            if (config !== "old" && config !== "new") broken.push(`${point.mode}@${at}:${JSON.stringify(config)}`)
          })
      })
      assert.strictEqual(result.points, 4)
      // Once the rename has landed, a power cut exposes the never-synced data.
      assert.deepStrictEqual(broken, ["power@end:\"\""])
    }))

  it.effect("a new file whose directory is not fsynced can vanish in a power cut, name and data", () =>
    Effect.gen(function*() {
      const program = (syncDirectory: boolean) =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          yield* Effect.scoped(Effect.gen(function*() {
            const file = yield* fs.open("/data/receipt", { flag: "wx", mode: 0o600 })
            yield* file.writeAll(bytes("done"))
            yield* file.sync
          }))
          if (syncDirectory) yield* Effect.scoped(Effect.flatMap(fs.open("/data", { flag: "r" }), (dir) => dir.sync))
        })
      const lostAtTheEnd = (syncDirectory: boolean) =>
        Effect.gen(function*() {
          const losses: Array<string> = []
          const result = yield* exploreCrashPoints({
            initial: makeMemoryFileSystem({ files: { "/data/.keep": "" } }),
            program: program(syncDirectory),
            modes: ["power"],
            verify: (point) =>
              Effect.sync(() => {
                if (point.operation !== undefined) return
                const receipt = point.image.snapshot("/data/receipt")[0]
                losses.push(`${JSON.stringify(point.loss)}:${receipt === undefined ? "gone" : "kept"}`)
              })
          })
          return { losses, images: result.images }
        })
      // Once the program returned, the receipt must be there: only the directory fsync makes it so.
      assert.deepStrictEqual((yield* lostAtTheEnd(false)).losses, ["\"none\":kept", "\"all\":gone"])
      assert.deepStrictEqual((yield* lostAtTheEnd(true)).losses, ["\"none\":kept"])
    }))

  it.effect("a synced append-only log keeps a prefix of whole records at every crash point", () =>
    Effect.gen(function*() {
      const records = ["alpha", "beta", "gamma"]
      const result = yield* exploreCrashPoints({
        initial: makeMemoryFileSystem({ files: { "/data/.keep": "" } }),
        program: appendRecords(records),
        modes: ["power"],
        verify: (point) =>
          Effect.sync(() => {
            const log = point.image.snapshot("/data/log")[0]
            const content = log === undefined ? "" : new TextDecoder().decode(log.data)
            const expected = records.map((record) => `${record}\n`)
            const prefixes = expected.map((_, n) => expected.slice(0, n).join("")).concat(expected.join(""))
            assert.include(prefixes, content, `power cut at ${point.operation?.method ?? "the end"}`)
          })
      })
      assert.strictEqual(result.points, 10)
    }))

  it.effect("a program that does something different on a rerun is reported", () =>
    Effect.gen(function*() {
      let runs = 0
      const exit = yield* Effect.exit(exploreCrashPoints({
        initial: makeMemoryFileSystem(),
        program: Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          runs++
          yield* fs.writeFileString(`/run-${runs}`, "x")
        }),
        verify: () => Effect.void
      }))
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual(runs, 2)
    }))

  it.effect("a failing crash-free run is returned as is", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(exploreCrashPoints({
        initial: makeMemoryFileSystem(),
        program: Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          return yield* fs.readFile("/missing")
        }),
        verify: () => Effect.void
      }))
      assert.strictEqual(error.reason._tag, "NotFound")
    }))
})
