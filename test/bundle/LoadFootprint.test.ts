/**
 * What a process pays for importing the Promise API (`dist/promise/index.js`,
 * the launcher of the bundle) and reading one Session's current state, in a
 * process of its own: the Node built-in modules it makes Node load.
 *
 * What must hold: a read loads nothing a read does not use. Node's
 * WebCrypto module (what `globalThis.crypto` loads) is for writes' tokens
 * at most, and the store draws those from `node:crypto` without it; Node's
 * `File` class is never used at all. No date is formatted by the built-in
 * methods, whose first call loads ICU's time zone names. (What the import
 * keeps in memory is V8's business: the bench's `heap` group reports it.)
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { settleWith } from "../cli/CliHarness.js"
import { runPromiseChild } from "../support/PromiseChild.js"
import { entry, makeRoots, type Roots, summaryReceipt, writeSession } from "../support/Reference.js"

let roots: Roots
let scratch = ""

/**
 * The child: imports the Promise API, reads the Session's current state,
 * and prints the built-in modules Node loaded for each step.
 */
const CHILD = `
const [api, sessionFile, sessionRoot, rarebitRoot] = process.argv.slice(1)
const loadedBefore = new Set(process.moduleLoadList)
const { readRarebitCurrent } = await import(api)
const loadedByImport = process.moduleLoadList.filter((name) => !loadedBefore.has(name))
const current = await readRarebitCurrent({ sessionFile, sessionRoot, rarebitRoot })
const loadedByRead = process.moduleLoadList.filter((name) => !loadedBefore.has(name) && !loadedByImport.includes(name))
process.stdout.write(JSON.stringify({ availability: current.availability, loadedByImport, loadedByRead }))
`

interface Footprint {
  readonly availability: string
  readonly loadedByImport: ReadonlyArray<string>
  readonly loadedByRead: ReadonlyArray<string>
}

const importAndRead = (cache: string): Promise<Footprint> =>
  runPromiseChild<Footprint>({
    script: CHILD,
    nodeFlags: [],
    args: [roots.sessionFile, roots.sessionRoot, roots.rarebitRoot],
    codeCache: cache
  })

/**
 * The child for the date-formatting test: counts calls of `Date`'s
 * formatting methods while it imports the Promise API, reads, reserves a
 * job (stamping its claim's time), has a second reservation find that claim
 * in flight (checking its time), and releases it.
 *
 * Why it matters: V8's first formatting of a date in a process (even
 * `toISOString`) loads ICU's time zone names, ~1 MiB of memory the process
 * then keeps, which a dashboard polling Sessions would pay for nothing.
 */
const FORMATTING_CHILD = `
import { readFileSync } from "node:fs"
const [api, sessionFile, sessionRoot, rarebitRoot, jobId] = process.argv.slice(1)
const formatted = []
for (const name of Object.getOwnPropertyNames(Date.prototype)) {
  if (!/^to[A-Z]/.test(name)) continue
  const builtIn = Date.prototype[name]
  Date.prototype[name] = function (...args) {
    formatted.push(name)
    return builtIn.apply(this, args)
  }
}
const store = await import(api)
const location = { sessionFile, sessionRoot, rarebitRoot }
await store.readRarebitCurrent(location)
const reservation = await store.reserveRarebitJob({ jobId, ...location })
const contender = await store.reserveRarebitJob({ jobId, ...location })
const claimedAt = JSON.parse(readFileSync(reservation.claimPath, "utf8")).claimedAt
await store.releaseRarebitJob(reservation)
await store.readRarebitCurrent(location)
process.stdout.write(JSON.stringify({
  formatted,
  reserved: reservation.acquired,
  contenderInFlight: contender.inFlight === true,
  claimedAt
}))
`

interface DateFormatting {
  /** The names of the formatting methods called, once per call. */
  readonly formatted: ReadonlyArray<string>
  readonly reserved: boolean
  readonly contenderInFlight: boolean
  readonly claimedAt: string
}

const JOB_ID = "f".repeat(64)

beforeAll(async () => {
  roots = await makeRoots("rarebit-load-footprint-")
  scratch = await mkdtemp(join(tmpdir(), "rarebit-load-footprint-cache-"))
  const branch = [entry("u1", "user", "a question"), entry("a1", "assistant", "an answer")]
  await writeSession(roots.sessionFile, "footprint-session", branch)
  await settleWith("ours", roots, roots.sessionFile, 1, summaryReceipt(branch, "footprint-session"))
})

afterAll(async () => {
  await roots?.cleanup()
  if (scratch !== "") await rm(scratch, { recursive: true, force: true })
})

describe("importing the Promise API and reading one Session", () => {
  it("loads neither Node's WebCrypto module nor its File class, with or without a code cache", async () => {
    // The first run writes the cache, the second starts from it.
    for (const run of [1, 2]) {
      const footprint = await importAndRead(scratch)
      assert.strictEqual(footprint.availability, "available", `run ${run}`)
      const loaded = [...footprint.loadedByImport, ...footprint.loadedByRead]
      // The read did run on node:crypto (the Session's hashes): the check below is not vacuous.
      assert.include(loaded, "NativeModule crypto", `run ${run}`)
      assert.notInclude(loaded, "NativeModule internal/crypto/webcrypto", `run ${run}`)
      assert.notInclude(loaded, "NativeModule internal/file", `run ${run}`)
    }
  })

  it("never formats a date with the built-in, reading or writing", async () => {
    const footprint = await runPromiseChild<DateFormatting>({
      script: FORMATTING_CHILD,
      nodeFlags: [],
      args: [roots.sessionFile, roots.sessionRoot, roots.rarebitRoot, JOB_ID],
      codeCache: "off"
    })
    // The writes stamped a claim time and the contender checked it: the check below is not vacuous.
    assert.strictEqual(footprint.reserved, true)
    assert.strictEqual(footprint.contenderInFlight, true)
    assert.match(footprint.claimedAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    assert.deepStrictEqual(footprint.formatted, [])
  })
})
