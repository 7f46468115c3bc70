/**
 * The head rule on its own: a Summary receipt for the Session as it is now
 * becomes current; a title, a Summary for another selection, or any receipt
 * while the Session cannot be read repeats the current head.
 */
import { assert, describe, it } from "@effect/vitest"
import { makeHead } from "../../../src/protocol/Head.js"
import type { Receipt } from "../../../src/protocol/Receipt.js"
import type { NativeObservation } from "../../../src/state/ArtifactState.js"
import type { SidecarCurrent } from "../../../src/store/read/SidecarReader.js"
import { headAfter, isSemanticCurrent } from "../../../src/store/write/CurrentHead.js"
import { branchOf, defaultBranch, jobId, nativeOf, summaryReceipt, titleReceipt } from "../../support/Receipts.js"

const encoder = new TextEncoder()
const branch = defaultBranch()
const native = nativeOf("s", branch) as unknown as NativeObservation
const missing: SidecarCurrent = {
  availability: "missing",
  path: "/rarebit/materializations-v4/s.jsonl",
  receipt: null,
  records: [],
  head: null,
  diagnostics: { tornTail: false, reason: "sidecar_missing" }
}
const summary = summaryReceipt(branch, "s", { jobId: jobId(1) }) as Receipt

describe("CurrentHead", () => {
  it("a Summary of the Session as it is now becomes current", () => {
    assert.isTrue(isSemanticCurrent(native, missing, summary))
  })

  it("a title, a Summary of another selection, or an unreadable Session does not", () => {
    assert.isFalse(isSemanticCurrent(native, missing, titleReceipt(branch, "s", { jobId: jobId(2) }) as Receipt))
    const longer = branchOf([["user", "first request"], ["assistant", "done"], ["user", "and more"]])
    assert.isFalse(isSemanticCurrent(native, missing, summaryReceipt(longer, "s", { jobId: jobId(3) }) as Receipt))
    assert.isFalse(isSemanticCurrent({ availability: "unreadable" } as NativeObservation, missing, summary))
  })

  it("the head after a receipt is new when it becomes current, else the current one repeated, else none", () => {
    const line = encoder.encode(`${JSON.stringify(summary)}\n`)
    assert.deepStrictEqual(headAfter(true, missing, "s", 120, line), makeHead("s", 120, line))
    assert.isNull(headAfter(false, missing, "s", 120, line))
    const previous = makeHead("s", 0, line)
    const available = { ...missing, availability: "unreadable", head: previous } as SidecarCurrent
    assert.strictEqual(headAfter(false, available, "s", 120, line), previous)
  })
})
