#!/usr/bin/env node
/**
 * Runs the reference package's own test suite twice: once as shipped (the
 * baseline) and once with its store module replaced by a re-export of this
 * project's built Promise API (`dist/promise/index.js`). Every test the
 * baseline passes must pass with our store too.
 *
 * Each run works on a private copy of the reference package (`src/`,
 * `test/`, `schemas/`, `bin/`, `package.json`) in a temporary directory, with
 * `node_modules` pointing at this project's, and runs `node --test` on it
 * with the Node that runs this script.
 *
 * The installed `@earendil-works/pi-ai` may lack the `./compat` subpath the
 * reference's extension imports, which makes every test file that imports
 * the extension fail to load before a single test runs (on Node 20 and 22
 * alike). In that case the copy's `node_modules` links every package of ours
 * except that one, which is replaced by a stub exporting only `complete`
 * (the tests script their model calls and never reach it). `--no-pi-ai-stub`
 * links `node_modules` as is instead.
 *
 * Usage: node scripts/reference-store-tests.mjs [--no-pi-ai-stub] [--verbose]
 * Exit status: 0 when the replaced run fails no test the baseline passes,
 * 1 when it does, 2 when the suite could not be run at all.
 */
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { cp, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { dirname, isAbsolute, join, relative, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..")
const projectModules = join(projectRoot, "node_modules")
const referenceRoot = join(projectModules, "@hypercarrier", "rarebit")
const ourPromiseApi = join(projectRoot, "dist", "promise", "index.js")
const COPIED = ["src", "test", "schemas", "bin", "package.json"]

/** Every name the reference store module exports; the replacement must export the same. */
const STORE_EXPORTS = [
  "DEFAULT_RAREBIT_ROOT",
  "DEFAULT_RAREBIT_SESSION_ROOT",
  "DEFAULT_RAREBIT_LEASE_MS",
  "RAREBIT_SIDECAR_PROTOCOL_VERSION",
  "rarebitMaterializationPath",
  "readRarebitCurrent",
  "readRarebitHistory",
  "reserveRarebitJob",
  "settleRarebitJob",
  "releaseRarebitJob"
]

const args = new Set(process.argv.slice(2))
const useStub = !args.has("--no-pi-ai-stub")
const verbose = args.has("--verbose")

/** @param {string} message @returns {never} */
const fail = (message) => {
  console.error(`reference-store-tests: ${message}`)
  process.exit(2)
}

// A node:test reporter that emits one JSON line per finished test, so the
// two runs can be compared test by test rather than by counts.
const REPORTER = `
export default async function* reporter(source) {
  for await (const event of source) {
    if (event.type === "test:stderr") {
      yield JSON.stringify({ status: "stderr", file: event.data.file ?? null, message: String(event.data.message) }) + "\\n"
      continue
    }
    if (event.type !== "test:pass" && event.type !== "test:fail") continue
    const data = event.data
    if (data.details?.type === "suite") continue
    const error = data.details?.error
    yield JSON.stringify({
      status: event.type === "test:pass" ? "pass" : "fail",
      name: data.name,
      file: data.file ?? null,
      nesting: data.nesting,
      error: error ? String(error.cause?.message ?? error.message ?? error).slice(0, 400) : null
    }) + "\\n"
  }
}
`

const PI_AI_STUB_PACKAGE = JSON.stringify({
  name: "@earendil-works/pi-ai",
  version: "0.0.0-reference-store-tests-stub",
  type: "module",
  exports: { "./compat": "./compat.mjs" }
})

const PI_AI_STUB = `export async function complete() {
  throw new Error("pi-ai stub: the reference tests must script their model calls")
}
`

const piAiHasCompat = async () => {
  const manifest = join(projectModules, "@earendil-works", "pi-ai", "package.json")
  if (!existsSync(manifest)) return false
  const exports = JSON.parse(await readFile(manifest, "utf8")).exports
  return typeof exports === "object" && exports !== null && "./compat" in exports
}

/**
 * `node_modules` of a copy: the project's, with pi-ai stubbed when it lacks `./compat`.
 * @param {string} dir
 * @param {boolean} stub
 */
const linkModules = async (dir, stub) => {
  const target = join(dir, "node_modules")
  if (!stub) return symlink(projectModules, target, "dir")
  await mkdir(target)
  for (const name of await readdir(projectModules)) {
    if (name === "@earendil-works") continue
    await symlink(join(projectModules, name), join(target, name))
  }
  const scope = join(target, "@earendil-works")
  await mkdir(scope)
  const earendil = join(projectModules, "@earendil-works")
  if (existsSync(earendil)) {
    for (const name of await readdir(earendil)) {
      if (name !== "pi-ai") await symlink(join(earendil, name), join(scope, name))
    }
  }
  await mkdir(join(scope, "pi-ai"))
  await writeFile(join(scope, "pi-ai", "package.json"), PI_AI_STUB_PACKAGE)
  await writeFile(join(scope, "pi-ai", "compat.mjs"), PI_AI_STUB)
}

/** @param {string} label @param {boolean} replaceStore @param {boolean} stub */
const prepare = async (label, replaceStore, stub) => {
  const dir = await mkdtemp(join(tmpdir(), `rarebit-reference-${label}-`))
  for (const name of COPIED) {
    const from = join(referenceRoot, name)
    if (existsSync(from)) await cp(from, join(dir, name), { recursive: true })
  }
  await linkModules(dir, stub)
  await writeFile(join(dir, "json-lines-reporter.mjs"), REPORTER)
  if (replaceStore) {
    const url = pathToFileURL(ourPromiseApi).href
    await writeFile(
      join(dir, "src", "rarebit-store.mjs"),
      `// Replaced by reference-store-tests: the store is rarebit-store's Promise API.\n` +
        `export {\n  ${STORE_EXPORTS.join(",\n  ")}\n} from ${JSON.stringify(url)};\n`
    )
  }
  return dir
}

/**
 * One `node --test` run of a copy's test files, its output collected.
 * @param {string} dir
 * @returns {Promise<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }>}
 */
const runSuite = (dir) =>
  new Promise((resolveRun, rejectRun) => {
    readdir(join(dir, "test")).then((names) => {
      const files = names.filter((name) => name.endsWith(".test.mjs")).sort().map((name) => join("test", name))
      const child = spawn(
        process.execPath,
        // Several files at once: each test process spends most of its time loading modules.
        [
          "--test",
          "--test-concurrency=4",
          "--test-reporter=./json-lines-reporter.mjs",
          "--test-reporter-destination=stdout",
          ...files
        ],
        { cwd: dir, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, NODE_OPTIONS: "" } }
      )
      let stdout = ""
      let stderr = ""
      child.stdout.on("data", (chunk) => (stdout += chunk))
      child.stderr.on("data", (chunk) => (stderr += chunk))
      child.on("error", rejectRun)
      child.on("close", (code) => resolveRun({ code, stdout, stderr }))
    }, rejectRun)
  })

/**
 * One line of the reporter above.
 * @typedef {{
 *   readonly status: "stderr"
 *   readonly file: string | null
 *   readonly message: string
 * } | {
 *   readonly status: "pass" | "fail"
 *   readonly name: string
 *   readonly file: string | null
 *   readonly nesting?: number
 *   readonly error: string | null
 * }} ReporterEvent
 */

/** @typedef {Extract<ReporterEvent, { readonly status: "pass" | "fail" }>} TestResult */

/**
 * Test results keyed by file and name, with paths made relative to the copy.
 * @param {string} dir
 * @param {string} stdout
 * @returns {Map<string, TestResult>}
 */
const parseResults = (dir, stdout) => {
  /** @type {Array<ReporterEvent>} */
  const events = stdout.split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line))
  /** @param {ReporterEvent} event */
  const fileOf = (event) => {
    if (!event.file) return "?"
    const file = event.file.startsWith("file:") ? fileURLToPath(event.file) : event.file
    return isAbsolute(file) ? relative(dir, file) : file
  }
  /** @type {Map<string, string>} */
  const stderr = new Map()
  for (const event of events) {
    if (event.status === "stderr") stderr.set(fileOf(event), (stderr.get(fileOf(event)) ?? "") + event.message)
  }
  /** @type {Map<string, TestResult>} */
  const results = new Map()
  for (const event of events) {
    if (event.status === "stderr") continue
    const file = fileOf(event)
    const name = typeof event.name === "string" && event.name.startsWith(dir) ? relative(dir, event.name) : event.name
    // A file that fails to load reports only "test failed"; its stderr says why.
    const why = name === file ? /^\w*Error.*$/m.exec(stderr.get(file) ?? "")?.[0] : undefined
    results.set(`${file} :: ${"  ".repeat(event.nesting ?? 0)}${name}`, why ? { ...event, error: why } : event)
  }
  return results
}

/** @param {ReadonlyMap<string, TestResult>} results */
const counts = (results) => {
  let passed = 0
  let failed = 0
  for (const { status } of results.values()) {
    if (status === "pass") passed++
    else failed++
  }
  return { passed, failed }
}

const main = async () => {
  if (!existsSync(referenceRoot)) fail(`reference package not installed at ${referenceRoot}`)
  if (!existsSync(ourPromiseApi)) fail(`${ourPromiseApi} is missing; run \`npm run build\` first`)
  const stub = useStub && !(await piAiHasCompat())
  if (stub) {
    console.log("note: the installed @earendil-works/pi-ai has no ./compat export; both runs use a stub for it")
  }
  console.log(`node ${process.version}`)

  const [baselineDir, replacedDir] = await Promise.all([
    prepare("baseline", false, stub),
    prepare("replaced", true, stub)
  ])
  try {
    // One after the other: the reference's suite has timing assertions (a
    // reserve must still be waiting 25 ms later), and two suites sharing two
    // CPUs made those flake on either side, which read as a regression of ours
    // whenever the replaced run was the unlucky one.
    const baselineRun = await runSuite(baselineDir)
    const replacedRun = await runSuite(replacedDir)
    const baseline = parseResults(baselineDir, baselineRun.stdout)
    const replaced = parseResults(replacedDir, replacedRun.stdout)
    if (baseline.size === 0) {
      console.error(`reference-store-tests: the baseline run reported no tests\n${baselineRun.stderr}`)
      process.exitCode = 2
      return
    }
    const b = counts(baseline)
    const r = counts(replaced)
    console.log(`baseline (reference store): ${b.passed} passed, ${b.failed} failed`)
    console.log(`replaced (rarebit-store):   ${r.passed} passed, ${r.failed} failed`)

    const regressions = []
    for (const [key, event] of baseline) {
      if (event.status !== "pass") continue
      const after = replaced.get(key)
      if (after === undefined) regressions.push({ key, error: "did not run with the replaced store" })
      else if (after.status !== "pass") regressions.push({ key, error: after.error })
    }
    const failingBoth = [...baseline].filter(([key, event]) =>
      event.status !== "pass" && replaced.get(key)?.status !== "pass"
    )
    const fixed = [...baseline].filter(([key, event]) =>
      event.status !== "pass" && replaced.get(key)?.status === "pass"
    )
    if (failingBoth.length > 0 || verbose) {
      for (const [key, event] of failingBoth) console.log(`  fails in both runs: ${key}: ${event.error ?? ""}`)
    }
    for (const [key] of fixed) console.log(`  fails only in the baseline: ${key}`)
    if (regressions.length > 0) {
      console.log(`FAILED: ${regressions.length} test(s) pass with the reference store but not with ours:`)
      for (const { key, error } of regressions) console.log(`  ${key}: ${error ?? ""}`)
      if (verbose) console.log(replacedRun.stderr)
      process.exitCode = 1
    } else {
      console.log("OK: every test the baseline passes also passes with rarebit-store's store")
    }
  } finally {
    await Promise.all([baselineDir, replacedDir].map((dir) => rm(dir, { recursive: true, force: true })))
  }
}

main().catch((/** @type {unknown} */ error) => {
  const stack = error === null || error === undefined
    ? undefined
    : /** @type {{ readonly stack?: unknown }} */ (error).stack
  fail(String(stack ?? error))
})
