import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Limits from "../../src/protocol/Limits.js"

describe("Limits", () => {
  it("match the protocol numbers", () => {
    assert.strictEqual(Limits.MAX_TAIL_BYTES, 65536)
    assert.strictEqual(Limits.MAX_RECEIPT_BYTES, 49152)
    assert.strictEqual(Limits.MAX_HEAD_BYTES, 8192)
    assert.strictEqual(Limits.COMMIT_LOCK_RETRY_MS * Limits.COMMIT_LOCK_ATTEMPTS, 10_000)
  })
  it.effect("effect runtime works", () => Effect.sync(() => assert.strictEqual(Limits.DEFAULT_LEASE_MS, 600_000)))
})
