/**
 * The sample data of `rarebit-store demo`: a small synthetic Pi Session
 * (format version 3, neutral text) and valid schema-v4 receipts for it.
 *
 * Receipts are built from the Session's own selection (`selectRarebits`),
 * so a summary made here is the semantic current summary of that Session
 * and gets a head when settled. Pure: no disk, no clock.
 *
 * @since 0.1.0
 */
import type { OkSummaryReceipt } from "../protocol/SummaryReceipt.js"
import type { TitledTitleReceipt } from "../protocol/TitleReceipt.js"
import { rarebitJobIdentity } from "../session/JobIdentity.js"
import { selectRarebits } from "../session/Selector.js"
import * as Receipts from "../testing/Receipts.js"

/**
 * A Pi Session as the demo writes it.
 *
 * @category models
 * @since 0.1.0
 */
export interface SampleSession {
  readonly id: string
  readonly header: Record<string, unknown>
  /** The entries, which are also the active branch (a linear chain). */
  readonly entries: ReadonlyArray<Record<string, unknown>>
  /** The file content: one JSON line per record. */
  readonly content: string
}

const TURNS: ReadonlyArray<readonly ["user" | "assistant", string]> = [
  ["user", "Draft a three-step checklist for repotting a small herb plant."],
  [
    "assistant",
    "1. Water the plant a day before. 2. Move it to a pot one size larger with fresh soil. " +
    "3. Water lightly and keep it out of direct sun for two days."
  ],
  ["user", "Add one line about choosing the pot."],
  ["assistant", "Choose a pot with a drainage hole, about two centimetres wider than the current one."]
]

/**
 * Builds the sample Session.
 *
 * @category constructors
 * @since 0.1.0
 */
export const sampleSession = (
  id: string = "0b9c6a1e-demo-4c1a-9e2b-5d6f7a8b9c0d",
  startedAtMs: number = Date.UTC(2026, 0, 1, 10, 0, 0)
): SampleSession => {
  const header = { type: "session", version: 3, id, timestamp: new Date(startedAtMs).toISOString(), cwd: "/demo" }
  const entries = TURNS.map(([role, text], index) => {
    const timestamp = new Date(startedAtMs + (index + 1) * 1000).toISOString()
    const message: Record<string, unknown> = {
      role,
      content: [{ type: "text", text }],
      timestamp: startedAtMs + (index + 1) * 1000
    }
    if (role === "assistant") {
      message.stopReason = "stop"
      message.provider = "demo"
      message.model = "demo-model"
    }
    return {
      type: "message",
      id: `e${index + 1}00demo`,
      parentId: index === 0 ? null : `e${index}00demo`,
      timestamp,
      message
    }
  })
  const content = [header, ...entries].map((record) => JSON.stringify(record)).join("\n") + "\n"
  return { id, header, entries, content }
}

const MODEL = { provider: "demo", id: "demo-model" }

/**
 * The job ids of the Session's summary and title.
 *
 * @category constructors
 * @since 0.1.0
 */
export const sampleJobIds = (session: SampleSession): { readonly summary: string; readonly title: string } => {
  const selection = selectRarebits(session.entries)
  const common = { sessionId: session.id, selection, model: MODEL, lifecycleBoundary: "manual", mode: "forced" }
  return {
    summary: rarebitJobIdentity({ ...common, operation: "summary", promptVersion: "rarebit-summary-v4" }),
    title: rarebitJobIdentity({ ...common, operation: "title", promptVersion: "rarebit-title-v4" })
  }
}

/**
 * A valid `ok` summary receipt of the whole Session (settle sets its
 * `jobId` to the reservation's).
 *
 * @category constructors
 * @since 0.1.0
 */
export const summaryReceipt = (
  session: SampleSession,
  options: { readonly summary: string; readonly observedAt: string; readonly jobId?: string }
): OkSummaryReceipt =>
  Receipts.summaryReceipt(session.entries, { ...options, sessionId: session.id, model: MODEL, source: "demo" })

/**
 * A valid title proposal receipt of the Session.
 *
 * @category constructors
 * @since 0.1.0
 */
export const titleReceipt = (
  session: SampleSession,
  options: { readonly title: string; readonly observedAt: string; readonly jobId?: string }
): TitledTitleReceipt =>
  Receipts.titleReceipt(session.entries, { ...options, sessionId: session.id, model: MODEL, source: "demo" })
