import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { summaryReceipt, titleReceipt } from "../../src/testing/Receipts.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import { nativeOf } from "../support/Receipts.js"
import { ArtifactState as Ref } from "../support/Reference.js"

const branchArbitrary = fc.array(
  fc.record({ user: fc.boolean(), text: fc.string({ minLength: 1, maxLength: 40 }) }),
  { minLength: 1, maxLength: 8 }
).map((turns) =>
  turns.map(({ text, user }, index) => ({
    type: "message",
    id: `e${index}`,
    parentId: index === 0 ? null : `e${index - 1}`,
    message: user ? { role: "user", content: text } : { role: "assistant", content: text, stopReason: "stop" }
  }))
)

describe("testing Receipts", () => {
  it("builds receipts the reference accepts, whose summary is the branch's current one", () => {
    fc.assert(
      fc.property(branchArbitrary, (branch) => {
        const options = { sessionId: "s", observedAt: "2026-01-01T00:00:00.000Z", jobId: "a".repeat(64) }
        const summary = summaryReceipt(branch, { ...options, summary: "a summary" })
        const title = titleReceipt(branch, { ...options, title: "A title" })
        assert.isTrue(Ref.validateRarebitArtifactReceipt(summary).valid)
        assert.isTrue(Ref.validateRarebitTitleReceipt(title).valid)
        const state = Ref.projectRarebitArtifactState({
          native: nativeOf("s", branch),
          materialization: { availability: "available", records: [summary] }
        })
        assert.strictEqual(state.syncState, "assessment_current")
        assert.strictEqual(state.receiptRef.jobId, "a".repeat(64))
      }),
      { numRuns: fuzzRuns(200) }
    )
  })
})
