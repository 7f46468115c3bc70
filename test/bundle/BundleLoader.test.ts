/**
 * The bundled entries as built (`dist/cli/main.js`, `dist/promise/index.js`)
 * and the code cache they start from, in processes of their own, each with
 * a cache directory of its own (`RAREBIT_STORE_CODE_CACHE`).
 *
 * What must hold: the launchers expose exactly the entries' API; a first run
 * writes a cache that later runs use as it is; a cache that does not fit
 * (damaged, cut short) never changes what a run does and is replaced; no
 * cache is used or written in a directory other users may write to, or when
 * caching is turned off; each command of the executable has a cache of its
 * own; a directory keeps four caches per bundle; and under
 * `--enable-source-maps` stack traces point into `src/`.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { commandVariant } from "../../src/bundle/BundleLoader.js"
import * as SourcePromiseApi from "../../src/promise/index.js"
import { CLI, REPO, rootFlags, settleWith } from "../cli/CliHarness.js"
import { entry, makeRoots, type Roots, summaryReceipt, writeSession } from "../support/Reference.js"

const PROMISE_API = join(REPO, "dist", "promise", "index.js")

let roots: Roots
let scratch = ""
let directoryCount = 0

interface Ran {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const run = (args: ReadonlyArray<string>, env: Record<string, string>): Promise<Ran> =>
  new Promise((resolve) =>
    execFile(
      process.execPath,
      args,
      { cwd: REPO, env: { ...process.env, NO_COLOR: "1", ...env } },
      (error, stdout, stderr) =>
        resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })
    )
  )

/** A new, empty cache directory (0700, as the loader makes them). */
const cacheDirectory = async () => {
  const directory = join(scratch, `cache-${directoryCount++}`)
  await mkdir(directory, { mode: 0o700 })
  return directory
}

const current = (cache: string, extra: Record<string, string> = {}) =>
  run([CLI, "current", "--session", roots.sessionFile, "--json", ...rootFlags(roots)], {
    RAREBIT_STORE_CODE_CACHE: cache,
    ...extra
  })

const cachesIn = async (directory: string) =>
  (await readdir(directory)).filter((name) => name.endsWith(".v8cache")).sort()

const identity = async (file: string) => {
  const info = await stat(file)
  return { ino: info.ino, mtimeMs: info.mtimeMs, size: info.size }
}

beforeAll(async () => {
  roots = await makeRoots("rarebit-bundle-")
  scratch = await mkdtemp(join(tmpdir(), "rarebit-code-cache-"))
  const branch = [entry("u1", "user", "a question"), entry("a1", "assistant", "an answer")]
  await writeSession(roots.sessionFile, "bundle-session", branch)
  await settleWith("ours", roots, roots.sessionFile, 1, summaryReceipt(branch, "bundle-session"))
})

afterAll(async () => {
  await roots?.cleanup()
  if (scratch !== "") await rm(scratch, { recursive: true, force: true })
})

describe("commandVariant", () => {
  it("is the first argument naming a command, else other", () => {
    const commands = ["current", "history"]
    assert.strictEqual(commandVariant(["--json", "history", "--session", "current"], commands), "history")
    assert.strictEqual(commandVariant(["--version"], commands), "other")
    assert.strictEqual(commandVariant([], commands), "other")
  })
})

describe("the bundled entries", () => {
  it("the Promise API's launcher exports exactly what src/promise/index.ts exports", async () => {
    const bundled = await import(pathToFileURL(PROMISE_API).href)
    assert.deepStrictEqual(Object.keys(bundled).sort(), Object.keys(SourcePromiseApi).sort())
    for (const name of Object.keys(SourcePromiseApi)) {
      const value = (SourcePromiseApi as Record<string, unknown>)[name]
      assert.strictEqual(typeof bundled[name], typeof value, name)
      if (typeof value === "function") assert.strictEqual(bundled[name].name, value.name, `${name}.name`)
      else assert.deepStrictEqual(bundled[name], value, name)
    }
  })

  it("a first run writes the cache, a later run uses it as it is, and both answer alike", async () => {
    const cache = await cacheDirectory()
    const first = await current(cache)
    assert.strictEqual(first.code, 0, first.stderr)
    const written = await cachesIn(cache)
    assert.lengthOf(written, 1)
    assert.match(written[0]!, /^main\.bundle\.cjs-current-v\d+\.\d+\.\d+-\w+-[0-9a-f]{16}-\d+-\d+\.v8cache$/)
    const before = await identity(join(cache, written[0]!))
    const second = await current(cache)
    assert.strictEqual(second.code, 0, second.stderr)
    assert.deepStrictEqual(JSON.parse(second.stdout), JSON.parse(first.stdout))
    assert.deepStrictEqual(await cachesIn(cache), written)
    // Not written again: V8 accepted it.
    assert.deepStrictEqual(await identity(join(cache, written[0]!)), before)
  })

  it("a damaged or cut-short cache changes nothing the run does, and is replaced", async () => {
    const cache = await cacheDirectory()
    const reference = await current(cache)
    assert.strictEqual(reference.code, 0, reference.stderr)
    const [name] = await cachesIn(cache)
    const file = join(cache, name!)
    const good = await readFile(file)
    for (const bad of [Buffer.alloc(good.length, 0x5a), good.subarray(0, good.length >> 1), Buffer.alloc(0)]) {
      await writeFile(file, bad)
      const ran = await current(cache)
      assert.strictEqual(ran.code, 0, ran.stderr)
      assert.strictEqual(ran.stderr, "")
      assert.deepStrictEqual(JSON.parse(ran.stdout), JSON.parse(reference.stdout))
      const rewritten = await readFile(file)
      assert.isFalse(rewritten.equals(bad), "the cache was not written anew")
      assert.isAbove(rewritten.length, 100_000)
    }
  })

  it("uses no cache in a directory other users may write to, nor when caching is off", async () => {
    const shared = await cacheDirectory()
    await chmod(shared, 0o777)
    const ran = await current(shared)
    assert.strictEqual(ran.code, 0, ran.stderr)
    assert.deepStrictEqual(await readdir(shared), [])

    const off = await cacheDirectory()
    const disabled = await current(off, { NODE_DISABLE_COMPILE_CACHE: "1" })
    assert.strictEqual(disabled.code, 0, disabled.stderr)
    assert.deepStrictEqual(await readdir(off), [])
    const alsoOff = await run([CLI, "--version"], { RAREBIT_STORE_CODE_CACHE: "off" })
    assert.strictEqual(alsoOff.code, 0, alsoOff.stderr)
  })

  it("a cache that cannot be written, nor its temporary file removed, leaves the run's exit code alone", async () => {
    // As in a user namespace whose uid owns nothing on disk: every write and removal in the cache directory fails.
    const cache = await cacheDirectory()
    const preload = join(scratch, "refuse-cache-writes.mjs")
    await writeFile(
      preload,
      [
        "import fs from \"node:fs\"",
        `const inCache = (path) => String(path).startsWith(${JSON.stringify(`${cache}/`)})`,
        "const refuse = (path) => Object.assign(new Error(`EACCES: permission denied, ${path}`), { code: \"EACCES\" })",
        "for (const name of [\"writeFileSync\", \"rmSync\", \"renameSync\"]) {",
        "  const original = fs[name]",
        "  fs[name] = function (path, ...rest) { if (inCache(path)) throw refuse(path); return original.call(this, path, ...rest) }",
        "}"
      ].join("\n")
    )
    const executable = await run([
      "--import",
      preload,
      CLI,
      "current",
      "--session",
      roots.sessionFile,
      "--json",
      ...rootFlags(roots)
    ], {
      RAREBIT_STORE_CODE_CACHE: cache
    })
    assert.strictEqual(executable.code, 0, executable.stderr)
    assert.strictEqual(executable.stderr, "")
    assert.strictEqual(JSON.parse(executable.stdout).availability, "available")
    const script = `const api = await import(${JSON.stringify(pathToFileURL(PROMISE_API).href)})
console.log(api.rarebitMaterializationPath(process.argv[1], { sessionRoot: process.argv[2], rarebitRoot: process.argv[3] }))`
    const plain = await run([
      "--import",
      preload,
      "--input-type=module",
      "-e",
      script,
      roots.sessionFile,
      roots.sessionRoot,
      roots.rarebitRoot
    ], {
      RAREBIT_STORE_CODE_CACHE: cache
    })
    assert.strictEqual(plain.code, 0, plain.stderr)
    assert.strictEqual(plain.stderr, "")
    assert.deepStrictEqual(await readdir(cache), [])
  })

  it("each command has a cache of its own; the Promise API one for all its uses", async () => {
    const cache = await cacheDirectory()
    assert.strictEqual((await current(cache)).code, 0)
    const history = await run([CLI, "history", "--session", roots.sessionFile, ...rootFlags(roots)], {
      RAREBIT_STORE_CODE_CACHE: cache
    })
    assert.strictEqual(history.code, 0, history.stderr)
    const script = `const api = await import(${JSON.stringify(pathToFileURL(PROMISE_API).href)})
const read = await api.readRarebitCurrent({ sessionFile: process.argv[1], sessionRoot: process.argv[2], rarebitRoot: process.argv[3] })
console.log(read.availability)`
    const plain = await run([
      "--input-type=module",
      "-e",
      script,
      roots.sessionFile,
      roots.sessionRoot,
      roots.rarebitRoot
    ], {
      RAREBIT_STORE_CODE_CACHE: cache
    })
    assert.strictEqual(plain.code, 0, plain.stderr)
    assert.strictEqual(plain.stdout.trim(), "available")
    const kinds = (await cachesIn(cache)).map((name) => name.split("-v")[0])
    assert.deepStrictEqual(kinds, ["index.bundle.cjs-all", "main.bundle.cjs-current", "main.bundle.cjs-history"])
  })

  it("keeps the four newest caches of a bundle for each Node, and those of other Nodes", async () => {
    const cache = await cacheDirectory()
    const prefix = `main.bundle.cjs-current-${process.version}-${process.arch}-`
    const older = ["0000000000000001", "0000000000000002", "0000000000000003", "0000000000000004"].map((build) =>
      `${prefix}${build}-1-1.v8cache`
    )
    const otherNode = `main.bundle.cjs-current-v0.0.0-${process.arch}-0000000000000009-1-1.v8cache`
    for (const [index, name] of [...older, otherNode].entries()) {
      await writeFile(join(cache, name), "stale")
      await utimes(join(cache, name), 1_000_000 + index, 1_000_000 + index)
    }
    assert.strictEqual((await current(cache)).code, 0)
    const left = await cachesIn(cache)
    assert.lengthOf(left, 5)
    assert.notInclude(left, older[0])
    assert.includeMembers(left, [...older.slice(1), otherNode])
  })

  it("under --enable-source-maps, stack traces point into src/, and no cache is written", async () => {
    const cache = await cacheDirectory()
    const script = `const api = await import(${JSON.stringify(pathToFileURL(PROMISE_API).href)})
try { await api.reserveRarebitJob({ jobId: "not a hash", sessionFile: process.argv[1], sessionRoot: process.argv[2] }) }
catch (error) { console.log(error.constructor.name); console.log(error.stack) }`
    const ran = await run([
      "--enable-source-maps",
      "--input-type=module",
      "-e",
      script,
      roots.sessionFile,
      roots.sessionRoot
    ], {
      RAREBIT_STORE_CODE_CACHE: cache
    })
    assert.strictEqual(ran.code, 0, ran.stderr)
    const [className, ...stack] = ran.stdout.trim().split("\n")
    assert.strictEqual(className, "TypeError")
    assert.match(stack.join("\n"), /\(.*\/src\/promise\/\w+\.ts:\d+:\d+\)/)
    assert.notMatch(stack.join("\n"), /\.bundle\.cjs/)
    assert.deepStrictEqual(await readdir(cache), [])
  })
})
