import * as NodeServices from "@effect/platform-node/NodeServices"
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem, Path, Result } from "effect"
import * as PlatformError from "effect/PlatformError"
import fc from "fast-check"
import { nonBlockingOpenOf, NonBlockingOpenTypeId } from "../../src/io/NonBlockingOpen.js"
import { toPlainError } from "../../src/promise/PlainErrors.js"
import {
  nativeObservation,
  readSession,
  resolveSessionFile,
  SessionAmbiguous,
  type SessionError,
  SessionNotFound
} from "../../src/session/index.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import { referenceNative, Session } from "../support/Reference.js"
import { assertSameOutcome, type Outcome, settle } from "./Outcome.js"
import { sessionTextArb, textArb } from "./SessionArbitrary.js"
import { header, message } from "./SessionLines.js"

const sessionText = (id: string) =>
  [header(id), message("u1", null, "user", "Run the tests."), message("a1", "u1", "assistant", "done")].join("\n") +
  "\n"

/** Our effect's outcome, failures converted to what the plain API would throw. */
const ours = <A, R>(effect: Effect.Effect<A, SessionError, R>): Effect.Effect<Outcome<A>, never, R> =>
  Effect.map(
    Effect.result(effect),
    (result): Outcome<A> =>
      Result.isSuccess(result)
        ? { ok: true, value: result.success }
        : { ok: false, error: toPlainError(result.failure) }
  )

const theirs = <A>(f: () => Promise<A>) => Effect.promise(() => settle(f))

const write = Effect.fnUntraced(function*(file: string, content: string | Uint8Array) {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  yield* fs.makeDirectory(path.dirname(file), { recursive: true })
  if (typeof content === "string") yield* fs.writeFileString(file, content)
  else yield* fs.writeFile(file, content)
})

/** Resolves `reference` with both implementations and checks they agree; returns ours. */
const resolveBoth = Effect.fnUntraced(function*(reference: string, sessionRoot: string) {
  const mine = yield* ours(resolveSessionFile(reference, { sessionRoot }))
  const reference_ = yield* theirs(() => Session.resolveRarebitSessionFile(reference, { sessionRoot }))
  assertSameOutcome(mine, reference_, `resolve ${reference}`)
  return mine
})

/** Reads `reference` with both implementations and checks they agree (and so do the native observations). */
const readBoth = Effect.fnUntraced(function*(reference: string, sessionRoot: string, label: string) {
  const mine = yield* ours(readSession(reference, { sessionRoot }))
  const reference_ = yield* theirs(() => Session.readRarebitSession(reference, { sessionRoot }))
  assertSameOutcome(mine, reference_, label)
  if (mine.ok) {
    assert.strictEqual(
      JSON.stringify(mine.value.selection),
      JSON.stringify((reference_ as { value: any }).value.selection)
    )
    assert.strictEqual(
      JSON.stringify(mine.value.measurement),
      JSON.stringify((reference_ as { value: any }).value.measurement)
    )
  }
  const observed = yield* nativeObservation(reference, { sessionRoot })
  const expected = yield* Effect.promise(() => referenceNative(reference, sessionRoot))
  assert.deepStrictEqual(observed, expected as typeof observed, `${label}: native observation`)
  return mine
})

const failureOf = <A>(outcome: Outcome<A>): Error & { code?: string } => {
  assert.isFalse(outcome.ok)
  return (outcome as { error: Error & { code?: string } }).error
}

/**
 * A file system that fails every read of a file's bytes (`readFile`, and
 * every open, the store's non-blocking one included) with the given reason,
 * as if the file changed under us between the stat and the read.
 */
const withReadFileFailure = (tag: PlatformError.SystemErrorTag) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const fail = (method: string, path: string) =>
      Effect.fail(PlatformError.systemError({ _tag: tag, module: "FileSystem", method, pathOrDescriptor: path }))
    const failing: FileSystem.FileSystem = {
      ...fs,
      readFile: (path) => fail("readFile", path),
      open: (path) => fail("open", path),
      ...(nonBlockingOpenOf(fs) === undefined ? {} : { [NonBlockingOpenTypeId]: (path: string) => fail("open", path) })
    }
    return yield* Effect.provideService(effect, FileSystem.FileSystem, failing)
  })

const seedOf = () => Number(process.env.RAREBIT_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31))

describe("SessionReader on disk", () => {
  it.layer(NodeServices.layer)((it) => {
    it.effect("resolves an existing file by absolute and relative path, as the reference does", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const path = yield* Path.Path
        const root = yield* fs.makeTempDirectoryScoped()
        const file = path.join(root, "2026", "one.jsonl")
        yield* write(file, sessionText("sess-one"))

        const byPath = yield* resolveBoth(file, path.join(root, "elsewhere"))
        assert.deepStrictEqual(byPath, { ok: true, value: file })
        const relative = path.relative(process.cwd(), file)
        assert.deepStrictEqual(yield* resolveBoth(relative, root), { ok: true, value: file })
        assert.deepStrictEqual(yield* resolveBoth(`  ${file}\n`, root), { ok: true, value: file })
      }))

    it.effect("finds an exact id under a nested root, skipping symlinks, other ids and non-jsonl files", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const path = yield* Path.Path
        const root = yield* fs.makeTempDirectoryScoped()
        const target = path.join(root, "a", "b", "c", "found.jsonl")
        yield* write(target, sessionText("sess-nested"))
        yield* write(path.join(root, "a", "other.jsonl"), sessionText("sess-other"))
        yield* write(path.join(root, "a", "notes.txt"), sessionText("sess-nested"))
        yield* write(path.join(root, "a", "no-header.jsonl"), message("u1", null, "user", "sess-nested"))
        yield* write(path.join(root, "a", "empty.jsonl"), "")
        yield* fs.makeDirectory(path.join(root, "dir.jsonl"))
        // Neither a symlinked file nor a symlinked directory is scanned, or the id would be ambiguous.
        yield* fs.symlink(target, path.join(root, "link.jsonl"))
        yield* fs.symlink(path.join(root, "a"), path.join(root, "linked-dir"))

        assert.deepStrictEqual(yield* resolveBoth("sess-nested", root), { ok: true, value: target })
        assert.deepStrictEqual(yield* resolveBoth(" sess-other ", root), {
          ok: true,
          value: path.join(root, "a", "other.jsonl")
        })
      }))

    it.effect("an id carried by two files is ambiguous", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const path = yield* Path.Path
        const root = yield* fs.makeTempDirectoryScoped()
        yield* write(path.join(root, "x", "one.jsonl"), sessionText("sess-twice"))
        yield* write(path.join(root, "y", "two.jsonl"), sessionText("sess-twice"))

        const error = yield* Effect.flip(resolveSessionFile("sess-twice", { sessionRoot: root }))
        assert.instanceOf(error, SessionAmbiguous)
        assert.strictEqual((error as SessionAmbiguous).count, 2)
        assert.strictEqual(error.message, "Pi Session ID sess-twice is ambiguous across 2 files; pass an exact path")
        const both = yield* resolveBoth("sess-twice", root)
        assert.strictEqual(failureOf(both).name, "RarebitQueryError")
      }))

    it.effect("an unknown id, or any id under a missing root, is not found", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const path = yield* Path.Path
        const root = yield* fs.makeTempDirectoryScoped()
        yield* write(path.join(root, "s.jsonl"), sessionText("sess-a"))

        const error = yield* Effect.flip(resolveSessionFile("sess-zzz", { sessionRoot: root }))
        assert.instanceOf(error, SessionNotFound)
        assert.strictEqual(error.message, "No persisted Pi Session has exact ID sess-zzz")
        yield* resolveBoth("sess-zzz", root)
        const missingRoot = yield* resolveBoth("sess-a", path.join(root, "does", "not", "exist"))
        assert.strictEqual(failureOf(missingRoot).message, "No persisted Pi Session has exact ID sess-a")
      }))

    it.effect("a path-like reference that names no file is not found and never scanned", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const path = yield* Path.Path
        const root = yield* fs.makeTempDirectoryScoped()
        yield* write(path.join(root, "s.jsonl"), sessionText("sess-a"))

        yield* fs.makeDirectory(path.join(root, "dir.jsonl"))
        const references = [
          "./sess-a",
          "sess-a.jsonl",
          ".sess-a",
          path.join(root, "missing.jsonl"),
          "a/sess-a",
          path.join(root, "dir.jsonl"),
          root
        ]
        for (const reference of references) {
          const outcome = yield* resolveBoth(reference, root)
          assert.strictEqual(failureOf(outcome).message, `Pi Session file not found: ${reference}`)
        }
        const error = yield* Effect.flip(resolveSessionFile("./sess-a", { sessionRoot: root }))
        assert.deepStrictEqual([error._tag, (error as SessionNotFound).lookup], ["SessionNotFound", "path"])
      }))

    it.effect("a blank reference is invalid", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const root = yield* fs.makeTempDirectoryScoped()
        for (const reference of ["", "  \n"]) {
          const outcome = yield* resolveBoth(reference, root)
          assert.strictEqual(failureOf(outcome).message, "--session requires an exact Pi Session path or ID")
        }
        const error = yield* Effect.flip(resolveSessionFile(" ", { sessionRoot: root }))
        assert.deepStrictEqual([error._tag, error._tag === "SessionInvalid" && error.kind], [
          "SessionInvalid",
          "invalid_reference"
        ])
      }))

    it.effect("a symlink to a Session file resolves by path to the link itself", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const path = yield* Path.Path
        const root = yield* fs.makeTempDirectoryScoped()
        const target = path.join(root, "real", "s.jsonl")
        const link = path.join(root, "link.jsonl")
        yield* write(target, sessionText("sess-linked"))
        yield* fs.symlink(target, link)

        assert.deepStrictEqual(yield* resolveBoth(link, root), { ok: true, value: link })
        const read = yield* readBoth(link, root, "symlink")
        assert.isTrue(read.ok)
        // A dangling link is no file: a path-like reference that is not found.
        const dangling = path.join(root, "dangling.jsonl")
        yield* fs.symlink(path.join(root, "gone.jsonl"), dangling)
        assert.strictEqual(
          failureOf(yield* resolveBoth(dangling, root)).message,
          `Pi Session file not found: ${dangling}`
        )
      }))

    it.effect("the id probe reads only the first 16 KiB, and keeps a BOM that only trimming forgives", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const path = yield* Path.Path
        const root = yield* fs.makeTempDirectoryScoped()
        const long = path.join(root, "long.jsonl")
        yield* write(long, `${header("sess-long", { padding: "x".repeat(16384) })}\n`)
        yield* write(path.join(root, "bom.jsonl"), `\uFEFF${sessionText("sess-bom")}`)

        assert.strictEqual(
          failureOf(yield* resolveBoth("sess-long", root)).message,
          "No persisted Pi Session has exact ID sess-long"
        )
        assert.isTrue((yield* readBoth(long, root, "long header")).ok)
        // The probe trims the BOM away, the parser does not: found by id, then malformed at line 1.
        assert.isTrue((yield* resolveBoth("sess-bom", root)).ok)
        const bom = yield* readBoth("sess-bom", root, "bom")
        assert.strictEqual(failureOf(bom).message, `${path.join(root, "bom.jsonl")} contains malformed JSON at line 1`)
      }))

    it.effect("a root that is a file fails with the file system's own error", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const path = yield* Path.Path
        const root = yield* fs.makeTempDirectoryScoped()
        const notADirectory = path.join(root, "root-file")
        yield* write(notADirectory, "plain")

        const outcome = yield* resolveBoth("sess-a", notADirectory)
        assert.strictEqual(failureOf(outcome).code, "ENOTDIR")
        const error = yield* Effect.flip(resolveSessionFile("sess-a", { sessionRoot: notADirectory }))
        assert.strictEqual(error._tag, "SessionIo")
      }))

    it.effect("native observation: available, unreadable for a missing path or a malformed file", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const path = yield* Path.Path
        const root = yield* fs.makeTempDirectoryScoped()
        const good = path.join(root, "good.jsonl")
        const broken = path.join(root, "broken.jsonl")
        const missing = path.join(root, "missing.jsonl")
        yield* write(good, sessionText("sess-good"))
        yield* write(broken, `${header("sess-broken")}\n{"type":"message"`)

        const available = yield* nativeObservation(good, { sessionRoot: root })
        assert.strictEqual(available.availability, "available")
        assert.deepStrictEqual(available, (yield* Effect.promise(() => referenceNative(good, root))) as any)
        if (available.availability === "available") {
          assert.strictEqual(available.sessionId, "sess-good")
          assert.strictEqual(available.selection.selectorVersion, "rarebit-selector-v1")
          assert.deepStrictEqual(Object.keys(available.selection), [
            "occurrences",
            "payloads",
            "manifest",
            "manifestHash",
            "selectorVersion"
          ])
        }
        // A missing absolute path is a path-like reference: a query error, so "unreadable", not "missing".
        assert.deepStrictEqual(yield* nativeObservation(missing, { sessionRoot: root }), { availability: "unreadable" })
        assert.deepStrictEqual(yield* Effect.promise(() => referenceNative(missing, root)), {
          availability: "unreadable"
        })
        assert.deepStrictEqual(yield* nativeObservation(broken, { sessionRoot: root }), { availability: "unreadable" })
        yield* readBoth(broken, root, "broken")
      }))

    it.effect("native observation is missing only when the file system says NotFound", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const path = yield* Path.Path
        const root = yield* fs.makeTempDirectoryScoped()
        const file = path.join(root, "s.jsonl")
        yield* write(file, sessionText("sess-vanishing"))

        const vanished = yield* nativeObservation(file, { sessionRoot: root }).pipe(withReadFileFailure("NotFound"))
        assert.deepStrictEqual(vanished, { availability: "missing" })
        const denied = yield* nativeObservation(file, { sessionRoot: root }).pipe(
          withReadFileFailure("PermissionDenied")
        )
        assert.deepStrictEqual(denied, { availability: "unreadable" })
        const error = yield* Effect.flip(readSession(file, { sessionRoot: root }).pipe(withReadFileFailure("NotFound")))
        assert.strictEqual(error._tag, "SessionIo")
      }))

    it.effect("readSession equals readRarebitSession on generated Sessions, by path and by id", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const path = yield* Path.Path
        const tmp = yield* fs.makeTempDirectoryScoped()
        const seed = seedOf()
        const samples = fc.sample(sessionTextArb, { numRuns: fuzzRuns(100), seed })
        for (let index = 0; index < samples.length; index++) {
          const root = path.join(tmp, `run-${index}`)
          const file = path.join(root, "nested", "session.jsonl")
          yield* write(file, samples[index])
          const label = `seed ${seed} case ${index}: ${JSON.stringify(samples[index])}`
          yield* readBoth(file, root, `${label} by path`)
          yield* readBoth("sess-a", root, `${label} by id`)
        }
      }))

    it.effect("decodes invalid UTF-8 and multibyte text exactly like readFile(path, \"utf8\")", () =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const path = yield* Path.Path
        const tmp = yield* fs.makeTempDirectoryScoped()
        const seed = seedOf()
        // Raw bytes placed inside a JSON string: anything but quote, backslash and control bytes.
        const rawArb = fc.uint8Array({ maxLength: 24 }).map((bytes) =>
          bytes.filter((byte) => byte >= 0x20 && byte !== 0x22 && byte !== 0x5c)
        )
        const samples = fc.sample(fc.tuple(rawArb, textArb, fc.boolean()), { numRuns: fuzzRuns(100), seed })
        const encoder = new TextEncoder()
        for (let index = 0; index < samples.length; index++) {
          const [raw, text, bom] = samples[index]
          const before = encoder.encode(
            `${bom ? "\uFEFF" : ""}${
              header("sess-bytes")
            }\n{"type":"message","id":"u1","parentId":null,"message":{"role":"user","content":"${
              JSON.stringify(text).slice(1, -1)
            }`
          )
          const after = encoder.encode(`"}}\n`)
          const bytes = new Uint8Array(before.length + raw.length + after.length)
          bytes.set(before, 0)
          bytes.set(raw, before.length)
          bytes.set(after, before.length + raw.length)
          const file = path.join(tmp, `bytes-${index}.jsonl`)
          yield* write(file, bytes)
          yield* readBoth(file, tmp, `seed ${seed} case ${index}`)
        }
      }))
  })
})
