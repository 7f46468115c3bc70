/**
 * The Promise API lets its caller's event loop turn. Reads answered from
 * the caches do all their I/O synchronously and settle in microtasks, so a
 * caller awaiting one read after another, as a dashboard polling its
 * Sessions does, would otherwise hold its loop for the whole sweep: no
 * timer, socket or V8 task in between. The reference's reads wait on the
 * thread pool, so its callers' loops turn at every call.
 */
import { afterEach, assert, beforeEach, describe, it } from "@effect/vitest"
import * as Ours from "../../src/promise/index.js"
import { entry, makeRoots, type Roots, writeSession } from "../support/Reference.js"

/** Counts the loop's turns with a callback that sets itself again each turn. */
const watchTurns = () => {
  let turns = 0
  let running = true
  const tick = () => {
    turns++
    if (running) setImmediate(tick)
  }
  setImmediate(tick)
  return {
    stop: () => {
      running = false
      return { turns }
    }
  }
}

describe("the Promise API and the caller's event loop", () => {
  let roots: Roots
  let input: Ours.ReadRarebitCurrentInput
  beforeEach(async () => {
    roots = await makeRoots("rarebit-turns-")
    await writeSession(roots.sessionFile, "polled", [entry("u1", "user", "a question")])
    input = { sessionFile: roots.sessionFile, ...roots.location }
    // The runtime is built and the caches filled before anything is measured.
    await Ours.readRarebitCurrent(input)
  })
  afterEach(async () => {
    await roots?.cleanup()
  })

  it("a caller awaiting one read after another lets its loop turn at every read", async () => {
    // Counted in reads, not in wall time: how fast a loaded machine runs them is not the contract.
    const reads = 50
    const watch = watchTurns()
    for (let read = 0; read < reads; read++) await Ours.readRarebitCurrent(input)
    const { turns } = watch.stop()
    // One turn before each call: the watcher's callback runs in each of them.
    assert.isAtLeast(turns, reads / 2, `the loop turned ${turns} times while ${reads} reads ran`)
  })

  it("a call waits for one turn of the loop before it runs, and calls still start and settle in order", async () => {
    const order: Array<string> = []
    setImmediate(() => order.push("turn"))
    await Promise.all([0, 1, 2, 3, 4].map((index) => Ours.readRarebitCurrent(input).then(() => order.push(`${index}`))))
    assert.deepStrictEqual(order, ["turn", "0", "1", "2", "3", "4"])
  })
})
