/**
 * Behaviour that differs from the pinned reference and is not among the
 * deliberate differences the store was specified with (see
 * `WriteDifferential`'s `DeliberateDifferences`). Each case was reported to
 * the lead; the tests pin both sides so a change on either is noticed.
 *
 * - Crash recovery on takeover: ours completes a settlement whose receipt
 *   reached the sidecar after one of our claims (it records `sidecarOffset`)
 *   but whose claim was never marked settled; the reference reserves the job
 *   again. After a reference claim both reserve it again.
 * - Unparsable claims: the reference's reserve throws `SyntaxError`, ours
 *   treats the claim as in flight until its modification time is older than
 *   the lease, then takes it over.
 * - (now identical, kept as regression tests) reserving a settled job whose
 *   sidecar became a symlink, and settling a hand-made reservation without
 *   `sessionFile`.
 * - The Session cache trusts that Sessions are append-only: an in-place
 *   rewrite that grows the file and changes bytes between its fingerprints
 *   is not seen (documented on `StoreConfig.cacheSessions`); with
 *   `cacheSessions: false` the store reads what the reference reads.
 */
import { afterEach, assert, describe, it } from "@effect/vitest"
import { Effect, ManagedRuntime } from "effect"
import { appendFile, mkdir, readFile, rename, symlink, utimes, writeFile } from "node:fs/promises"
import { dirname, join } from "node:path"
import { NodeStore, RarebitStore } from "../../src/index.js"
import { entry, jobId, makeRoots, outcomeOf, type Roots, summaryReceipt, writeSession } from "../support/Reference.js"
import { ours, reference, type StoreApi } from "./Interop.js"

const branch = [entry("u1", "user", "first request")]

let cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  await Promise.all(cleanups.map((cleanup) => cleanup()))
  cleanups = []
})

const fresh = async (): Promise<Roots> => {
  const roots = await makeRoots("rarebit-open-differences-")
  cleanups.push(roots.cleanup)
  await writeSession(roots.sessionFile, "s", branch)
  return roots
}

const input = (roots: Roots, extra: Record<string, unknown> = {}) => ({
  jobId: jobId(1),
  sessionFile: roots.sessionFile,
  ...roots.location,
  ...extra
})

describe("OpenDifferences", { concurrent: false }, () => {
  const crashAfterAppend = async (crasher: StoreApi, taker: StoreApi) => {
    const roots = await fresh()
    // The crashed worker appended its receipt and died before marking the claim settled.
    const crashed = await crasher.reserveRarebitJob(input(roots, { now: 0, leaseMs: 1 }))
    const line = `${JSON.stringify({ ...summaryReceipt(branch, "s"), jobId: jobId(1) })}\n`
    await mkdir(dirname(crashed.materializationPath), { recursive: true })
    await appendFile(crashed.materializationPath, line)
    const taken = await taker.reserveRarebitJob(input(roots, { now: 10, leaseMs: 1 }))
    const claim = JSON.parse(await readFile(crashed.claimPath, "utf8"))
    const sidecarLines = (await readFile(crashed.materializationPath, "utf8")).split("\n").filter(Boolean).length
    return { acquired: taken.acquired, duplicate: taken.duplicate === true, state: claim.state, sidecarLines }
  }

  it("takeover after our worker crashed between the append and the settled claim: ours recovers, the reference re-runs", async () => {
    // Our claim records `sidecarOffset`, so the receipt after it is provably this lease's.
    assert.deepStrictEqual(await crashAfterAppend(ours, ours), {
      acquired: false,
      duplicate: true,
      state: "settled",
      sidecarLines: 2
    })
    // The reference takes the job over, so a second receipt for it will follow.
    assert.deepStrictEqual(await crashAfterAppend(ours, reference), {
      acquired: true,
      duplicate: false,
      state: "active",
      sidecarLines: 1
    })
  })

  it("takeover after a reference worker crashed between the append and the settled claim: both re-run", async () => {
    // Its claim cannot say which receipts came after it, so ours does not guess.
    const expected = { acquired: true, duplicate: false, state: "active", sidecarLines: 1 }
    assert.deepStrictEqual(await crashAfterAppend(reference, ours), expected)
    assert.deepStrictEqual(await crashAfterAppend(reference, reference), expected)
  })

  it("an unparsable claim: the reference throws SyntaxError, ours waits out the lease by mtime", async () => {
    const results: Record<string, Array<unknown>> = {}
    for (const api of [ours, reference] as Array<StoreApi>) {
      const roots = await fresh()
      const claimPath = join(roots.rarebitRoot, "jobs-v4", `${jobId(1)}.json`)
      await mkdir(dirname(claimPath), { recursive: true })
      await writeFile(claimPath, "{\"jobId\":")
      const modified = new Date("2026-01-01T00:00:00.000Z")
      await utimes(claimPath, modified, modified)
      const soon = await outcomeOf(() =>
        api.reserveRarebitJob(input(roots, { now: modified.getTime() + 1_000, leaseMs: 60_000 }))
      )
      const later = await outcomeOf(() =>
        api.reserveRarebitJob(input(roots, { now: modified.getTime() + 120_000, leaseMs: 60_000 }))
      )
      const summarize = (outcome: any) =>
        outcome.ok
          ? { acquired: outcome.value.acquired, inFlight: outcome.value.inFlight === true }
          : outcome.errorClass
      results[api.name] = [summarize(soon), summarize(later)]
    }
    assert.deepStrictEqual(results.reference, ["SyntaxError", "SyntaxError"])
    assert.deepStrictEqual(results.ours, [{ acquired: false, inFlight: true }, { acquired: true, inFlight: false }])
  })

  it("a settled job whose sidecar is now a symlink: both say it is not a regular file", async () => {
    const results: Record<string, unknown> = {}
    for (const api of [ours, reference] as Array<StoreApi>) {
      const roots = await fresh()
      const reservation = await api.reserveRarebitJob(input(roots))
      await api.settleRarebitJob(reservation, summaryReceipt(branch, "s"))
      const path = reservation.materializationPath
      await rename(path, `${path}.moved`)
      await symlink(`${path}.moved`, path)
      const outcome = await outcomeOf(() => api.reserveRarebitJob(input(roots)))
      results[api.name] = outcome.ok ? "reserved" : (outcome as { message: string }).message
    }
    assert.deepStrictEqual(results, {
      ours: "Rarebit materialization path must be a regular file",
      reference: "Rarebit materialization path must be a regular file"
    })
  })

  it("a hand-made reservation without sessionFile: both settles fail the same way", async () => {
    const results: Record<string, unknown> = {}
    for (const api of [ours, reference] as Array<StoreApi>) {
      const roots = await fresh()
      const reservation = await api.reserveRarebitJob(input(roots))
      const outcome = await outcomeOf(() =>
        api.settleRarebitJob({ ...reservation, sessionFile: undefined }, summaryReceipt(branch, "s"))
      )
      results[api.name] = outcome.ok ? "settled" : (outcome as { message: string }).message
    }
    assert.deepStrictEqual(results, {
      ours: "A persisted Pi Session file is required",
      reference: "A persisted Pi Session file is required"
    })
  })

  it("an in-place rewrite that grows a Session and changes only its middle: the cache trusts appends, cacheSessions: false sees it", async () => {
    const roots = await fresh()
    const base = { sessionFile: roots.sessionFile, ...roots.location }
    const session = (middle: string, extra: Array<Record<string, unknown>>) => [
      entry("u1", "user", "first"),
      entry("a1", "assistant", "x".repeat(10_000)),
      entry("u2", "user", middle),
      entry("a2", "assistant", "y".repeat(10_000)),
      entry("u3", "user", "third"),
      ...extra
    ]
    const uncached = (effect: Effect.Effect<unknown, unknown, RarebitStore>) =>
      Effect.runPromise(effect.pipe(Effect.provide(NodeStore.layer({ ...roots.location, cacheSessions: false }))))
    const cachedStore = ManagedRuntime.make(NodeStore.layer(roots.location))
    try {
      const read = (store: "cached" | "uncached") => {
        const program = RarebitStore.use((s) => s.readCurrent(base))
        return store === "cached" ? cachedStore.runPromise(program) : uncached(program)
      }
      await writeSession(roots.sessionFile, "s", session("middle B", []))
      await read("cached")
      // What a reader that keeps the old bytes and takes only the appended line sees ("B" and
      // "C" have the same length, so the appended bytes are exactly the new last entry).
      await writeSession(roots.sessionFile, "s", session("middle B", [entry("u4", "user", "fourth")]))
      const stale = await reference.readRarebitCurrent(base)
      await writeSession(roots.sessionFile, "s", session("middle C", [entry("u4", "user", "fourth")]))
      const truth = await reference.readRarebitCurrent(base)
      assert.notDeepEqual(stale.artifactState, truth.artifactState, "the rewrite changes the answer")
      // The documented limit of the append-only cache: the stale middle is still the one seen...
      assert.deepStrictEqual(await read("cached"), stale)
      // ...and without the cache the store reads exactly what the reference reads.
      assert.deepStrictEqual(await read("uncached"), truth)
    } finally {
      await cachedStore.dispose()
    }
  })
})
