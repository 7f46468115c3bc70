/**
 * `npm install git+file://…` of this repository into a fresh project: npm
 * clones it, installs its devDependencies in the clone, runs `prepare` (the
 * build), packs the result and installs that. Before `prepare` existed this
 * installed only README.md and package.json: no `dist/`, no bin.
 *
 * What is installed is the commit at HEAD (uncommitted changes are not in a
 * clone). npm 11 runs a git dependency's `prepare` without approval and only
 * notes it; under `strict-allow-scripts` the user approves it first (see the
 * README's Install section).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { existsSync } from "node:fs"
import { mkdtemp, readFile, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { installedCopies, installFreshProject, REPO, runOk } from "./FreshProject.js"

let temp = ""
let project = ""
let installed = ""

describe("a git install in a fresh project", { concurrent: false }, () => {
  beforeAll(async () => {
    const head = (await runOk("git", ["rev-parse", "HEAD"], REPO)).stdout.trim()
    temp = await mkdtemp(join(tmpdir(), "rarebit-git-"))
    project = join(temp, "project")
    const spec = `git+file://${REPO}#${head}`
    await installFreshProject(project, spec, { resolved: spec })
    installed = join(project, "node_modules", "rarebit-store")
  }, 240_000)

  afterAll(async () => {
    if (temp !== "") await rm(temp, { recursive: true, force: true })
  })

  it("installs the built package: dist, its sources and the examples", () => {
    for (
      const file of [
        "dist/index.js",
        "dist/index.d.ts",
        "dist/cli/main.js",
        "dist/cli/main.bundle.cjs",
        "dist/promise/index.bundle.cjs",
        "src/index.ts",
        "examples/main.ts"
      ]
    ) {
      assert.isTrue(existsSync(join(installed, file)), `${file} is missing from the git install`)
    }
    assert.isFalse(existsSync(join(installed, "node_modules")), "the package brought its own dependencies")
  })

  it("imports from the user's program and shares its one copy of Effect", async () => {
    const script = [
      `const store = await import("rarebit-store")`,
      `const plain = await import("rarebit-store/promise")`,
      `const testing = await import("rarebit-store/testing")`,
      `console.log(typeof store.NodeStore.layer, typeof plain.reserveRarebitJob, typeof testing.MemoryStore.layer)`
    ].join("\n")
    const ran = await runOk(process.execPath, ["--input-type=module", "-e", script], project)
    assert.strictEqual(ran.stdout.trim(), "function function function")
    assert.lengthOf(await installedCopies(project, "effect"), 1)
  })

  it("links the rarebit-store bin", async () => {
    const version = JSON.parse(await readFile(join(REPO, "package.json"), "utf8")).version
    const ran = await runOk(join(project, "node_modules", ".bin", "rarebit-store"), ["--version"], project)
    assert.include(ran.stdout, version)
  })
})
