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

/** Counts the loop's turns with a callback that sets itself again each turn, and the longest time between two. */
const watchTurns = () => {
  let turns = 0
  let last = performance.now()
  let longest = 0
  let running = true
  const tick = () => {
    const now = performance.now()
    longest = Math.max(longest, now - last)
    last = now
    turns++
    if (running) setImmediate(tick)
  }
  setImmediate(tick)
  return {
    stop: () => {
      running = false
      return { turns, longest: Math.max(longest, performance.now() - last) }
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
    const watch = watchTurns()
    const started = performance.now()
    let reads = 0
    while (performance.now() - started < 150) {
      await Ours.readRarebitCurrent(input)
      reads++
    }
    const { longest, turns } = watch.stop()
    assert.isAbove(reads, 20, "the reads are answered from the caches")
    // One turn before each call: the watcher's callback runs in each of them.
    assert.isAtLeast(turns, reads / 2, `the loop turned ${turns} times while ${reads} reads ran for 150 ms`)
    assert.isBelow(longest, 60, `the loop was held at most ${longest.toFixed(1)} ms at a time`)
  })

  it("a call waits for one turn of the loop before it runs, and calls still start and settle in order", async () => {
    const order: Array<string> = []
    setImmediate(() => order.push("turn"))
    await Promise.all([0, 1, 2, 3, 4].map((index) => Ours.readRarebitCurrent(input).then(() => order.push(`${index}`))))
    assert.deepStrictEqual(order, ["turn", "0", "1", "2", "3", "4"])
  })
})
