/**
 * The worker, then the reader, on the real disk:
 *
 *   node main.js <Pi Session file> [sessionRoot] [rarebitRoot]
 *
 * The roots default to Pi's and Rarebit's (`~/.pi/agent/sessions`,
 * `~/.pi/agent/rarebit`); a Session must lie under its root.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Console, Effect } from "effect"
import { DEFAULT_RAREBIT_ROOT, DEFAULT_RAREBIT_SESSION_ROOT, NodeStore } from "rarebit-store"
import { showCurrent, summarizeSession } from "./SummaryWorker.js"

const [sessionFile, sessionRoot = DEFAULT_RAREBIT_SESSION_ROOT, rarebitRoot = DEFAULT_RAREBIT_ROOT] = process.argv
  .slice(2)

const main = Effect.gen(function*() {
  if (sessionFile === undefined) {
    return yield* Effect.fail(new Error("usage: node main.js <Pi Session file> [sessionRoot] [rarebitRoot]"))
  }
  const { jobId, outcome } = yield* summarizeSession(sessionFile, sessionRoot)
  yield* Console.log(`summary job ${jobId}: ${outcome}`)
  const current = yield* showCurrent(sessionFile)
  yield* Console.log(`current: ${current.availability}, ${current.syncState}: ${current.summary}`)
})

// One layer: the store, and the Node file system, path and crypto it runs on.
main.pipe(Effect.provide(NodeStore.layer({ rarebitRoot, sessionRoot })), NodeRuntime.runMain)
