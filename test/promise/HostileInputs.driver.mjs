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
 * `{ fn, slot, value }` names (see `VALUES`, `CALLS`); `--list` as argv[3]
 * prints those names instead. Output: one JSON line per case,
 * `{ case, ours, reference }`, each an outcome with the files left behind.
 */
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, lstatSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"

const [repo, mode] = process.argv.slice(2)
const scratch = mkdtempSync(join(tmpdir(), "rarebit-hostile-"))
const home = join(scratch, "home")
const cwd = join(scratch, "cwd")
mkdirSync(home)
mkdirSync(cwd)
process.env.HOME = home
process.chdir(cwd)

const Ours = await import(join(repo, "dist/promise/index.js"))
const RefStore = await import(join(repo, "node_modules/@hypercarrier/rarebit/src/rarebit-store.mjs"))
const RefSession = await import(join(repo, "node_modules/@hypercarrier/rarebit/src/rarebit-session.mjs"))
const Receipts = await import(join(repo, "stress/receipts.mjs"))
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

/** Hostile values by name; functions of the world where they are paths in it. */
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

const reserve = (api, w, extra = {}) => api.reserveRarebitJob({ ...w.base, jobId: JOB, now: 1_000, ...extra })

/** Each function's argument slots: how to call it with `value` in that slot. */
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
  reserveThenSettle: Object.fromEntries(
    ["sessionFile", "sessionRoot", "rarebitRoot", "allowExternalSession", "hooks", "native"].map((slot) => [
      slot,
      async (api, w, v) => api.settleRarebitJob(await reserve(api, w, { [slot]: v }), receipt())
    ])
  ),
  reserveThenRelease: Object.fromEntries(
    ["sessionFile", "sessionRoot", "rarebitRoot"].map((slot) => [
      slot,
      async (api, w, v) => api.releaseRarebitJob(await reserve(api, w, { [slot]: v }))
    ])
  ),
  settle: {
    reservation: (api, _w, v) => api.settleRarebitJob(v, receipt()),
    record: async (api, w, v) => api.settleRarebitJob(await reserve(api, w), v),
    ...Object.fromEntries(
      ["claimPath", "leaseToken", "materializationPath", "sessionFile", "rarebitRoot", "sessionRoot", "jobId", "native"]
        .map((field) => [
          field,
          async (api, w, v) => api.settleRarebitJob({ ...(await reserve(api, w)), [field]: v }, receipt())
        ])
    )
  },
  release: {
    reservation: (api, _w, v) => api.releaseRarebitJob(v),
    ...Object.fromEntries(
      ["claimPath", "leaseToken", "materializationPath", "jobId"].map((field) => [
        field,
        async (api, w, v) => api.releaseRarebitJob({ ...(await reserve(api, w)), [field]: v })
      ])
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

const masker = (root) => (text) =>
  text
    .replaceAll(root, "<root>")
    .replaceAll(relative(cwd, root), "<relative root>")
    .replaceAll(cwd, "<cwd>")
    .replaceAll(home, "<home>")
    .replace(TOKEN, "<token>")

/** A JSON-safe copy of a result, with world paths and tokens masked. */
const comparableValue = (value, mask) => {
  const seen = new Set()
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

/** Files a call left in the world, the working directory and HOME, by masked path. */
const filesLeft = (w, mask) => {
  const files = {}
  const walk = (directory) => {
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
          const claim = JSON.parse(content)
          delete claim.sidecarOffset
          // A claim stamped with the clock (no `now` given) is only as old as the run.
          if (Date.now() - Date.parse(claim.claimedAt) < 3_600_000) claim.claimedAt = "<now>"
          content = JSON.stringify(claim)
        } catch {}
      }
      files[mask(full)] = `${(lstatSync(full).mode & 0o777).toString(8)} ${mask(content)}`
    }
  }
  for (const directory of [w.root, cwd, home]) walk(directory)
  return files
}

const run = async (api, testCase) => {
  const w = makeWorld()
  const mask = masker(w.root)
  let outcome
  try {
    const call = CALLS[testCase.fn][testCase.slot]
    const value = await call(api, w, VALUES[testCase.value](w))
    outcome = { ok: true, value: comparableValue(value, mask) }
  } catch (error) {
    outcome = {
      ok: false,
      errorClass: error?.constructor?.name ?? typeof error,
      code: error?.code ?? null,
      message: mask(String(error?.message ?? error))
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

const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
for (const testCase of JSON.parse(Buffer.concat(chunks).toString("utf8"))) {
  const ours = await run(implementations.ours, testCase)
  const reference = await run(implementations.reference, testCase)
  console.log(JSON.stringify({ case: testCase, ours, reference }))
}
rmSync(scratch, { recursive: true, force: true })
