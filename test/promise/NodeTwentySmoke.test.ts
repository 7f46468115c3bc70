/**
 * The built package on Node 20, which `engines` no longer promises (the
 * Effect peers require 22.19) but which this project's machines run as their
 * system Node, so a break there is seen at once: a Node 20 binary from PATH
 * (never the pinned one under `node_modules`) imports
 * `dist/promise/index.js` and `dist/index.js`, reserves, settles and reads
 * the current receipt in a temporary directory. The machine must have a
 * Node 20; without one the test fails and says so.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { accessSync, constants, existsSync, realpathSync } from "node:fs"
import { writeFile } from "node:fs/promises"
import { delimiter, dirname, join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import {
  entry,
  jobId,
  makeRoots,
  type Roots,
  Store as Reference,
  summaryReceipt,
  writeSession
} from "../support/Reference.js"

const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..")
const distPromise = join(projectRoot, "dist", "promise", "index.js")
const distIndex = join(projectRoot, "dist", "index.js")

/** Every `node` on PATH outside any `node_modules`, with its version. */
const nodesOnPath = (): Array<{ readonly path: string; readonly version: string }> => {
  const seen = new Set<string>()
  const found: Array<{ path: string; version: string }> = []
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir === "" || dir.split(/[\\/]/).includes("node_modules")) continue
    const candidate = join(dir, "node")
    try {
      accessSync(candidate, constants.X_OK)
    } catch {
      continue
    }
    const real = realpathSync(candidate)
    if (real.split(/[\\/]/).includes("node_modules") || seen.has(real)) continue
    seen.add(real)
    const version = execFileSync(candidate, ["--version"], { encoding: "utf8" }).trim()
    found.push({ path: candidate, version })
  }
  return found
}

const SCRIPT = `
import { readFile } from "node:fs/promises"
const input = JSON.parse(await readFile(process.argv[2], "utf8"))
const plain = await import(input.promiseUrl)
const main = await import(input.indexUrl)
const location = { sessionFile: input.sessionFile, sessionRoot: input.sessionRoot, rarebitRoot: input.rarebitRoot }
const reservation = await plain.reserveRarebitJob({ ...location, jobId: input.jobId })
const settled = await plain.settleRarebitJob(reservation, input.receipt)
const again = await plain.reserveRarebitJob({ ...location, jobId: input.jobId })
const current = await plain.readRarebitCurrent(location)
const history = await plain.readRarebitHistory(location)
process.stdout.write(JSON.stringify({
  version: process.version,
  mainExports: Object.keys(main).length,
  acquired: reservation.acquired,
  settledJobId: settled.jobId,
  settledPath: settled.path,
  duplicate: again.duplicate === true,
  availability: current.availability,
  current,
  history
}))
`

describe("NodeTwentySmoke", () => {
  let roots: Roots
  beforeAll(async () => {
    roots = await makeRoots("rarebit-node20-")
  })
  afterAll(async () => {
    await roots?.cleanup()
  })

  it("the built Promise API reserves, settles and reads on Node 20", async () => {
    const nodes = nodesOnPath()
    const node20 = nodes.find((node) => node.version.startsWith("v20."))
    assert.isDefined(
      node20,
      `no Node 20 on PATH outside node_modules (found: ${
        nodes.map((node) => `${node.path} ${node.version}`).join(", ") || "none"
      }); install Node 20 to run this smoke test`
    )
    assert.isTrue(existsSync(distPromise) && existsSync(distIndex), "dist/ is missing: run `npm run build` first")

    const branch = [entry("u1", "user", "smoke request")]
    await writeSession(roots.sessionFile, "s", branch)
    const inputPath = join(roots.root, "input.json")
    await writeFile(
      inputPath,
      JSON.stringify({
        promiseUrl: pathToFileURL(distPromise).href,
        indexUrl: pathToFileURL(distIndex).href,
        sessionFile: roots.sessionFile,
        ...roots.location,
        jobId: jobId(20),
        receipt: summaryReceipt(branch, "s")
      })
    )
    const scriptPath = join(roots.root, "smoke.mjs")
    await writeFile(scriptPath, SCRIPT)
    const output = execFileSync(node20!.path, [scriptPath, inputPath], { encoding: "utf8", cwd: roots.root })
    const result = JSON.parse(output)

    assert.match(result.version, /^v20\./)
    assert.isAbove(result.mainExports, 0)
    assert.strictEqual(result.acquired, true)
    assert.strictEqual(result.settledJobId, jobId(20))
    assert.strictEqual(result.settledPath, join(roots.rarebitRoot, "materializations-v4", "project", "trace.jsonl"))
    assert.strictEqual(result.duplicate, true)
    assert.strictEqual(result.current.availability, "available")
    assert.strictEqual(result.current.receipt.jobId, jobId(20))
    assert.deepStrictEqual(result.history.records.map((item: any) => item.record.jobId), [jobId(20)])
    // What Node 20 read is what the reference reads on the same directory.
    const location = { sessionFile: roots.sessionFile, ...roots.location }
    assert.deepStrictEqual(result.current, await Reference.readRarebitCurrent(location))
    assert.deepStrictEqual(result.history, await Reference.readRarebitHistory(location))
  })
})
