/**
 * `RarebitStore.sessions` / `followSessions` on both worlds: every Session
 * under the root once, with exactly what `readCurrent` reports for it,
 * whatever state it is in (current, stale, damaged sidecar, unreadable
 * Session, in flight, nested, never derived); orphan sidecars and live
 * claims; the roots' failure modes; and the following form seeing a settle.
 */
import { assert } from "@effect/vitest"
import { Effect, Fiber, FileSystem, Path, Queue, Stream } from "effect"
import { TestClock } from "effect/testing"
import { modifiedMs } from "../../../src/protocol/internal/FileInfo.js"
import { JOBS_DIR } from "../../../src/store/MirroredPath.js"
import { activeClaims, orphanSidecars, type SessionOverviewEntry } from "../../../src/store/read/SessionOverview.js"
import { fileSystemSuite } from "../../support/FileSystemSuite.js"
import { entry, jobId, sessionText, summaryReceipt, titleReceipt } from "../../support/Receipts.js"
import { acquired, type Kit, makeSleepProbe, setup } from "../StoreKit.js"

const write = (kit: Kit, file: string, text: string) =>
  Effect.gen(function*() {
    yield* kit.fs.makeDirectory(kit.path.dirname(file), { recursive: true })
    yield* kit.fs.writeFileString(file, text)
  })

const settle = (kit: Kit, sessionFile: string, sessionId: string, n: number, summary: string) =>
  Effect.gen(function*() {
    const reservation = acquired(yield* kit.store.reserve({ jobId: jobId(n), sessionFile }))
    return yield* kit.store.settle(reservation, summaryReceipt(kit.branch, sessionId, { summary }))
  })

/**
 * A store holding one Session in each state the overview must report, and
 * what each is called.
 */
const populated = (root: string) =>
  Effect.gen(function*() {
    const kit = yield* setup(root, { sessionId: "current" })
    const at = (...parts: Array<string>) => kit.path.join(kit.sessionRoot, ...parts)
    const files = {
      current: kit.sessionFile,
      stale: at("project", "stale.jsonl"),
      damaged: at("project", "damaged.jsonl"),
      unreadable: at("project", "unreadable.jsonl"),
      inFlight: at("other", "in-flight.jsonl"),
      nested: at("deep", "er", "still", "nested.jsonl"),
      never: at("never.jsonl"),
      gone: at("project", "gone.jsonl")
    }
    for (const [name, file] of Object.entries(files)) {
      if (name !== "current") yield* write(kit, file, sessionText(name, kit.branch).text)
    }
    yield* write(kit, at("project", "notes.txt"), "not a Session\n")

    yield* settle(kit, files.current, "current", 1, "The first line\nand a second one")
    const title = acquired(yield* kit.store.reserve({ jobId: jobId(2), sessionFile: files.current }))
    yield* kit.store.settle(title, titleReceipt(kit.branch, "current", { title: "A title" }))
    yield* settle(kit, files.stale, "stale", 3, "stale summary")
    yield* kit.fs.writeFileString(files.stale, `${JSON.stringify(entry("a9", "assistant", "and more", "e1"))}\n`, {
      flag: "a"
    })
    yield* settle(kit, files.nested, "nested", 4, "nested summary")
    // Derived once, then the Session became unreadable: its receipt stands, its source is pending.
    yield* settle(kit, files.unreadable, "unreadable", 8, "derived before the damage")
    yield* write(kit, files.unreadable, "this is not JSON\n")
    yield* settle(kit, files.gone, "gone", 5, "gone summary")
    const goneSidecar = yield* kit.store.materializationPath(files.gone)
    yield* kit.fs.remove(files.gone)
    yield* write(
      kit,
      yield* kit.store.materializationPath(files.damaged),
      `${
        JSON.stringify({
          type: "rarebit_head",
          protocolVersion: 1,
          sessionId: "damaged",
          receiptOffset: 0,
          receiptLength: 10,
          receiptHash: "0".repeat(64)
        })
      }\n`
    )
    yield* kit.store.reserve({ jobId: jobId(6), sessionFile: files.inFlight })
    return { kit, files, goneSidecar }
  })

const collect = <E>(stream: Stream.Stream<SessionOverviewEntry, E>) =>
  Effect.map(Stream.runCollect(stream), (entries) => [...entries])

fileSystemSuite("RarebitStore.sessions", (it) => {
  it.effect("every Session once, with readCurrent's availability and syncState", ({ root }) =>
    Effect.gen(function*() {
      const { files, kit } = yield* populated(root)
      const entries = yield* collect(kit.store.sessions())
      const listed = entries.map((e) => e.sessionFile)
      const expected = Object.entries(files).filter(([name]) => name !== "gone").map(([, file]) => file)
      assert.deepStrictEqual([...listed].sort(), [...expected].sort())
      assert.strictEqual(new Set(listed).size, listed.length, "each Session once")
      for (const listedEntry of entries) {
        const current = yield* kit.store.readCurrent({ sessionFile: listedEntry.sessionFile })
        assert.deepStrictEqual(
          [listedEntry.availability, listedEntry.syncState],
          [current.availability, current.artifactState.syncState],
          listedEntry.sessionFile
        )
      }
      const byFile = new Map(entries.map((e) => [e.sessionFile, e]))
      // The fixture really spans the states, so the comparison above means something.
      assert.isAtLeast(new Set(entries.map((e) => e.syncState)).size, 3)
      assert.deepStrictEqual(
        new Set(entries.map((e) => e.availability)),
        new Set(["available", "missing", "unreadable"])
      )
      assert.strictEqual(byFile.get(files.damaged)!.availability, "unreadable")
      assert.strictEqual(byFile.get(files.never)!.availability, "missing")
      assert.strictEqual(byFile.get(files.unreadable)!.syncState, "assessment_source_pending")
      assert.strictEqual(byFile.get(files.unreadable)!.sessionId, "unreadable", "from the head, the Session unread")

      const current = byFile.get(files.current)!
      assert.strictEqual(current.summary, "The first line")
      assert.strictEqual(current.title, "A title")
      assert.strictEqual(current.sessionId, "current")
      assert.strictEqual(current.syncState, "assessment_current")
      const claimInfo = yield* kit.fs.stat(kit.claimPath(jobId(1)))
      assert.strictEqual(current.settledAt, new Date(modifiedMs(claimInfo)!).toISOString(), "the settled claim's time")
      assert.isNotNull(current.modifiedAt)
      const never = byFile.get(files.never)!
      assert.deepStrictEqual([never.summary, never.title, never.settledAt], [null, null, null])
      assert.notStrictEqual(byFile.get(files.stale)!.syncState, "assessment_current")
    }))

  it.effect("orphan sidecars and live claims", ({ root }) =>
    Effect.gen(function*() {
      const { goneSidecar, kit } = yield* populated(root)
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const orphans = yield* Stream.runCollect(orphanSidecars(fs, path, kit.config))
      assert.deepStrictEqual([...orphans], [goneSidecar])
      assert.strictEqual(yield* activeClaims(fs, path, kit.config), 1)
      // Once its lease has run out, the in-flight claim is no longer live.
      yield* TestClock.adjust(kit.config.leaseMs + 1)
      assert.strictEqual(yield* activeClaims(fs, path, kit.config), 0)
      assert.isTrue(yield* fs.exists(path.join(kit.rarebitRoot, JOBS_DIR)))
    }))

  it.effect("a Rarebit root that does not exist lists every Session as missing", ({ root }) =>
    Effect.gen(function*() {
      const { kit } = yield* populated(root)
      const entries = yield* collect(kit.store.sessions({ rarebitRoot: kit.path.join(root, "nowhere") }))
      assert.strictEqual(entries.length, 7)
      for (const e of entries) assert.strictEqual(e.availability, "missing", e.sessionFile)
    }))

  it.effect("a Session root that is not a directory fails with SessionRootNotFound", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const missing = yield* Effect.flip(collect(kit.store.sessions({ sessionRoot: kit.path.join(root, "nowhere") })))
      assert.strictEqual(missing._tag, "SessionRootNotFound")
      const file = yield* Effect.flip(collect(kit.store.sessions({ sessionRoot: kit.sessionFile })))
      assert.strictEqual(file._tag, "SessionRootNotFound")
    }))

  it.effect("followSessions: every Session, then the one a settle changed", ({ root }) =>
    Effect.gen(function*() {
      const { files, kit } = yield* populated(root)
      const probe = yield* makeSleepProbe
      const out = yield* Queue.unbounded<SessionOverviewEntry>()
      const fiber = yield* probe.instrument(
        Stream.runForEach(kit.store.followSessions(), (e) => Queue.offer(out, e))
      ).pipe(Effect.forkScoped)
      const next = Effect.gen(function*() {
        for (;;) {
          const got = yield* Effect.raceFirst(
            Effect.map(Queue.take(out), (e) => ({ _tag: "entry", e }) as const),
            Effect.map(probe.next, (ms) => ({ _tag: "wait", ms }) as const)
          )
          if (got._tag === "entry") return got.e
          yield* TestClock.adjust(got.ms)
        }
      })
      const initial = new Set<string>()
      for (let i = 0; i < 7; i++) initial.add((yield* next).sessionFile)
      assert.strictEqual(initial.size, 7)
      yield* settle(kit, files.never, "never", 7, "Settled while followed")
      let changed = yield* next
      while (changed.sessionFile !== files.never) changed = yield* next
      assert.deepStrictEqual([changed.availability, changed.summary], ["available", "Settled while followed"])
      assert.isNotNull(changed.settledAt)
      yield* Fiber.interrupt(fiber)
    }))
})
