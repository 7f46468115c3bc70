/**
 * The stress harness's after-run checker (`stress/check.mjs`) charges a
 * torn commit lock to the reference when reference workers ran: only the
 * reference writes a lock in place (open, then write), so only its worker,
 * killed or stopped in between, can leave one empty. With our workers alone
 * the same file stays a violation.
 */
import { afterEach, assert, beforeEach, describe, it } from "@effect/vitest"
import { mkdir, writeFile } from "node:fs/promises"
import { join } from "node:path"
import { rarebitMaterializationPath } from "../../src/promise/index.js"
import { checkRun } from "../../stress/check.mjs"
import { entry, makeRoots, type Roots, writeSession } from "../support/Reference.js"

describe("the stress checker and a torn commit lock", () => {
  let roots: Roots
  let runDir: string
  let lockPath: string
  beforeEach(async () => {
    roots = await makeRoots("rarebit-stress-check-")
    await writeSession(roots.sessionFile, "stressed", [entry("u1", "user", "a question")])
    const sidecar = rarebitMaterializationPath(roots.sessionFile, roots.location)
    lockPath = `${sidecar}.commit-lock`
    await mkdir(join(sidecar, ".."), { recursive: true })
    await writeFile(lockPath, "")
    runDir = join(roots.root, "run")
    await mkdir(runDir, { recursive: true })
  })
  afterEach(async () => {
    await roots?.cleanup()
  })

  const check = async (impl: "ours" | "reference") => {
    const acquired = { e: "acquired", impl, worker: 1, token: "lease", job: "0".repeat(64) }
    await writeFile(join(runDir, "journal-1.jsonl"), `${JSON.stringify(acquired)}\n`)
    return checkRun({ ...roots.location, sessions: [{ name: "s1", file: roots.sessionFile }], runDir })
  }
  const torn = () => `${lockPath}: lock is not a JSON object with a token`

  it("is the reference's issue when a reference worker ran", async () => {
    const result = await check("reference")
    assert.include(result.referenceIssues, torn())
    assert.notInclude(result.violations, torn())
  })

  it("is a violation when only our workers ran", async () => {
    const result = await check("ours")
    assert.include(result.violations, torn())
    assert.notInclude(result.referenceIssues, torn())
  })
})
