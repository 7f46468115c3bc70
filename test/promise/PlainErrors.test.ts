/**
 * The plain API's rejections, side by side with the reference on the same
 * inputs: every error phrase PROTOCOL.md lists ("Error messages the plain
 * API keeps") comes with the same class and the same whole message, and odd
 * argument values (`null` roots, `null` bounds, non-function hooks, …) fail
 * or succeed exactly as the reference does.
 *
 * HOME points at a temporary directory before either store is loaded, so
 * the default roots (`~/.pi/agent/…`) live there: a case that wrongly fell
 * back to them would write into the temporary HOME, which is checked to stay
 * empty, never into the real one.
 */
import { afterAll, afterEach, assert, describe, it } from "@effect/vitest"
import { mkdtempSync } from "node:fs"
import { mkdir, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"

const home = mkdtempSync(join(tmpdir(), "rarebit-plain-errors-home-"))
process.env.HOME = home

// Loaded only now, so both stores compute their default roots under `home`.
const Support = await import("../support/Reference.js")
const { comparable, ours, reference, snapshot } = await import("../interop/Interop.js")
type StoreApi = typeof ours
type Roots = Awaited<ReturnType<typeof Support.makeRoots>>
const { entry, jobId, makeRoots, outcomeOf, summaryReceipt, titleReceipt, writeSession } = Support

const branch = [entry("u1", "user", "first request")]

// One path for both stores: an external sidecar is named by the hash of the resolved Session path.
const outsideSession = join(tmpdir(), "rarebit-plain-errors-outside", "trace.jsonl")

let cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  await Promise.all(cleanups.map((cleanup) => cleanup()))
  cleanups = []
})
afterAll(async () => {
  await rm(home, { recursive: true, force: true })
})

const worldFor = async (api: StoreApi) => {
  const roots = await makeRoots(`rarebit-plain-errors-${api.name}-`)
  cleanups.push(roots.cleanup)
  await writeSession(roots.sessionFile, "s", branch)
  const base = { sessionFile: roots.sessionFile, ...roots.location }
  // A fixed `now` by default, so both stores stamp the same `claimedAt`.
  const reserve = (n: number, extra: Record<string, unknown> = {}) =>
    api.reserveRarebitJob({ ...base, jobId: jobId(n), now: 1_000, ...extra })
  return { api, roots, base, reserve }
}

type World = Awaited<ReturnType<typeof worldFor>>

/**
 * Runs `scenario` against each store on its own fresh root and asserts the
 * same outcome (class and message, or value) and the same files afterwards.
 */
const sideBySide = async (scenario: (world: World) => Promise<unknown>) => {
  const results: Array<{ outcome: unknown; files: unknown; roots: Roots }> = []
  for (const api of [ours, reference]) {
    const world = await worldFor(api)
    const outcome = await outcomeOf(() => scenario(world))
    results.push({ outcome: comparable(outcome, world.roots), files: await snapshot(world.roots), roots: world.roots })
  }
  const [mine, theirs] = results
  assert.deepStrictEqual(mine.outcome, theirs.outcome)
  assert.deepStrictEqual(mine.files, theirs.files)
  const underHome = await readdir(home)
  // Cleared before asserting, so one wrong fallback does not fail every later case too.
  await Promise.all(underHome.map((name) => rm(join(home, name), { recursive: true, force: true })))
  assert.deepStrictEqual(underHome, [], "nothing was written under the default roots")
  return mine.outcome as { ok: boolean; errorClass?: string; message?: string }
}

const expectRejection = async (
  phrase: string,
  errorClass: "Error" | "TypeError" | "RangeError",
  scenario: (world: World) => Promise<unknown>
) => {
  const outcome = await sideBySide(scenario)
  assert.isFalse(outcome.ok, "rejected")
  assert.strictEqual(outcome.errorClass, errorClass)
  assert.include(outcome.message, phrase)
}

describe("PlainErrors", { concurrent: false }, () => {
  describe("every phrase the plain API keeps", () => {
    it("outside the configured Session root: materialization path (thrown), reads, reserve", async () => {
      const outside = (world: World) => join(world.roots.root, "elsewhere", "trace.jsonl")
      const phrase = "outside the configured Session root"
      await expectRejection(
        phrase,
        "Error",
        async (w) => w.api.rarebitMaterializationPath(outside(w), w.roots.location)
      )
      await expectRejection(phrase, "Error", (w) => w.api.readRarebitCurrent({ ...w.base, sessionFile: outside(w) }))
      await expectRejection(phrase, "Error", (w) => w.api.readRarebitHistory({ ...w.base, sessionFile: outside(w) }))
      await expectRejection(
        phrase,
        "Error",
        (w) => w.api.reserveRarebitJob({ ...w.base, jobId: jobId(1), sessionFile: outside(w) })
      )
      // The reference's path function throws synchronously; the others reject.
      const roots = await makeRoots()
      cleanups.push(roots.cleanup)
      assert.throws(() => ours.rarebitMaterializationPath(join(roots.root, "x.jsonl"), roots.location), phrase)
      const pending = ours.readRarebitCurrent({ sessionFile: join(roots.root, "x.jsonl"), ...roots.location })
      assert.instanceOf(pending, Promise)
      await pending.then(() => assert.fail("resolved"), () => undefined)
    })

    it("must be a regular file: settling into a directory or a symlink", async () => {
      for (const replace of ["directory", "symlink"] as const) {
        await expectRejection("must be a regular file", "Error", async (w) => {
          const reservation = await w.reserve(1)
          const path = reservation.materializationPath
          if (replace === "directory") await mkdir(path, { recursive: true })
          else {
            await writeFile(`${path}.target`, "")
            await symlink(`${path}.target`, path)
          }
          return w.api.settleRarebitJob(reservation, summaryReceipt(branch, "s"))
        })
      }
    })

    it("jobId must be a SHA-256 hex string", async () => {
      for (const bad of ["xyz", "A".repeat(64), "a".repeat(65), 7, null, undefined, ["a".repeat(64)]]) {
        await expectRejection(
          "jobId must be a SHA-256 hex string",
          "TypeError",
          (w) => w.api.reserveRarebitJob({ ...w.base, jobId: bad })
        )
      }
    })

    it("leaseMs must be a positive finite number", async () => {
      for (const bad of [0, -1, 0.5, Number.NaN, Number.POSITIVE_INFINITY, "5", null, {}]) {
        await expectRejection(
          "leaseMs must be a positive finite number",
          "TypeError",
          (w) => w.reserve(1, { leaseMs: bad })
        )
      }
    })

    it("receipt type is unsupported", async () => {
      for (const record of [{ type: "rarebit_other" }, {}, null, undefined, "rarebit_summary", 5]) {
        await expectRejection(
          "receipt type is unsupported",
          "TypeError",
          async (w) => w.api.settleRarebitJob(await w.reserve(1), record)
        )
      }
    })

    it("does not match protocol v4, for Summaries and Titles, with status and sorted keys", async () => {
      const records = [
        { ...summaryReceipt(branch, "s"), unexpected: true },
        { ...summaryReceipt(branch, "s"), status: "failure" },
        { ...summaryReceipt(branch, "s"), schemaVersion: 3 },
        { ...titleReceipt(branch, "s"), title: "" },
        { ...titleReceipt(branch, "s"), status: undefined }
      ]
      for (const record of records) {
        await expectRejection(
          "does not match protocol v4",
          "TypeError",
          async (w) => w.api.settleRarebitJob(await w.reserve(1), record)
        )
      }
    })

    it("exceeds protocol byte limit, for a receipt (nothing written) and for a head", async () => {
      await expectRejection(
        "Rarebit receipt exceeds protocol byte limit",
        "RangeError",
        async (w) =>
          w.api.settleRarebitJob(await w.reserve(1), summaryReceipt(branch, "s", { summary: "x".repeat(48 * 1024) }))
      )
      // The head case leaves different files (see WriteDifferential's DeliberateDifferences), so
      // only the rejection is compared here.
      const outcomes = []
      for (const api of [ours, reference]) {
        const world = await worldFor(api)
        const sessionId = "s".repeat(9000)
        await writeSession(world.roots.sessionFile, sessionId, branch)
        outcomes.push(
          await outcomeOf(async () => api.settleRarebitJob(await world.reserve(1), summaryReceipt(branch, sessionId)))
        )
      }
      assert.deepStrictEqual(outcomes[0], outcomes[1])
      assert.deepStrictEqual(outcomes[0], {
        ok: false,
        errorClass: "RangeError",
        message: "Rarebit head exceeds protocol byte limit"
      })
    })

    it("fenced by a newer worker", async () => {
      await expectRejection("fenced by a newer worker", "Error", async (w) => {
        const old = await w.reserve(1, { now: 0, leaseMs: 1 })
        const fresh = await w.reserve(1, { now: 10, leaseMs: 1 })
        assert.strictEqual(fresh.acquired, true)
        return w.api.settleRarebitJob(old, summaryReceipt(branch, "s"))
      })
    })

    it("commit lock is held; explicit repair is required (a lock left by a crashed reference)", async () => {
      // Both stores retry 2000 times, 5 ms apart, before giving up: run them at once.
      const worlds = await Promise.all([ours, reference].map(worldFor))
      const outcomes = await Promise.all(worlds.map(async (w) => {
        const reservation = await w.reserve(1)
        const lockPath = `${reservation.materializationPath}.commit-lock`
        await writeFile(
          lockPath,
          `${JSON.stringify({ token: "f".repeat(48), claimedAt: "2026-01-01T00:00:00.000Z" })}\n`
        )
        const outcome = await outcomeOf(() => w.api.releaseRarebitJob(reservation))
        assert.strictEqual(JSON.parse(await readFile(lockPath, "utf8")).token, "f".repeat(48), "the lock is left alone")
        return comparable(outcome, w.roots)
      }))
      assert.deepStrictEqual(outcomes[0], outcomes[1])
      assert.deepStrictEqual(outcomes[0], {
        ok: false,
        errorClass: "Error",
        message: "Rarebit Session commit lock is held; explicit repair is required if its owner crashed"
      })
    }, 60_000)

    it("settled job receipt pointer is invalid (the sidecar no longer holds the receipt)", async () => {
      for (const damage of ["rewrite", "truncate", "pointer"] as const) {
        await expectRejection("settled job receipt pointer is invalid", "Error", async (w) => {
          const reservation = await w.reserve(1)
          await w.api.settleRarebitJob(reservation, summaryReceipt(branch, "s"))
          const path = reservation.materializationPath
          if (damage === "rewrite") await writeFile(path, (await readFile(path, "utf8")).replace("\"ok\"", "\"OK\""))
          if (damage === "truncate") await writeFile(path, "\n")
          if (damage === "pointer") {
            const claim = JSON.parse(await readFile(reservation.claimPath, "utf8"))
            await writeFile(
              reservation.claimPath,
              `${JSON.stringify({ ...claim, receiptRef: { ...claim.receiptRef, receiptLength: 3 } })}\n`
            )
          }
          return w.reserve(1)
        })
      }
    })

    it("An acquired Rarebit reservation is required", async () => {
      for (const pick of ["null", "undefined", "empty", "duplicate", "inFlight", "released"] as const) {
        await expectRejection("An acquired Rarebit reservation is required", "Error", async (w) => {
          const receipt = summaryReceipt(branch, "s")
          if (pick === "null") return w.api.settleRarebitJob(null, receipt)
          if (pick === "undefined") return w.api.settleRarebitJob(undefined, receipt)
          if (pick === "empty") return w.api.settleRarebitJob({}, receipt)
          const first = await w.reserve(1)
          if (pick === "inFlight") return w.api.settleRarebitJob(await w.reserve(1), receipt)
          if (pick === "released") return w.api.settleRarebitJob({ ...first, acquired: false }, receipt)
          await w.api.settleRarebitJob(first, receipt)
          return w.api.settleRarebitJob(await w.reserve(1), receipt)
        })
      }
    })

    it("History offset and limit are outside protocol bounds", async () => {
      const bounds = [
        { fromOffset: -1 },
        { fromOffset: 1.5 },
        { fromOffset: Number.NaN },
        { fromOffset: "0" },
        { fromOffset: null },
        { fromOffset: 2 ** 53 },
        { limit: 0 },
        { limit: 1001 },
        { limit: 2.5 },
        { limit: "5" },
        { limit: null },
        { limit: -3, sessionFile: undefined }
      ]
      for (const bound of bounds) {
        await expectRejection(
          "History offset and limit are outside protocol bounds",
          "TypeError",
          (w) => w.api.readRarebitHistory({ ...w.base, ...bound })
        )
      }
    })
  })

  describe("odd argument values", () => {
    const cases: Record<string, (w: World) => Promise<unknown>> = {
      "reserve: rarebitRoot null": (w) => w.api.reserveRarebitJob({ ...w.base, jobId: jobId(1), rarebitRoot: null }),
      "reserve: sessionRoot null": (w) => w.api.reserveRarebitJob({ ...w.base, jobId: jobId(1), sessionRoot: null }),
      "reserve: sessionRoot a number": (w) => w.api.reserveRarebitJob({ ...w.base, jobId: jobId(1), sessionRoot: 5 }),
      "reserve: bad jobId and null root (jobId is checked first)": (w) =>
        w.api.reserveRarebitJob({ ...w.base, jobId: "x", rarebitRoot: null }),
      "reserve: now null": (w) => w.reserve(1, { now: null }),
      "reserve: now a date string": (w) => w.reserve(1, { now: "2026-01-01" }),
      "reserve: now NaN": (w) => w.reserve(1, { now: Number.NaN }),
      "reserve: allowExternalSession null": (w) => w.reserve(1, { allowExternalSession: null }),
      "reserve: allowExternalSession 1, outside the root": (w) =>
        w.reserve(1, { allowExternalSession: 1, sessionFile: outsideSession }),
      "reserve: null options": (w) => w.api.reserveRarebitJob(null),
      "reserve: no options": (w) => w.api.reserveRarebitJob(),
      "reserve: blank Session file": (w) => w.reserve(1, { sessionFile: "  " }),
      "reserve: a jobId-like object": (w) =>
        w.api.reserveRarebitJob({ ...w.base, jobId: { toString: () => jobId(1) } }),
      "history: rarebitRoot null": (w) => w.api.readRarebitHistory({ ...w.base, rarebitRoot: null }),
      "history: null options": (w) => w.api.readRarebitHistory(null),
      "history: no options": (w) => w.api.readRarebitHistory(),
      "current: rarebitRoot null": (w) => w.api.readRarebitCurrent({ ...w.base, rarebitRoot: null }),
      "current: sessionRoot null": (w) => w.api.readRarebitCurrent({ ...w.base, sessionRoot: null }),
      "current: null options": (w) => w.api.readRarebitCurrent(null),
      "current: no options": (w) => w.api.readRarebitCurrent(),
      "current: expectation null": (w) => w.api.readRarebitCurrent({ ...w.base, expectation: null }),
      "current: expectation unknown": (w) => w.api.readRarebitCurrent({ ...w.base, expectation: "soon" }),
      "current: deadlineExpired a string": (w) =>
        w.api.readRarebitCurrent({ ...w.base, expectation: "agent_settled", deadlineExpired: "yes" }),
      "current: native false": (w) => w.api.readRarebitCurrent({ ...w.base, native: false }),
      "current: native {}": (w) => w.api.readRarebitCurrent({ ...w.base, native: {} }),
      "current: native without a selection": (w) =>
        w.api.readRarebitCurrent({ ...w.base, native: { availability: "available", sessionId: "s", selection: null } }),
      "path: null options": async (w) => w.api.rarebitMaterializationPath(w.roots.sessionFile, null),
      "path: rarebitRoot null": async (w) =>
        w.api.rarebitMaterializationPath(w.roots.sessionFile, { rarebitRoot: null }),
      "path: sessionRoot a number": async (w) =>
        w.api.rarebitMaterializationPath(w.roots.sessionFile, { sessionRoot: 5 }),
      "settle: hook that is not a function": async (w) =>
        w.api.settleRarebitJob(await w.reserve(1, { hooks: { afterLeaseValidated: 5 } }), summaryReceipt(branch, "s")),
      "settle: hook that uses `this`": async (w) => {
        const hooks = {
          calls: 0,
          async afterLeaseValidated(this: { calls: number }) {
            this.calls++
          }
        }
        const result = await w.api.settleRarebitJob(await w.reserve(1, { hooks }), summaryReceipt(branch, "s"))
        return { type: result.type, calls: hooks.calls }
      },
      "settle: hook that rejects": async (w) =>
        w.api.settleRarebitJob(
          await w.reserve(1, {
            hooks: {
              afterLeaseValidated: async () => {
                throw new SyntaxError("from the hook")
              }
            }
          }),
          summaryReceipt(branch, "s")
        ),
      "settle: acquired without a path": (w) => w.api.settleRarebitJob({ acquired: true }, summaryReceipt(branch, "s")),
      "settle: receipt null": async (w) => w.api.settleRarebitJob(await w.reserve(1), null),
      "release: null": (w) => w.api.releaseRarebitJob(null),
      "release: a duplicate result": async (w) => {
        await w.api.settleRarebitJob(await w.reserve(1), summaryReceipt(branch, "s"))
        return w.api.releaseRarebitJob(await w.reserve(1))
      },
      "release: twice": async (w) => {
        const reservation = await w.reserve(1)
        await w.api.releaseRarebitJob(reservation)
        return w.api.releaseRarebitJob(reservation)
      }
    }
    for (const [name, scenario] of Object.entries(cases)) {
      it(name, async () => {
        await sideBySide(scenario)
      })
    }
  })
})
