/**
 * What the store keeps on the heap for each idle Session it polls, with an
 * available receipt in its sidecar: the entries of its two caches, the
 * Session's state and packed evidence, the sidecar's proof, and the strings
 * they hold. A dashboard polling a thousand Sessions keeps a thousand of
 * these, and everything they keep passes through the young generation once
 * as the caches fill, which decides how large V8 lets that generation grow
 * (the 1,000-Session polling rows of `npm run bench`).
 *
 * What it keeps now, after two rounds of cuts (Node 22, bytes a Session):
 * - real disk 1,680 → 1,475–1,515 from four details: a resolved copy of
 *   the Session's path kept although the caller's was already absolute;
 *   file identities built by concatenation, which V8 keeps as a rope of two
 *   strings once they are 13 characters or longer; an `Infinity` in each
 *   cache entry's reuse distance, which V8 boxed in a heap number in every
 *   entry; a field in each entry pointing at the entry itself;
 * - then → 785–790 (in memory, where identities are shorter, 1,300–1,390 →
 *   625): the Session's resting state and the sidecar's proof became
 *   records outside the heap (`io/RecordArena`) named by a small integer,
 *   the per-Session slot object went, and each cache entry keeps its six
 *   flags in one field (21 fields → 15).
 *
 * Measured as the heap used after a full collection, over Sessions read
 * twice (as a poll's second sweep does), after other Sessions have been
 * read the same way so that compiled code and one-off state are already
 * there.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { heapUsedAfterGc } from "../support/HeapUse.js"
import { jobId, type Json, sessionText, summaryReceipt } from "../support/Receipts.js"
import { headFor, headLine, receiptLine, setup } from "./StoreKit.js"

const WARM_SESSIONS = 64
const SESSIONS = 600
/**
 * Bytes a polled idle Session may keep: over the disk's 785–790 with room
 * for the JIT's timing (which moved earlier figures by ~40), and far under
 * the 1,475–1,515 of the objects it kept before.
 */
const MAX_BYTES_PER_SESSION = 1_000

fileSystemSuite("polled Session memory", (it) => {
  it.effect(
    `an idle polled Session keeps under ${MAX_BYTES_PER_SESSION} bytes of heap`,
    ({ root }) =>
      Effect.gen(function*() {
        const kit = yield* setup(root, { writeSession: false })
        const { fs, path } = kit
        const longAgo = new Date(Date.UTC(2026, 0, 1))
        // The store's clock reads a day later: the files were last written long before its reads.
        yield* TestClock.setTime(longAgo.getTime() + 24 * 60 * 60 * 1000)
        const sessionAt = (index: number) => path.join(kit.sessionRoot, "project", `polled-${index}.jsonl`)
        const writePair = (index: number) =>
          Effect.gen(function*() {
            const sessionId = `polled-${index}`
            const { branch, text } = sessionText(sessionId)
            const receipt = summaryReceipt(branch, sessionId, { jobId: jobId(index + 1) }) as Json
            const line = receiptLine(receipt)
            const sidecar = path.join(kit.rarebitRoot, "materializations-v4", "project", `polled-${index}.jsonl`)
            yield* fs.writeFileString(sessionAt(index), text)
            yield* fs.writeFileString(sidecar, line + headLine(headFor(sessionId, 0, line)))
            // At rest, as most of what a dashboard polls is: answered by a stat until it changes.
            for (const file of [sessionAt(index), sidecar]) yield* fs.utimes(file, longAgo, longAgo)
          })
        yield* fs.makeDirectory(path.join(kit.sessionRoot, "project"), { recursive: true })
        yield* fs.makeDirectory(path.join(kit.rarebitRoot, "materializations-v4", "project"), { recursive: true })
        for (let index = 0; index < WARM_SESSIONS + SESSIONS; index++) yield* writePair(index)
        // The caller's own strings, as a poller's list holds them.
        const targets = Array.from({ length: WARM_SESSIONS + SESSIONS }, (_, index) => sessionAt(index))
        const sweep = (files: ReadonlyArray<string>) =>
          Effect.forEach(files, (sessionFile) =>
            Effect.gen(function*() {
              const current = yield* kit.store.readCurrent({ sessionFile })
              assert.strictEqual(current.availability, "available")
            }), { discard: true })

        const warm = targets.slice(0, WARM_SESSIONS)
        yield* sweep(warm)
        yield* sweep(warm)
        const before = heapUsedAfterGc()
        const polled = targets.slice(WARM_SESSIONS)
        yield* sweep(polled)
        yield* sweep(polled)
        const perSession = (heapUsedAfterGc() - before) / SESSIONS
        // Something is kept: the caches did fill (a bound met by keeping nothing would prove nothing).
        assert.isAbove(perSession, 400)
        assert.isBelow(perSession, MAX_BYTES_PER_SESSION)
      }),
    120_000
  )
})
