/**
 * The run's own checks: a build older than its sources is caught before any
 * test spawns it, and the reports of a run hold that run's figures only.
 */
import { afterEach, assert, beforeEach, describe, it } from "@effect/vitest"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { REPORT_TIME_SLACK_MS, reportsSince, staleBuild } from "./GlobalSetup.js"
import { makeReport } from "./TestReport.js"

let repo: string

beforeEach(() => {
  repo = mkdtempSync(join(tmpdir(), "rarebit-global-setup-"))
})

afterEach(() => {
  rmSync(repo, { recursive: true, force: true })
})

/** Writes `file` under the temporary repository, dated `secondsAgo` seconds back. */
const writeAt = (file: string, secondsAgo: number) => {
  const path = join(repo, file)
  mkdirSync(dirname(path), { recursive: true })
  writeFileSync(path, "")
  const at = Date.now() / 1000 - secondsAgo
  utimesSync(path, at, at)
}

/** Sources and configuration written 100 s ago, and a build of them 50 s ago. */
const freshBuild = () => {
  for (
    const file of ["tsconfig.build.json", "tsconfig.base.json", "src/index.ts", "src/cli/main.ts", "src/types.d.ts"]
  ) {
    writeAt(file, 100)
  }
  for (const file of ["dist/index.js", "dist/index.d.ts", "dist/cli/main.js", "dist/cli/main.js.map"]) writeAt(file, 50)
}

describe("staleBuild", () => {
  it("accepts a build newer than every source and the configuration", () => {
    freshBuild()
    assert.isUndefined(staleBuild(repo))
  })

  it("names a source changed after its module was built", () => {
    freshBuild()
    writeAt("src/cli/main.ts", 10)
    assert.strictEqual(staleBuild(repo), "src/cli/main.ts changed after dist/cli/main.js was built")
  })

  it("names a source that was never built, and a build without dist/", () => {
    freshBuild()
    writeAt("src/store/New.ts", 100)
    assert.strictEqual(staleBuild(repo), "dist/store/New.js is missing")
    rmSync(join(repo, "dist"), { recursive: true })
    assert.strictEqual(staleBuild(repo), "dist/ does not exist")
  })

  it("names a built module whose source is gone, and a configuration changed since the build", () => {
    freshBuild()
    writeAt("dist/Removed.js", 50)
    assert.strictEqual(staleBuild(repo), "dist/Removed.js has no source any more")
    rmSync(join(repo, "dist", "Removed.js"))
    writeAt("dist/cli/Removed.js", 50)
    assert.strictEqual(staleBuild(repo), "dist/cli/Removed.js has no source any more")
    rmSync(join(repo, "dist", "cli", "Removed.js"))
    // A folder src/ has no counterpart of is another build's.
    writeAt("dist/stress/run.js", 50)
    assert.isUndefined(staleBuild(repo))
    writeAt("tsconfig.base.json", 10)
    assert.match(staleBuild(repo)!, /^the build configuration changed after dist\/.*\.js was built$/)
  })
})

describe("reports", () => {
  it("the first write of a run replaces its report, later ones append", () => {
    const directory = join(repo, "reports")
    mkdirSync(directory)
    writeFileSync(join(directory, "fuzz.txt"), "last run's figures\n")
    const report = makeReport(directory)
    report("fuzz", "first")
    report("fuzz", "second\n")
    assert.strictEqual(readFileSync(join(directory, "fuzz.txt"), "utf8"), "first\nsecond\n")
  })

  it("prints the reports written since the run began: short ones in full, long ones as their file", () => {
    const directory = join(repo, "reports")
    const report = makeReport(directory)
    report("older", "from another run")
    utimesSync(join(directory, "older.txt"), Date.now() / 1000 - 60, Date.now() / 1000 - 60)
    const startedAt = Date.now() - REPORT_TIME_SLACK_MS
    report("short", "one\ntwo")
    report("long", "1\n2\n3\n4\n5")
    assert.deepStrictEqual(reportsSince(startedAt, directory), [
      "long.txt   5 lines",
      "short.txt  one",
      "           two"
    ])
  })
})
