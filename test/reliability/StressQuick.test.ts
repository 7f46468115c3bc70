/**
 * The CI configuration of the multi-process stress (`npm run stress --
 * --quick`): our workers alone, then mixed with a reference worker, under
 * SIGKILLs, SIGSTOPs and crashes inside locked sections. Runs the built
 * package (`dist/`), as `npm test` builds it first. The run's report goes to
 * `test-reports/stress-quick.txt`.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { mkdtemp, readFile, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { report } from "../support/TestReport.js"

const runner = fileURLToPath(new URL("../../stress/run.mjs", import.meta.url))

interface Figures {
  readonly configuration: string
  readonly jobs: number
  readonly settles: number
  readonly kills: number
  readonly violations: number
  readonly violationSamples: ReadonlyArray<string>
  readonly unexpectedExits: ReadonlyArray<unknown>
  readonly tornClaims: number
  readonly leftoverLocks: number
  readonly duplicateJobs: { readonly rerunByOurs: number }
  readonly currentReads: { readonly disagreements: number }
}

describe("stress (quick)", () => {
  it("our workers and a mixed deployment survive kills without a violation", async () => {
    const directory = await mkdtemp(join(tmpdir(), "rarebit-stress-quick-"))
    try {
      const json = join(directory, "figures.json")
      const output = await new Promise<string>((resolve) =>
        execFile(
          process.execPath,
          [runner, "--quick", "--json", json],
          { timeout: 170_000 },
          (_error, stdout, stderr) => resolve(`${stdout}${stderr}`)
        )
      )
      report("stress-quick", output)
      const figures = await readFile(json, "utf8").catch(() => undefined)
      assert.isDefined(figures, `the stress run wrote no figures:\n${output}`)
      const { results } = JSON.parse(figures!) as { results: ReadonlyArray<Figures> }
      assert.deepStrictEqual(results.map((result) => result.configuration), ["ours", "mixed"])
      for (const result of results) {
        assert.deepStrictEqual(result.violationSamples, [], `${result.configuration}: violations`)
        assert.strictEqual(result.violations, 0)
        assert.deepStrictEqual(result.unexpectedExits, [], `${result.configuration}: workers that failed`)
        assert.strictEqual(result.duplicateJobs.rerunByOurs, 0, `${result.configuration}: jobs our store ran twice`)
        assert.strictEqual(result.currentReads.disagreements, 0)
        assert.isAbove(result.kills, 0, `${result.configuration}: nobody was killed`)
        assert.isAbove(result.settles, 0, `${result.configuration}: nothing settled`)
      }
      const ours = results[0]
      assert.strictEqual(ours.tornClaims, 0)
      assert.strictEqual(ours.leftoverLocks, 0)
    } finally {
      await rm(directory, { recursive: true, force: true })
    }
  }, 180_000)
})
