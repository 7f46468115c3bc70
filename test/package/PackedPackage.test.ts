/**
 * The newcomer's path, tested: pack this package, install the tarball into a
 * fresh project (`npm ci` offline, from the npm cache) with its Effect
 * peers, copy the README's examples in, and there type-check them, run the
 * Effect program, the Promise script, the watch script and the example's
 * `@effect/vitest` test, and the `rarebit-store` bin, all from the installed
 * package.
 *
 * Packing skips the `prepare` build (`--ignore-scripts`): `npm test` has just
 * built `dist/` (the run's global setup checks it is current), and a rebuild
 * here would rewrite files other test files are loading. The git-install test runs `prepare` in a clone of its own.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { mkdtemp, readFile, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { report } from "../support/TestReport.js"
import {
  cleanEnv,
  copyExamples,
  installedCopies,
  installFreshProject,
  integrityOf,
  REPO,
  runOk
} from "./FreshProject.js"

const SESSION = "sessions/demo/first-session.jsonl"
const LINE_OF_JOB = /^summary job ([0-9a-f]{64}): (\w+)$/m
const WATCH_MISSING = "current: missing (sidecar_missing), awaiting_artifacts: null"
const WATCH_CREATED_EMPTY = "current: missing (sidecar_empty), awaiting_artifacts: null"
const WATCH_AVAILABLE = "current: available, assessment_current: A conversation of 3 messages."

interface Packed {
  readonly filename: string
  readonly size: number
  readonly unpackedSize: number
  readonly entryCount: number
  readonly files: ReadonlyArray<{ readonly path: string }>
}

let temp = ""
let project = ""
let packed: Packed
let installed = ""

const node = (args: ReadonlyArray<string>) => runOk(process.execPath, args, project)
const jobLine = (stdout: string) => {
  const match = LINE_OF_JOB.exec(stdout)
  assert.isNotNull(match, `no job line in:\n${stdout}`)
  return { jobId: match![1]!, outcome: match![2]! }
}

describe("the packed package in a fresh project", { concurrent: false }, () => {
  beforeAll(async () => {
    temp = await mkdtemp(join(tmpdir(), "rarebit-pack-"))
    const pack = await runOk("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", temp], REPO)
    packed = JSON.parse(pack.stdout)[0]
    project = join(temp, "project")
    const tarball = join(temp, packed.filename)
    await installFreshProject(project, `file:${tarball}`, {
      resolved: `file:${tarball}`,
      integrity: await integrityOf(tarball)
    })
    installed = join(project, "node_modules", "rarebit-store")
    await copyExamples(project)
    // Measured figures, for BENCHMARKS-style reporting; the assertions are below.
    report(
      "packed-package",
      `packed ${packed.filename}: ${packed.size} bytes, ${packed.entryCount} files, ${packed.unpackedSize} bytes unpacked`
    )
  }, 240_000)

  afterAll(async () => {
    if (temp !== "") await rm(temp, { recursive: true, force: true })
  })

  it("ships dist with the sources its maps point to, the examples and the README, and nothing else", async () => {
    const files = packed.files.map((file) => file.path)
    const allowed = /^(dist\/|src\/|examples\/|README\.md$|package\.json$)/
    assert.deepStrictEqual(files.filter((file) => !allowed.test(file)), [])
    for (
      const file of [
        "dist/index.js",
        "dist/promise/index.d.ts",
        "dist/testing/index.js",
        "examples/main.ts",
        "dist/cli/main.bundle.cjs",
        "dist/cli/main.bundle.cjs.map",
        "dist/promise/index.bundle.cjs",
        "dist/promise/index.bundle.cjs.map"
      ]
    ) {
      assert.include(files, file)
    }
    // No output without its source: a stale build would ship modules nobody maintains.
    const built = files.filter((file) => file.startsWith("dist/") && file.endsWith(".js"))
    assert.isAbove(built.length, 50)
    const orphans = built.filter((file) => !files.includes(file.replace(/^dist\//, "src/").replace(/\.js$/, ".ts")))
    assert.deepStrictEqual(orphans, [])
    for (const map of files.filter((file) => file.endsWith(".map"))) {
      const { sources } = JSON.parse(await readFile(join(installed, map), "utf8")) as { sources: Array<string> }
      for (const source of sources) {
        const target = join(installed, map, "..", source)
        assert.isTrue(existsSync(target), `${map} points to ${source}, which is not in the package`)
      }
    }
    assert.isTrue((await readFile(join(installed, "dist/cli/main.js"), "utf8")).startsWith("#!/usr/bin/env node\n"))
  })

  it("shares one copy of Effect with the user's program: effect and platform-node are peers", async () => {
    assert.lengthOf(await installedCopies(project, "effect"), 1)
    assert.lengthOf(await installedCopies(project, "@effect/platform-node"), 1)
    const manifest = JSON.parse(await readFile(join(installed, "package.json"), "utf8"))
    assert.isUndefined(manifest.dependencies)
    assert.hasAllKeys(manifest.peerDependencies, ["effect", "@effect/platform-node"])
  })

  it("the bin and the Promise API start from their bundles; the Effect entries import the user's Effect", async () => {
    const text = (file: string) => readFile(join(installed, file), "utf8")
    for (
      const [launcher, bundle] of [["dist/cli/main.js", "main.bundle.cjs"], [
        "dist/promise/index.js",
        "index.bundle.cjs"
      ]]
    ) {
      const code = await text(launcher!)
      // One module to load: the launcher imports nothing, it runs its bundle.
      assert.notMatch(code, /^\s*import\s/m, launcher)
      assert.include(code, `new URL("./${bundle}", import.meta.url)`, launcher)
    }
    for (const bundle of ["dist/cli/main.bundle.cjs", "dist/promise/index.bundle.cjs"]) {
      const required = [...(await text(bundle)).matchAll(/require\((["`])([^"`]+)\1\)/g)].map((match) => match[2]!)
      assert.isAbove(required.length, 0)
      assert.deepStrictEqual(required.filter((name) => !name.startsWith("node:") && name !== "url"), [], bundle)
    }
    assert.match(await text("dist/store/RarebitStore.js"), /from "effect"/)
    assert.match(await text("dist/testing/MemoryStore.js"), /from "effect"/)
  })

  it("promises no Node version that a runtime dependency refuses", async () => {
    const manifestOf = async (name: string) =>
      JSON.parse(await readFile(join(project, "node_modules", name, "package.json"), "utf8"))
    const ours = JSON.parse(await readFile(join(installed, "package.json"), "utf8"))
    const minimum = (range: string, owner: string): [number, number, number] => {
      const match = /^>=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(range.trim())
      assert.isNotNull(match, `${owner} engines.node "${range}" is not a plain lower bound; compare it by hand`)
      return [Number(match![1]), Number(match![2] ?? 0), Number(match![3] ?? 0)]
    }
    const atLeast = (a: ReadonlyArray<number>, b: ReadonlyArray<number>) =>
      a[0]! !== b[0]! ? a[0]! > b[0]! : a[1]! !== b[1]! ? a[1]! > b[1]! : a[2]! >= b[2]!
    const promised = minimum(ours.engines.node, "rarebit-store")
    // Everything the package loads at run time: its peers and, transitively, their dependencies.
    const seen = new Set<string>()
    const pending = Object.keys(ours.peerDependencies)
    while (pending.length > 0) {
      const name = pending.pop()!
      if (seen.has(name)) continue
      seen.add(name)
      const manifest = await manifestOf(name)
      const required = manifest.engines?.node
      if (required !== undefined) {
        assert.isTrue(
          atLeast(promised, minimum(required, name)),
          `rarebit-store promises Node ${ours.engines.node}, but ${name} requires ${required}`
        )
      }
      const optional = new Set(
        Object.keys(manifest.peerDependenciesMeta ?? {}).filter((peer) => manifest.peerDependenciesMeta[peer].optional)
      )
      for (
        const next of [...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.peerDependencies ?? {})]
      ) {
        if (!optional.has(next)) pending.push(next)
      }
    }
    assert.include([...seen], "undici")
  })

  it("type-checks the examples against the installed package", async () => {
    await runOk(join(project, "node_modules", ".bin", "tsc"), ["-p", "."], project)
    assert.isTrue(existsSync(join(project, "out", "main.js")))
  }, 60_000)

  it("the Effect example settles a summary once, then finds the job done", async () => {
    const first = await node(["out/main.js", SESSION, "sessions", "rarebit"])
    assert.strictEqual(jobLine(first.stdout).outcome, "Settled")
    assert.include(first.stdout, "current: available, assessment_current: A conversation of 3 messages.")
    // The README shows this run's output line for line.
    const readme = await readFile(join(REPO, "README.md"), "utf8")
    for (const line of first.stdout.trimEnd().split("\n")) assert.include(readme, `\n# ${line}\n`)
    const again = await node(["out/main.js", SESSION, "sessions", "rarebit"])
    assert.deepStrictEqual(jobLine(again.stdout), { ...jobLine(first.stdout), outcome: "Duplicate" })
  }, 60_000)

  it("the Promise example computes the same job: done on that root, settled on a fresh one", async () => {
    const effectJob = jobLine((await node(["out/main.js", SESSION, "sessions", "rarebit"])).stdout).jobId
    const onSameRoot = await node(["out/promise.js", SESSION, "sessions", "rarebit"])
    assert.deepStrictEqual(jobLine(onSameRoot.stdout), { jobId: effectJob, outcome: "Duplicate" })
    const onFreshRoot = await node(["out/promise.js", SESSION, "sessions", "rarebit-promise"])
    assert.deepStrictEqual(jobLine(onFreshRoot.stdout), { jobId: effectJob, outcome: "Settled" })
    assert.include(onFreshRoot.stdout, "current: available, assessment_current: A conversation of 3 messages.")
  }, 60_000)

  it("the watch example prints the state, then the summary another process settles, and ends", async () => {
    const watcher = spawn(process.execPath, ["out/watch.js", SESSION, "sessions", "rarebit-watch"], {
      cwd: project,
      env: cleanEnv(),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    watcher.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk))
    const ended = new Promise<number | null>((resolve) => watcher.on("close", resolve))
    await new Promise<void>((resolve) =>
      watcher.stdout.setEncoding("utf8").on("data", (chunk) => {
        stdout += chunk
        if (stdout.includes("\n")) resolve()
      })
    )
    assert.strictEqual(stdout, `${WATCH_MISSING}\n`)
    const settled = await node(["out/promise.js", SESSION, "sessions", "rarebit-watch"])
    assert.strictEqual(jobLine(settled.stdout).outcome, "Settled")
    assert.strictEqual(await ended, 0, stderr)
    // A settle creates the sidecar, then writes its receipt and head: a read in between sees it empty, a state
    // of its own, emitted when the watch happens to read then. Nothing else may come between.
    assert.oneOf(stdout, [
      `${WATCH_MISSING}\n${WATCH_AVAILABLE}\n`,
      `${WATCH_MISSING}\n${WATCH_CREATED_EMPTY}\n${WATCH_AVAILABLE}\n`
    ])
  }, 60_000)

  it("the example's @effect/vitest test passes on the in-memory store", async () => {
    const tested = await runOk(
      join(project, "node_modules", ".bin", "vitest"),
      ["run", "SummaryWorker.test.ts"],
      project
    )
    assert.match(tested.stdout, /Tests\s+.*1 passed/)
  }, 60_000)

  it("the rarebit-store bin reports its version and reads the settled summary", async () => {
    const bin = join(project, "node_modules", ".bin", "rarebit-store")
    const version = JSON.parse(await readFile(join(REPO, "package.json"), "utf8")).version
    assert.include((await runOk(bin, ["--version"], project)).stdout, version)
    const current = await runOk(bin, [
      "current",
      "--json",
      "--session",
      SESSION,
      "--root",
      "rarebit",
      "--session-root",
      "sessions"
    ], project)
    const read = JSON.parse(current.stdout)
    assert.strictEqual(read.availability, "available")
    assert.strictEqual(read.receipt.summary, "A conversation of 3 messages.")
  }, 60_000)
})
