/**
 * `watchRarebitCurrent`, the Promise API's watch, on the real disk: each
 * value is what `readRarebitCurrent` answers at that moment; `break` and an
 * `AbortSignal` end it and close its file-system watches (counted in the
 * kernel: the inotify watches `/proc/self/fdinfo` lists for this process);
 * a bad input rejects the first `next()` as `readRarebitCurrent` rejects.
 */
import { afterEach, assert, beforeEach, describe, it } from "@effect/vitest"
import { readdirSync, readFileSync, readlinkSync } from "node:fs"
import * as Ours from "../../src/promise/index.js"
import { entry, jobId, makeRoots, type Roots, summaryReceipt, writeSession } from "../support/Reference.js"

/** Whether the watches can be counted: inotify's, listed in `/proc`, are Linux's. */
const countable = process.platform === "linux"

/**
 * Inotify watches this process holds now (Node's `fs.watch` makes one per
 * watched path); 0 where they cannot be counted, so only the values are
 * checked there.
 */
const inotifyWatches = (): number => {
  if (!countable) return 0
  let count = 0
  for (const fd of readdirSync("/proc/self/fd")) {
    let target = ""
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`)
    } catch {
      continue
    }
    if (target !== "anon_inode:inotify") continue
    count += readFileSync(`/proc/self/fdinfo/${fd}`, "utf8").split("\n").filter((line) =>
      line.startsWith("inotify wd:")
    ).length
  }
  return count
}

const branch = [entry("u1", "user", "a question"), entry("a1", "assistant", "an answer")]

const settle = async (roots: Roots, job: number, summary: string) => {
  const reservation = await Ours.reserveRarebitJob({
    jobId: jobId(job),
    sessionFile: roots.sessionFile,
    ...roots.location
  })
  if (!reservation.acquired) throw new Error(`job ${job} was not acquired`)
  await Ours.settleRarebitJob(reservation, summaryReceipt(branch, "watched", { summary }))
}

const summaryOf = (current: Ours.RarebitSidecarCurrent) =>
  current.receipt?.status === "ok" ? current.receipt.summary : null

describe("watchRarebitCurrent", () => {
  let roots: Roots
  beforeEach(async () => {
    roots = await makeRoots("rarebit-watch-promise-")
    await writeSession(roots.sessionFile, "watched", branch)
  })
  afterEach(async () => {
    await roots?.cleanup()
  })

  it("yields the current read, then each settle, as readRarebitCurrent answers; break closes its watches", async () => {
    const before = inotifyWatches()
    const input = { sessionFile: roots.sessionFile, ...roots.location }
    const seen: Array<string | null> = []
    let during = 0
    for await (const current of Ours.watchRarebitCurrent(input)) {
      assert.deepStrictEqual(current, await Ours.readRarebitCurrent(input))
      seen.push(summaryOf(current))
      during = Math.max(during, inotifyWatches())
      if (seen.length === 3) break
      await settle(roots, seen.length, `summary ${seen.length}`)
    }
    assert.deepStrictEqual(seen, [null, "summary 1", "summary 2"])
    if (countable) assert.isAbove(during, before, "it watched while iterating")
    assert.strictEqual(inotifyWatches(), before, "break closed every watch")
  })

  it("an AbortSignal ends a pending next() with an AbortError and closes its watches", async () => {
    const before = inotifyWatches()
    const controller = new AbortController()
    const iterator = Ours.watchRarebitCurrent({ sessionFile: roots.sessionFile, ...roots.location }, {
      signal: controller.signal
    })
    const first = await iterator.next()
    assert.strictEqual(first.done, false)
    const pending = iterator.next()
    controller.abort(new Error("enough"))
    const error = await pending.then(() => undefined, (e: unknown) => e as Error & { code?: string })
    assert.strictEqual(error?.name, "AbortError")
    assert.strictEqual(error?.code, "ABORT_ERR")
    assert.strictEqual((error?.cause as Error | undefined)?.message, "enough")
    assert.strictEqual(inotifyWatches(), before)
    // Ended for good.
    await iterator.next().then(
      () => assert.fail("a next() after abort resolved"),
      (e: Error) => assert.strictEqual(e.name, "AbortError")
    )
  })

  it("a signal aborted before the first next() opens nothing", async () => {
    const before = inotifyWatches()
    const iterator = Ours.watchRarebitCurrent({ sessionFile: roots.sessionFile, ...roots.location }, {
      signal: AbortSignal.abort()
    })
    const error = await iterator.next().then(() => undefined, (e: Error) => e)
    assert.strictEqual(error?.name, "AbortError")
    assert.strictEqual(inotifyWatches(), before)
  })

  it("with native passed, each value is readRarebitCurrent's with that native", async () => {
    const session = await Ours.readRarebitSession(roots.sessionFile, { sessionRoot: roots.sessionRoot })
    const native = {
      availability: "available" as const,
      sessionId: session.session.id,
      selection: { ...session.selection, selectorVersion: session.selection.manifest.selectorVersion }
    }
    const input = { sessionFile: roots.sessionFile, ...roots.location, native }
    const iterator = Ours.watchRarebitCurrent(input, { debounceMs: 1 })
    const first = await iterator.next()
    assert.deepStrictEqual(first.value, await Ours.readRarebitCurrent(input))
    await settle(roots, 7, "with native")
    const second = await iterator.next()
    assert.strictEqual(summaryOf(second.value!), "with native")
    assert.deepStrictEqual(second.value, await Ours.readRarebitCurrent(input))
    assert.deepStrictEqual(await iterator.return!(), { done: true, value: undefined })
    assert.deepStrictEqual(await iterator.next(), { done: true, value: undefined })
  })

  it("a bad input rejects the first next() exactly as readRarebitCurrent rejects", async () => {
    for (const input of [{ sessionFile: "" }, { sessionFile: "/elsewhere/trace.jsonl", ...roots.location }]) {
      const expected = await Ours.readRarebitCurrent(input).then(() => undefined, (e: Error) => e)
      assert.isDefined(expected)
      const actual = await Ours.watchRarebitCurrent(input).next().then(() => undefined, (e: Error) => e)
      assert.strictEqual(actual?.constructor, expected?.constructor)
      assert.strictEqual(actual?.message, expected?.message)
    }
  })
})
