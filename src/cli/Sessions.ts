/**
 * `rarebit-store sessions`: every Session under the Session root with its
 * sync state, availability, when its current receipt was settled and what
 * it is about (`RarebitStore.sessions`).
 *
 * In a terminal, a table, most recently active Session first, fitted to the
 * width, with a footer of counts by sync state. `--json` prints one
 * document `{ sessionRoot, rarebitRoot, sessions, orphanSidecars,
 * activeClaims }`, written entry by entry (the listing is never held whole).
 * `--state` keeps only rows in the given sync states (repeatable).
 *
 * What it reports is never a failure: an unreadable Session or a damaged
 * sidecar is a row with its state, and a Rarebit root that does not exist
 * lists every Session as missing. A Session root that is not a directory is
 * exit 3.
 *
 * `--follow` keeps the overview live (`RarebitStore.followSessions`): the
 * table is redrawn in place after each change; with `--json`, one entry per
 * line (NDJSON), every Session's at start and then each Session that
 * changed. It ends like `current --follow`: Ctrl-C exits 130, a reader that
 * closes the pipe 141.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Stream } from "effect"
import { Command, Flag } from "effect/cli"
import { FileSystem } from "effect/FileSystem"
import { Path } from "effect/Path"
import type { ArtifactSyncState } from "../state/ArtifactState.js"
import { RarebitStore } from "../store/RarebitStore.js"
import {
  activeClaims,
  orphanSidecars,
  requireSessionRoot,
  type SessionOverviewEntry
} from "../store/read/SessionOverview.js"
import { cliFailure, ExitCode, toCliFailure } from "./CliFailure.js"
import { globals, storeLayer } from "./GlobalOptions.js"
import { jsonText } from "./JsonText.js"
import { availabilityText, formatDuration, printJsonLine, printLines, type Style, style } from "./Output.js"
import { relativeTo as relativeToRoot } from "./RunAudit.js"

const SYNC_STATES = [
  "awaiting_artifacts",
  "request_source_pending",
  "request_current",
  "settlement_pending",
  "assessment_source_pending",
  "assessment_current",
  "terminal_error"
] as const satisfies ReadonlyArray<ArtifactSyncState>

const stateFlag = Flag.Literals("state", SYNC_STATES).pipe(
  Flag.withDescription(
    "Only Sessions in this sync state (repeatable), e.g. awaiting_artifacts: what a worker picks up"
  ),
  Flag.atLeast(0)
)

const followFlag = Flag.Boolean("follow").pipe(
  Flag.withAlias("f"),
  Flag.withDescription(
    "Keep watching: redraw the table as Sessions change (with --json, one entry per line, every Session at " +
      "start and then each one that changed); ends on Ctrl-C"
  ),
  Flag.withDefault(false)
)

/** The narrowest the table is laid out for; a narrower terminal wraps. */
const MIN_WIDTH = 60

const stateText = (s: Style, state: string) =>
  state === "assessment_current"
    ? s.green(state)
    : state === "terminal_error"
    ? s.red(state)
    : s.yellow(state)

/** Cuts `text` to `width` characters, keeping its end (the file name) for paths. */
const fitStart = (text: string, width: number) =>
  text.length <= width ? text : width <= 1 ? "…".slice(0, width) : `…${text.slice(text.length - width + 1)}`

const fitEnd = (text: string, width: number) =>
  text.length <= width ? text : width <= 1 ? "…".slice(0, width) : `${text.slice(0, width - 1)}…`

/** Control characters from a Session's prose must not move the cursor of the table. */
const printable = (text: string) => {
  let out = ""
  for (const char of text) {
    const code = char.codePointAt(0)!
    out += code < 0x20 || (code >= 0x7f && code <= 0x9f) ? " " : char
  }
  return out
}

/** How long ago `iso` was, e.g. `4m12s`; `-` for none. */
const ago = (iso: string | null, nowMs: number) => (iso === null ? "-" : formatDuration(nowMs - Date.parse(iso)))

const byRecentActivity = (a: SessionOverviewEntry, b: SessionOverviewEntry) =>
  (b.modifiedAt ?? "").localeCompare(a.modifiedAt ?? "") || a.sessionFile.localeCompare(b.sessionFile)

/**
 * The table of `entries` (already sorted) in `width` columns, with its
 * footer; at most `maxRows` rows of Sessions (the rest counted in a line).
 *
 * @category formatting
 * @since 0.1.0
 */
export const formatSessions = (
  s: Style,
  entries: ReadonlyArray<SessionOverviewEntry>,
  options: {
    readonly relativeTo: (file: string) => string
    readonly width: number
    readonly nowMs: number
    readonly maxRows?: number
  }
): ReadonlyArray<string> => {
  const width = Math.max(MIN_WIDTH, options.width)
  const shown = options.maxRows === undefined ? entries : entries.slice(0, Math.max(0, options.maxRows))
  // Columns as wide as what they show, so the path and the summary get the rest.
  const widest = (header: string, of: (entry: SessionOverviewEntry) => string) =>
    shown.reduce((most, entry) => Math.max(most, of(entry).length), header.length)
  const stateWidth = widest("SYNC STATE", (entry) => entry.syncState)
  const availabilityWidth = widest("AVAILABLE", (entry) => entry.availability)
  const settledWidth = 7
  const rest = width - (stateWidth + availabilityWidth + settledWidth + 4)
  // The Session path takes what it needs, up to half of what is left; the summary the rest.
  const sessionWidth = Math.min(
    widest("SESSION", (entry) => options.relativeTo(entry.sessionFile)),
    Math.max(12, Math.floor(rest / 2))
  )
  const aboutWidth = Math.max(8, rest - sessionWidth)
  const row = (session: string, state: string, availability: string, settled: string, about: string) =>
    [session, state, availability, settled, about].join(" ")
  const lines = [
    s.dim(
      row(
        "SESSION".padEnd(sessionWidth),
        "SYNC STATE".padEnd(stateWidth),
        "AVAILABLE".padEnd(availabilityWidth),
        "SETTLED".padEnd(settledWidth),
        "SUMMARY / TITLE"
      ).trimEnd()
    )
  ]
  for (const entry of shown) {
    const about = printable(entry.summary ?? entry.title ?? "")
    lines.push(
      row(
        fitStart(printable(options.relativeTo(entry.sessionFile)), sessionWidth).padEnd(sessionWidth),
        // Coloured by the value, then padded: the colour codes take no columns.
        stateText(s, entry.syncState) + " ".repeat(stateWidth - entry.syncState.length),
        availabilityText(s, entry.availability) + " ".repeat(availabilityWidth - entry.availability.length),
        fitEnd(ago(entry.settledAt, options.nowMs), settledWidth).padEnd(settledWidth),
        fitEnd(about, aboutWidth)
      ).trimEnd()
    )
  }
  if (shown.length < entries.length) lines.push(s.dim(`… ${entries.length - shown.length} more`))
  lines.push(footer(s, entries, width))
  return lines
}

/** `12 Sessions: 9 assessment_current, 3 awaiting_artifacts`, fitted to the width. */
const footer = (s: Style, entries: ReadonlyArray<SessionOverviewEntry>, width: number) => {
  const counts = new Map<string, number>()
  for (const entry of entries) counts.set(entry.syncState, (counts.get(entry.syncState) ?? 0) + 1)
  const parts = SYNC_STATES.filter((state) => counts.has(state)).map((state) => `${counts.get(state)} ${state}`)
  const text = `${entries.length} Session${entries.length === 1 ? "" : "s"}${parts.length > 0 ? ": " : ""}${
    parts.join(", ")
  }`
  return s.bold(fitEnd(text, width))
}

const terminalWidth = () => process.stdout.columns ?? 80
const terminalRows = () => process.stdout.rows ?? 24

/** Writes the JSON document entry by entry, so a store of any size is never one string. */
/** Characters of JSON lines gathered before one write. */
const OUTPUT_BATCH_CHARS = 32 * 1024

const printDocument = <E1, E2>(
  header: { readonly sessionRoot: string; readonly rarebitRoot: string },
  entries: Stream.Stream<SessionOverviewEntry, E1>,
  tail: Effect.Effect<{ readonly orphanSidecars: ReadonlyArray<string>; readonly activeClaims: number }, E2>
) =>
  Effect.gen(function*() {
    yield* printLines([
      `{`,
      `  "sessionRoot": ${jsonText(header.sessionRoot)},`,
      `  "rarebitRoot": ${jsonText(header.rarebitRoot)},`,
      `  "sessions": [`
    ])
    // Each entry is printed when the next one arrives, so only the last has no comma; lines go out
    // about 32 KiB at a time, not one write each (a write per Session cost about a tenth of the command).
    let held: string | undefined
    let batch: Array<string> = []
    let batchLength = 0
    yield* Stream.runForEach(entries, (entry) => {
      const previous = held
      held = `    ${jsonText(entry)}`
      if (previous === undefined) return Effect.void
      batch.push(`${previous},`)
      batchLength += previous.length
      if (batchLength < OUTPUT_BATCH_CHARS) return Effect.void
      const lines = batch
      batch = []
      batchLength = 0
      return printLines(lines)
    })
    const rest = yield* tail
    yield* printLines([
      ...batch,
      ...(held === undefined ? [] : [held]),
      `  ],`,
      `  "orphanSidecars": ${jsonText(rest.orphanSidecars)},`,
      `  "activeClaims": ${rest.activeClaims}`,
      `}`
    ])
  })

/**
 * The `sessions` command.
 *
 * @category commands
 * @since 0.1.0
 */
export const sessionsCommand = Command.make(
  "sessions",
  { follow: followFlag, state: stateFlag },
  Effect.fn("cli.sessions")(function*({ follow, state }) {
    const options = yield* globals
    const wanted = new Set<string>(state)
    const keep = (entry: SessionOverviewEntry) => wanted.size === 0 || wanted.has(entry.syncState)
    const location = {
      sessionRoot: options.sessionRoot,
      rarebitRoot: options.rarebitRoot,
      allowExternalSession: false
    }
    const program = Effect.gen(function*() {
      const store = yield* RarebitStore
      const fs = yield* FileSystem
      const path = yield* Path
      const relativeTo = (file: string) => relativeToRoot(path, options.sessionRoot, file)
      const s = yield* style
      // Checked before anything is printed, so a missing root is one error, not half a document.
      yield* requireSessionRoot(fs, options.sessionRoot)
      if (follow && options.json) {
        return yield* Stream.runForEach(Stream.filter(store.followSessions(location), keep), printJsonLine)
      }
      if (follow) {
        // One row per Session, replaced as it changes: the table is what the latest entries say.
        const rows = new Map<string, SessionOverviewEntry>()
        let drawn = 0
        const draw = Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const sorted = [...rows.values()].filter(keep).sort(byRecentActivity)
          const lines = formatSessions(s, sorted, {
            relativeTo,
            width: terminalWidth(),
            nowMs: now,
            // The header, the "more" and the footer lines, and the cursor's own.
            maxRows: terminalRows() - 4
          })
          const erase = drawn > 0 ? `\u001b[${drawn}F\u001b[0J` : ""
          drawn = lines.length
          yield* printLines([`${erase}${lines[0]}`, ...lines.slice(1)])
        })
        // The first table is drawn whole, not as the watch's first reads trickle in.
        yield* Stream.runForEach(
          store.sessions(location),
          (entry) => Effect.sync(() => rows.set(entry.sessionFile, entry))
        )
        yield* draw
        return yield* store.followSessions(location).pipe(
          // A burst (every Session at start, a sweep of settles) is drawn once.
          Stream.groupedWithin(10_000, "20 millis"),
          Stream.runForEach((group) =>
            Effect.andThen(
              Effect.sync(() => {
                for (const entry of group) rows.set(entry.sessionFile, entry)
              }),
              draw
            )
          )
        )
      }
      const entries = Stream.filter(store.sessions(location), keep)
      if (options.json) {
        return yield* printDocument(
          location,
          entries,
          Effect.gen(function*() {
            const orphans = yield* Stream.runCollect(orphanSidecars(fs, path, location))
            return { orphanSidecars: orphans, activeClaims: yield* activeClaims(fs, path, location) }
          })
        )
      }
      const collected = yield* Stream.runCollect(entries)
      const now = yield* Clock.currentTimeMillis
      const orphans = yield* Stream.runCollect(orphanSidecars(fs, path, location))
      const live = yield* activeClaims(fs, path, location)
      const lines = [
        ...formatSessions(s, collected.sort(byRecentActivity), { relativeTo, width: terminalWidth(), nowMs: now }),
        ...(orphans.length > 0 || live > 0
          ? [
            s.dim(
              `${orphans.length} orphan sidecar${orphans.length === 1 ? "" : "s"}, ${live} live claim${
                live === 1 ? "" : "s"
              }`
            )
          ]
          : [])
      ]
      yield* printLines(lines)
    })
    return yield* program.pipe(
      Effect.catchTag("SessionRootNotFound", (error) =>
        Effect.fail(cliFailure(
          "SessionRootNotFound",
          ExitCode.NotFound,
          error.message,
          "pass --session-root <dir> (default ~/.pi/agent/sessions)"
        ))),
      Effect.provide(storeLayer(options)),
      Effect.mapError(toCliFailure)
    )
  })
).pipe(
  Command.withDescription(
    "List every Session under --session-root (*.jsonl, recursively) with its sync state, availability, " +
      "when its current receipt was settled and its summary or title, most recently active first, with counts " +
      "by state. --json prints one document (sessions, orphanSidecars, activeClaims). --state keeps only the " +
      "given sync states. --follow redraws as Sessions change (one JSON entry per line with --json) until " +
      "Ctrl-C. An unreadable Session or damaged sidecar is a row, never a failure; exits 3 when the Session " +
      "root does not exist"
  ),
  Command.withExamples([
    { command: "rarebit-store sessions", description: "the table, newest activity first" },
    {
      command: "rarebit-store sessions --state awaiting_artifacts --json",
      description: "what a worker should pick up"
    },
    { command: "rarebit-store sessions --follow", description: "live, redrawn in place" }
  ])
)
