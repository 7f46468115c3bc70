/**
 * The Session read limits (`SessionLimits`) on both file systems, with a
 * small text limit (64 Ki code units) in place of V8's: the uncached reader
 * and the cache fail with `SessionTooLarge` exactly when the whole-text
 * decode of the file is longer than the limit (or the file is over the size
 * limit), and otherwise answer what the whole text parses to. The oracle is
 * the whole-file decode and the uncached parse of its text, which the
 * differential tests hold to the reference.
 */
import { assert } from "@effect/vitest"
import { Effect, FileSystem, Result } from "effect"
import fc from "fast-check"
import {
  parseSessionResult,
  projectSession,
  readSession,
  resolveActiveBranchResult,
  type SessionError,
  type SessionLimits
} from "../../src/session/index.js"
import { make as makeSessionCache } from "../../src/session/SessionCache.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { header, message } from "./SessionLines.js"

const LIMIT = 64 * 1024
const limits: SessionLimits = { maxTextUnits: LIMIT, maxFileBytes: 2 ** 31 - 1 }
const encoder = new TextEncoder()
const whole = new TextDecoder("utf-8", { ignoreBOM: true })

/** What a read must answer for these bytes: the verdict of the rule, else the whole text's parse. */
const expectedOf = (bytes: Uint8Array, file: string, rule: SessionLimits) => {
  if (bytes.length > rule.maxFileBytes) return { tooLarge: "file" as const }
  const text = whole.decode(bytes)
  if (text.length > rule.maxTextUnits) return { tooLarge: "text" as const }
  const parsed = parseSessionResult(text, file)
  if (Result.isFailure(parsed)) return { failure: parsed.failure.message }
  const branch = resolveActiveBranchResult(parsed.success, file)
  if (Result.isFailure(branch)) return { failure: branch.failure.message }
  return { projection: projectSession(parsed.success, branch.success) }
}

type Expected = ReturnType<typeof expectedOf>

const assertRead = (actual: Result.Result<unknown, SessionError>, expected: Expected, label: string) => {
  if ("projection" in expected) {
    assert.isTrue(Result.isSuccess(actual), `${label}: expected success, got ${JSON.stringify(actual)}`)
    const { branch: _branch, parsed: _parsed, sessionFile: _file, ...projection } = (actual as Result.Success<
      Record<string, unknown>,
      SessionError
    >).success
    assert.deepStrictEqual(projection, expected.projection as unknown, label)
    return
  }
  assert.isTrue(Result.isFailure(actual), `${label}: expected a failure`)
  const failure = (actual as Result.Failure<unknown, SessionError>).failure
  if ("tooLarge" in expected) {
    assert.strictEqual(failure._tag, "SessionTooLarge", `${label}: ${failure.message}`)
    assert.strictEqual(failure._tag === "SessionTooLarge" && failure.reason, expected.tooLarge, label)
  } else {
    assert.strictEqual(failure.message, expected.failure, label)
  }
}

/** Writes `bytes`, then reads them uncached and through a fresh cache; both must answer `expectedOf`. */
const checkBytes = (root: string, name: string, bytes: Uint8Array, rule: SessionLimits = limits) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = `${root}/${name}`
    yield* fs.writeFile(file, bytes)
    const expected = expectedOf(bytes, file, rule)
    const uncached = yield* Effect.result(readSession(file, { sessionRoot: root, limits: rule }))
    assertRead(uncached, expected, `${name} uncached`)
    const cache = yield* makeSessionCache({ limits: rule })
    assertRead(yield* Effect.result(cache.read(file, { sessionRoot: root })), expected, `${name} cached`)
    const observed = yield* cache.observe(file, { sessionRoot: root })
    assert.strictEqual(observed.availability, "projection" in expected ? "available" : "unreadable", `${name} observed`)
    return expected
  })

/** A header line padded to exactly `units` code units (at least ~90). */
const paddedHeader = (units: number) => {
  const bare = header("s-pad", { pad: "" })
  return header("s-pad", { pad: "p".repeat(units - bare.length) })
}

/** A message line whose text is `text`, in a tree under the padded header. */
const messageLine = (id: string, parentId: string | null, text: string) => message(id, parentId, "user", text)

fileSystemSuite("Session read limits", (it) => {
  it.effect("one line under, at and over the limit, terminated or not", ({ root }) =>
    Effect.gen(function*() {
      for (const delta of [-1, 0, 1]) {
        const line = paddedHeader(LIMIT + delta)
        assert.strictEqual(line.length, LIMIT + delta)
        const unterminated = yield* checkBytes(root, `line${delta}.jsonl`, encoder.encode(line))
        assert.strictEqual("tooLarge" in unterminated, delta > 0, `unterminated ${delta}`)
        // The newline is one more code unit of the text.
        const terminated = yield* checkBytes(root, `line${delta}n.jsonl`, encoder.encode(`${line}\n`))
        assert.strictEqual("tooLarge" in terminated, delta >= 0, `terminated ${delta}`)
      }
    }))

  it.effect("a total just under and just over the limit over many lines", ({ root }) =>
    Effect.gen(function*() {
      const lines = [header("s-many")]
      let parent: string | null = null
      for (let index = 0; lines.join("\n").length < LIMIT - 600; index++) {
        lines.push(messageLine(`m${index}`, parent, `turn ${index}`))
        parent = `m${index}`
      }
      const base = `${lines.join("\n")}\n`
      const filler = (units: number) => {
        const bare = messageLine("last", parent, "")
        return `${messageLine("last", parent, "f".repeat(units - bare.length - 1))}\n`
      }
      for (const delta of [-1, 0, 1]) {
        const text = base + filler(LIMIT + delta - base.length)
        assert.strictEqual(text.length, LIMIT + delta)
        const expected = yield* checkBytes(root, `many${delta}.jsonl`, encoder.encode(text))
        assert.strictEqual("tooLarge" in expected, delta > 0)
      }
    }))

  it.effect("multibyte and invalid UTF-8 count as they decode, wherever the 64 KiB reads cut them", ({ root }) =>
    Effect.gen(function*() {
      // Runs of 1-, 2-, 3- and 4-byte characters and invalid bytes inside a JSON string (each invalid
      // sequence decodes to one U+FFFD, still a valid string), sized to straddle the read boundaries.
      const partArb = fc.oneof(
        fc.integer({ min: 1, max: 9000 }).map((count) => encoder.encode("a".repeat(count))),
        fc.integer({ min: 1, max: 9000 }).map((count) => encoder.encode("é".repeat(count))),
        fc.integer({ min: 1, max: 9000 }).map((count) => encoder.encode("€".repeat(count))),
        fc.integer({ min: 1, max: 9000 }).map((count) => encoder.encode("😀".repeat(count))),
        fc.constantFrom(
          Uint8Array.of(0xff),
          Uint8Array.of(0xe2, 0x82),
          Uint8Array.of(0xf0, 0x9f, 0x98),
          Uint8Array.of(0xed, 0xa0, 0x80),
          Uint8Array.of(0xc0, 0xaf)
        )
      )
      const cases = fc.sample(
        fc.tuple(fc.array(partArb, { minLength: 1, maxLength: 30 }), fc.integer({ min: -2, max: 2 }), fc.boolean()),
        { numRuns: 12, seed: 42 }
      )
      for (const [index, [parts, slack, terminated]] of cases.entries()) {
        const opening = `{"type":"message","id":"m","parentId":null,"message":{"role":"user","content":"`
        const prefix = encoder.encode(`${header("s-mb")}\n${opening}`)
        const suffix = encoder.encode(`"}}${terminated ? "\n" : ""}`)
        const chunks = [prefix, ...parts, suffix]
        const bytes = new Uint8Array(chunks.reduce((sum, chunk) => sum + chunk.length, 0))
        let at = 0
        for (const chunk of chunks) {
          bytes.set(chunk, at)
          at += chunk.length
        }
        const units = whole.decode(bytes).length
        const rule = { ...limits, maxTextUnits: Math.max(1, units + slack) }
        const expected = yield* checkBytes(root, `mb${index}.jsonl`, bytes, rule)
        assert.strictEqual("tooLarge" in expected, slack < 0, `case ${index}`)
      }
    }))

  it.effect("a file over the size limit is too large whatever it holds", ({ root }) =>
    Effect.gen(function*() {
      const text = encoder.encode(`${header("s-size")}\n${" ".repeat(1000)}`)
      const rule = { maxTextUnits: LIMIT, maxFileBytes: text.length - 1 }
      assert.deepStrictEqual(yield* checkBytes(root, "over.jsonl", text, rule), { tooLarge: "file" })
      const fits = yield* checkBytes(root, "fits.jsonl", text, { ...rule, maxFileBytes: text.length })
      assert.isTrue("projection" in fits)
    }))

  it.effect("lines longer than 1 MiB are read again whole: complete, torn and over the limit", ({ root }) =>
    Effect.gen(function*() {
      const big = "b".repeat(2 * 1024 * 1024 + 17)
      const head = header("s-long")
      const long = messageLine("long", null, big)
      const after = messageLine("after", "long", "still here")
      const rule = { ...limits, maxTextUnits: 8 * 1024 * 1024 }
      const inside = yield* checkBytes(root, "inside.jsonl", encoder.encode(`${head}\n${long}\n${after}\n`), rule)
      assert.strictEqual("projection" in inside && inside.projection.session.activeLeafId, "after")
      const last = yield* checkBytes(root, "last.jsonl", encoder.encode(`${head}\n${long}`), rule)
      assert.strictEqual("projection" in last && last.projection.session.activeLeafId, "long")
      const torn = yield* checkBytes(root, "torn.jsonl", encoder.encode(`${head}\n${long.slice(0, -3)}`), rule)
      assert.isTrue("failure" in torn && torn.failure.endsWith("malformed JSON at line 2"))
      const over = { ...rule, maxTextUnits: long.length }
      assert.deepStrictEqual(yield* checkBytes(root, "over.jsonl", encoder.encode(`${head}\n${long}`), over), {
        tooLarge: "text"
      })
      // A malformed line before it: the verdict is the malformed line, and the long line is never needed.
      const broken = yield* checkBytes(root, "broken.jsonl", encoder.encode(`${head}\n{oops\n${long}\n`), rule)
      assert.isTrue("failure" in broken && broken.failure.endsWith("malformed JSON at line 2"))
      // Unless the whole text is over the limit: the reference's read fails before any line is parsed.
      const brokenOver = yield* checkBytes(root, "broken-over.jsonl", encoder.encode(`${head}\n{oops\n${long}\n`), over)
      assert.deepStrictEqual(brokenOver, { tooLarge: "text" })
    }))

  it.effect("a cached Session grown past the limit is unreadable, and readable again once replaced or truncated", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const file = `${root}/grow.jsonl`
      const cache = yield* makeSessionCache({ limits })
      const read = Effect.gen(function*() {
        const actual = yield* Effect.result(cache.read(file, { sessionRoot: root }))
        const expected = expectedOf(yield* fs.readFile(file), file, limits)
        assertRead(actual, expected, "cached")
        return { expected, stats: yield* cache.stats }
      })
      const small = `${header("s-grow")}\n${messageLine("m0", null, "x".repeat(LIMIT - 2000))}\n`
      yield* fs.writeFileString(file, small)
      const first = yield* read
      assert.isTrue("projection" in first.expected)
      assert.strictEqual(first.stats.full, 1)

      yield* fs.writeFileString(file, `${messageLine("m1", "m0", "y".repeat(3000))}\n`, { flag: "a" })
      const grown = yield* read
      assert.deepStrictEqual(grown.expected, { tooLarge: "text" })
      assert.deepStrictEqual([grown.stats.full, grown.stats.incremental], [1, 1])
      assert.strictEqual((yield* cache.observe(file, { sessionRoot: root })).availability, "unreadable")

      // Appends keep it too large: the verdict is kept, the Session is not parsed from the start again.
      yield* fs.writeFileString(file, `${messageLine("m2", "m1", "z")}\n`, { flag: "a" })
      const again = yield* read
      assert.deepStrictEqual(again.expected, { tooLarge: "text" })
      assert.deepStrictEqual([again.stats.full, again.stats.incremental], [1, 2])

      // Replaced by a small Session: read afresh.
      yield* fs.writeFileString(`${file}.tmp`, small)
      yield* fs.rename(`${file}.tmp`, file)
      const replaced = yield* read
      assert.isTrue("projection" in replaced.expected)
      assert.strictEqual(replaced.stats.full, 2)

      // Past the limit again in one append, then truncated in place: read afresh.
      yield* fs.writeFileString(file, `${messageLine("m1", "m0", "w".repeat(5000))}\n`, { flag: "a" })
      assert.deepStrictEqual((yield* read).expected, { tooLarge: "text" })
      yield* fs.truncate(file, small.length)
      const truncated = yield* read
      assert.isTrue("projection" in truncated.expected)
      assert.strictEqual(truncated.stats.full, 3)
    }))
})
