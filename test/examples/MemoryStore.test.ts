/**
 * The README's "Testing your own programs without a disk" example, as a
 * test: the store over the public in-memory FileSystem, with receipts from
 * the public builders, imported by package name as a user would.
 */
import { assert, it } from "@effect/vitest"
import { Effect, FileSystem } from "effect"
import { RarebitStore } from "rarebit-store"
import { MemoryStore, Receipts } from "rarebit-store/testing"

const testStore = MemoryStore.layer({ rarebitRoot: "/rarebit", sessionRoot: "/sessions" })

const branch = [
  { type: "message", id: "u1", parentId: null, message: { role: "user", content: "Summarize the plan." } },
  { type: "message", id: "a1", parentId: "u1", message: { role: "assistant", content: "Done.", stopReason: "stop" } }
]

it.effect("my worker settles once", () =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const sessionFile = "/sessions/project/trace.jsonl"
    yield* fs.makeDirectory("/sessions/project", { recursive: true })
    yield* fs.writeFileString(
      sessionFile,
      [{ type: "session", version: 3, id: "s" }, ...branch].map((line) => JSON.stringify(line)).join("\n") + "\n"
    )
    const store = yield* RarebitStore
    const receipt = Receipts.summaryReceipt(branch, {
      sessionId: "s",
      observedAt: "2026-01-01T00:00:00.000Z",
      summary: "The plan was summarized."
    })
    const job = { jobId: "b".repeat(64), sessionFile }
    const first = yield* store.withJob(job, () => Effect.succeed(receipt))
    const second = yield* store.withJob(job, () => Effect.succeed(receipt))
    assert.strictEqual(first._tag, "Settled")
    assert.strictEqual(second._tag, "Duplicate")
    const current = yield* store.readCurrent({ sessionFile })
    // Only an available read has a receipt, and only an `ok` receipt has a summary: the types say so.
    const summary = current.availability === "available" && current.receipt.status === "ok"
      ? current.receipt.summary
      : undefined
    assert.strictEqual(summary, "The plan was summarized.")
  }).pipe(Effect.provide(testStore)))
