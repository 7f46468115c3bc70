/**
 * What a `HeldFile` costs the heap once it has opened its file: a cache keeps
 * one per Session and one per sidecar it polls (2,000 for the benchmark's
 * 1,000 Sessions), so its own closures are memory that scales with what is
 * polled. A holder whose open was a generator function made per holder kept
 * that function, its prototype and a hidden class of its own: ~2,000 bytes
 * per holder against ~1,400 with combinators. Measured as heap used after a
 * full collection.
 */
import { assert } from "@effect/vitest"
import { Effect, FileSystem } from "effect"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import * as HeldFiles from "../../src/io/HeldFiles.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"

setFlagsFromString("--expose-gc")
const collectGarbage = runInNewContext("gc") as () => void
const heapUsedAfterGc = () => {
  collectGarbage()
  return process.memoryUsage().heapUsed
}

const HOLDERS = 2_000
const MAX_BYTES_PER_HOLDER = 1_700

fileSystemSuite("held file memory", (it) => {
  it.effect("a holder that has opened its file keeps under 1.7 KB of heap", ({ root }) =>
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
})
