/**
 * Where sidecars live: the mirrored path under `materializations-v4`, the
 * outside-root rule, hashed external sidecars, and agreement with the
 * reference's path function on generated paths.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Path } from "effect"
import fc from "fast-check"
import { sha256Hex } from "../../src/protocol/CanonicalJson.js"
import { materializationPath } from "../../src/store/MirroredPath.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import { fromPlainCaller, jobId, sessionText, summaryReceipt } from "../support/Receipts.js"
import { Store as Ref } from "../support/Reference.js"
import { filesUnder, modeOf, setup } from "./StoreKit.js"

fileSystemSuite("RarebitStore paths", (it) => {
  it.effect("a Session under the root mirrors its relative path under materializations-v4", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { writeSession: false })
      const path = kit.path
      assert.strictEqual(yield* kit.store.materializationPath(kit.sessionFile), kit.sidecar)
      const nested = path.join(kit.sessionRoot, "a", "b", "c.jsonl")
      assert.strictEqual(
        yield* kit.store.materializationPath(nested),
        path.join(kit.rarebitRoot, "materializations-v4", "a", "b", "c.jsonl")
      )
      // Dot segments are resolved before the path is mirrored.
      const dotted = path.join(kit.sessionRoot, "a", ".", "x", "..", "b", "c.jsonl")
      assert.strictEqual(
        yield* kit.store.materializationPath(`${kit.sessionRoot}/a/./x/../b/c.jsonl`),
        path.join(kit.rarebitRoot, "materializations-v4", "a", "b", "c.jsonl")
      )
      assert.strictEqual(yield* kit.store.materializationPath(dotted), yield* kit.store.materializationPath(nested))
      // A name that merely contains ".." is inside the root.
      const dots = path.join(kit.sessionRoot, "a..b", "..c.jsonl")
      assert.strictEqual(
        yield* kit.store.materializationPath(dots),
        path.join(kit.rarebitRoot, "materializations-v4", "a..b", "..c.jsonl")
      )
    }))

  it.effect("a Session outside the root, or the root itself, is refused", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { writeSession: false })
      const path = kit.path
      const outside = [
        path.join(root, "elsewhere", "trace.jsonl"),
        `${kit.sessionRoot}-other/trace.jsonl`,
        kit.sessionRoot,
        `${kit.sessionRoot}/`,
        path.join(kit.sessionRoot, ".."),
        `${kit.sessionRoot}/project/../../escape.jsonl`
      ]
      for (const sessionFile of outside) {
        const error = yield* Effect.flip(kit.store.materializationPath(fromPlainCaller(sessionFile)))
        assert.strictEqual(error._tag, "SessionOutsideRoot", sessionFile)
        assert.include(error.message, "outside the configured Session root")
      }
    }))

  it.effect("external Sessions, when allowed, get a sidecar named by the SHA-256 of the resolved path", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { writeSession: false })
      const path = kit.path
      const external = path.join(root, "elsewhere", "trace.jsonl")
      const expected = path.join(kit.rarebitRoot, "materializations-v4", "external", `${sha256Hex(external)}.jsonl`)
      assert.strictEqual(yield* kit.store.materializationPath(external, { allowExternalSession: true }), expected)
      const unresolved = `${root}/elsewhere/./x/../trace.jsonl`
      assert.strictEqual(yield* kit.store.materializationPath(unresolved, { allowExternalSession: true }), expected)
      // The layer's setting applies when the call does not override it.
      const permissive = yield* setup(root, { writeSession: false, config: { allowExternalSession: true } })
      assert.strictEqual(yield* permissive.store.materializationPath(external), expected)
      const refused = yield* Effect.flip(
        permissive.store.materializationPath(external, { allowExternalSession: false })
      )
      assert.strictEqual(refused._tag, "SessionOutsideRoot")
      // A Session inside the root is mirrored even when external ones are allowed.
      assert.strictEqual(yield* permissive.store.materializationPath(kit.sessionFile), kit.sidecar)
    }))

  it.effect("an external Session is reserved, settled and read through its hashed sidecar", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { config: { allowExternalSession: true } })
      const external = kit.path.join(root, "elsewhere", "trace.jsonl")
      yield* kit.fs.makeDirectory(kit.path.dirname(external), { recursive: true })
      yield* kit.fs.writeFileString(external, sessionText("s", kit.branch).text)
      const sidecar = kit.path.join(kit.rarebitRoot, "materializations-v4", "external", `${sha256Hex(external)}.jsonl`)
      const reservation = yield* kit.store.reserve({ jobId: jobId(1), sessionFile: external })
      assert.strictEqual(reservation.materializationPath, sidecar)
      assert.strictEqual(reservation._tag, "Acquired")
      if (reservation._tag !== "Acquired") return
      const settled = yield* kit.store.settle(reservation, summaryReceipt(kit.branch, "s"))
      assert.strictEqual(settled.path, sidecar)
      assert.strictEqual(yield* modeOf(kit.fs, kit.path.dirname(sidecar)), 0o700)
      const current = yield* kit.store.readCurrent({ sessionFile: external })
      assert.strictEqual(current.availability, "available")
      assert.strictEqual(current.artifactState.syncState, "assessment_current")
      assert.deepStrictEqual(yield* filesUnder(kit.fs, kit.path.join(kit.rarebitRoot, "materializations-v4")), [
        "external",
        `external/${sha256Hex(external)}.jsonl`
      ])
    }))

  it.effect("a blank or missing Session file is refused", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { writeSession: false })
      for (const sessionFile of ["", "   ", "\n\t", undefined, null, 42, {}]) {
        const error = yield* Effect.flip(kit.store.materializationPath(fromPlainCaller(sessionFile)))
        assert.strictEqual(error._tag, "SessionFileRequired", String(sessionFile))
        assert.strictEqual(error.message, "A persisted Pi Session file is required")
      }
    }))

  it.effect("every operation refuses an outside Session with the typed error and writes nothing", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { writeSession: false })
      const sessionFile = kit.path.join(root, "elsewhere", "trace.jsonl")
      const errors = [
        yield* Effect.flip(kit.store.readCurrent({ sessionFile, native: { availability: "missing" } })),
        yield* Effect.flip(kit.store.readHistory({ sessionFile })),
        yield* Effect.flip(kit.store.reserve({ jobId: jobId(1), sessionFile })),
        yield* Effect.flip(
          kit.store.withJob({ jobId: jobId(1), sessionFile }, () => Effect.succeed(fromPlainCaller({})))
        )
      ]
      assert.deepStrictEqual(errors.map((error) => error._tag), [
        "SessionOutsideRoot",
        "SessionOutsideRoot",
        "SessionOutsideRoot",
        "SessionOutsideRoot"
      ])
      assert.deepStrictEqual(yield* filesUnder(kit.fs, root), [])
    }))
})

describe("materializationPath matches the reference", () => {
  const segment = fc.oneof(
    fc.constantFrom(".", "..", "a", "b.jsonl", "..x", "x..", " ", "a b", "é"),
    fc.stringMatching(/^[a-z0-9._-]{1,6}$/)
  )
  const relativePath = fc.array(segment, { minLength: 0, maxLength: 5 }).map((parts) => parts.join("/"))

  it.effect("for any path relative to the Session root, with and without external Sessions", () =>
    Effect.gen(function*() {
      const path = yield* Path.Path
      fc.assert(
        fc.property(relativePath, fc.boolean(), fc.boolean(), (relative, absolute, allowExternalSession) => {
          const location = { sessionRoot: "/srv/sessions", rarebitRoot: "/srv/rarebit", allowExternalSession }
          const sessionFile = absolute ? `/srv/sessions/${relative}` : `../sessions/${relative}`
          const ours = materializationPath(path, sessionFile, location)
          let theirs: { ok: true; value: string } | { ok: false; message: string }
          try {
            theirs = { ok: true, value: Ref.rarebitMaterializationPath(sessionFile, location) }
          } catch (error) {
            theirs = { ok: false, message: (error as Error).message }
          }
          if (theirs.ok) {
            assert.isTrue(ours._tag === "Success", `${sessionFile}: ours failed`)
            if (ours._tag === "Success") assert.strictEqual(ours.success, theirs.value)
          } else {
            assert.isTrue(ours._tag === "Failure", `${sessionFile}: ours succeeded`)
            if (ours._tag === "Failure") assert.strictEqual(ours.failure.message, theirs.message)
          }
        }),
        { numRuns: fuzzRuns(1000) }
      )
    }).pipe(Effect.provide(Path.layer)))
})
