import { assert, describe, it } from "@effect/vitest"
import * as Limits from "../../src/protocol/Limits.js"
import { Store } from "../support/Reference.js"

describe("Limits", () => {
  it("match the protocol numbers", () => {
    assert.strictEqual(Limits.MAX_TAIL_BYTES, 65536)
    assert.strictEqual(Limits.MAX_RECEIPT_BYTES, 49152)
    assert.strictEqual(Limits.MAX_HEAD_BYTES, 8192)
    assert.strictEqual(Limits.COMMIT_LOCK_RETRY_MS * Limits.COMMIT_LOCK_ATTEMPTS, 10_000)
    assert.strictEqual(Limits.DEFAULT_LEASE_MS, 600_000)
    assert.strictEqual(Limits.DEFAULT_LEASE_MS, Store.DEFAULT_RAREBIT_LEASE_MS)
  })
})
