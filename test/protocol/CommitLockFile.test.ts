import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { decodeCommitLockFile, encodeLockLine, lockHeldBy, parseLockFile } from "../../src/protocol/CommitLockFile.js"

const token = "9e".repeat(24)
const claimedAt = "2026-01-01T00:00:00.000Z"
const owner = {
  pid: 4242,
  hostname: "host-a",
  startTicks: "123456",
  bootId: "boot-1",
  timeNamespace: "time:[4026531834]",
  pidNamespace: "pid:[4026532182]"
}

describe("CommitLockFile", () => {
  describe("encodeLockLine", () => {
    it("writes the seed's line when there is no owner evidence", () => {
      assert.strictEqual(encodeLockLine({ claimedAt, token }), `{"token":"${token}","claimedAt":"${claimedAt}"}\n`)
    })

    it("nests owner evidence after the seed's keys", () => {
      assert.strictEqual(
        encodeLockLine({ owner: { bootId: "boot-1", hostname: "host-a", pid: 4242 }, claimedAt, token }),
        `{"token":"${token}","claimedAt":"${claimedAt}","owner":{"pid":4242,"hostname":"host-a","bootId":"boot-1"}}\n`
      )
    })

    it("tags Darwin evidence with its platform, right after the hostname, and reads the tag back", () => {
      const darwin = { startTicks: "1796666400", bootId: "boot-2", platform: "darwin", hostname: "mac-a", pid: 501 }
      const line = encodeLockLine({ owner: darwin, claimedAt, token })
      assert.strictEqual(
        line,
        `{"token":"${token}","claimedAt":"${claimedAt}","owner":{"pid":501,"hostname":"mac-a","platform":"darwin",` +
          `"bootId":"boot-2","startTicks":"1796666400"}}\n`
      )
      const parsed = parseLockFile(line)
      assert.strictEqual(parsed._tag === "Parsed" ? parsed.lock.owner?.platform : parsed._tag, "darwin")
    })

    it("writes every evidence field in one fixed order, whatever order it was given in", () => {
      assert.strictEqual(
        encodeLockLine({ owner, claimedAt, token }),
        `{"token":"${token}","claimedAt":"${claimedAt}","owner":{"pid":4242,"hostname":"host-a","bootId":"boot-1",` +
          `"startTicks":"123456","pidNamespace":"pid:[4026532182]","timeNamespace":"time:[4026531834]"}}\n`
      )
    })

    it("round-trips through the lenient and the strict readers", () => {
      const line = encodeLockLine({ token, claimedAt, owner })
      assert.deepStrictEqual(parseLockFile(line), { _tag: "Parsed", lock: { token, claimedAt, owner } })
      assert.isTrue(Result.isSuccess(decodeCommitLockFile(JSON.parse(line))))
    })
  })

  describe("parseLockFile", () => {
    it("calls empty, blank and unparsable text torn", () => {
      for (const text of ["", "  \n", `{"token":"${token}"`, "}"]) {
        assert.deepStrictEqual(parseLockFile(text), { _tag: "Torn" })
      }
    })

    it("keeps only well-typed fields", () => {
      assert.deepStrictEqual(parseLockFile(`{"token":7,"claimedAt":null,"owner":{"pid":"1"}}`), {
        _tag: "Parsed",
        lock: {}
      })
      assert.deepStrictEqual(parseLockFile(`{"token":"t","extra":true}`), { _tag: "Parsed", lock: { token: "t" } })
      assert.deepStrictEqual(parseLockFile("null"), { _tag: "Parsed", lock: {} })
      assert.deepStrictEqual(parseLockFile(`["t"]`), { _tag: "Parsed", lock: {} })
    })

    it("drops malformed owner evidence but keeps the token", () => {
      const parsed = parseLockFile(JSON.stringify({ token, claimedAt, owner: { pid: -1, hostname: "h" } }))
      assert.deepStrictEqual(parsed, { _tag: "Parsed", lock: { token, claimedAt } })
    })
  })

  describe("lockHeldBy", () => {
    it("compares the token alone", () => {
      const parsed = parseLockFile(`{"token":"${token}"}`)
      assert.strictEqual(parsed._tag, "Parsed")
      if (parsed._tag === "Parsed") {
        assert.isTrue(lockHeldBy(parsed.lock, token))
        assert.isFalse(lockHeldBy(parsed.lock, "other"))
        assert.isFalse(lockHeldBy({}, token))
      }
    })
  })

  describe("decodeCommitLockFile", () => {
    it("accepts a seed-written lock and rejects unknown keys or malformed evidence", () => {
      assert.isTrue(Result.isSuccess(decodeCommitLockFile({ token, claimedAt })))
      assert.isTrue(Result.isFailure(decodeCommitLockFile({ token, claimedAt, extra: 1 })))
      assert.isTrue(Result.isFailure(decodeCommitLockFile({ token, claimedAt, owner: { ...owner, user: "x" } })))
      assert.isTrue(Result.isFailure(decodeCommitLockFile({ token, claimedAt, owner: { ...owner, pid: 1.5 } })))
      assert.isTrue(Result.isFailure(decodeCommitLockFile({ token, claimedAt, owner: { ...owner, pidNamespace: 7 } })))
      assert.isTrue(Result.isFailure(decodeCommitLockFile({ token: "", claimedAt })))
      assert.isTrue(Result.isFailure(decodeCommitLockFile({ token, claimedAt: "yesterday" })))
    })
  })
})
