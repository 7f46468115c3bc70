/**
 * `RarebitStore.watchSessions` on both worlds: a thousand Sessions in ten
 * folders are watched with one watch per folder, not per Session; when one
 * of them changes, only that one is read again and emitted.
 */
import { assert } from "@effect/vitest"
import { Effect, Fiber, FileSystem, Stream } from "effect"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { entry, jobId, sessionText, summaryReceipt } from "../support/Receipts.js"
import { acquired, type Kit, setup, tracksHandles } from "./StoreKit.js"
import { countingWatches, drive, memoryWatchers, settleJob, watchSessionsReads } from "./WatchKit.js"

const SESSIONS = 1000
const FOLDERS = 10

const sessionFileOf = (kit: Kit, index: number) =>
  kit.path.join(kit.sessionRoot, `folder-${index % FOLDERS}`, `session-${index}.jsonl`)

const settleFor = (kit: Kit, index: number, summary: string, job: number) =>
  Effect.gen(function*() {
    const sessionFile = sessionFileOf(kit, index)
    const reservation = acquired(yield* kit.store.reserve({ jobId: jobId(job), sessionFile }))
    yield* kit.store.settle(reservation, summaryReceipt(kit.branch, `session-${index}`, { summary }))
  })

fileSystemSuite("RarebitStore.watchSessions", (it) => {
  it.effect(
    "1,000 Sessions: one watch per folder, and only the Session that changed is read and emitted",
    ({ root }) =>
      Effect.gen(function*() {
        const counted = countingWatches(yield* FileSystem.FileSystem)
        const kit = yield* setup(root, { fs: counted.fs, writeSession: false })
        const sessionFiles: Array<string> = []
        for (let index = 0; index < SESSIONS; index++) {
          const file = sessionFileOf(kit, index)
          yield* kit.fs.makeDirectory(kit.path.dirname(file), { recursive: true })
          yield* kit.fs.writeFileString(file, sessionText(`session-${index}`, kit.branch).text)
          sessionFiles.push(file)
        }
        // One settled Session per folder, so every sidecar folder exists.
        for (let folder = 0; folder < FOLDERS; folder++) yield* settleFor(kit, folder, `first ${folder}`, folder + 1)

        const watch = yield* drive(watchSessionsReads(kit, { sessionFiles }))
        const initial = new Map<string, string>()
        for (let index = 0; index < SESSIONS; index++) {
          const read = yield* watch.next
          assert.strictEqual(read.decision, "initial")
          initial.set(read.sessionFile, read.current.availability)
        }
        assert.strictEqual(initial.size, SESSIONS)
        assert.strictEqual([...initial.values()].filter((availability) => availability === "available").length, FOLDERS)

        // Ten Session folders and ten sidecar folders, whatever the number of Sessions.
        assert.strictEqual(counted.open(), 2 * FOLDERS)
        const memory = memoryWatchers(kit.fs)
        if (memory !== undefined) assert.strictEqual(memory.length, 2 * FOLDERS)
        if (tracksHandles(kit.fs)) {
          // Only what the store's bounded caches hold (64 sidecars, 32 Sessions).
          const open = (kit.fs as unknown as { openDescriptors: () => ReadonlyArray<unknown> }).openDescriptors()
          assert.isAtMost(open.length, 64 + 32)
        }

        const changed = 517
        yield* settleFor(kit, changed, "the one that changed", 1000)
        const read = yield* watch.nextEmitted
        assert.strictEqual(read.sessionFile, sessionFileOf(kit, changed))
        assert.strictEqual(
          read.current.receipt?.status === "ok" ? read.current.receipt.summary : null,
          "the one that changed"
        )
        assert.deepStrictEqual({ epoch: read.epoch, sequence: read.sequence }, { epoch: 1, sequence: 1 })

        // Another Session grows: again only that one.
        const grown = sessionFileOf(kit, 42)
        yield* kit.fs.writeFileString(grown, `${JSON.stringify(entry("u2", "user", "more", "e1"))}\n`, { flag: "a" })
        let next = yield* watch.next
        if (memory === undefined) {
          // On the disk the first settle's last events may still come in: those reads are not emitted.
          while (next.sessionFile !== grown) {
            assert.strictEqual(next.decision, "identical")
            next = yield* watch.next
          }
        }
        assert.strictEqual(next.sessionFile, grown)
        assert.strictEqual(next.decision, "changed")
        yield* Fiber.interrupt(watch.fiber)
        assert.strictEqual(counted.open(), 0)
      }),
    120_000
  )

  it.effect("a folder replaced under the Sessions it holds is watched anew, not through the old folder's watch", ({ root }) =>
    Effect.gen(function*() {
      const counted = countingWatches(yield* FileSystem.FileSystem)
      const kit = yield* setup(root, { fs: counted.fs })
      const other = kit.path.join(kit.sessionRoot, "project", "other.jsonl")
      yield* kit.fs.writeFileString(other, sessionText("other", kit.branch).text)
      yield* settleJob(kit, 1)
      const watch = yield* drive(watchSessionsReads(kit, { sessionFiles: [kit.sessionFile, other] }))
      yield* watch.next
      yield* watch.next
      const folder = kit.path.dirname(kit.sidecar)
      assert.deepStrictEqual(counted.made().filter((made) => made === folder), [folder])

      // Moved away and made again within one debounce: both Sessions plan the same path, now another directory,
      // while the old one (still watched, for as long as either Session holds it) lives on elsewhere.
      yield* kit.fs.rename(folder, `${folder}-old`)
      yield* kit.fs.makeDirectory(folder, { mode: 0o700 })
      const moved = yield* watch.nextEmitted
      assert.deepStrictEqual([moved.sessionFile, moved.current.availability], [kit.sessionFile, "missing"])
      assert.deepStrictEqual(
        counted.made().filter((made) => made === folder),
        [folder, folder],
        "the new folder is watched"
      )

      const reservation = acquired(yield* kit.store.reserve({ jobId: jobId(2), sessionFile: other }))
      yield* kit.store.settle(reservation, summaryReceipt(kit.branch, "other"))
      const settled = yield* watch.nextEmitted
      assert.deepStrictEqual([settled.sessionFile, settled.current.availability], [other, "available"])
    }))

  it.effect("initial: false emits only later changes; a Session listed twice is watched once", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const other = kit.path.join(kit.sessionRoot, "project", "other.jsonl")
      yield* kit.fs.writeFileString(other, sessionText("other", kit.branch).text)
      const listed = [kit.sessionFile, other, kit.sessionFile]

      const fromStore = yield* kit.store.watchSessions({ sessionFiles: listed }).pipe(Stream.take(2), Stream.runCollect)
      assert.deepStrictEqual(fromStore.map((state) => [state.sessionFile, state.sequence]), [[kit.sessionFile, 0], [
        other,
        0
      ]])

      const watch = yield* drive(watchSessionsReads(kit, { sessionFiles: listed, initial: false }))
      const first = yield* watch.next
      const second = yield* watch.next
      assert.deepStrictEqual([first.decision, second.decision], ["baseline", "baseline"])
      assert.deepStrictEqual([first.sessionFile, second.sessionFile], [kit.sessionFile, other])
      const reservation = acquired(yield* kit.store.reserve({ jobId: jobId(1), sessionFile: other }))
      yield* kit.store.settle(reservation, summaryReceipt(kit.branch, "other"))
      const change = yield* watch.nextEmitted
      // The first emission: sequence 0, in the sidecar's first file (it did not exist at the baseline).
      assert.deepStrictEqual([change.sessionFile, change.sequence, change.epoch], [other, 0, 1])
      assert.strictEqual(change.current.availability, "available")
    }))
})
