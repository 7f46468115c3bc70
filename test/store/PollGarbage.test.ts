/**
 * Polling an idle Session leaves almost nothing in the old generation: the
 * objects of one `readCurrent` die young. A poll path that made a generator
 * function per call (`(...) => Effect.gen(function*() { ... })`) gave each
 * read's generator object a new hidden class; those are made in the old
 * generation and kept that read's objects alive through every young
 * collection until a full one, so each poll promoted ~3 KB of garbage and
 * the young generation grew to its maximum (the 1,000-Session polling rows'
 * RSS). Measured as the old space's growth over many polls of one Session
 * after a full collection (a full collection in between only lowers it),
 * each poll in a fiber of its own as the Promise API runs it.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { getHeapSpaceStatistics } from "node:v8"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { collectGarbage } from "../support/HeapUse.js"
import { jobId, summaryReceipt } from "../support/Receipts.js"
import { appendReceiptWithHead, setup } from "./StoreKit.js"

const oldSpaceBytes = () => getHeapSpaceStatistics().find((space) => space.space_name === "old_space")!.space_used_size

const POLLS = 4_000
/** Bytes per poll on average: ~3,100 with a generator function made per call, ~550 without (Node 20 and 22). */
const MAX_PROMOTED_PER_POLL = 1_200

fileSystemSuite("polling garbage", (it) => {
  it.effect(
    "polling an idle Session promotes under 1.2 KB per read to the old generation",
    ({ root }) =>
      Effect.gen(function*() {
        const kit = yield* setup(root)
        yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, kit.sessionId, { jobId: jobId(1) }))
        // Written long ago, as a Session at rest is.
        const longAgo = new Date(Date.UTC(2026, 0, 1))
        for (const file of [kit.sessionFile, kit.sidecar]) yield* kit.fs.utimes(file, longAgo, longAgo)
        const poll = Effect.promise(() => Effect.runPromise(kit.store.readCurrent({ sessionFile: kit.sessionFile })))
        // Caches filled and the code optimized before measuring.
        for (let index = 0; index < 500; index++) assert.strictEqual((yield* poll).availability, "available")
        collectGarbage()
        const before = oldSpaceBytes()
        for (let index = 0; index < POLLS; index++) yield* poll
        assert.isBelow((oldSpaceBytes() - before) / POLLS, MAX_PROMOTED_PER_POLL)
      }),
    60_000
  )
})
