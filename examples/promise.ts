/**
 * The same worker and reader on the plain Promise API, the drop-in for
 * `@hypercarrier/rarebit`'s functions:
 *
 *   node promise.js <Pi Session file> [sessionRoot] [rarebitRoot]
 */
import {
  DEFAULT_PI_SESSION_ROOT,
  DEFAULT_RAREBIT_ROOT,
  rarebitJobIdentity,
  readRarebitCurrent,
  readRarebitSession,
  releaseRarebitJob,
  reserveRarebitJob,
  settleRarebitJob
} from "rarebit-store/promise"
import { Receipts } from "rarebit-store/testing"

const [sessionFile, sessionRoot = DEFAULT_PI_SESSION_ROOT, rarebitRoot = DEFAULT_RAREBIT_ROOT] = process.argv.slice(2)
if (sessionFile === undefined) throw new Error("usage: node promise.js <Pi Session file> [sessionRoot] [rarebitRoot]")

const model = { provider: "example", id: "example-model" }
const session = await readRarebitSession(sessionFile, { sessionRoot })
const sessionId = session.session.id
const jobId = rarebitJobIdentity({
  operation: "summary",
  sessionId,
  branch: Receipts.branchReference(session.branch),
  selection: session.selection,
  promptVersion: "rarebit-summary-v4",
  model
})

const reservation = await reserveRarebitJob({ jobId, sessionFile: session.sessionFile, sessionRoot, rarebitRoot })
if (reservation.acquired) {
  try {
    const summary = `A conversation of ${session.selection.payloads.length} messages.` // the model call
    const observedAt = new Date().toISOString()
    await settleRarebitJob(
      reservation,
      Receipts.summaryReceipt(session.branch, { sessionId, observedAt, summary, model, source: "example" })
    )
    console.log(`summary job ${jobId}: Settled`)
  } catch (error) {
    await releaseRarebitJob(reservation) // give the job back at once rather than when its lease runs out
    throw error
  }
} else {
  console.log(`summary job ${jobId}: ${reservation.duplicate ? "Duplicate" : "InFlight"}`)
}

const current = await readRarebitCurrent({ sessionFile: session.sessionFile, sessionRoot, rarebitRoot })
const summary = current.availability === "available" && current.receipt.status === "ok" ? current.receipt.summary : null
console.log(`current: ${current.availability}, ${current.artifactState.syncState}: ${summary}`)
