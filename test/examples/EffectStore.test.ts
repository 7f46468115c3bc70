import { assert, describe, it } from "@effect/vitest"
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { run } from "../../examples/EffectStore.js"
import { sessionText, summaryReceipt } from "../support/Receipts.js"

describe("README example: Effect API", () => {
  it("reserves, settles and reads a current summary on the real disk", async () => {
    const root = await mkdtemp(join(tmpdir(), "rarebit-example-"))
    try {
      const sessionRoot = join(root, "sessions")
      const rarebitRoot = join(root, "rarebit")
      await mkdir(join(sessionRoot, "project"), { recursive: true })
      const sessionFile = join(sessionRoot, "project", "trace.jsonl")
      const { branch, text } = sessionText("s")
      await writeFile(sessionFile, text)
      const jobId = "a".repeat(64)
      const first = await run({ rarebitRoot, sessionRoot }, sessionFile, jobId, summaryReceipt(branch, "s"))
      assert.deepStrictEqual(first, { outcome: "Settled", availability: "available", syncState: "assessment_current" })
      const again = await run({ rarebitRoot, sessionRoot }, sessionFile, jobId, summaryReceipt(branch, "s"))
      assert.strictEqual(again.outcome, "Duplicate")
    } finally {
      await rm(root, { recursive: true, force: true })
    }
  })
})
