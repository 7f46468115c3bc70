/**
 * Pi Session lines for hand-written test Sessions: a v3 header and a text
 * message entry, with fixed timestamps, and whole Sessions of such turns.
 */

/** A v3 Session header line (no newline). */
export const header = (id: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ type: "session", version: 3, id, timestamp: "2026-01-01T00:00:00.000Z", cwd: "/project", ...extra })

/** A message entry line with one text block (no newline). */
export const message = (id: string, parentId: string | null, role: string, text: string, stopReason = "stop") =>
  JSON.stringify({
    type: "message",
    id,
    parentId,
    timestamp: "2026-01-01T00:00:01.000Z",
    message: { role, content: [{ type: "text", text }], stopReason }
  })

/** A tree Session of `turns` user/assistant pairs, each line newline-terminated. */
export const turnsText = (turns: number, id = "sess-a", from = 0) => {
  const lines: Array<string> = from === 0 ? [header(id)] : []
  for (let turn = from; turn < from + turns; turn++) {
    lines.push(message(`u${turn}`, turn === 0 ? null : `a${turn - 1}`, "user", `question ${turn}`))
    lines.push(message(`a${turn}`, `u${turn}`, "assistant", `answer ${turn}`))
  }
  return lines.map((line) => `${line}\n`).join("")
}
