/**
 * `rarebit-store current --session <path|id>`: the current receipt of one
 * Session, by the bounded reader, with its head, diagnostics and artifact
 * state.
 *
 * `--json` prints exactly the object `readRarebitCurrent` (and
 * `RarebitStore.readCurrent`) returns, as one document. A root that does
 * not exist is "no store" (exit 3), never a "missing" sidecar. Nothing is
 * written.
 *
 * `--follow` keeps watching (`RarebitStore.watch`) and prints the state
 * again each time it changes: with `--json`, one compact document per line
 * (NDJSON), each exactly `readRarebitCurrent`'s object. It runs until
 * interrupted: Ctrl-C ends it like any command (exit 130), a reader that
 * closes the pipe ends it with exit 141.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Stream } from "effect"
import { Command, Flag } from "effect/cli"
import { isoTimestampOf } from "../protocol/internal/IsoTimestamp.js"
import { RarebitStore } from "../store/RarebitStore.js"
import type { CurrentRead } from "../store/RarebitStore.js"
import { toCliFailure } from "./CliFailure.js"
import { globals, requireStore, resolveSession, sessionFlag, storeLayer } from "./GlobalOptions.js"
import {
  availabilityText,
  displayText,
  printJson,
  printJsonLine,
  printLines,
  short,
  snippet,
  type Style,
  style
} from "./Output.js"

const field = (s: Style, label: string, value: string) => `${s.dim(label.padEnd(11))} ${value}`

/**
 * The human-readable rendering of a current read.
 *
 * @category formatting
 * @since 0.1.0
 */
export const formatCurrent = (s: Style, sessionFile: string, current: CurrentRead): ReadonlyArray<string> => {
  const lines = [
    field(s, "Session", sessionFile),
    field(s, "Sidecar", `${current.path} (${availabilityText(s, current.availability)})`)
  ]
  const head = current.head
  if (head !== null) {
    lines.push(field(
      s,
      "Head",
      `receipt @ byte ${head.receiptOffset}, ${head.receiptLength} bytes, sha256 ${short(head.receiptHash)}`
    ))
  }
  const receipt = current.receipt
  if (receipt !== null) {
    const model = receipt.model
    lines.push(field(
      s,
      "Receipt",
      [
        `${receipt.type} ${s.bold(String(receipt.status))}`,
        `job ${short(receipt.jobId)}`,
        `observed ${receipt.observedAt}`,
        `${receipt.lifecycleBoundary}/${receipt.synthesisMode}`,
        model ? `model ${model.provider}/${model.id}` : "no model"
      ].join(" · ")
    ))
    if (receipt.status === "ok") {
      lines.push(field(s, "Summary", `"${snippet(receipt.summary, 100)}"`))
      // An array status (a quirk the validator accepts) is not shown.
      if (typeof receipt.sessionStatus === "string") {
        lines.push(
          field(s, "Assessment", `${displayText(receipt.sessionStatus)} (${displayText(receipt.statusReason)})`)
        )
      }
    }
  }
  const state = current.artifactState
  const projection = state.projection
  lines.push(field(
    s,
    "State",
    [
      `sync ${s.bold(state.syncState)}`,
      `applicability ${state.applicability}`,
      projection === null ? "no projection" : `projection ${String(projection.status)} (${projection.reason})`
    ].join(" · ")
  ))
  if (state.retry !== null) {
    lines.push(
      field(s, "Retry", `${state.retry.recommended ? "recommended" : "not recommended"} (${state.retry.reason})`)
    )
  }
  const diagnostics = current.diagnostics
  const notes = [
    diagnostics.reason === undefined ? null : diagnostics.reason,
    diagnostics.tornTail ? "torn tail (ignored)" : null
  ].filter((note): note is string => note !== null)
  lines.push(field(s, "Diagnostics", notes.length === 0 ? s.green("none") : s.yellow(notes.join(", "))))
  return lines
}

/**
 * The line `--follow` prints above each state after the first: when it was
 * seen, and whether the sidecar is another file than before.
 *
 * @category formatting
 * @since 0.1.0
 */
export const followHeader = (s: Style, seenAtMs: number, newFile: boolean): string =>
  s.dim(`-- ${isoTimestampOf(seenAtMs)} changed${newFile ? " (the sidecar is another file now)" : ""} --`)

const followFlag = Flag.Boolean("follow").pipe(
  Flag.withAlias("f"),
  Flag.withDescription(
    "Keep watching, and print the state again each time it changes (with --json, one document per line); " +
      "ends on Ctrl-C"
  ),
  Flag.withDefault(false)
)

/**
 * The `current` command.
 *
 * @category commands
 * @since 0.1.0
 */
export const currentCommand = Command.make(
  "current",
  { session: sessionFlag, follow: followFlag },
  Effect.fn("cli.current")(function*({ follow, session }) {
    const options = yield* globals
    yield* requireStore(options)
    const resolved = yield* resolveSession(session, options)
    if (follow) {
      const s = yield* style
      let epoch = 0
      return yield* RarebitStore.use((store) =>
        store.watch({ sessionFile: resolved.sessionFile }).pipe(
          Stream.runForEach((state) =>
            Effect.gen(function*() {
              const newFile = state.epoch !== epoch
              epoch = state.epoch
              if (options.json) return yield* printJsonLine(state.current)
              if (state.sequence > 0) yield* printLines(["", followHeader(s, yield* Clock.currentTimeMillis, newFile)])
              yield* printLines(formatCurrent(s, resolved.sessionFile, state.current))
            })
          )
        )
      ).pipe(Effect.provide(storeLayer(options)), Effect.mapError(toCliFailure))
    }
    const current = yield* RarebitStore.use((store) => store.readCurrent({ sessionFile: resolved.sessionFile })).pipe(
      Effect.provide(storeLayer(options)),
      Effect.mapError(toCliFailure)
    )
    if (options.json) return yield* printJson(current)
    yield* printLines(formatCurrent(yield* style, resolved.sessionFile, current))
  })
).pipe(
  Command.withDescription(
    "Show the current receipt, head, diagnostics and artifact state of one Session. " +
      "--json prints one JSON document, exactly readRarebitCurrent's object; errors are one JSON line on stderr. " +
      "--follow keeps watching and prints each new state (one JSON document per line with --json) until Ctrl-C. " +
      "Exits 3 when the Session or the store at --root does not exist"
  ),
  Command.withExamples([
    { command: "rarebit-store current --session ~/.pi/agent/sessions/proj/2026-01-01.jsonl", description: "by path" },
    { command: "rarebit-store current --session 0b9c6a1e-demo --json", description: "by Session id, as JSON" },
    { command: "rarebit-store current --session 0b9c6a1e-demo --follow --json", description: "each new state, NDJSON" }
  ])
)
