/**
 * What a `HeldFile` and a set's entry cost the heap: a cache keeps an entry
 * per Session and one per sidecar it polls (2,000 for the benchmark's 1,000
 * Sessions), so their own objects are memory that scales with what is
 * polled. A holder whose open was a generator function made per holder kept
 * that function, its prototype and a hidden class of its own (~2,000 bytes);
 * one made of closures with combinators ~1,400, and an entry kept seven more
 * closures and two Map slots re-set on every get; a class instance linked
 * into its recency lists ~800 (a holder, with its scope's finalizer) and
 * ~250 (an entry); ~200 once an entry's six booleans were one field of bits
 * and its file system and options one object its set shares. Measured as
 * heap used after a full collection.
 */
import { assert } from "@effect/vitest"
import { Effect, FileSystem } from "effect"
import * as HeldFiles from "../../src/io/HeldFiles.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { heapUsedAfterGc } from "../support/HeapUse.js"

const HOLDERS = 2_000
/**
 * More entries than holders: the JIT's code and the collections' timing move
 * the heap by some KB from run to run, which over 2,000 entries moved the
 * figure by up to 40 bytes an entry, over 10,000 by a few.
 */
const ENTRIES = 10_000
const MAX_BYTES_PER_HOLDER = 1_000
/**
 * Bytes an entry may keep, its map slot included: halfway between the
 * 190–209 measured over repeated runs on both worlds and the 237–256 of an
 * entry with a field per boolean and the file system and options apart.
 */
const MAX_BYTES_PER_ENTRY = 225

fileSystemSuite("held file memory", (it) => {
  it.effect("a holder that has opened its file keeps under 1 KB of heap", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = `${root}/held`
      yield* fs.writeFileString(path, "one\n")
      const info = yield* fs.lstat(path)
      const holders: Array<HeldFiles.HeldFile> = []
      const before = heapUsedAfterGc()
      for (let index = 0; index < HOLDERS; index++) {
        const held = yield* HeldFiles.makeFile(fs, path, { followSymlinks: false })
        assert.isTrue(yield* held.use(info, (use) => Effect.succeed(use.opened)))
        // Its descriptor closed: what stays is the holder's own.
        yield* held.letGo
        holders.push(held)
      }
      assert.isBelow((heapUsedAfterGc() - before) / HOLDERS, MAX_BYTES_PER_HOLDER)
      assert.lengthOf(holders, HOLDERS)
    }), 60_000)

  it.effect("a set's entry keeps under 225 bytes of heap besides its path", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const set = yield* HeldFiles.make<number>(fs, { followSymlinks: false, initial: () => 0 })
      const paths = Array.from({ length: ENTRIES }, (_, index) => `${root}/entry-${index}`)
      const before = heapUsedAfterGc()
      for (const path of paths) (yield* set.get(path))!.state = 1
      // Got again, as a poll does: moving an entry to the most recent end must not allocate per entry.
      for (const path of paths) yield* set.get(path)
      assert.isBelow((heapUsedAfterGc() - before) / ENTRIES, MAX_BYTES_PER_ENTRY)
      assert.lengthOf([...set.entries()], ENTRIES)
    }), 60_000)
})
