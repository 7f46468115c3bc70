/**
 * Runs Promise-API calls with hostile inputs against our built package and
 * the reference, each on its own fresh world, and prints both outcomes per
 * case as JSON lines. Spawned by `HostileInputs.test.ts`, which decides what
 * to run and compares.
 *
 * It runs in a child process so that it can (1) drop root privileges (when
 * the tests run as root, directories with mode 000 deny nothing), (2) have
 * its own working directory and HOME in a temporary directory, since empty,
 * blank and relative roots resolve against them in both stores, and (3)
 * import the stores only after HOME is set, which fixes their default roots.
 *
 * Input: argv[2] is the repository; stdin a JSON array of
 * `{ fn, slot, value }` names (see `VALUES`, `CALLS`), where an unknown name
 * stops the driver before any case runs; `--list` as argv[3] prints those
 * names instead. Output: one JSON line per case,
 * `{ case, ours, reference }`, each an outcome with the files left behind.
 */
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, lstatSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"

/** @import { Dirent } from "node:fs" */
/** @import * as OursModule from "../../dist/promise/index.js" */
/** @import * as RefStoreModule from "../../node_modules/@hypercarrier/rarebit/src/rarebit-store.mjs" */
/** @import * as RefSessionModule from "../../node_modules/@hypercarrier/rarebit/src/rarebit-session.mjs" */
/** @import * as ReceiptsModule from "../../stress/receipts.mjs" */

/**
 * The Promise functions the cases call, as a hostile caller sees them. They
 * are methods so that each store, whose own parameter types are narrower,
 * still fits: the point is to pass them anything. A reservation only has to
 * be an object, since cases spread it to forge fields.
 * @typedef {{
 *   rarebitMaterializationPath(sessionFile: unknown, options?: unknown): unknown
 *   readRarebitCurrent(input: unknown): Promise<unknown>
 *   readRarebitHistory(input: unknown): Promise<unknown>
 *   reserveRarebitJob(input: unknown): Promise<object>
 *   settleRarebitJob(reservation: unknown, record: unknown): Promise<unknown>
 *   releaseRarebitJob(reservation: unknown): Promise<unknown>
 *   resolveRarebitSessionFile(reference: unknown, options?: unknown): Promise<unknown>
 *   readRarebitSession(reference: unknown, options?: unknown): Promise<unknown>
 * }} HostileApi
 */

/** A case as the test names it (see `--list`). @typedef {{ readonly fn: string; readonly slot: string; readonly value: string }} Case */

/**
 * What a call did, made comparable: its value, or what it threw (anything can be thrown).
 * @typedef {(
 *   | { readonly ok: true; readonly value: unknown }
 *   | { readonly ok: false; readonly errorClass: unknown; readonly code: unknown; readonly message: string }
 * )} CallOutcome
 */

/** A call's outcome and the files it left, by masked path. @typedef {CallOutcome & { readonly files: Readonly<Record<string, string>> }} Outcome */

/** Replaces the run's paths and tokens in a text. @typedef {(text: string) => string} Mask */

const [repo, mode] = process.argv.slice(2)
const scratch = mkdtempSync(join(tmpdir(), "rarebit-hostile-"))
const home = join(scratch, "home")
const cwd = join(scratch, "cwd")
mkdirSync(home)
mkdirSync(cwd)
process.env.HOME = home
process.chdir(cwd)

const Ours = /** @type {typeof OursModule} */ (await import(join(repo, "dist/promise/index.js")))
const RefStore = /** @type {typeof RefStoreModule} */ (
  await import(join(repo, "node_modules/@hypercarrier/rarebit/src/rarebit-store.mjs"))
)
const RefSession = /** @type {typeof RefSessionModule} */ (
  await import(join(repo, "node_modules/@hypercarrier/rarebit/src/rarebit-session.mjs"))
)
const Receipts = /** @type {typeof ReceiptsModule} */ (await import(join(repo, "stress/receipts.mjs")))
/** @type {{ readonly ours: HostileApi; readonly reference: HostileApi }} */
const implementations = { ours: Ours, reference: { ...RefStore, ...RefSession } }

const JOB = "a".repeat(64)
const branch = [{ id: "u1", type: "message", message: { role: "user", content: "a question" } }]
const receipt = () =>
  Receipts.summaryReceipt(branch, "s1", { model: { provider: "p", id: "m" }, source: "test", text: "a summary" })

/** A fresh world: a Session root with a valid Session and traps, an empty Rarebit root. */
const makeWorld = () => {
  const root = mkdtempSync(join(scratch, "world-"))
  const sessionRoot = join(root, "sessions")
  const rarebitRoot = join(root, "rarebit")
  const sessionFile = join(sessionRoot, "p", "s.jsonl")
  const session = `${[{ type: "session", id: "s1" }, ...branch].map((line) => JSON.stringify(line)).join("\n")}\n`
  mkdirSync(join(sessionRoot, "p", "dir.jsonl"), { recursive: true })
  writeFileSync(sessionFile, session)
  writeFileSync(join(sessionRoot, "p", "file"), "not a directory")
  mkdirSync(join(sessionRoot, "denied"))
  writeFileSync(join(sessionRoot, "denied", "s.jsonl"), session)
  chmodSync(join(sessionRoot, "denied"), 0o000)
  writeFileSync(join(sessionRoot, "p", "unreadable.jsonl"), session, { mode: 0o000 })
  mkdirSync(join(root, "denied-rarebit"), { mode: 0o000 })
  mkdirSync(join(root, "readonly-rarebit"), { mode: 0o555 })
  mkdirSync(join(root, "readonly-jobs", "jobs-v4"), { recursive: true })
  chmodSync(join(root, "readonly-jobs", "jobs-v4"), 0o555)
  mkdirSync(join(root, "readonly-sidecars", "materializations-v4", "p"), { recursive: true })
  chmodSync(join(root, "readonly-sidecars", "materializations-v4", "p"), 0o555)
  return { root, sessionRoot, rarebitRoot, sessionFile, base: { sessionFile, sessionRoot, rarebitRoot } }
}

/** @typedef {ReturnType<typeof makeWorld>} World */

/** A hostile value, made for the world it is used in. @typedef {(w: World) => unknown} HostileValue */

/** One function called with a hostile value in one argument slot. @typedef {(api: HostileApi, w: World, v: unknown) => unknown} Call */

/**
 * Hostile values by name; functions of the world where they are paths in it.
 * @type {Readonly<Record<string, HostileValue>>}
 */
const VALUES = {
  nulInName: (w) => join(w.sessionRoot, "p", "a\0b.jsonl"),
  nulInDirectory: (w) => join(w.sessionRoot, "p\0q", "s.jsonl"),
  nulRoot: (w) => join(w.root, "r\0x"),
  nulId: () => "s\0",
  empty: () => "",
  blank: () => "   ",
  null: () => null,
  undefined: () => undefined,
  zero: () => 0,
  number: () => 5,
  negative: () => -1,
  nan: () => Number.NaN,
  infinity: () => Number.POSITIVE_INFINITY,
  string: () => "x",
  object: () => ({}),
  array: () => [],
  pathInArray: (w) => [w.sessionFile],
  true: () => true,
  false: () => false,
  function: () => () => 1,
  bigint: () => 10n,
  symbol: () => Symbol("s"),
  date: () => new Date(0),
  throwingToString: () => ({
    toString() {
      throw new Error("no string form")
    }
  }),
  name200: (w) => join(w.sessionRoot, "p", `${"n".repeat(200)}.jsonl`),
  name240: (w) => join(w.sessionRoot, "p", `${"n".repeat(237)}.jsonl`),
  name300: (w) => join(w.sessionRoot, "p", `${"n".repeat(300)}.jsonl`),
  pathTooLong: (w) => join(w.sessionRoot, `${"d".repeat(200)}/`.repeat(25), "x.jsonl"),
  rootNameTooLong: (w) => join(w.root, "n".repeat(300)),
  throughFile: (w) => join(w.sessionRoot, "p", "file", "x.jsonl"),
  directory: (w) => join(w.sessionRoot, "p", "dir.jsonl"),
  deniedSession: (w) => join(w.sessionRoot, "denied", "s.jsonl"),
  unreadableSession: (w) => join(w.sessionRoot, "p", "unreadable.jsonl"),
  deniedRoot: (w) => join(w.root, "denied-rarebit"),
  readonlyRoot: (w) => join(w.root, "readonly-rarebit"),
  readonlyJobsRoot: (w) => join(w.root, "readonly-jobs"),
  readonlySidecarsRoot: (w) => join(w.root, "readonly-sidecars"),
  deniedSessionRoot: (w) => join(w.sessionRoot, "denied"),
  relativeRoot: (w) => relative(cwd, join(w.root, "relative")),
  sessionId: () => "s1",
  outside: (w) => join(w.root, "elsewhere", "s.jsonl")
}

/**
 * @param {HostileApi} api
 * @param {World} w
 * @param {Readonly<Record<string, unknown>>} [extra]
 */
const reserve = (api, w, extra = {}) => api.reserveRarebitJob({ ...w.base, jobId: JOB, now: 1_000, ...extra })

/**
 * The same call for each of several slots (or forged reservation fields).
 * @param {ReadonlyArray<string>} slots
 * @param {(slot: string) => Call} callFor
 * @returns {Record<string, Call>}
 */
const callsFor = (slots, callFor) => Object.fromEntries(slots.map((slot) => [slot, callFor(slot)]))

/**
 * Each function's argument slots: how to call it with `value` in that slot.
 * @type {Readonly<Record<string, Readonly<Record<string, Call>>>>}
 */
const CALLS = {
  path: {
    sessionFile: (api, w, v) => api.rarebitMaterializationPath(v, { sessionRoot: w.sessionRoot, rarebitRoot: w.rarebitRoot }),
    sessionRoot: (api, w, v) => api.rarebitMaterializationPath(w.sessionFile, { ...w.base, sessionRoot: v }),
    rarebitRoot: (api, w, v) => api.rarebitMaterializationPath(w.sessionFile, { ...w.base, rarebitRoot: v }),
    allowExternalSession: (api, w, v) => api.rarebitMaterializationPath(w.sessionFile, { ...w.base, allowExternalSession: v }),
    options: (api, w, v) => api.rarebitMaterializationPath(w.sessionFile, v)
  },
  current: {
    sessionFile: (api, w, v) => api.readRarebitCurrent({ ...w.base, sessionFile: v }),
    sessionRoot: (api, w, v) => api.readRarebitCurrent({ ...w.base, sessionRoot: v }),
    rarebitRoot: (api, w, v) => api.readRarebitCurrent({ ...w.base, rarebitRoot: v }),
    native: (api, w, v) => api.readRarebitCurrent({ ...w.base, native: v }),
    expectation: (api, w, v) => api.readRarebitCurrent({ ...w.base, expectation: v }),
    deadlineExpired: (api, w, v) => api.readRarebitCurrent({ ...w.base, expectation: "agent_settled", deadlineExpired: v }),
    allowExternalSession: (api, w, v) => api.readRarebitCurrent({ ...w.base, allowExternalSession: v }),
    options: (api, w, v) => api.readRarebitCurrent(v)
  },
  history: {
    sessionFile: (api, w, v) => api.readRarebitHistory({ ...w.base, sessionFile: v }),
    sessionRoot: (api, w, v) => api.readRarebitHistory({ ...w.base, sessionRoot: v }),
    rarebitRoot: (api, w, v) => api.readRarebitHistory({ ...w.base, rarebitRoot: v }),
    fromOffset: (api, w, v) => api.readRarebitHistory({ ...w.base, fromOffset: v }),
    limit: (api, w, v) => api.readRarebitHistory({ ...w.base, limit: v }),
    options: (api, w, v) => api.readRarebitHistory(v)
  },
  reserve: {
    jobId: (api, w, v) => reserve(api, w, { jobId: v }),
    sessionFile: (api, w, v) => reserve(api, w, { sessionFile: v }),
    sessionRoot: (api, w, v) => reserve(api, w, { sessionRoot: v }),
    rarebitRoot: (api, w, v) => reserve(api, w, { rarebitRoot: v }),
    leaseMs: (api, w, v) => reserve(api, w, { leaseMs: v }),
    now: (api, w, v) => reserve(api, w, { now: v }),
    native: (api, w, v) => reserve(api, w, { native: v }),
    hooks: (api, w, v) => reserve(api, w, { hooks: v }),
    allowExternalSession: (api, w, v) => reserve(api, w, { allowExternalSession: v }),
    options: (api, w, v) => api.reserveRarebitJob(v)
  },
  // A reservation made with the hostile value, then settled or released.
  reserveThenSettle: callsFor(
    ["sessionFile", "sessionRoot", "rarebitRoot", "allowExternalSession", "hooks", "native"],
    (slot) => async (api, w, v) => api.settleRarebitJob(await reserve(api, w, { [slot]: v }), receipt())
  ),
  reserveThenRelease: callsFor(
    ["sessionFile", "sessionRoot", "rarebitRoot"],
    (slot) => async (api, w, v) => api.releaseRarebitJob(await reserve(api, w, { [slot]: v }))
  ),
  settle: {
    reservation: (api, _w, v) => api.settleRarebitJob(v, receipt()),
    record: async (api, w, v) => api.settleRarebitJob(await reserve(api, w), v),
    ...callsFor(
      ["claimPath", "leaseToken", "materializationPath", "sessionFile", "rarebitRoot", "sessionRoot", "jobId", "native"],
      (field) => async (api, w, v) => api.settleRarebitJob({ ...(await reserve(api, w)), [field]: v }, receipt())
    )
  },
  release: {
    reservation: (api, _w, v) => api.releaseRarebitJob(v),
    ...callsFor(
      ["claimPath", "leaseToken", "materializationPath", "jobId"],
      (field) => async (api, w, v) => api.releaseRarebitJob({ ...(await reserve(api, w)), [field]: v })
    )
  },
  resolveSession: {
    reference: (api, w, v) => api.resolveRarebitSessionFile(v, { sessionRoot: w.sessionRoot }),
    sessionRoot: (api, _w, v) => api.resolveRarebitSessionFile("s1", { sessionRoot: v }),
    options: (api, _w, v) => api.resolveRarebitSessionFile("s1", v)
  },
  readSession: {
    reference: (api, w, v) => api.readRarebitSession(v, { sessionRoot: w.sessionRoot }),
    sessionRoot: (api, _w, v) => api.readRarebitSession("s1", { sessionRoot: v }),
    options: (api, _w, v) => api.readRarebitSession("s1", v)
  }
}

if (mode === "--list") {
  rmSync(scratch, { recursive: true, force: true })
  console.log(JSON.stringify({
    values: Object.keys(VALUES),
    calls: Object.fromEntries(Object.entries(CALLS).map(([fn, slots]) => [fn, Object.keys(slots)]))
  }))
  process.exit(0)
}

// ---------------------------------------------------------------------------
// outcomes, made comparable
// ---------------------------------------------------------------------------

const TOKEN = /\b[a-f0-9]{48}\b/g

/** @param {string} root @returns {Mask} */
const masker = (root) => (text) =>
  text
    .replaceAll(root, "<root>")
    .replaceAll(relative(cwd, root), "<relative root>")
    .replaceAll(cwd, "<cwd>")
    .replaceAll(home, "<home>")
    .replace(TOKEN, "<token>")

/**
 * A JSON-safe copy of a result, with world paths and tokens masked.
 * @param {unknown} value
 * @param {Mask} mask
 */
const comparableValue = (value, mask) => {
  /** @type {Set<object>} */
  const seen = new Set()
  /** @param {unknown} item @param {string} [key] @returns {unknown} */
  const visit = (item, key) => {
    if (key === "hooks" && item !== null && item !== undefined) return "<hooks>"
    switch (typeof item) {
      case "string":
        return mask(item)
      case "bigint":
      case "symbol":
      case "function":
        return `<${typeof item}>`
      case "undefined":
        return "<undefined>"
      case "number":
        return Number.isFinite(item) ? item : String(item)
      case "object": {
        if (item === null) return null
        if (seen.has(item)) return "<cycle>"
        seen.add(item)
        if (item instanceof Map) return { "<map>": visit([...item.entries()]) }
        if (Array.isArray(item)) return item.map((element) => visit(element))
        return Object.fromEntries(Object.entries(item).map(([k, v]) => [k, visit(v, k)]))
      }
      default:
        return item
    }
  }
  return visit(value)
}

/**
 * Files a call left in the world, the working directory and HOME, by masked path.
 * @param {World} w
 * @param {Mask} mask
 */
const filesLeft = (w, mask) => {
  /** @type {Record<string, string>} */
  const files = {}
  /** @param {string} directory */
  const walk = (directory) => {
    /** @type {Array<Dirent>} */
    let entries
    try {
      entries = readdirSync(directory, { withFileTypes: true })
    } catch {
      return
    }
    for (const entry of entries) {
      const full = join(directory, entry.name)
      if (full === join(w.sessionRoot)) continue
      if (entry.isDirectory()) {
        walk(full)
        continue
      }
      let content = readFileSync(full, "utf8")
      if (entry.name.endsWith(".json")) {
        try {
          const parsed = /** @type {unknown} */ (JSON.parse(content))
          if (typeof parsed === "object" && parsed !== null) {
            const claim = /** @type {Record<string, unknown>} */ (parsed)
            delete claim.sidecarOffset
            // A claim stamped with the clock (no `now` given) is only as old as the run.
            if (Date.now() - Date.parse(String(claim.claimedAt)) < 3_600_000) claim.claimedAt = "<now>"
            content = JSON.stringify(claim)
          }
        } catch {}
      }
      files[mask(full)] = `${(lstatSync(full).mode & 0o777).toString(8)} ${mask(content)}`
    }
  }
  for (const directory of [w.root, cwd, home]) walk(directory)
  return files
}

/**
 * @param {HostileApi} api
 * @param {ResolvedCase} testCase
 * @returns {Promise<Outcome>}
 */
const run = async (api, testCase) => {
  const w = makeWorld()
  const mask = masker(w.root)
  /** @type {CallOutcome} */
  let outcome
  try {
    const value = await testCase.call(api, w, testCase.value(w))
    outcome = { ok: true, value: comparableValue(value, mask) }
  } catch (error) {
    // A primitive reads as its wrapper, as `error?.constructor` would.
    const fields = error === null || error === undefined
      ? undefined
      : /** @type {{ readonly constructor?: { readonly name?: unknown }; readonly code?: unknown; readonly message?: unknown }} */ (error)
    outcome = {
      ok: false,
      errorClass: fields?.constructor?.name ?? typeof error,
      code: fields?.code ?? null,
      message: mask(String(fields?.message ?? error))
    }
  }
  const files = filesLeft(w, mask)
  const traps = [
    join(w.sessionRoot, "denied"),
    join(w.root, "denied-rarebit"),
    join(w.root, "readonly-rarebit"),
    join(w.root, "readonly-jobs", "jobs-v4"),
    join(w.root, "readonly-sidecars", "materializations-v4", "p")
  ]
  for (const trap of traps) {
    chmodSync(trap, 0o700)
  }
  rmSync(w.root, { recursive: true, force: true })
  for (const directory of [cwd, home]) {
    for (const name of readdirSync(directory)) rmSync(join(directory, name), { recursive: true, force: true })
  }
  return { ...outcome, files }
}

/** A case with its call and value looked up. @typedef {{ readonly case: Case; readonly call: Call; readonly value: HostileValue }} ResolvedCase */

/**
 * @template T
 * @param {Readonly<Record<string, T>>} table
 * @param {unknown} name
 * @returns {T | undefined}
 */
const entryNamed = (table, name) => (typeof name === "string" && Object.hasOwn(table, name) ? table[name] : undefined)

/**
 * The cases on stdin, looked up before any runs: a name that is not in
 * `--list` stops the driver rather than failing alike on both sides.
 * @param {unknown} input
 * @returns {Array<ResolvedCase>}
 */
const resolveCases = (input) => {
  if (!Array.isArray(input)) throw new Error(`stdin is not a JSON array of cases: ${JSON.stringify(input)}`)
  return input.map((/** @type {unknown} */ item) => {
    const named = typeof item === "object" && item !== null
      ? /** @type {{ readonly fn?: unknown; readonly slot?: unknown; readonly value?: unknown }} */ (item)
      : {}
    const call = entryNamed(entryNamed(CALLS, named.fn) ?? {}, named.slot)
    const value = entryNamed(VALUES, named.value)
    if (call === undefined || value === undefined) throw new Error(`not a case of --list: ${JSON.stringify(item)}`)
    return { case: /** @type {Case} */ (item), call, value }
  })
}

/** @type {Array<Buffer>} */
const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
try {
  for (const testCase of resolveCases(JSON.parse(Buffer.concat(chunks).toString("utf8")))) {
    const ours = await run(implementations.ours, testCase)
    const reference = await run(implementations.reference, testCase)
    console.log(JSON.stringify({ case: testCase.case, ours, reference }))
  }
} finally {
  rmSync(scratch, { recursive: true, force: true })
}
