/**
 * The Promise API's cache budget from the environment: what each variable
 * accepts, that anything else is refused by name rather than read as the
 * default, and, in a process of its own, that the Promise API's store keeps
 * to the budget set.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { mkdir, mkdtemp, rm, utimes, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { CACHE_MAX_BYTES_VARIABLE, cacheBudgetFromEnvironment } from "../../src/promise/CacheBudgetEnvironment.js"
import { DEFAULT_CACHE_BUDGET } from "../../src/store/StoreConfig.js"
import { turnsText } from "../session/SessionLines.js"
import { runPromiseChild } from "../support/PromiseChild.js"

const budgetOf = (maxBytes: string | undefined) => cacheBudgetFromEnvironment({ [CACHE_MAX_BYTES_VARIABLE]: maxBytes })

describe("cacheBudgetFromEnvironment", () => {
  it("unset or empty is the default budget", () => {
    assert.deepStrictEqual(cacheBudgetFromEnvironment({}), DEFAULT_CACHE_BUDGET)
    assert.deepStrictEqual(budgetOf(""), DEFAULT_CACHE_BUDGET)
  })

  it("takes whole bytes, KiB, MiB and GiB, zero included", () => {
    assert.deepStrictEqual(budgetOf("0"), { maxBytes: 0 })
    assert.deepStrictEqual(budgetOf("1048576"), { maxBytes: 1048576 })
    assert.strictEqual(budgetOf("512KiB").maxBytes, 512 * 1024)
    assert.strictEqual(budgetOf(" 64MiB ").maxBytes, 64 * 1024 * 1024)
    assert.strictEqual(budgetOf("2GiB").maxBytes, 2 * 1024 ** 3)
  })

  it("refuses anything else with a RangeError naming the variable and the value", () => {
    for (const bad of ["-1", "1.5", "64MB", "64 MiB", "lots", "1e6", "0x10", "99999999999999999999", "9999999999GiB"]) {
      assert.throws(() => budgetOf(bad), RangeError, `${CACHE_MAX_BYTES_VARIABLE} must be a whole number of bytes`)
      assert.throws(() => budgetOf(bad), JSON.stringify(bad))
    }
  })
})

// ---- the Promise API keeps to it ---------------------------------------------------

const SESSIONS = 40
let scratch = ""

/**
 * The child: reads every Session, then every Session again, counting the
 * Session files the second sweep opens (each \`fs.openSync\`, which the
 * store's reads go through).
 */
const CHILD = `
import fs from "node:fs"
const [api, sessionRoot, rarebitRoot, ...files] = process.argv.slice(1)
const opened = []
const openSync = fs.openSync
fs.openSync = function (path, ...rest) {
  opened.push(String(path))
  return openSync.call(this, path, ...rest)
}
const { readRarebitCurrent } = await import(api)
const read = (sessionFile) => readRarebitCurrent({ sessionFile, sessionRoot, rarebitRoot })
let refused
try { await read(files[0]) } catch (error) { refused = { name: error.name, message: error.message } }
if (refused) { process.stdout.write(JSON.stringify({ refused })); process.exit(0) }
for (const file of files) await read(file)
opened.length = 0
const states = []
for (const file of files) states.push((await read(file)).artifactState?.nativeRef?.availability)
const sessionOpens = opened.filter((path) => path.startsWith(sessionRoot)).length
process.stdout.write(JSON.stringify({ states, sessionOpens }))
`

interface ChildReport {
  readonly refused?: { readonly name: string; readonly message: string }
  readonly states?: ReadonlyArray<string>
  readonly sessionOpens?: number
}

/** Idle Sessions (`s*`), or Sessions being written (`live*`), which every read opens again. */
const files = (kind: "s" | "live" = "s") =>
  Array.from({ length: SESSIONS }, (_, index) => join(scratch, "sessions", `${kind}${index}.jsonl`))

const runChild = (env: Record<string, string>, kind: "s" | "live" = "s") =>
  runPromiseChild<ChildReport>({
    script: CHILD,
    nodeFlags: [],
    args: [join(scratch, "sessions"), join(scratch, "rarebit"), ...files(kind)],
    codeCache: "off",
    env
  })

describe("the Promise API's store", () => {
  beforeAll(async () => {
    scratch = await mkdtemp(join(tmpdir(), "rarebit-budget-env-"))
    await mkdir(join(scratch, "sessions"), { recursive: true })
    // Written long ago, so the cache keeps each one's evidence, as for a dashboard's idle Sessions.
    const longAgo = new Date(Date.UTC(2026, 0, 1))
    for (const [index, file] of files().entries()) {
      await writeFile(file, turnsText(3 + (index % 4), `sess-${index}`))
      await utimes(file, longAgo, longAgo)
    }
    // Written "after" every read (an hour ahead): never at rest, so each read checks the file it holds.
    const ahead = new Date(Date.now() + 3_600_000)
    for (const [index, file] of files("live").entries()) {
      await writeFile(file, turnsText(3 + (index % 4), `live-${index}`))
      await utimes(file, ahead, ahead)
    }
  })
  afterAll(() => rm(scratch, { recursive: true, force: true }))

  it("answers an idle Session from memory by default, and reads it again every time under a budget of 0 bytes", async () => {
    const cached = await runChild({})
    const uncached = await runChild({ [CACHE_MAX_BYTES_VARIABLE]: "0" })
    // Same answers either way: the budget decides only what is kept between reads.
    assert.isTrue(cached.states!.every((state) => state === "available"), JSON.stringify(cached.states))
    assert.deepStrictEqual(uncached.states, cached.states)
    // Idle and cached, a Session is answered by a stat; with nothing kept, each read opens it.
    assert.strictEqual(cached.sessionOpens, 0)
    assert.strictEqual(uncached.sessionOpens, SESSIONS)
  })

  it("opens a Session being written at every read, cached or not: no file is held between reads", async () => {
    const cached = await runChild({}, "live")
    const uncached = await runChild({ [CACHE_MAX_BYTES_VARIABLE]: "0" }, "live")
    assert.isTrue(cached.states!.every((state) => state === "available"), JSON.stringify(cached.states))
    assert.deepStrictEqual(uncached.states, cached.states)
    assert.strictEqual(cached.sessionOpens, SESSIONS)
    assert.strictEqual(uncached.sessionOpens, SESSIONS)
  })

  it("refuses every call while a variable holds what is not a budget", async () => {
    const report = await runChild({ [CACHE_MAX_BYTES_VARIABLE]: "32 megabytes" })
    assert.deepStrictEqual(report.refused, {
      name: "RangeError",
      message:
        `${CACHE_MAX_BYTES_VARIABLE} must be a whole number of bytes, optionally followed by KiB, MiB or GiB (e.g. 64MiB), got "32 megabytes"`
    })
  })
})
