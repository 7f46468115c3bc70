/**
 * The reference package's own test suite, run once as shipped and once with
 * its store module replaced by a re-export of our built Promise API
 * (`scripts/reference-store-tests.mjs`). Every test the baseline passes must
 * pass with our store.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..")
const script = join(projectRoot, "scripts", "reference-store-tests.mjs")

const run = () =>
  new Promise<{ code: number | null; output: string }>((resolveRun, rejectRun) => {
    const child = spawn(process.execPath, [script], { cwd: projectRoot, stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    child.on("error", rejectRun)
    child.on("close", (code) => resolveRun({ code, output }))
  })

describe("ReferenceSuite", () => {
  it("every reference test that passes with its own store passes with ours", async () => {
    assert.isTrue(
      existsSync(join(projectRoot, "dist", "promise", "index.js")),
      "dist/ is missing: run `npm run build` first"
    )
    const { code, output } = await run()
    assert.strictEqual(code, 0, output)
    const counts = (label: string) => {
      const match = new RegExp(`${label}[^:]*:\\s+(\\d+) passed, (\\d+) failed`).exec(output)
      assert.isNotNull(match, `no ${label} summary in:\n${output}`)
      return { passed: Number(match![1]), failed: Number(match![2]) }
    }
    const baseline = counts("baseline")
    const replaced = counts("replaced")
    // The reference ships 107 tests; all of them load and pass with the pi-ai stub.
    assert.isAtLeast(baseline.passed, 100, output)
    assert.isAtLeast(replaced.passed, baseline.passed, output)
  }, 120_000)
})
