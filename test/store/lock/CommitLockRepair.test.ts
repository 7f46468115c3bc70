/**
 * The commit-lock repair, on the in-memory file system and on the real disk:
 * a lock is inspected, then removed only while it is the lock inspected,
 * only once its owner is provably dead unless forced, and only by the one
 * repair that holds its break file.
 */
import { assert } from "@effect/vitest"
import { Effect, FileSystem, Option } from "effect"
import { TestClock } from "effect/testing"
import { inspectCommitLock, removeCommitLock } from "../../../src/store/lock/CommitLockRepair.js"
import { LockOwner } from "../../../src/store/lock/LockOwner.js"
import { fileSystemSuite } from "../../support/FileSystemSuite.js"

fileSystemSuite("CommitLockRepair", (it) => {
  it.effect("removeCommitLock removes only the lock it was given the key of", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const lockPath = `${root}/session.jsonl.commit-lock`
      const write = (token: string) =>
        fs.writeFileString(lockPath, `${JSON.stringify({ token, claimedAt: "2026-01-01T00:00:00.000Z" })}\n`)

      yield* write("a".repeat(48))
      const inspected = yield* inspectCommitLock(lockPath)
      assert.isDefined(inspected)
      // Between the inspection and the removal, another writer takes a new lock.
      yield* write("b".repeat(48))
      // These locks carry no owner evidence, so every removal here is forced.
      const force = { force: true }
      assert.deepStrictEqual(yield* removeCommitLock(lockPath, inspected!.key, force), {
        _tag: "Changed",
        tokenPrefix: "bbbbbbbbbbbb"
      })
      assert.include(yield* fs.readFileString(lockPath), "b".repeat(48))

      const current = yield* inspectCommitLock(lockPath)
      yield* fs.writeFileString(`${lockPath}.break-${current!.key}`, "{}\n")
      assert.deepStrictEqual(yield* removeCommitLock(lockPath, current!.key, force), {
        _tag: "BreakInProgress",
        breakPath: `${lockPath}.break-${current!.key}`
      })
      assert.isTrue(yield* fs.exists(lockPath))
      yield* fs.remove(`${lockPath}.break-${current!.key}`)

      assert.deepStrictEqual(yield* removeCommitLock(lockPath, current!.key.slice(0, 8), force), { _tag: "Removed" })
      assert.isFalse(yield* fs.exists(lockPath))
      assert.deepStrictEqual(yield* fs.readDirectory(root), [])
      assert.deepStrictEqual(yield* removeCommitLock(lockPath, current!.key, force), { _tag: "Absent" })
    }))

  it.effect("clearStaleBreakFile clears a crashed breaker's break file only once it is stale", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const lockPath = `${root}/session.jsonl.commit-lock`
      const lockText = `${JSON.stringify({ token: "e".repeat(48), claimedAt: "2026-01-01T00:00:00.000Z" })}\n`
      yield* fs.writeFileString(lockPath, lockText)
      const key = (yield* inspectCommitLock(lockPath))!.key
      const breakPath = `${lockPath}.break-${key}`
      const breakText = `${JSON.stringify({ deadToken: key })}\n`
      yield* fs.writeFileString(breakPath, breakText)
      // Staleness is judged from the break file's mtime, which on disk is the
      // real time of the write, so the clock is set relative to it.
      const mtime = Option.getOrThrow((yield* fs.stat(breakPath)).mtime).getTime()
      // Distinct from the 10 s default, so an ignored option shows.
      const staleAfterMs = 30_000
      // The lock carries no owner evidence: only a forced repair may remove it.
      const repair = removeCommitLock(lockPath, key, { force: true, clearStaleBreakFile: true, staleAfterMs })
      const kept = { _tag: "BreakInProgress", breakPath } as const

      for (const age of [0, 10_000, staleAfterMs - 1]) {
        yield* TestClock.setTime(mtime + age)
        assert.deepStrictEqual(yield* repair, kept, `break file ${age} ms old`)
        assert.strictEqual(yield* fs.readFileString(lockPath), lockText, `lock kept at ${age} ms`)
        assert.strictEqual(yield* fs.readFileString(breakPath), breakText, `break file kept at ${age} ms`)
      }
      // Without the option a stale break file is still someone else's break.
      yield* TestClock.setTime(mtime + staleAfterMs)
      assert.deepStrictEqual(yield* removeCommitLock(lockPath, key, { force: true, staleAfterMs }), kept)
      assert.isTrue(yield* fs.exists(lockPath))

      assert.deepStrictEqual(yield* repair, { _tag: "Removed" })
      assert.isFalse(yield* fs.exists(lockPath))
      assert.deepStrictEqual(yield* fs.readDirectory(root), [], "the break file is gone too")
    }))

  it.effect("a torn lock (no token) is keyed by its content, so it can be repaired too", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const lockPath = `${root}/session.jsonl.commit-lock`
      yield* fs.writeFileString(lockPath, "")
      const inspected = yield* inspectCommitLock(lockPath)
      assert.isTrue(inspected!.lock.torn)
      assert.isNull(inspected!.lock.tokenPrefix)
      assert.strictEqual(inspected!.lock.liveness, "no_evidence")
      assert.match(inspected!.key, /^torn-[0-9a-f]{32}$/)
      assert.deepStrictEqual(yield* removeCommitLock(lockPath, "short"), { _tag: "Changed", tokenPrefix: null })
      assert.deepStrictEqual(yield* removeCommitLock(lockPath, inspected!.key), {
        _tag: "OwnerMayBeAlive",
        liveness: "no_evidence"
      })
      assert.deepStrictEqual(yield* removeCommitLock(lockPath, inspected!.key, { force: true }), { _tag: "Removed" })
    }))

  it.effect("lock evidence: age from claimedAt, liveness from the LockOwner probe", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const lockPath = `${root}/session.jsonl.commit-lock`
      yield* TestClock.setTime(Date.parse("2026-01-01T00:01:00.000Z"))
      const owner = { pid: 4242, hostname: "host-a", bootId: "boot-1", startTicks: "77" }
      yield* fs.writeFileString(
        lockPath,
        `${JSON.stringify({ token: "c".repeat(48), claimedAt: "2026-01-01T00:00:00.000Z", owner })}\n`
      )
      const unknown = yield* inspectCommitLock(lockPath)
      assert.deepStrictEqual(
        { ...unknown!.lock, breakFiles: [] },
        {
          path: lockPath,
          tokenPrefix: "cccccccccccc",
          claimedAt: "2026-01-01T00:00:00.000Z",
          ageMs: 60_000,
          owner,
          liveness: "unknown",
          torn: false,
          unreadable: null,
          breakFiles: []
        }
      )
      const dead = yield* inspectCommitLock(lockPath).pipe(
        Effect.provideService(LockOwner, {
          current: undefined,
          isProvablyDead: (evidence) => Effect.succeed(evidence.pid === 4242)
        })
      )
      assert.strictEqual(dead!.lock.liveness, "dead")
    }))
})
