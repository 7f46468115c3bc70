/**
 * `rarebit-store history --session <path|id> [--from N] [--limit N] [--all]`:
 * the audit path over a sidecar's receipts, with absolute byte offsets.
 *
 * Without `--all`, one bounded page (`readRarebitHistory`); its `nextOffset`
 * is what `--from` takes to continue. With `--all`, every page to the end,
 * in constant memory. Under `--json` both print one JSON document of
 * `readRarebitHistory`'s shape, `{availability, path, records, nextOffset}`
 * (with `--all`, every record and `nextOffset: null`), written as it is read:
 * the head on the first line, then one `{"offset":…,"record":…}` per line,
 * then the end. A sidecar that cannot be read past the first page fails with
 * exit 4, and the document on stdout is then cut short. Nothing is written.
 *
 * @since 0.1.0
 */
import { Console, Effect, Option, Stream } from "effect"
import { Command, Flag } from "effect/cli"
import { FileSystem } from "effect/FileSystem"
import { HistoryUnreadable } from "../store/Errors.js"
import { RarebitStore } from "../store/RarebitStore.js"
import type { HistoryRecord } from "../store/read/SidecarReader.js"
import { toCliFailure } from "./CliFailure.js"
import { globals, requireStore, resolveSession, sessionFlag, storeLayer } from "./GlobalOptions.js"
import { jsonText } from "./JsonText.js"
import { formatBytes, makeProgress, printLines, short, snippet, type Style, style } from "./Output.js"

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
 * Writes one history document as it is read: the head, one record per line
 * (each line but the last ends with a comma, so a record is printed once
 * the next one arrives), and the end with `nextOffset`.
 */
const makeHistoryDocument = (availability: string, path: string) => {
  let pending: string | undefined
  return {
    head: Console.log(`{"availability":${JSON.stringify(availability)},"path":${JSON.stringify(path)},"records":[`),
    record: (entry: HistoryRecord) =>
      Effect.suspend(() => {
        const previous = pending
        pending = jsonText(entry)
        return previous === undefined ? Effect.void : Console.log(`${previous},`)
      }),
    end: (nextOffset: number | null) =>
      Effect.suspend(() => Console.log(`${pending ?? ""}],"nextOffset":${JSON.stringify(nextOffset)}}`))
  }
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
      Flag.withDescription("Read every page to the end, in constant memory"),
      Flag.withDefault(false)
    )
  },
  Effect.fn("cli.history")(function*({ all, from, limit, session }) {
    const options = yield* globals
    yield* requireStore(options)
    const resolved = yield* resolveSession(session, options)
    const s = yield* style
    const request = { sessionFile: resolved.sessionFile, fromOffset: from, limit: Option.getOrUndefined(limit) }
    const run = <A, E>(effect: Effect.Effect<A, E, RarebitStore>) =>
      effect.pipe(Effect.provide(storeLayer(options)), Effect.mapError(toCliFailure))

    const first = yield* run(
      RarebitStore.use((store) => store.readHistory(all ? { ...request, limit: request.limit ?? 1000 } : request))
    )
    if (!all) {
      if (options.json) {
        const document = makeHistoryDocument(first.availability, first.path)
        yield* document.head
        for (const entry of first.records) yield* document.record(entry)
        return yield* document.end(first.nextOffset)
      }
      const lines = [`${s.dim("Sidecar")} ${first.path} (${first.availability})`]
      if (first.availability === "missing") lines.push("No sidecar yet: this Session has no receipts.")
      for (const entry of first.records) lines.push(formatHistoryRecord(s, entry))
      lines.push(
        first.nextOffset === null
          ? s.dim(`${first.records.length} receipt(s); end of sidecar`)
          : s.dim(`${first.records.length} receipt(s); next page: --from ${first.nextOffset}`)
      )
      return yield* printLines(lines)
    }

    const fs = yield* FileSystem
    // `lstat`, as the store sees the sidecar: a symlink there is not read.
    const size = yield* fs.lstat(resolved.sidecar).pipe(
      Effect.map((info) => Number(info.size)),
      Effect.catch(() => Effect.succeed(undefined))
    )
    const document = makeHistoryDocument(first.availability, first.path)
    yield* options.json
      ? document.head
      : Console.log(
        `${s.dim("Sidecar")} ${resolved.sidecar} (${
          first.availability === "available" && size !== undefined ? formatBytes(size) : first.availability
        })`
      )
    const progress = makeProgress()
    let count = 0
    const emit = (entry: HistoryRecord) =>
      Effect.gen(function*() {
        count++
        if (options.json) return yield* document.record(entry)
        yield* progress.clear
        yield* Console.log(formatHistoryRecord(s, entry))
        if (size !== undefined) yield* progress.update(entry.offset, size, `${formatBytes(entry.offset)} read`)
      })
    for (const entry of first.records) yield* emit(entry)
    if (first.availability === "unreadable") {
      if (options.json) yield* document.end(null)
      return yield* run(Effect.fail(new HistoryUnreadable({ path: first.path, offset: from })))
    }
    if (first.nextOffset !== null) {
      const rest = { ...request, fromOffset: first.nextOffset }
      yield* run(RarebitStore.use((store) => store.history(rest).pipe(Stream.runForEach(emit)))).pipe(
        Effect.ensuring(progress.clear)
      )
    }
    yield* options.json ? document.end(null) : Console.log(s.dim(`${count} receipt(s); end of sidecar`))
  })
).pipe(
  Command.withDescription(
    "List a Session's receipts with their byte offsets, page by page or all at once. " +
      "--json prints one JSON document, readRarebitHistory's {availability, path, records, nextOffset}, " +
      "one record per line (with --all, every record and nextOffset null); errors are one JSON line on stderr. " +
      "Exits 3 when there is no store at --root"
  ),
  Command.withExamples([
    { command: "rarebit-store history --session ./proj/session.jsonl --limit 20", description: "first 20 receipts" },
    { command: "rarebit-store history --session ./proj/session.jsonl --from 48210", description: "continue a page" },
    {
      command: "rarebit-store history --session 0b9c6a1e-demo --all --json | jq '.records | length'",
      description: "count receipts"
    }
  ])
)
