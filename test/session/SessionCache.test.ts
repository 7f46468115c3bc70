import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, FileSystem, Option, Path, Result } from "effect"
import { TestClock } from "effect/testing"
import fc from "fast-check"
import { ByteCache, ENTRY_OVERHEAD_BYTES } from "../../src/io/ByteCache.js"
import { nativeObservation, readSession, type SessionError } from "../../src/session/index.js"
import { make as makeSessionCache } from "../../src/session/SessionCache.js"
import { makeFaultFileSystem } from "../../src/testing/FaultFileSystem.js"
import { makeMemoryFileSystem } from "../../src/testing/MemoryFileSystem.js"
import { fileSystemSuite, nodeWorld, rewriteInPlace as rewriteInPlaceOn } from "../support/FileSystemSuite.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import { Session } from "../support/Reference.js"
import { makeSpecial } from "../support/SpecialFiles.js"
import { makeStallingFileSystem } from "../support/StallingFileSystem.js"
import { makeSwappingFileSystem } from "../support/SwappingFileSystem.js"
import { sessionTextArb } from "./SessionArbitrary.js"
import { header, message, turnsText } from "./SessionLines.js"

// ---- helpers --------------------------------------------------------------

/** A long tool output, so fingerprints cover only part of the file. */
const toolOutput = (id: string, parentId: string, size: number) =>
  JSON.stringify({
    type: "message",
    id,
    parentId,
    timestamp: "2026-01-01T00:00:02.000Z",
    message: { role: "toolResult", content: [{ type: "text", text: "x".repeat(size) }] }
  })

// ---- the cache on a file system ------------------------------------------------

/** What `readSession` says now, without the parsed entries (which the cache does not keep). */
const freshRead = (file: string, sessionRoot: string) =>
  readSession(file, { sessionRoot }).pipe(
    Effect.map(({ branch: _branch, parsed: _parsed, ...projection }) => projection),
    Effect.result
  )

const cachedRead = (cache: Effect.Success<ReturnType<typeof makeSessionCache>>, file: string, sessionRoot: string) =>
  Effect.result(cache.read(file, { sessionRoot }))

const assertSameRead = (
  actual: Result.Result<unknown, SessionError>,
  expected: Result.Result<unknown, SessionError>,
  label: string
) => {
  if (Result.isSuccess(expected)) {
    assert.isTrue(Result.isSuccess(actual), `${label}: expected success, got ${JSON.stringify(actual)}`)
    assert.deepStrictEqual((actual as Result.Success<unknown, SessionError>).success, expected.success, label)
  } else {
    assert.isTrue(Result.isFailure(actual), `${label}: expected failure ${expected.failure.message}`)
    const failure = (actual as Result.Failure<unknown, SessionError>).failure
    assert.strictEqual(failure._tag, expected.failure._tag, label)
    assert.strictEqual(failure.message, expected.failure.message, label)
  }
}

const append = (file: string, text: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* fs.writeFileString(file, text, { flag: "a" })
  })

/** `rewriteInPlace` on the file system in context. */
const rewriteInPlace = (file: string, text: string) =>
  Effect.gen(function*() {
    yield* rewriteInPlaceOn(yield* FileSystem.FileSystem, file, text)
  })

const replace = (file: string, text: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* fs.writeFileString(`${file}.tmp`, text)
    yield* fs.rename(`${file}.tmp`, file)
  })

type Cache = Effect.Success<ReturnType<typeof makeSessionCache>>

/** Reads with the cache and fresh, asserts they agree, and returns the cache's counters. */
const check = Effect.fnUntraced(function*(
  cache: Cache,
  file: string,
  root: string,
  label: string
) {
  const actual = yield* cachedRead(cache, file, root)
  const expected = yield* freshRead(file, root)
  assertSameRead(actual, expected, label)
  return yield* cache.stats
})

/** What `observeEvidence` must answer: the uncached observation, its selection's texts left out. */
const freshEvidence = (file: string, sessionRoot: string) =>
  Effect.map(
    nativeObservation(file, { sessionRoot }),
    (observed) =>
      observed.availability !== "available" ? observed : {
        availability: observed.availability,
        sessionId: observed.sessionId,
        selection: {
          occurrences: observed.selection.occurrences.map(({ text: _text, ...occurrence }) => occurrence),
          payloads: observed.selection.payloads.map(({ text: _text, ...payload }) => payload),
          manifestHash: observed.selection.manifestHash,
          selectorVersion: observed.selection.selectorVersion
        }
      }
  )

/** Observes with the cache and fresh, asserts they agree, and returns the cache's counters. */
const checkEvidence = Effect.fnUntraced(function*(
  cache: Cache,
  file: string,
  root: string,
  label: string
) {
  const actual = yield* cache.observeEvidence(file, { sessionRoot: root })
  assert.deepStrictEqual(actual, yield* freshEvidence(file, root), label)
  return yield* cache.stats
})

/**
 * The most an idle Session may be charged, its entry included: the entry's
 * overhead and path, 1 KiB, and 250 bytes per selected message (what the
 * README and `StoreConfig` state).
 */
const idleBound = (file: string, occurrences: number) =>
  ENTRY_OVERHEAD_BYTES + 2 * file.length + 1024 + 400 * occurrences

const historyArb = fc.tuple(
  sessionTextArb,
  fc.array(
    fc.oneof(
      { weight: 6, arbitrary: fc.record({ op: fc.constant("append" as const), text: sessionTextArb }) },
      { weight: 2, arbitrary: fc.record({ op: fc.constant("truncate" as const), at: fc.nat() }) },
      {
        weight: 2,
        arbitrary: fc.record({
          op: fc.constant("rewrite" as const),
          at: fc.nat(),
          char: fc.constantFrom("x", "{", "\n", " ")
        })
      },
      { weight: 1, arbitrary: fc.record({ op: fc.constant("replace" as const), text: sessionTextArb }) }
    ),
    { maxLength: 8 }
  )
)

type HistoryOperation = (typeof historyArb extends fc.Arbitrary<infer T> ? T : never)[1][number]

/** Applies one generated operation to a Session file; `rewrite` writes a same-length text in place. */
const applyOperation = (
  file: string,
  operation: HistoryOperation,
  rewrite: (file: string, text: string) => Effect.Effect<void, unknown, FileSystem.FileSystem>
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const current = yield* fs.readFileString(file)
    switch (operation.op) {
      case "append":
        // Generated texts start with their own header; appending one is still just more lines.
        return yield* append(file, operation.text)
      case "truncate":
        return yield* fs.truncate(file, operation.at % (current.length + 1))
      case "rewrite": {
        if (current.length === 0) return
        const at = operation.at % current.length
        return yield* rewrite(file, `${current.slice(0, at)}${operation.char}${current.slice(at + 1)}`)
      }
      case "replace":
        return yield* replace(file, operation.text)
    }
  })

/**
 * Fuzzed histories of ordinary writes (which move the mtime to the time of
 * writing), each on a Session of its own, `<root>/<name><run>.jsonl`, with a
 * cache of its own. After its first write and after each later one, the
 * file is aged (as if last written a minute ago) and `onAged` looks at it;
 * `onWritten` looks at it right after each later write. The clock is set
 * to the file system's: both run on real time here.
 */
const forEachAgedHistory = <E, R>(
  root: string,
  name: string,
  seed: number,
  onAged: (cache: Cache, file: string, label: string) => Effect.Effect<void, E, R>,
  onWritten: (cache: Cache, file: string, label: string) => Effect.Effect<unknown, E, R>
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const now = Date.now()
    yield* TestClock.setTime(now)
    const aged = new Date(now - 60_000)
    for (const [run, [initial, operations]] of fc.sample(historyArb, { numRuns: fuzzRuns(40), seed }).entries()) {
      const cache = yield* makeSessionCache()
      const file = `${root}/${name}${run}.jsonl`
      const label = `run ${run} ${JSON.stringify(operations.map((operation) => operation.op))}`
      const age = (step: string) => Effect.andThen(fs.utimes(file, aged, aged), onAged(cache, file, `${label} ${step}`))
      yield* fs.writeFileString(file, initial)
      yield* age("initial")
      for (const [index, operation] of operations.entries()) {
        yield* applyOperation(file, operation, (target, text) => fs.writeFileString(target, text))
        yield* onWritten(cache, file, `${label} after ${index}: ${operation.op}`)
        yield* age(`after ${index}: ${operation.op}, aged`)
      }
    }
  })

/** A fresh cache that has read `text` once from `<root>/s.jsonl`. */
const started = (root: string, text: string) =>
  Effect.gen(function*() {
    const cache = yield* makeSessionCache()
    const file = `${root}/s.jsonl`
    yield* append(file, text)
    yield* check(cache, file, root, "first")
    return { cache, file, text }
  })

fileSystemSuite("SessionCache", (it) => {
  it.effect("appended lines are parsed incrementally and read like a fresh read", ({ root }) =>
    Effect.gen(function*() {
      const cache = yield* makeSessionCache()
      const file = `${root}/s.jsonl`
      yield* append(file, turnsText(3))
      assert.strictEqual((yield* check(cache, file, root, "first")).full, 1)
      for (let step = 3; step < 6; step++) {
        yield* append(file, turnsText(1, "sess-a", step))
        const stats = yield* check(cache, file, root, `after append ${step}`)
        assert.strictEqual(stats.full, 1)
        assert.strictEqual(stats.incremental, step - 2)
      }
    }))

  it.effect("an unchanged file is answered from the cache", ({ root }) =>
    Effect.gen(function*() {
      const cache = yield* makeSessionCache()
      const file = `${root}/s.jsonl`
      yield* append(file, turnsText(2))
      yield* check(cache, file, root, "first")
      const { retainedBytes, ...stats } = yield* check(cache, file, root, "again")
      assert.deepStrictEqual(stats, { full: 1, incremental: 0, unchanged: 1, unopened: 0, uncached: 0, idle: 0 })
      assert.isAbove(retainedBytes, 0)
    }))

  it.effect("a changed Session is never answered from the cache, idle or not", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const now = Date.now()
      yield* TestClock.setTime(now)
      const aged = new Date(now - 60_000)
      const cache = yield* makeSessionCache()
      const file = `${root}/s.jsonl`
      yield* append(file, turnsText(3))
      yield* fs.utimes(file, aged, aged)
      // Cached both ways: its parse (read), then only its evidence (observed at rest).
      yield* check(cache, file, root, "read")
      const observed = yield* checkEvidence(cache, file, root, "observed")
      assert.strictEqual(observed.idle, 1)
      // The same size, other bytes, written now (same inode, a new mtime): both answers follow the file.
      yield* fs.writeFileString(file, (yield* fs.readFileString(file)).replace("question 1", "question Q"))
      yield* checkEvidence(cache, file, root, "rewritten, observed")
      yield* check(cache, file, root, "rewritten, read")
      // Replaced by another Session under the same name, its mtime set back to the old one.
      yield* replace(file, turnsText(4, "sess-other"))
      yield* fs.utimes(file, aged, aged)
      yield* checkEvidence(cache, file, root, "replaced, observed")
      yield* check(cache, file, root, "replaced, read")
      const stats = yield* cache.stats
      assert.strictEqual(stats.unopened, observed.unopened, "no change was answered by a stat")
      // The rewrite, parsed once and then confirmed by its bytes; the replacement, observed and then read.
      assert.strictEqual(stats.full, observed.full + 3, "each change parsed in full")
    }))

  it.effect("with maxBytes 0 nothing is kept, and every read parses the file", ({ root }) =>
    Effect.gen(function*() {
      const cache = yield* makeSessionCache({ maxBytes: 0 })
      const file = `${root}/s.jsonl`
      yield* append(file, turnsText(2))
      for (let round = 0; round < 3; round++) yield* check(cache, file, root, `read ${round}`)
      const stats = yield* cache.stats
      assert.strictEqual(stats.full, 3)
      assert.strictEqual(stats.retainedBytes, 0)
    }))

  it.effect("a torn last line reads as malformed, and whole once completed", ({ root }) =>
    Effect.gen(function*() {
      const cache = yield* makeSessionCache()
      const file = `${root}/s.jsonl`
      yield* append(file, turnsText(2))
      yield* check(cache, file, root, "first")
      const next = `${message("u2", "a1", "user", "question 2")}\n`
      yield* append(file, next.slice(0, 17))
      const torn = yield* cachedRead(cache, file, root)
      assert.isTrue(Result.isFailure(torn))
      assert.strictEqual(
        (torn as Result.Failure<unknown, SessionError>).failure.message,
        `${file} contains malformed JSON at line 6`
      )
      yield* check(cache, file, root, "torn")
      yield* append(file, next.slice(17))
      const stats = yield* check(cache, file, root, "completed")
      assert.strictEqual(stats.full, 1)
    }))

  it.effect("a truncated file is parsed from the start", ({ root }) =>
    Effect.gen(function*() {
      const cache = yield* makeSessionCache()
      const fs = yield* FileSystem.FileSystem
      const file = `${root}/s.jsonl`
      const text = turnsText(4)
      yield* append(file, text)
      yield* check(cache, file, root, "first")
      yield* fs.truncate(file, text.length - 30)
      assert.strictEqual((yield* check(cache, file, root, "truncated mid-line")).full, 2)
      yield* fs.truncate(file, turnsText(2).length)
      assert.strictEqual((yield* check(cache, file, root, "truncated at a line")).full, 3)
    }))

  it.effect("a Session being written, swapped for a FIFO or a link to a device, reads as the uncached reader reads it", ({ root }) =>
    Effect.scoped(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      for (const kind of ["fifo", "zero"] as const) {
        const cache = yield* makeSessionCache()
        const file = `${root}/${kind}.jsonl`
        yield* append(file, turnsText(3))
        // Just written, so its parsed prefix is kept for the next read to extend.
        assert.isTrue(Result.isSuccess(yield* cachedRead(cache, file, root)), kind)
        yield* fs.remove(file)
        yield* makeSpecial(file, kind)
        const after = yield* cachedRead(cache, file, root)
        assert.isTrue(Result.isFailure(after), kind)
        assertSameRead(after, yield* freshRead(file, root), kind)
        assert.strictEqual((yield* cache.stats).incremental, 0, kind)
      }
    })))

  it.effect("an in-place rewrite with the same size and modification time is noticed", ({ root }) =>
    Effect.gen(function*() {
      const { cache, file, text } = yield* started(root, turnsText(3))
      // Same length, different last answer: the tail fingerprint changes.
      yield* rewriteInPlace(file, text.replace("answer 2", "answer X"))
      const stats = yield* check(cache, file, root, "rewritten tail")
      assert.strictEqual(stats.full, 2)
    }))

  it.effect("a rewritten header is noticed even when the tail is unchanged", ({ root }) =>
    Effect.gen(function*() {
      const cache = yield* makeSessionCache()
      const file = `${root}/s.jsonl`
      // A long tool output pushes the header out of the tail fingerprint.
      const text = `${header("sess-a")}\n${message("u0", null, "user", "q")}\n${toolOutput("t0", "u0", 20_000)}\n${
        message("a0", "t0", "assistant", "a")
      }\n`
      yield* append(file, text)
      yield* check(cache, file, root, "first")
      yield* rewriteInPlace(file, text.replace("sess-a", "sess-z"))
      yield* append(file, `${message("u1", "a0", "user", "next")}\n`)
      const stats = yield* check(cache, file, root, "rewritten header, then appended")
      assert.strictEqual(stats.full, 2)
    }))

  it.effect("a rewrite just before the old end is noticed when the file also grew", ({ root }) =>
    Effect.gen(function*() {
      const { cache, file, text } = yield* started(root, turnsText(3))
      yield* rewriteInPlace(file, `${text.replace("answer 2", "answer Y")}${message("u3", "a2", "user", "more")}\n`)
      assert.strictEqual((yield* check(cache, file, root, "rewritten and grown")).full, 2)
    }))

  it.effect("a file replaced by rename is parsed from the start", ({ root }) =>
    Effect.gen(function*() {
      const { cache, file, text } = yield* started(root, turnsText(3))
      yield* replace(file, text.replace("question 1", "question Q"))
      assert.strictEqual((yield* check(cache, file, root, "replaced, same size")).full, 2)
      yield* replace(file, `${text}${message("u3", "a2", "user", "more")}\n`)
      assert.strictEqual((yield* check(cache, file, root, "replaced by a longer file")).full, 3)
    }))

  it.effect("a touched file of the same size is parsed again", ({ root }) =>
    Effect.gen(function*() {
      const cache = yield* makeSessionCache()
      const fs = yield* FileSystem.FileSystem
      const file = `${root}/s.jsonl`
      yield* append(file, turnsText(2))
      yield* check(cache, file, root, "first")
      const later = new Date(Date.UTC(2030, 0, 1))
      yield* fs.utimes(file, later, later)
      assert.strictEqual((yield* check(cache, file, root, "touched")).full, 2)
    }))

  it.effect("large appends stream in pieces and long lines span pieces", ({ root }) =>
    Effect.gen(function*() {
      const cache = yield* makeSessionCache()
      const file = `${root}/s.jsonl`
      yield* append(file, `${header("sess-a")}\n${message("u0", null, "user", "q")}\n`)
      yield* check(cache, file, root, "first")
      const lines = [toolOutput("t0", "u0", 150_000)]
      for (let index = 1; index < 40; index++) lines.push(toolOutput(`t${index}`, `t${index - 1}`, 3000 + index))
      lines.push(message("a0", "t39", "assistant", "done"))
      yield* append(file, `${lines.join("\n")}\n`)
      const stats = yield* check(cache, file, root, "after a large append")
      assert.strictEqual(stats.incremental, 1)
    }))

  it.effect("after any sequence of appends, truncations, rewrites and replacements it reads like a fresh read", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      for (const [run, [initial, operations]] of fc.sample(historyArb, { numRuns: fuzzRuns(60), seed: 5 }).entries()) {
        const cache = yield* makeSessionCache()
        const file = `${root}/s${run}.jsonl`
        const label = `run ${run} ${JSON.stringify(operations.map((operation) => operation.op))}`
        yield* fs.writeFileString(file, initial)
        yield* check(cache, file, root, `${label} initial`)
        for (const [index, operation] of operations.entries()) {
          yield* applyOperation(file, operation, rewriteInPlace)
          yield* check(cache, file, root, `${label} after ${index}: ${operation.op}`)
        }
      }
    }))

  it.effect("a Session whose mtime was old at the last read is answered by a stat, and every later write is seen", ({ root }) =>
    Effect.gen(function*() {
      let unopened = 0
      yield* forEachAgedHistory(root, "aged", 7, (cache, file, label) =>
        Effect.gen(function*() {
          // Read once to remember the old mtime, then poll.
          const read = yield* check(cache, file, root, label)
          const polled = yield* check(cache, file, root, `${label}, polled`)
          assert.strictEqual(polled.unopened, read.unopened + 1, `${label}: answered by a stat`)
          unopened++
        }), (cache, file, label) => check(cache, file, root, label))
      assert.isAbove(unopened, 0, "polls answered by a stat alone")
    }))

  it.effect("a Session at rest is answered by a stat, and appends and rewrites are still told apart by its fingerprints", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      // The store's clock must agree with the file system's: both run on real time here.
      const now = Date.now()
      yield* TestClock.setTime(now)
      const aged = new Date(now - 60_000)
      const cache = yield* makeSessionCache()
      const file = `${root}/s.jsonl`
      // Long enough for full prints: 4 KiB at the head, 8 KiB before the end.
      yield* append(
        file,
        `${turnsText(3)}${toolOutput("t0", "a2", 20_000)}\n${message("a3", "t0", "assistant", "done")}\n`
      )
      yield* check(cache, file, root, "just written")
      yield* fs.utimes(file, aged, aged)
      const atRest = yield* check(cache, file, root, "at rest")
      assert.strictEqual(atRest.full, 2, "a new mtime at the same size is read in full")
      // Appended to: the prints are checked against the bytes read again, and only the append is parsed.
      yield* append(file, `${message("u4", "a3", "user", "one more")}\n`)
      yield* fs.utimes(file, aged, aged)
      assert.strictEqual((yield* check(cache, file, root, "appended")).incremental, 1)
      assert.strictEqual((yield* check(cache, file, root, "appended, polled")).unopened, atRest.unopened + 1)
      // Its head rewritten in place and grown: the head's print no longer matches, so it is read afresh.
      const text = yield* fs.readFileString(file)
      yield* rewriteInPlace(
        file,
        `${text.replace("question 1", "question Q")}${message("a5", "u4", "assistant", "ok")}\n`
      )
      yield* fs.utimes(file, aged, aged)
      const rewritten = yield* check(cache, file, root, "head rewritten")
      assert.strictEqual(rewritten.full, 3)
      assert.strictEqual(rewritten.incremental, 1)
      // The bytes before the old end rewritten and grown: the tail's print no longer matches either.
      const again = yield* fs.readFileString(file)
      const at = again.lastIndexOf("ok")
      yield* rewriteInPlace(
        file,
        `${again.slice(0, at)}OK${again.slice(at + 2)}${message("a6", "a5", "assistant", "ok")}\n`
      )
      assert.strictEqual((yield* check(cache, file, root, "tail rewritten")).full, 4)
    }))

  it.effect("an idle Session observed at rest keeps only its evidence, and every later write is still seen", ({ root }) =>
    Effect.gen(function*() {
      let idle = 0
      yield* forEachAgedHistory(root, "idle", 11, (cache, file, label) =>
        Effect.gen(function*() {
          yield* checkEvidence(cache, file, root, label)
          const observed = yield* checkEvidence(cache, file, root, `${label}, polled`)
          const polled = yield* checkEvidence(cache, file, root, `${label}, polled again`)
          assert.strictEqual(polled.unopened, observed.unopened + 1, `${label}: answered by a stat`)
          const fresh = yield* freshRead(file, root)
          if (Result.isSuccess(fresh)) {
            idle++
            const bound = idleBound(file, fresh.success.selection.occurrences.length)
            assert.isAtMost(polled.retainedBytes, bound, `${label}: only the evidence is kept`)
          }
          // A projection read of an idle Session parses it again, and answers as a fresh read.
          yield* check(cache, file, root, `${label}, read`)
        }), (cache, file, label) => checkEvidence(cache, file, root, label))
      assert.isAbove(idle, 0, "Sessions kept as evidence")
    }))

  it.effect("an idle Session is charged 1 KiB plus 400 bytes per selected message besides its entry", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const now = Date.now()
      yield* TestClock.setTime(now)
      const aged = new Date(now - 60_000)
      const cache = yield* makeSessionCache()
      const file = `${root}/s.jsonl`
      // Like the benchmark's Sessions: a few questions and answers, most of the bytes in tool outputs.
      const lines = [header("sess-a")]
      for (let turn = 0; turn < 6; turn++) {
        const parent = turn === 0 ? null : `a${turn - 1}`
        lines.push(message(`u${turn}`, parent, "user", `question ${turn} ${"q".repeat(400)}`))
        lines.push(toolOutput(`t${turn}`, `u${turn}`, 8_000))
        lines.push(message(`a${turn}`, `t${turn}`, "assistant", `answer ${turn} ${"a".repeat(1_500)}`))
      }
      yield* fs.writeFileString(file, `${lines.join("\n")}\n`)
      yield* fs.utimes(file, aged, aged)
      const parsed = (yield* check(cache, file, root, "read")).retainedBytes
      const observed = yield* checkEvidence(cache, file, root, "observed")
      const bound = idleBound(file, 12)
      assert.isAtMost(observed.retainedBytes, bound, `an idle Session is charged at most ${bound} bytes`)
      assert.isBelow(observed.retainedBytes, parsed / 6, "a fraction of what its parse keeps")
      // Answered by a stat until it changes.
      const polled = yield* checkEvidence(cache, file, root, "polled")
      assert.strictEqual(polled.unopened, observed.unopened + 1)
    }))

  it.effect("a Session is kept idle until it is dropped or changes", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const now = Date.now()
      yield* TestClock.setTime(now)
      const aged = new Date(now - 60_000)
      const files = ["a", "b", "c"].map((name) => `${root}/${name}.jsonl`)
      for (const [index, file] of files.entries()) {
        yield* append(file, turnsText(2, `sess-${index}`))
        yield* fs.utimes(file, aged, aged)
      }
      // Room for two idle Sessions, not three.
      const probe = yield* makeSessionCache()
      const one = (yield* checkEvidence(probe, files[0], root, "probe")).retainedBytes
      // Plain LRU (every new key admitted): what is dropped is the cache's choice, what is charged the Session cache's.
      const cache = yield* makeSessionCache({ cache: new ByteCache(Math.floor(one * 2.5), 1) })
      for (const [index, file] of files.entries()) yield* checkEvidence(cache, file, root, `observed ${index}`)
      // The first was dropped beyond the bound.
      assert.strictEqual((yield* cache.stats).idle, 2)
      // Written again: no longer at rest, it keeps its parse instead, and is not idle.
      yield* append(files[2], turnsText(1, "sess-2-more"))
      yield* checkEvidence(cache, files[2], root, "observed after a write")
      assert.strictEqual((yield* cache.stats).idle, 1)
      yield* checkEvidence(cache, files[1], root, "polled")
      assert.strictEqual((yield* cache.stats).idle, 1)
    }))

  it.effect("within 2 s of its mtime a same-size rewrite that keeps the mtime is still seen", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const cache = yield* makeSessionCache()
      const file = `${root}/recent.jsonl`
      yield* append(file, turnsText(2))
      const mtime = Option.getOrThrow((yield* fs.stat(file)).mtime).getTime()
      yield* TestClock.setTime(mtime + 1_500)
      yield* check(cache, file, root, "first")
      yield* rewriteInPlace(file, (yield* fs.readFileString(file)).replace("question 1", "question Q"))
      const stats = yield* check(cache, file, root, "rewritten in place, mtime kept")
      assert.strictEqual(stats.unopened, 0)
      assert.strictEqual(stats.full, 2)
    }))

  it.effect("observations match the uncached observation, missing and unreadable included", ({ root }) =>
    Effect.gen(function*() {
      const cache = yield* makeSessionCache()
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const good = `${root}/good.jsonl`
      const bad = `${root}/bad.jsonl`
      yield* fs.writeFileString(good, turnsText(2))
      yield* fs.writeFileString(bad, `${header("x")}\n{"type":`)
      yield* fs.makeDirectory(`${root}/dir.jsonl`)
      const references: ReadonlyArray<unknown> = [
        good,
        bad,
        `${root}/nothing.jsonl`,
        `${root}/dir.jsonl`,
        "sess-a",
        "no-such-id",
        "  ",
        path.relative(process.cwd(), good)
      ]
      for (const reference of references) {
        const expected = yield* nativeObservation(reference as string, { sessionRoot: root })
        for (let round = 0; round < 2; round++) {
          assert.deepStrictEqual(
            yield* cache.observe(reference, { sessionRoot: root }),
            expected,
            `${String(reference)} round ${round}`
          )
        }
      }
    }))

  it.effect("the least recently read Session is dropped when two do not fit", ({ root }) =>
    Effect.gen(function*() {
      const a = `${root}/a.jsonl`
      const b = `${root}/b.jsonl`
      yield* append(a, turnsText(2, "sess-a"))
      yield* append(b, turnsText(2, "sess-b"))
      const probe = yield* makeSessionCache()
      const alone = (yield* check(probe, b, root, "b alone")).retainedBytes
      const cache = yield* makeSessionCache({ cache: new ByteCache(Math.floor(alone * 1.5), 1) })
      yield* check(cache, a, root, "a")
      const onlyB = yield* check(cache, b, root, "b")
      // The evicted Session's state no longer counts against the byte bound.
      assert.strictEqual(onlyB.retainedBytes, alone)
      const stats = yield* check(cache, a, root, "a again")
      assert.strictEqual(stats.full, 3)
    }))

  it.effect("over several Sessions the least recently read state is dropped to fit the byte bound", ({ root }) =>
    Effect.gen(function*() {
      const files = ["a", "b", "c", "d"].map((name) => `${root}/${name}.jsonl`)
      for (const [index, file] of files.entries()) yield* append(file, turnsText(6, `sess-${index}`))
      // Learn one Session's footprint, then allow a little over two of them.
      const probe = yield* makeSessionCache()
      yield* check(probe, files[0], root, "probe")
      const one = (yield* probe.stats).retainedBytes
      const cache = yield* makeSessionCache({ cache: new ByteCache(Math.floor(one * 2.5), 1) })
      for (const [index, file] of files.entries()) {
        const stats = yield* check(cache, file, root, `first read of ${index}`)
        assert.isAtMost(stats.retainedBytes, Math.floor(one * 2.5))
        assert.strictEqual(stats.full, index + 1)
      }
      // The last two read are kept; the first two were dropped and parse again.
      const kept = yield* check(cache, files[3], root, "d again")
      assert.strictEqual(kept.full, 4)
      const dropped = yield* check(cache, files[0], root, "a again")
      assert.strictEqual(dropped.full, 5)
      assert.isAtMost(dropped.retainedBytes, Math.floor(one * 2.5))
    }))

  it.effect("a full cache refuses most new Sessions at rest, but takes one being written and one it read again", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const now = Date.now()
      yield* TestClock.setTime(now)
      const age = (file: string, seconds: number) =>
        fs.utimes(file, new Date(now - seconds * 1000), new Date(now - seconds * 1000))
      const files = ["a", "b", "c", "d"].map((name) => `${root}/${name}.jsonl`)
      for (const [index, file] of files.entries()) {
        yield* append(file, turnsText(6, `sess-${index}`))
        yield* age(file, 60)
      }
      const probe = yield* makeSessionCache()
      yield* check(probe, files[0], root, "probe")
      const one = (yield* probe.stats).retainedBytes
      const cache = yield* makeSessionCache({ maxBytes: Math.floor(one * 2.5) })
      for (const [index, file] of files.slice(0, 3).entries()) yield* check(cache, file, root, `first read of ${index}`)
      // c came when a and b filled the cache: refused, so it parses again, and a and b are still kept.
      assert.strictEqual((yield* check(cache, files[2], root, "c again")).full, 4)
      assert.strictEqual((yield* check(cache, files[0], root, "a again")).full, 4)
      assert.strictEqual((yield* check(cache, files[1], root, "b again")).full, 4)
      // a changes and is at rest again: taken out, extended and put back although the cache is full.
      yield* append(files[0], turnsText(1, "sess-0-more"))
      yield* age(files[0], 30)
      assert.strictEqual((yield* check(cache, files[0], root, "a grown")).incremental, 1)
      assert.strictEqual((yield* check(cache, files[0], root, "a polled")).unchanged, 3)
      // d is being written: a full cache takes it at its first read, so the next poll parses only what it appends.
      yield* append(files[3], turnsText(1, "sess-3-more"))
      assert.strictEqual((yield* check(cache, files[3], root, "d written")).full, 5)
      yield* append(files[3], turnsText(1, "sess-3-again"))
      const polled = yield* check(cache, files[3], root, "d polled")
      assert.deepStrictEqual([polled.full, polled.incremental], [5, 2])
      assert.isAtMost(polled.retainedBytes, Math.floor(one * 2.5))
    }))

  it.effect("state beyond the byte bound is not kept", ({ root }) =>
    Effect.gen(function*() {
      const cache = yield* makeSessionCache({ maxBytes: 1024 })
      const file = `${root}/s.jsonl`
      yield* append(file, turnsText(20))
      yield* check(cache, file, root, "first")
      const stats = yield* check(cache, file, root, "again")
      assert.strictEqual(stats.full, 2)
    }))
})

// On the file system the store's live layer reads Sessions through (DirectFileSystem), not platform-node's pool.
describe("SessionCache against the reference", () => {
  it.effect("cached reads of a growing Session equal the reference's readRarebitSession", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* fs.makeTempDirectoryScoped({ prefix: "rarebit-cache-" })
      const cases = fc.sample(fc.tuple(sessionTextArb, sessionTextArb, fc.nat()), { numRuns: fuzzRuns(100), seed: 9 })
      for (const [run, [first, more, cut]] of cases.entries()) {
        const file = `${root}/s${run}.jsonl`
        const cache = yield* makeSessionCache()
        const whole = `${first}${more}`
        const splitAt = first.length + (cut % (more.length + 1))
        let written = 0
        for (const end of [first.length, splitAt, whole.length]) {
          yield* fs.writeFileString(file, whole.slice(written, end), { flag: "a" })
          written = end
          const label = `run ${run} at ${end}`
          const mine = yield* Effect.result(cache.read(file, { sessionRoot: root }))
          const reference = yield* Effect.promise(() =>
            Session.readRarebitSession(file, { sessionRoot: root }).then(
              ({ branch: _branch, parsed: _parsed, ...projection }: Record<string, unknown>) => ({
                ok: true as const,
                value: projection
              }),
              (error: Error) => ({ ok: false as const, error })
            )
          )
          if (reference.ok) {
            assert.isTrue(Result.isSuccess(mine), `${label}: expected success: ${JSON.stringify(mine)}`)
            const value = (mine as Result.Success<unknown, SessionError>).success
            assert.deepStrictEqual(value, reference.value, label)
            assert.strictEqual(JSON.stringify(value), JSON.stringify(reference.value), label)
          } else {
            assert.isTrue(Result.isFailure(mine), `${label}: expected ${reference.error.message}`)
            assert.strictEqual(
              (mine as Result.Failure<unknown, SessionError>).failure.message,
              reference.error.message,
              label
            )
          }
        }
      }
    }).pipe(Effect.provide(nodeWorld.layer)))
})

describe("SessionCache holds no Session open between reads", () => {
  const world = () => {
    const memory = makeMemoryFileSystem()
    const fault = makeFaultFileSystem(memory, { rules: [] })
    const provide = <A, E, R>(self: Effect.Effect<A, E, R>) =>
      self.pipe(Effect.provideService(FileSystem.FileSystem, fault), Effect.provide(Path.layer))
    const opens = () => fault.operations().filter((op) => op.method === "open").length
    const open = () => memory.openDescriptors().map(({ flag, path }) => `${flag} ${path}`)
    return { memory, provide, opens, open }
  }

  it.effect("polls of a growing Session open it at every read and leave nothing open", () => {
    const { memory, open, opens, provide } = world()
    return provide(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.makeDirectory("/s", { recursive: true })
      yield* append("/s/a.jsonl", turnsText(2))
      const cache = yield* makeSessionCache()
      // `check`'s uncached reads go around the counting wrapper, so only the cache's opens count.
      const checked = (label: string) =>
        check(cache, "/s/a.jsonl", "/s", label).pipe(Effect.provideService(FileSystem.FileSystem, memory))
      yield* checked("first")
      for (let step = 2; step < 6; step++) {
        yield* append("/s/a.jsonl", turnsText(1, "sess-a", step))
        const stats = yield* checked(`append ${step}`)
        assert.strictEqual(stats.incremental, step - 1)
        assert.deepStrictEqual(open(), [])
      }
      // One open per read, none kept.
      assert.strictEqual(opens(), 5)
    }))
  })

  it.effect("a replaced or removed Session is read afresh, and no file stays open", () => {
    const { open, provide } = world()
    return provide(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.makeDirectory("/s", { recursive: true })
      yield* append("/s/a.jsonl", turnsText(2))
      const cache = yield* makeSessionCache()
      yield* check(cache, "/s/a.jsonl", "/s", "a")
      // Replaced by a rename: the new file is read whole.
      yield* fs.writeFileString("/s/a.new", turnsText(3))
      yield* fs.rename("/s/a.new", "/s/a.jsonl")
      const replaced = yield* check(cache, "/s/a.jsonl", "/s", "a replaced")
      assert.strictEqual(replaced.full, 2)
      assert.deepStrictEqual(open(), [])
      // Removed: answered as missing, and nothing of it is kept.
      yield* fs.remove("/s/a.jsonl")
      yield* Effect.flip(cache.read("/s/a.jsonl", { sessionRoot: "/s" }))
      assert.strictEqual((yield* cache.stats).retainedBytes, 0)
      assert.deepStrictEqual(open(), [])
    }))
  })

  it.effect("a Session's state outlives its file's handle: after other reads, a grown Session is read incrementally", () => {
    const { memory, open, opens, provide } = world()
    return provide(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.makeDirectory("/s", { recursive: true })
      for (const name of ["a", "b", "c"]) yield* append(`/s/${name}.jsonl`, turnsText(2, `sess-${name}`))
      const cache = yield* makeSessionCache()
      // `check`'s uncached reads go around the counting wrapper, so only the cache's opens count.
      const checked = (name: string, label: string) =>
        check(cache, `/s/${name}.jsonl`, "/s", label).pipe(Effect.provideService(FileSystem.FileSystem, memory))
      for (const name of ["a", "b", "c"]) yield* checked(name, name)
      assert.deepStrictEqual(open(), [])
      assert.strictEqual(opens(), 3)
      yield* append("/s/a.jsonl", turnsText(1, "sess-a", 2))
      const stats = yield* checked("a", "a grown")
      assert.strictEqual(stats.full, 3)
      assert.strictEqual(stats.incremental, 1)
      assert.strictEqual(opens(), 4)
      assert.deepStrictEqual(open(), [])
    }))
  })

  it.effect("a Session replaced between the stat and the open is read as the file opened, then let go", () => {
    const { memory, open } = world()
    return Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.makeDirectory("/s", { recursive: true })
      yield* append("/s/a.jsonl", turnsText(2))
      // Renames a longer Session over the path just before the cache's open runs.
      const swapping = makeSwappingFileSystem(memory, replace("/s/a.jsonl", turnsText(4)))
      const cache = yield* makeSessionCache().pipe(Effect.provideService(FileSystem.FileSystem, swapping.fs))
      const checked = (label: string) => check(cache, "/s/a.jsonl", "/s", label)
      yield* checked("first")
      yield* replace("/s/a.jsonl", turnsText(3))
      swapping.arm()
      // The answer is the swapped-in Session's, whole, as a fresh read of it answers.
      yield* checked("raced")
      assert.isFalse(swapping.armed(), "the swap ran")
      assert.deepStrictEqual(open(), [], "neither the old nor the raced file stays open")
      const again = yield* cache.read("/s/a.jsonl", { sessionRoot: "/s" })
      assert.strictEqual(again.measurement.rarebitOccurrenceCount, 8)
      assert.deepStrictEqual(open(), [], "nor after the read after")
    }).pipe(Effect.provideService(FileSystem.FileSystem, memory), Effect.provide(Path.layer))
  })

  it.effect("a read interrupted at any file-system call leaves nothing open, and the next read is right", () => {
    const { memory, open, provide } = world()
    return provide(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.makeDirectory("/s", { recursive: true })
      yield* append("/s/a.jsonl", turnsText(2))
      const stalled = { appended: 0, replaced: 0 }
      for (let run = 0; run < 16; run++) {
        yield* Effect.scoped(Effect.gen(function*() {
          // Once armed, the poll's `cut`-th file-system call never returns; then the poll is interrupted.
          const cut = 1 + (run >> 1)
          const variant = run % 2 === 0 ? "appended" : "replaced"
          const { arm, disarm, fs: stalling, reached } = yield* makeStallingFileSystem(memory, cut)
          // The cache does all its reading through the file system it was made with.
          const cache = yield* makeSessionCache().pipe(Effect.provideService(FileSystem.FileSystem, stalling))
          yield* check(cache, "/s/a.jsonl", "/s", "warm")
          if (variant === "appended") {
            yield* append("/s/a.jsonl", turnsText(1, "sess-a", 10 + cut))
          } else {
            // A replaced file makes the poll let go of its handle and open the new one.
            yield* fs.writeFileString("/s/a.new", turnsText(2 + cut))
            yield* fs.rename("/s/a.new", "/s/a.jsonl")
          }
          arm()
          const poll = yield* Effect.forkChild(
            cache.read("/s/a.jsonl", { sessionRoot: "/s" }).pipe(Effect.provideService(FileSystem.FileSystem, stalling))
          )
          yield* Effect.raceFirst(
            Effect.andThen(Deferred.await(reached), Effect.sync(() => stalled[variant]++)),
            Fiber.await(poll)
          )
          yield* Fiber.interrupt(poll)
          disarm()
          assert.deepStrictEqual(open(), [], `cut ${cut}`)
          yield* check(cache, "/s/a.jsonl", "/s", `after cut ${cut}`)
          assert.deepStrictEqual(open(), [])
        }))
      }
      // A poll of an appended Session makes 3 calls here (open, fstat, one read: the file is under 8 KiB, and
      // it was being written at its last read, so no `stat` comes first).
      assert.strictEqual(stalled.appended, 3)
      assert.isAtLeast(stalled.replaced, 3)
    }))
  })
})
