/**
 * The worker tested without a disk: the store on an in-memory file system,
 * with reproducible tokens, from the testing kit.
 */
import { assert, it } from "@effect/vitest"
import { Effect, FileSystem } from "effect"
import { MemoryStore } from "rarebit-store/testing"
import { showCurrent, summarizeSession } from "./SummaryWorker.js"

const sessionRoot = "/sessions"
const sessionFile = "/sessions/project/first-session.jsonl"
const text = (value: string) => [{ type: "text", text: value }]
const records = [
  { type: "session", version: 3, id: "first-session", timestamp: "2026-01-01T10:00:00.000Z", cwd: "/project" },
  { type: "message", id: "u1", parentId: null, message: { role: "user", content: text("Plan the release.") } },
  {
    type: "message",
    id: "a1",
    parentId: "u1",
    message: { role: "assistant", content: text("Tag, build, publish."), stopReason: "stop" }
  }
]

it.effect("a Session is summarized once; the next worker finds the job done", () =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* fs.makeDirectory("/sessions/project", { recursive: true })
    yield* fs.writeFileString(sessionFile, records.map((record) => JSON.stringify(record)).join("\n") + "\n")

    assert.strictEqual((yield* summarizeSession(sessionFile, sessionRoot)).outcome, "Settled")
    assert.strictEqual((yield* summarizeSession(sessionFile, sessionRoot)).outcome, "Duplicate")
    assert.deepStrictEqual(yield* showCurrent(sessionFile), {
      availability: "available",
      syncState: "assessment_current",
      summary: "A conversation of 2 messages."
    })
  }).pipe(Effect.provide(MemoryStore.layer({ rarebitRoot: "/rarebit", sessionRoot }))))
