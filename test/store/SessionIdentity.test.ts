/**
 * One identity per Session file: spellings of one Session (through a
 * symlinked root, in another case or normalization on a Darwin-like volume)
 * get one sidecar, hence one lock queue and one sidecar cache entry, and one
 * canonical path, the Session cache's key. The sidecar of the canonical
 * spelling is the reference's. The symlink cases run on both worlds; the
 * case and normalization ones on the memory file system's Darwin profile.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, FileSystem, Layer, Path, Result } from "effect"
import { sha256Hex } from "../../src/protocol/CanonicalJson.js"
import { makeSessionIdentity, materializationPath } from "../../src/store/MirroredPath.js"
import { makeMemoryFileSystem } from "../../src/testing/MemoryFileSystem.js"
import { fileSystemSuite, type World } from "../support/FileSystemSuite.js"
import { jobId, sessionText, summaryReceipt } from "../support/Receipts.js"
import { Store as Ref } from "../support/Reference.js"
import { type Kit, setup } from "./StoreKit.js"

/** Two settles of one Session, by two spellings, at once: the second must queue behind the first in the process. */
const settleConcurrently = (kit: Kit, first: string, second: string) =>
  Effect.gen(function*() {
    const a = yield* kit.store.reserve({ jobId: jobId(1), sessionFile: first })
    const b = yield* kit.store.reserve({ jobId: jobId(2), sessionFile: second })
    assert.strictEqual(a._tag, "Acquired")
    assert.strictEqual(b._tag, "Acquired")
    if (a._tag !== "Acquired" || b._tag !== "Acquired") return
    assert.strictEqual(a.materializationPath, b.materializationPath)
    const entered = yield* Deferred.make<void>()
    const proceed = yield* Deferred.make<void>()
    const holder = yield* Effect.forkChild(kit.store.settle(a, summaryReceipt(kit.branch, kit.sessionId), {
      hooks: { afterLeaseValidated: Deferred.succeed(entered, undefined).pipe(Effect.andThen(Deferred.await(proceed))) }
    }))
    yield* Deferred.await(entered)
    // With one try at the lock file, a second queue would fail at once with LockHeld.
    const waiter = yield* Effect.forkChild(
      kit.store.settle(b, summaryReceipt(kit.branch, kit.sessionId, { summary: "second" }))
    )
    for (let turn = 0; turn < 50; turn++) yield* Effect.yieldNow
    yield* Deferred.succeed(proceed, undefined)
    const settled = yield* Effect.all([Fiber.join(holder), Fiber.join(waiter)])
    assert.deepStrictEqual(settled.map((receipt) => receipt.path), [a.materializationPath, a.materializationPath])
  })

const oneTry = { lockRetry: { intervalMs: 5, attempts: 1 } }

fileSystemSuite("One identity per Session file", (it) => {
  it.effect("a Session spelled through a symlinked root or through its target gets one sidecar", ({ root }) =>
    Effect.gen(function*() {
      const path = yield* Path.Path
      const link = path.join(root, "link")
      const viaLink = path.join(link, "project", "trace.jsonl")
      // The root given through the link.
      const linked = yield* setup(root, { config: { sessionRoot: link } })
      yield* linked.fs.symlink(linked.sessionRoot, link)
      assert.strictEqual(yield* linked.store.materializationPath(viaLink), linked.sidecar)
      assert.strictEqual(yield* linked.store.materializationPath(linked.sessionFile), linked.sidecar)
      // The root given at its real path.
      const real = yield* setup(root, { writeSession: false })
      assert.strictEqual(yield* real.store.materializationPath(viaLink), real.sidecar)
      assert.strictEqual(yield* real.store.materializationPath(linked.sessionFile), real.sidecar)
      // The canonical spelling's sidecar is the reference's.
      assert.strictEqual(
        Ref.rarebitMaterializationPath(real.sessionFile, {
          sessionRoot: real.sessionRoot,
          rarebitRoot: real.rarebitRoot
        }),
        real.sidecar
      )
      // Written by one spelling, read by the other.
      const reservation = yield* linked.store.reserve({ jobId: jobId(1), sessionFile: viaLink })
      assert.strictEqual(reservation._tag, "Acquired")
      if (reservation._tag !== "Acquired") return
      yield* linked.store.settle(reservation, summaryReceipt(linked.branch, linked.sessionId))
      for (const sessionFile of [viaLink, linked.sessionFile]) {
        const current = yield* linked.store.readCurrent({ sessionFile })
        assert.strictEqual(current.availability, "available", sessionFile)
        assert.strictEqual(current.artifactState.syncState, "assessment_current", sessionFile)
      }
    }))

  it.effect("an external Session spelled through a symlink is hashed at its real path", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { writeSession: false, config: { allowExternalSession: true } })
      const path = kit.path
      const external = path.join(root, "elsewhere", "trace.jsonl")
      yield* kit.fs.makeDirectory(path.dirname(external), { recursive: true })
      yield* kit.fs.writeFileString(external, sessionText("s").text)
      yield* kit.fs.symlink(path.dirname(external), path.join(root, "outside-link"))
      const expected = path.join(kit.rarebitRoot, "materializations-v4", "external", `${sha256Hex(external)}.jsonl`)
      assert.strictEqual(yield* kit.store.materializationPath(external), expected)
      assert.strictEqual(yield* kit.store.materializationPath(path.join(root, "outside-link", "trace.jsonl")), expected)
    }))

  it.effect("a Session symlinked out of the root keeps the reference's sidecar for its spelling", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { writeSession: false })
      const path = kit.path
      const outside = path.join(root, "elsewhere", "trace.jsonl")
      yield* kit.fs.makeDirectory(path.dirname(outside), { recursive: true })
      yield* kit.fs.writeFileString(outside, sessionText("s").text)
      yield* kit.fs.makeDirectory(path.dirname(kit.sessionFile), { recursive: true })
      yield* kit.fs.symlink(outside, kit.sessionFile)
      assert.strictEqual(yield* kit.store.materializationPath(kit.sessionFile), kit.sidecar)
      const error = yield* Effect.flip(kit.store.materializationPath(outside))
      assert.strictEqual(error._tag, "SessionOutsideRoot")
    }))

  it.effect("two settles by two spellings of one Session queue in the process", ({ root }) =>
    Effect.gen(function*() {
      const path = yield* Path.Path
      const link = path.join(root, "link")
      const kit = yield* setup(root, { config: { sessionRoot: link, ...oneTry } })
      yield* kit.fs.symlink(kit.sessionRoot, link)
      yield* settleConcurrently(kit, path.join(link, "project", "trace.jsonl"), kit.sessionFile)
    }))
})

const darwinWorld: World = {
  name: "memory",
  layer: Layer.merge(
    Layer.sync(FileSystem.FileSystem, () => makeMemoryFileSystem({ caseInsensitive: true, normalization: "NFD" })),
    Path.layer
  )
}

fileSystemSuite("One identity per Session file, on a Darwin-like volume (case-insensitive, NFD)", (it) => {
  it.effect("spellings in another case or normalization get the sidecar of the spelling on disk", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { writeSession: false })
      const path = kit.path
      const composed = path.join(kit.sessionRoot, "Café", "Trace.jsonl").normalize("NFC")
      yield* kit.fs.makeDirectory(path.dirname(composed), { recursive: true })
      yield* kit.fs.writeFileString(composed, sessionText(kit.sessionId, kit.branch).text)
      // The volume keeps names decomposed: that is the spelling on disk.
      const onDisk = composed.normalize("NFD")
      assert.strictEqual(yield* kit.fs.realPath(composed.toUpperCase()), onDisk)
      const sidecar = Ref.rarebitMaterializationPath(onDisk, {
        sessionRoot: kit.sessionRoot,
        rarebitRoot: kit.rarebitRoot
      })
      for (const spelling of [composed, onDisk, composed.toLowerCase(), onDisk.toUpperCase()]) {
        assert.strictEqual(yield* kit.store.materializationPath(spelling.replace("SESSIONS", "sessions")), sidecar)
      }
      const identity = makeSessionIdentity(kit.fs, path)
      const location = { sessionRoot: kit.sessionRoot, rarebitRoot: kit.rarebitRoot, allowExternalSession: false }
      const canonical = yield* identity.canonical(composed.toLowerCase(), location)
      assert.deepStrictEqual(canonical, { sessionFile: onDisk, location })
      assert.deepStrictEqual(yield* identity.canonical(onDisk.toUpperCase(), location), canonical)
      assert.strictEqual(identity.roots(), 1)
    }))

  it.effect("a Session's root spelled in another case is the same root", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { config: { sessionRoot: `${root}/SESSIONS` } })
      assert.strictEqual(
        yield* kit.store.materializationPath(kit.sessionFile.toUpperCase()),
        kit.sidecar
      )
    }))

  it.effect("two settles by two case spellings of one Session queue in the process", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { config: oneTry })
      yield* settleConcurrently(kit, kit.sessionFile, kit.sessionFile.replace("project/trace", "Project/TRACE"))
      const current = yield* kit.store.readCurrent({ sessionFile: kit.sessionFile.replace("trace", "Trace") })
      assert.strictEqual(current.availability, "available")
    }))

  it.effect("an external Session in either normalization gets one sidecar", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { writeSession: false, config: { allowExternalSession: true } })
      const external = kit.path.join(root, "Élan", "trace.jsonl")
      yield* kit.fs.makeDirectory(kit.path.dirname(external), { recursive: true })
      yield* kit.fs.writeFileString(external, sessionText("s").text)
      const expected = kit.path.join(
        kit.rarebitRoot,
        "materializations-v4",
        "external",
        `${sha256Hex(external.normalize("NFC"))}.jsonl`
      )
      for (const spelling of [external.normalize("NFC"), external.normalize("NFD"), external.toLowerCase()]) {
        assert.strictEqual(yield* kit.store.materializationPath(spelling), expected, spelling)
      }
    }))
}, [darwinWorld])

describe("external Sessions are hashed in NFC", () => {
  it.effect("a decomposed spelling gets the reference's sidecar of the composed one", () =>
    Effect.gen(function*() {
      const path = yield* Path.Path
      const location = { sessionRoot: "/srv/sessions", rarebitRoot: "/srv/rarebit", allowExternalSession: true }
      const composed = "/srv/elsewhere/Café/trace.jsonl".normalize("NFC")
      const theirs = Ref.rarebitMaterializationPath(composed, location)
      assert.deepStrictEqual(materializationPath(path, composed.normalize("NFD"), location), Result.succeed(theirs))
      assert.deepStrictEqual(materializationPath(path, composed, location), Result.succeed(theirs))
      // The reference hashes the bytes it is given.
      assert.notStrictEqual(Ref.rarebitMaterializationPath(composed.normalize("NFD"), location), theirs)
    }).pipe(Effect.provide(Path.layer)))
})
