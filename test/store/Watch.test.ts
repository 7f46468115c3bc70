/**
 * `RarebitStore.watch` on both worlds: the first read is emitted at once; a
 * settle, the sidecar appearing or being replaced, and the Session growing
 * are each emitted once, as the state they leave; what leaves the state as
 * it was (a torn tail, an append that repeats the head) is read but not
 * emitted; bursts are read once. The memory world's `TestClock` drives the
 * debounce and the polling; on the real disk, events come from the kernel.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Fiber, FileSystem, Path, PlatformError, Stream } from "effect"
import { TestClock } from "effect/testing"
import { DEFAULT_CONFIRM_INTERVAL_MS } from "../../src/store/watch/CurrentWatch.js"
import { darwinWatchEvents, makeMemoryFileSystem } from "../../src/testing/MemoryFileSystem.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { entry, jobId, nativeOf, sessionText, summaryReceipt, titleReceipt } from "../support/Receipts.js"
import { acquired, appendRaw, bytesOf, interceptFileSystem, receiptLine, setup, sizeOf } from "./StoreKit.js"
import {
  countingWatches,
  DEBOUNCE_MS,
  drive,
  memoryWatchers,
  settleJob,
  spanRecorder,
  summaryOf,
  watchReads,
  withoutWatch
} from "./WatchKit.js"

fileSystemSuite("RarebitStore.watch", (it) => {
  it.effect("emits the current read at start, then each settle, the first one as the sidecar's first epoch", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const watch = yield* drive(watchReads(kit))
      const start = yield* watch.next
      assert.strictEqual(start.decision, "initial")
      assert.deepStrictEqual(
        { availability: start.current.availability, epoch: start.emitted?.epoch, sequence: start.emitted?.sequence },
        { availability: "missing", epoch: 0, sequence: 0 }
      )

      yield* settleJob(kit, 1)
      const first = yield* watch.nextEmitted
      assert.strictEqual(first.current.availability, "available")
      assert.strictEqual(summaryOf(first), "summary 1")
      // The sidecar appeared: another file than at the start (none), so a new epoch.
      assert.deepStrictEqual({ epoch: first.epoch, sequence: first.sequence }, { epoch: 1, sequence: 1 })

      yield* settleJob(kit, 2)
      const second = yield* watch.nextEmitted
      assert.strictEqual(summaryOf(second), "summary 2")
      assert.deepStrictEqual({ epoch: second.epoch, sequence: second.sequence }, { epoch: 1, sequence: 2 })
      assert.isAbove(second.current.head!.receiptOffset, first.current.head!.receiptOffset)
      // What a watch emits is exactly what readCurrent answers.
      assert.deepStrictEqual(second.current, yield* kit.store.readCurrent({ sessionFile: kit.sessionFile }))
    }))

  it.effect("a burst of settles and Session writes is read once, as the state it left", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const watch = yield* drive(watchReads(kit))
      yield* watch.next
      for (let n = 1; n <= 5; n++) yield* settleJob(kit, n)
      // The Session grows byte by byte: one new user message.
      const line = bytesOf(`${JSON.stringify(entry("u2", "user", "one more request", "e1"))}\n`)
      for (const byte of line) yield* kit.fs.writeFile(kit.sessionFile, new Uint8Array([byte]), { flag: "a" })
      const burst = yield* watch.next
      assert.strictEqual(burst.decision, "new epoch")
      assert.strictEqual(summaryOf(burst.emitted!), "summary 5")
      assert.deepStrictEqual(burst.current, yield* kit.store.readCurrent({ sessionFile: kit.sessionFile }))
      assert.notStrictEqual(burst.current.artifactState.syncState, "assessment_current", "the grown Session was read")
      // One emission for the whole burst: the next state is the next sequence number.
      yield* kit.fs.writeFileString(
        kit.sessionFile,
        `${JSON.stringify(entry("a2", "assistant", "and its answer", "u2"))}\n`,
        { flag: "a" }
      )
      const after = memoryWatchers(kit.fs) === undefined
        ? yield* watch.nextEmitted
        // In memory no event comes late: the burst's events made exactly one read.
        : (yield* watch.next).emitted!
      assert.notDeepEqual(after.current.artifactState, burst.current.artifactState)
      assert.strictEqual(after.sequence, burst.emitted!.sequence + 1)
    }))

  it.effect("a torn tail and a repeated head are read but not emitted", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* settleJob(kit, 1)
      const watch = yield* drive(watchReads(kit))
      const start = (yield* watch.next).emitted!

      // A writer that crashed mid-append leaves an unterminated line.
      yield* appendRaw(kit, receiptLine(summaryReceipt(kit.branch, kit.sessionId, { summary: "torn" })).slice(0, 200))
      let torn = yield* watch.next
      while (!torn.current.diagnostics.tornTail) torn = yield* watch.next
      assert.strictEqual(torn.decision, "identical")
      assert.isUndefined(torn.emitted)

      // A Title receipt repeats the current head: the sidecar grew, the state did not.
      const title = acquired(yield* kit.store.reserve({ jobId: jobId(2), sessionFile: kit.sessionFile }))
      const before = yield* sizeOf(kit.fs, kit.sidecar)
      yield* kit.store.settle(title, titleReceipt(kit.branch, kit.sessionId))
      assert.isAbove(yield* sizeOf(kit.fs, kit.sidecar), before)
      const repeated = yield* watch.next
      assert.strictEqual(repeated.decision, "identical")

      yield* settleJob(kit, 3)
      const next = yield* watch.nextEmitted
      assert.strictEqual(summaryOf(next), "summary 3")
      assert.strictEqual(next.sequence, start.sequence + 1, "nothing was emitted in between")
      assert.strictEqual(next.epoch, start.epoch)
    }))

  it.effect("a sidecar replaced by a rename is a new epoch, even with the same bytes", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* settleJob(kit, 1)
      yield* settleJob(kit, 2)
      const watch = yield* drive(watchReads(kit))
      const start = (yield* watch.next).emitted!
      assert.strictEqual(summaryOf(start), "summary 2")

      // An older copy (only the first receipt and its head) renamed over the sidecar.
      const bytes = yield* kit.fs.readFile(kit.sidecar)
      const firstHead = bytes.indexOf(10, bytes.indexOf(10) + 1) + 1
      yield* kit.fs.writeFile(`${kit.sidecar}.copy`, bytes.subarray(0, firstHead), { mode: 0o600 })
      yield* kit.fs.rename(`${kit.sidecar}.copy`, kit.sidecar)
      const older = yield* watch.nextEmitted
      assert.strictEqual(summaryOf(older), "summary 1")
      assert.deepStrictEqual({ epoch: older.epoch, sequence: older.sequence }, { epoch: 1, sequence: 1 })

      // The same bytes again, in another file.
      yield* kit.fs.writeFile(`${kit.sidecar}.copy`, bytes.subarray(0, firstHead), { mode: 0o600 })
      yield* kit.fs.rename(`${kit.sidecar}.copy`, kit.sidecar)
      const same = yield* watch.nextEmitted
      assert.deepStrictEqual(same.current, older.current)
      assert.deepStrictEqual({ epoch: same.epoch, sequence: same.sequence }, { epoch: 2, sequence: 2 })

      // Removed: no file, another epoch.
      yield* kit.fs.remove(kit.sidecar)
      const removed = yield* watch.nextEmitted
      assert.strictEqual(removed.current.availability, "missing")
      assert.strictEqual(removed.epoch, 3)
    }))

  it.effect("a sidecar rewritten in place with an older head is a new epoch, never an older state in the same one", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* settleJob(kit, 1)
      yield* settleJob(kit, 2)
      const watch = yield* drive(watchReads(kit))
      const start = (yield* watch.next).emitted!
      const bytes = yield* kit.fs.readFile(kit.sidecar)
      const firstHead = bytes.indexOf(10, bytes.indexOf(10) + 1) + 1
      yield* kit.fs.truncate(kit.sidecar, firstHead)
      const rewritten = yield* watch.nextEmitted
      assert.strictEqual(summaryOf(rewritten), "summary 1")
      assert.isBelow(rewritten.current.head!.receiptOffset, start.current.head!.receiptOffset)
      assert.strictEqual(rewritten.epoch, start.epoch + 1)
    }))

  it.effect("directories that appear, vanish and come back are followed: the Session's and the sidecar's", ({ root }) =>
    Effect.gen(function*() {
      // Neither the Session's folder nor the Rarebit root exists yet.
      const kit = yield* setup(root, { writeSession: false })
      const watch = yield* drive(watchReads(kit))
      const start = (yield* watch.next).emitted!
      assert.notStrictEqual(start.current.artifactState.nativeRef?.availability, "available")

      const { text } = sessionText(kit.sessionId, kit.branch)
      yield* kit.fs.makeDirectory(kit.path.dirname(kit.sessionFile), { recursive: true })
      yield* kit.fs.writeFileString(kit.sessionFile, text)
      const appeared = yield* watch.nextEmitted
      assert.strictEqual(appeared.current.artifactState.nativeRef?.availability, "available")

      yield* settleJob(kit, 1)
      assert.strictEqual(summaryOf(yield* watch.nextEmitted), "summary 1")

      // The sidecar's whole folder goes (its watch falls silent), then comes back with the next settle.
      yield* kit.fs.remove(kit.path.dirname(kit.sidecar), { recursive: true })
      const gone = yield* watch.nextEmitted
      assert.strictEqual(gone.current.availability, "missing")
      yield* settleJob(kit, 2)
      const back = yield* watch.nextEmitted
      assert.strictEqual(summaryOf(back), "summary 2")
      assert.strictEqual(back.epoch, gone.epoch + 1)

      // A Session reached through a symlink is written where the link points: that is watched too.
      const target = kit.path.join(root, "elsewhere", "trace.jsonl")
      yield* kit.fs.makeDirectory(kit.path.dirname(target), { recursive: true })
      yield* kit.fs.rename(kit.sessionFile, target)
      yield* kit.fs.symlink(target, kit.sessionFile)
      yield* Fiber.interrupt(watch.fiber)
      const linked = yield* drive(watchReads(kit))
      const linkedStart = (yield* linked.next).emitted!
      assert.strictEqual(summaryOf(linkedStart), "summary 2")
      yield* kit.fs.writeFileString(target, `${JSON.stringify(entry("u2", "user", "through the link", "e1"))}\n`, {
        flag: "a"
      })
      const grown = yield* linked.nextEmitted
      assert.notStrictEqual(grown.current.artifactState.syncState, linkedStart.current.artifactState.syncState)
    }))

  it.effect("directories made while the watch moves down to them are followed, however close behind each other", ({ root }) =>
    Effect.gen(function*() {
      const world = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      // Once armed, each watch of a directory on the way to `ahead` first makes that directory's next component:
      // it appears after the watch planned it missing and before the watch can report it, as when another
      // process's mkdir chain runs ahead of the watch following it down.
      let ahead: string | undefined
      const open = new Map<string, number>()
      const racing: FileSystem.FileSystem = {
        ...world,
        watch: (directory, options) =>
          Stream.unwrap(Effect.gen(function*() {
            if (ahead !== undefined && ahead.startsWith(`${directory}${path.sep}`)) {
              const next = path.join(directory, ahead.slice(directory.length + 1).split(path.sep)[0]!)
              if (!(yield* world.exists(next))) yield* world.makeDirectory(next, { mode: 0o700 })
            }
            open.set(directory, (open.get(directory) ?? 0) + 1)
            return world.watch(directory, options).pipe(
              Stream.ensuring(Effect.sync(() => void open.set(directory, open.get(directory)! - 1)))
            )
          }))
      }
      const watchedNow = () => [...open].filter(([, count]) => count > 0).map(([directory]) => directory).sort()
      const kit = yield* setup(root, { fs: racing })
      assert.isFalse(yield* world.exists(kit.rarebitRoot))
      const watch = yield* drive(watchReads(kit))
      assert.strictEqual((yield* watch.next).current.availability, "missing")

      ahead = path.dirname(kit.sidecar)
      yield* world.makeDirectory(kit.rarebitRoot, { mode: 0o700 })
      const followed = yield* watch.next
      assert.strictEqual(followed.decision, "identical")
      // Every directory made behind the watch's back was looked for again once its watch stood.
      assert.deepStrictEqual(watchedNow(), [path.dirname(kit.sessionFile), path.dirname(kit.sidecar)].sort())
      yield* settleJob(kit, 1)
      assert.strictEqual(summaryOf(yield* watch.nextEmitted), "summary 1")
    }))

  it.effect("the Session growing is seen; with native passed, the Session is not watched", ({ root }) =>
    Effect.gen(function*() {
      const counted = countingWatches(yield* FileSystem.FileSystem)
      const kit = yield* setup(root, { fs: counted.fs })
      yield* settleJob(kit, 1)
      const watch = yield* drive(watchReads(kit))
      const start = (yield* watch.next).emitted!
      assert.strictEqual(start.current.artifactState.syncState, "assessment_current")
      yield* kit.fs.writeFileString(
        kit.sessionFile,
        `${JSON.stringify(entry("u2", "user", "one more request", "e1"))}\n`,
        { flag: "a" }
      )
      const grown = yield* watch.nextEmitted
      assert.notStrictEqual(
        grown.current.artifactState.nativeRef?.selectionManifestHash,
        start.current.artifactState.nativeRef?.selectionManifestHash
      )
      assert.notStrictEqual(grown.current.artifactState.syncState, "assessment_current")
      assert.isTrue(counted.made().includes(kit.path.dirname(kit.sessionFile)), "the Session's directory is watched")
      yield* Fiber.interrupt(watch.fiber)

      const before = counted.made().length
      const nativeWatch = yield* drive(watchReads(kit, { native: nativeOf(kit.sessionId, kit.branch) as never }))
      yield* nativeWatch.next
      const watched = counted.made().slice(before)
      assert.deepStrictEqual(watched, [kit.path.dirname(kit.sidecar)], "only the sidecar's directory")
    }))

  it.effect("interrupting the consumer closes every watch it made", ({ root }) =>
    Effect.gen(function*() {
      const counted = countingWatches(yield* FileSystem.FileSystem)
      const kit = yield* setup(root, { fs: counted.fs })
      const watch = yield* drive(watchReads(kit))
      yield* watch.next
      yield* settleJob(kit, 1)
      yield* watch.nextEmitted
      assert.isAtLeast(counted.open(), 2)
      yield* Fiber.interrupt(watch.fiber)
      assert.strictEqual(counted.open(), 0)
      const memory = memoryWatchers(kit.fs)
      if (memory !== undefined) assert.deepStrictEqual(memory, [])
    }))

  it.effect("where watching fails or dies, it polls: backing off while idle, back to the base interval after a change", ({ root }) =>
    Effect.gen(function*() {
      for (const how of ["fail", "die"] as const) {
        const kit = yield* setup(`${root}/${how}`, { fs: withoutWatch(yield* FileSystem.FileSystem, how) })
        const watch = yield* drive(watchReads(kit, { pollInterval: "100 millis", maxPollInterval: "800 millis" }), {
          polls: true
        })
        const start = yield* watch.next
        assert.strictEqual(start.mode, "poll", how)
        yield* settleJob(kit, 1)
        assert.strictEqual(summaryOf(yield* watch.nextEmitted), "summary 1", how)
        assert.deepStrictEqual(yield* watch.passWaits(5), [100, 200, 400, 800, 800], `${how}: idle`)
        yield* settleJob(kit, 2)
        assert.strictEqual(summaryOf(yield* watch.nextEmitted), "summary 2", how)
        assert.deepStrictEqual(yield* watch.passWaits(1), [100], `${how}: after a change`)
        // A torn tail changes the sidecar's size: read, not emitted.
        yield* appendRaw(kit, "{\"type\":\"rarebit_sum")
        const torn = yield* watch.next
        assert.isTrue(torn.current.diagnostics.tornTail, how)
        assert.strictEqual(torn.decision, "identical", how)
        yield* Fiber.interrupt(watch.fiber)
        const memory = memoryWatchers(kit.fs)
        if (memory !== undefined) assert.deepStrictEqual(memory, [], how)
      }
    }))

  it.effect("a sidecar that could not be read is read again until it reads, without any file changing", ({ root }) =>
    Effect.gen(function*() {
      const world = yield* FileSystem.FileSystem
      const writer = yield* setup(root)
      yield* settleJob(writer, 1)
      let failing = false
      // While `failing`, the sidecar cannot be examined, as under EMFILE or EIO.
      const flaky = interceptFileSystem(
        world,
        (method, args) =>
          failing && (method === "lstat" || method === "open") && args[0] === writer.sidecar
            ? Effect.fail(PlatformError.systemError({
              _tag: "Unknown",
              module: "FileSystem",
              method,
              pathOrDescriptor: writer.sidecar,
              description: "EIO"
            }))
            : Effect.void
      )
      const kit = yield* setup(root, { fs: flaky, writeSession: false })
      const watch = yield* drive(watchReads(kit, { pollInterval: "100 millis", maxPollInterval: "400 millis" }), {
        polls: true
      })
      const start = (yield* watch.next).emitted!
      assert.strictEqual(summaryOf(start), "summary 1")
      failing = true
      yield* settleJob(writer, 2)
      const failed = yield* watch.nextEmitted
      assert.strictEqual(failed.current.availability, "unreadable")
      assert.strictEqual(failed.current.diagnostics.reason, "sidecar_unreadable")
      // Still failing: read again, backing off, the same state not emitted again.
      const again = yield* watch.next
      assert.strictEqual(again.decision, "identical")
      failing = false
      const recovered = yield* watch.nextEmitted
      assert.strictEqual(summaryOf(recovered), "summary 2")
      // The same file all along: a failure to examine it is not a new epoch.
      assert.strictEqual(recovered.epoch, start.epoch)
      // Besides the waits for the stat confirmation (every DEFAULT_CONFIRM_INTERVAL_MS, none due here).
      assert.deepStrictEqual(
        watch.waits.filter((ms) => ms > DEBOUNCE_MS && ms !== DEFAULT_CONFIRM_INTERVAL_MS),
        [100, 200]
      )
    }))

  it.effect("the mode in use is the span attribute rarebit.watch.mode", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const modes: Array<unknown> = []
      for (
        const [label, kitFs, mode] of [
          ["events", fs, "auto"],
          ["forced", fs, "poll"],
          ["fallback", withoutWatch(fs, "fail"), "auto"]
        ] as const
      ) {
        const kit = yield* setup(`${root}/${label}`, { fs: kitFs })
        const { spans, tracer } = spanRecorder()
        yield* kit.store.watch({ sessionFile: kit.sessionFile, mode }).pipe(
          Stream.take(1),
          Stream.runDrain,
          Effect.withTracer(tracer)
        )
        const span = spans().find((s) => s.name === "RarebitStore.watch")
        modes.push(span?.attributes.get("rarebit.watch.mode"))
        assert.strictEqual(span?.status._tag, "Ended", label)
      }
      assert.deepStrictEqual(modes, ["events", "poll", "poll"])
    }))
})

/**
 * FSEvents-like events (`darwinWatchEvents`: delayed, coalesced, some
 * dropped) in the memory world: events are hints, and what they miss is
 * seen by the watch's `stat` confirmation within its bound.
 */
describe("RarebitStore.watch on FSEvents-like events", () => {
  /** The longest a dropped event may leave a watch stale: the confirmation interval, the debounce and a read. */
  const STALE_BOUND_MS = 2_000

  const darwinWorld = (drop: () => boolean) =>
    Effect.provideService(
      FileSystem.FileSystem,
      makeMemoryFileSystem({ watchEvents: darwinWatchEvents(() => drop()) })
    )

  it.effect("a settle whose events were all dropped is emitted within the bound, by the stat confirmation", () => {
    let dropping = false
    return Effect.gen(function*() {
      const kit = yield* setup("/work")
      const watch = yield* drive(watchReads(kit), { polls: true })
      assert.strictEqual((yield* watch.next).decision, "initial")
      dropping = true
      const settledAt = yield* Clock.currentTimeMillis
      yield* settleJob(kit, 1)
      const seen = yield* watch.nextEmitted
      const staleMs = (yield* Clock.currentTimeMillis) - settledAt
      assert.strictEqual(summaryOf(seen), "summary 1")
      assert.isAtMost(staleMs, STALE_BOUND_MS)
      assert.isAtLeast(staleMs, DEFAULT_CONFIRM_INTERVAL_MS, "no event announced it: the confirmation found it")
      // The confirmation keeps going: a second lost settle is found the same way.
      yield* settleJob(kit, 2)
      assert.strictEqual(summaryOf(yield* watch.nextEmitted), "summary 2")
    }).pipe(Effect.provide(Path.layer), darwinWorld(() => dropping))
  })

  it.effect("delayed, coalesced events still report a burst once, as the state it left", () =>
    Effect.gen(function*() {
      const kit = yield* setup("/work")
      // Only the debounce is passed by the driver: the events' latency by hand, the confirmation never.
      const watch = yield* drive(watchReads(kit))
      yield* watch.next
      const settledAt = yield* Clock.currentTimeMillis
      for (let n = 1; n <= 3; n++) yield* settleJob(kit, n)
      yield* TestClock.adjust(darwinWatchEvents().latencyMs!)
      const seen = yield* watch.nextEmitted
      assert.strictEqual(summaryOf(seen), "summary 3")
      // Seen by the (delayed) event, well before any confirmation.
      assert.isBelow((yield* Clock.currentTimeMillis) - settledAt, DEFAULT_CONFIRM_INTERVAL_MS)
    }).pipe(Effect.provide(Path.layer), darwinWorld(() => false)))

  it.effect("idle, the confirmation only stats: no read while nothing changes", () =>
    Effect.gen(function*() {
      const kit = yield* setup("/work")
      const watch = yield* drive(watchReads(kit), { polls: true })
      yield* watch.next
      const waits = yield* watch.passWaits(5)
      assert.deepStrictEqual(waits, Array.from({ length: 5 }, () => DEFAULT_CONFIRM_INTERVAL_MS))
    }).pipe(Effect.provide(Path.layer), darwinWorld(() => false)))
})
