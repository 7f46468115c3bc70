import { assert, describe, it } from "@effect/vitest"
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { NodeStore } from "rarebit-store"
import { program, run } from "../../examples/EffectStore.js"
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
      assert.deepStrictEqual(first, {
        outcome: "Settled",
        availability: "available",
        syncState: "assessment_current",
        summary: "ok"
      })
      const again = await run({ rarebitRoot, sessionRoot }, sessionFile, jobId, summaryReceipt(branch, "s"))
      assert.strictEqual(again.outcome, "Duplicate")
      // The README's alternative for network file systems runs the same program, and sees the same store.
      const onThePool = (job: string) =>
        Effect.runPromise(
          program(sessionFile, job, summaryReceipt(branch, "s")).pipe(
            Effect.provide(NodeStore.threadpoolLayer({ rarebitRoot, sessionRoot }))
          )
        )
      assert.strictEqual((await onThePool(jobId)).outcome, "Duplicate")
      assert.deepStrictEqual(await onThePool("c".repeat(64)), {
        outcome: "Settled",
        availability: "available",
        syncState: "assessment_current",
        summary: "ok"
      })
    } finally {
      await rm(root, { recursive: true, force: true })
    }
  })
})
