/**
 * `rarebit-store history --session <path|id> [--from N] [--limit N] [--all]`:
 * the audit path over a sidecar's receipts, with absolute byte offsets.
 *
 * Without `--all`, one bounded page (`readRarebitHistory`); its `nextOffset`
 * is what `--from` takes to continue. With `--all`, the store's `history`
 * stream walks every page in constant memory; under `--json` each receipt is
 * printed as one JSON line (`{"offset":…,"record":…}`) as soon as it is read.
 * Nothing is written.
 *
 * @since 0.1.0
 */
import { Console, Effect, Option, Stream } from "effect"
import { Command, Flag } from "effect/cli"
import { FileSystem } from "effect/FileSystem"
import { RarebitStore } from "../store/RarebitStore.js"
import type { HistoryRecord } from "../store/SidecarReader.js"
import { toCliFailure } from "./CliFailure.js"
import { globals, resolveSession, sessionFlag, storeLayer } from "./GlobalOptions.js"
import {
  formatBytes,
  makeProgress,
  printJson,
  printJsonLine,
  printLines,
  short,
  snippet,
  type Style,
  style
} from "./Output.js"

/**
 * One receipt as a table row.
 *
 * @category formatting
 * @since 0.1.0
 */
export const formatHistoryRecord = (s: Style, entry: HistoryRecord): string => {
  const record = entry.record
  const text = record.type === "rarebit_title" ? record.title : record.status === "ok" ? record.summary : null
  return [
    s.cyan(`@${entry.offset}`.padEnd(9)),
    String(record.type).padEnd(16),
    s.bold(String(record.status).padEnd(24)),
    `job ${short(record.jobId)}`,
    String(record.observedAt),
    typeof text === "string" ? `"${snippet(text, 60)}"` : ""
  ].join(" ").trimEnd()
}

/**
 * The `history` command.
 *
 * @category commands
 * @since 0.1.0
 */
export const historyCommand = Command.make(
  "history",
  {
    session: sessionFlag,
    from: Flag.Int("from").pipe(
      Flag.withMetavar("offset"),
      Flag.withDescription("Absolute byte offset to start at, e.g. the nextOffset of a previous page (default 0)"),
      Flag.withDefault(0)
    ),
    limit: Flag.Int("limit").pipe(
      Flag.withMetavar("n"),
      Flag.withDescription("Receipts per page, 1-1000 (default 100; with --all, receipts read per step, default 1000)"),
      Flag.optional
    ),
    all: Flag.Boolean("all").pipe(
      Flag.withDescription("Stream every page to the end in constant memory; --json prints one JSON line per receipt"),
      Flag.withDefault(false)
    )
  },
  Effect.fn("cli.history")(function*({ all, from, limit, session }) {
    const options = yield* globals
    const resolved = yield* resolveSession(session, options)
    const s = yield* style
    const request = { sessionFile: resolved.sessionFile, fromOffset: from, limit: Option.getOrUndefined(limit) }

    if (!all) {
      const page = yield* RarebitStore.use((store) => store.readHistory(request)).pipe(
        Effect.provide(storeLayer(options)),
        Effect.mapError(toCliFailure)
      )
      if (options.json) return yield* printJson(page)
      const lines = [`${s.dim("Sidecar")} ${page.path} (${page.availability})`]
      if (page.availability === "missing") lines.push("No sidecar yet: this Session has no receipts.")
      for (const entry of page.records) lines.push(formatHistoryRecord(s, entry))
      lines.push(
        page.nextOffset === null
          ? s.dim(`${page.records.length} receipt(s); end of sidecar`)
          : s.dim(`${page.records.length} receipt(s); next page: --from ${page.nextOffset}`)
      )
      return yield* printLines(lines)
    }

    const fs = yield* FileSystem
    const size = yield* fs.stat(resolved.sidecar).pipe(
      Effect.map((info) => Number(info.size)),
      Effect.catch(() => Effect.succeed(undefined))
    )
    if (!options.json) {
      yield* Console.log(
        `${s.dim("Sidecar")} ${resolved.sidecar} (${size === undefined ? "missing" : formatBytes(size)})`
      )
    }
    const progress = makeProgress()
    let count = 0
    yield* RarebitStore.use((store) =>
      store.history(request).pipe(
        Stream.runForEach((entry) =>
          Effect.gen(function*() {
            count++
            yield* progress.clear
            yield* (options.json ? printJsonLine(entry) : Console.log(formatHistoryRecord(s, entry)))
            if (size !== undefined) yield* progress.update(entry.offset, size, `${formatBytes(entry.offset)} read`)
          })
        )
      )
    ).pipe(
      Effect.ensuring(progress.clear),
      Effect.provide(storeLayer(options)),
      Effect.mapError(toCliFailure)
    )
    if (!options.json) yield* Console.log(s.dim(`${count} receipt(s); end of sidecar`))
  })
).pipe(
  Command.withDescription("List a Session's receipts with their byte offsets, page by page or all at once"),
  Command.withExamples([
    { command: "rarebit-store history --session ./proj/session.jsonl --limit 20", description: "first 20 receipts" },
    { command: "rarebit-store history --session ./proj/session.jsonl --from 48210", description: "continue a page" },
    { command: "rarebit-store history --session 0b9c6a1e-demo --all --json | wc -l", description: "count receipts" }
  ])
)
