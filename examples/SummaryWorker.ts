/**
 * A Rarebit summary worker and a reader, on the Effect API.
 *
 * `summarizeSession` reads a Pi Session, computes the job's identity from
 * what it would summarize, reserves the job, derives a Summary receipt and
 * settles it. Another worker given the same Session computes the same job
 * id, so it gets `Duplicate` (or `InFlight` while this one works) instead of
 * summarizing twice. `showCurrent` is a reader: the bounded current read.
 */
import { Clock, Effect } from "effect"
import { RarebitStore, Session } from "rarebit-store"
import { Receipts } from "rarebit-store/testing"

// Part of the job identity: a new model or prompt is a new job.
const model = { provider: "example", id: "example-model" }
const promptVersion = "rarebit-summary-v4"

// Stands in for the model call: a real worker sends the selected prose to its model.
const summarize = (prose: ReadonlyArray<string>) => Effect.succeed(`A conversation of ${prose.length} messages.`)

export const summarizeSession = Effect.fn("summarizeSession")(function*(sessionFile: string, sessionRoot: string) {
  // The header, the active branch, and the Rarebits (the prose that counts) selected from it.
  const session = yield* Session.readSession(sessionFile, { sessionRoot })
  const sessionId = session.session.id
  const jobId = Session.rarebitJobIdentity({
    operation: "summary",
    sessionId,
    branch: Receipts.branchReference(session.branch),
    selection: session.selection,
    promptVersion,
    model
  })
  const store = yield* RarebitStore
  // Reserve, derive, settle; the claim is given back if deriving fails or is interrupted.
  const outcome = yield* store.withJob({ jobId, sessionFile: session.sessionFile }, () =>
    Effect.gen(function*() {
      const summary = yield* summarize(session.selection.payloads.map((payload) => payload.text))
      const observedAt = new Date(yield* Clock.currentTimeMillis).toISOString()
      // Fills every evidence field (branch, selection, synthesis record) from the branch.
      return Receipts.summaryReceipt(session.branch, { sessionId, observedAt, summary, model, source: "example" })
    })).pipe(
      // Our lease ran out and a newer worker took the job over: its receipt wins, ours was not written.
      Effect.catchTag("LeaseFenced", () => Effect.succeed({ _tag: "Fenced" as const }))
    )
  return { jobId, outcome: outcome._tag }
})

export const showCurrent = Effect.fn("showCurrent")(function*(sessionFile: string) {
  const store = yield* RarebitStore
  const current = yield* store.readCurrent({ sessionFile })
  return {
    availability: current.availability, // "available" once a summary has a head
    syncState: current.artifactState.syncState, // "assessment_current" while it covers the whole branch
    // Only an available read has a receipt, and only an `ok` Summary receipt carries a summary.
    summary: current.availability === "available" && current.receipt.status === "ok" ? current.receipt.summary : null
  }
})
