/**
 * Extending a cached Session from bytes read in one call (`extendFromWindow`,
 * what the Session cache does on a file system whose calls return at once)
 * answers exactly as extending it through the open file does, and refuses
 * bytes that are not the file's end as its `fstat` saw it.
 */
import { assert } from "@effect/vitest"
import { Effect, FileSystem } from "effect"
import { openSessionFile } from "../../src/session/SessionFile.js"
import {
  type CachedSession,
  extendFromWindow,
  type FileFacts,
  refreshSession,
  windowOf
} from "../../src/session/SessionRefresh.js"
import { DEFAULT_SESSION_LIMITS } from "../../src/session/SessionStream.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { turnsText } from "./SessionLines.js"

const limits = DEFAULT_SESSION_LIMITS
const readAt = Date.UTC(2026, 0, 1)

/** A fresh cached state of the file as it is now (each call parses anew: extending one feeds its parse). */
const stateNow = (fs: FileSystem.FileSystem, file: string) =>
  Effect.scoped(Effect.flatMap(
    openSessionFile(fs, file),
    ({ file: handle, info }) => refreshSession(limits, handle, info, file, undefined, readAt)
  )).pipe(Effect.map(({ state }) => state as CachedSession))

/** Extends a fresh state of the file as it was through the open file, as it is now. */
const extendedThroughFile = (fs: FileSystem.FileSystem, file: string, prior: CachedSession) =>
  Effect.scoped(Effect.flatMap(
    openSessionFile(fs, file),
    ({ file: handle, info }) => refreshSession(limits, handle, info, file, prior, readAt + 1)
  ))

const setUp = Effect.fnUntraced(function*(root: string) {
  const fs = yield* FileSystem.FileSystem
  const file = `${root}/s.jsonl`
  // Longer than the tail print (8 KiB), so the head print is compared too.
  yield* fs.writeFileString(file, turnsText(60))
  const priors = [yield* stateNow(fs, file), yield* stateNow(fs, file), yield* stateNow(fs, file)] as const
  yield* fs.writeFileString(file, turnsText(2, "sess-a", 60), { flag: "a" })
  const bytes = yield* fs.readFile(file)
  const info = yield* fs.stat(file)
  const facts = (prior: CachedSession): FileFacts => ({
    sessionFile: file,
    identity: prior.identity,
    size: bytes.length,
    mtimeMs: info.mtime._tag === "Some" ? info.mtime.value.getTime() : -1,
    readAt: readAt + 1
  })
  return { file, fs, priors, bytes, facts }
})

fileSystemSuite("SessionRefresh.extendFromWindow", (it) => {
  it.effect("answers a grown Session as extending it through the open file does", ({ root }) =>
    Effect.gen(function*() {
      const { bytes, facts, file, fs, priors: [throughFile, atOnce] } = yield* setUp(root)
      const window = windowOf(atOnce)!
      assert.isAbove(window.from, 0, "the head print is read too")
      const extended = extendFromWindow(
        limits,
        facts(atOnce),
        atOnce,
        bytes.subarray(window.from),
        bytes.subarray(0, window.head)
      )
      const expected = yield* extendedThroughFile(fs, file, throughFile)
      assert.strictEqual(extended?.kind, "incremental")
      assert.strictEqual(expected.kind, "incremental")
      assert.deepStrictEqual(extended?.outcome, expected.outcome)
      assert.strictEqual(extended?.state?.size, bytes.length)
    }))

  it.effect("refuses a window that is not the file's end, or a head that is not the one parsed", ({ root }) =>
    Effect.gen(function*() {
      const { bytes, facts, priors: [, grewWhileRead, otherHead] } = yield* setUp(root)
      const window = windowOf(grewWhileRead)!
      const head = bytes.subarray(0, window.head)
      // One byte past the size `fstat` gave: the file grew while it was read.
      const longer = new Uint8Array(bytes.length - window.from + 1)
      longer.set(bytes.subarray(window.from))
      longer[longer.length - 1] = 10
      assert.isUndefined(extendFromWindow(limits, facts(grewWhileRead), grewWhileRead, longer, head))
      // The same end, but the file's first bytes were rewritten.
      const rewritten = new Uint8Array(head)
      rewritten[10] = rewritten[10] === 0x41 ? 0x42 : 0x41
      const end = bytes.subarray(window.from)
      assert.isUndefined(extendFromWindow(limits, facts(otherHead), otherHead, end, rewritten))
      // Another file at the path.
      assert.isUndefined(
        extendFromWindow(limits, { ...facts(otherHead), identity: "another" }, otherHead, end, head)
      )
    }))
})
