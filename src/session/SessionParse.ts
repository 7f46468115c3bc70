/**
 * Parsing a Pi Session JSONL text and walking its active branch.
 *
 * A Session is one header line (`type: "session"`, a non-empty string `id`)
 * followed by entries. Version 1 Sessions (and headers without a version) are
 * linear: every entry is on the branch, in file order. From version 2 on,
 * entries form a tree through `id`/`parentId`, and Pi persists the active leaf
 * as the last entry, so the branch is the chain from that entry to its root.
 *
 * Blank lines are skipped; anything else must be JSON. Entries are kept as the
 * JSON values they parse to, unvalidated, because the selector reads only the
 * few fields it knows and must see exactly what Pi wrote.
 *
 * Each operation comes in three forms with one implementation: a `Result`, an
 * `Effect` failing with `SessionInvalid`, and the throwing form of the plain
 * API, which throws what the reference throws (`toQueryError`).
 *
 * @since 0.1.0
 */
import { Effect, Result } from "effect"
import { memberOf } from "../protocol/internal/JsonShape.js"
import { SessionInvalid, toQueryError } from "./SessionErrors.js"

export { SessionInvalid, toQueryError }

/**
 * A Session header: the first record, with `type: "session"` and a non-empty
 * string `id`. Other fields (`version`, `timestamp`, `cwd`, ...) are as written.
 *
 * @category models
 * @since 0.1.0
 */
export interface SessionHeader {
  readonly type: "session"
  readonly id: string
  readonly [field: string]: unknown
}

/**
 * An entry of a tree Session: any JSON object with a non-empty string `id`.
 *
 * @category models
 * @since 0.1.0
 */
export interface SessionEntry {
  readonly id: string
  readonly [field: string]: unknown
}

/**
 * A parsed Session, shaped like the reference's result.
 *
 * **Details**
 *
 * `entries` are the records after the header, in file order. `byId` indexes
 * them by id for tree Sessions and stays empty for linear ones, whose entries
 * may be any JSON value.
 *
 * @category models
 * @since 0.1.0
 */
export interface ParsedSession {
  readonly header: SessionHeader
  readonly entries: Array<unknown>
  readonly byId: Map<string, SessionEntry>
  readonly linear: boolean
}

/**
 * The part of a parsed Session the branch walk needs.
 *
 * @category models
 * @since 0.1.0
 */
export interface SessionTree {
  readonly entries: ReadonlyArray<unknown>
  readonly byId: ReadonlyMap<unknown, unknown>
  readonly linear: unknown
}

const DEFAULT_SOURCE = "Pi Session"

/**
 * One line's JSON value, or that it is not JSON. (A line that is JSON
 * `null` is a value, not a failure.)
 *
 * @category parsing
 * @since 0.1.0
 */
export const parseLine = (line: string): { readonly ok: true; readonly value: unknown } | { readonly ok: false } => {
  try {
    return { ok: true, value: JSON.parse(line) }
  } catch {
    return { ok: false }
  }
}

/**
 * Whether a record is a Session header: `type: "session"` and a non-empty
 * string `id`.
 *
 * @category parsing
 * @since 0.1.0
 */
export const isSessionHeader = (record: unknown): record is SessionHeader => {
  const id = memberOf(record, "id")
  return memberOf(record, "type") === "session" && typeof id === "string" && id.length > 0
}

/**
 * Whether a header's Session is linear (version 1, or no version) rather
 * than a tree. The comparison is JavaScript's own, on whatever `version`
 * holds: "2" and [2] count as tree Sessions exactly as they do for the
 * reference.
 *
 * @category parsing
 * @since 0.1.0
 */
export const isLinearSession = (header: SessionHeader): boolean => ((header.version ?? 1) as number) < 2

/**
 * The line rule of a Session text, for parsers fed its lines in file order:
 * blank lines are skipped, every other line must be JSON, and the first that
 * is not decides the outcome (`malformed_json` at that 1-based line), so
 * after it (`wantsLines` turns false) lines are only counted.
 *
 * **Details**
 *
 * `addLine` takes each complete line without its newline and hands the
 * JSON value of each non-blank one to `addRecord`.
 *
 * @category parsing
 * @since 0.1.0
 */
export abstract class SessionLineParser {
  /** Lines fed so far (newlines consumed). */
  lines = 0
  /** The first malformed line (1-based), once there is one. */
  protected malformedLine: number | undefined = undefined

  constructor(readonly source: string) {}

  /** Whether later lines can still change the outcome: false after a malformed line. */
  get wantsLines(): boolean {
    return this.malformedLine === undefined
  }

  /** Feeds one complete line. */
  addLine(line: string): void {
    this.lines++
    if (this.malformedLine !== undefined || !line.trim()) return
    const parsed = parseLine(line)
    if (parsed.ok) this.addRecord(parsed.value)
    else this.malformedLine = this.lines
  }

  /** Takes the value of the next non-blank line. */
  protected abstract addRecord(record: unknown): void
}

/**
 * The parse of a Session fed line by line, in file order: what
 * `parseSessionResult` computes for the whole text, for readers that stream
 * the file.
 *
 * **Details**
 *
 * `addLine` takes each complete line without its newline; `finish` takes the
 * unterminated rest ("" when the text ends with a newline) and is called
 * once. After the first malformed line nothing later can change the outcome
 * (`wantsLines` turns false) and later lines are only counted.
 *
 * @category parsing
 * @since 0.1.0
 */
export class SessionRecords extends SessionLineParser {
  private readonly records: Array<unknown> = []

  constructor(source: string = DEFAULT_SOURCE) {
    super(source)
  }

  protected addRecord(record: unknown): void {
    this.records.push(record)
  }

  finish(trailing: string): Result.Result<ParsedSession, SessionInvalid> {
    this.addLine(trailing)
    if (this.malformedLine !== undefined) {
      return Result.fail(SessionInvalid.malformedJson(this.source, this.malformedLine))
    }
    return fromRecords(this.records, this.source)
  }
}

const fromRecords = (records: Array<unknown>, source: string): Result.Result<ParsedSession, SessionInvalid> => {
  const header = records[0]
  if (!isSessionHeader(header)) return Result.fail(SessionInvalid.invalidHeader(source))
  const entries = records.slice(1)
  const byId = new Map<string, SessionEntry>()
  if (isLinearSession(header)) return Result.succeed({ header, entries, byId, linear: true })
  for (const entry of entries) {
    const entryId = memberOf(entry, "id")
    if (typeof entryId !== "string" || !entryId) {
      return Result.fail(SessionInvalid.entryWithoutId(source))
    }
    if (byId.has(entryId)) {
      return Result.fail(SessionInvalid.duplicateId(source, entryId))
    }
    byId.set(entryId, entry as SessionEntry)
  }
  return Result.succeed({ header, entries, byId, linear: false })
}

/**
 * Parses Session text into a `ParsedSession`, or the first rule it breaks.
 *
 * @category parsing
 * @since 0.1.0
 */
export const parseSessionResult = (
  content: string,
  source: string = DEFAULT_SOURCE
): Result.Result<ParsedSession, SessionInvalid> => {
  const records = new SessionRecords(source)
  const lines = String(content).split("\n")
  const trailing = lines.pop()!
  for (const line of lines) {
    records.addLine(line)
    if (!records.wantsLines) break
  }
  return records.finish(trailing)
}

/**
 * The active branch of a parsed Session, root first, or the tree defect that
 * stops the walk from the last entry.
 *
 * **Details**
 *
 * A linear Session returns a copy of all entries. A tree Session follows
 * `parentId` from the last entry until a `null` or absent parent; revisiting an
 * entry is a `cycle`, a parent id that names no entry is `missing_parent`.
 *
 * @category parsing
 * @since 0.1.0
 */
export const resolveActiveBranchResult = (
  parsed: SessionTree,
  source: string = DEFAULT_SOURCE
): Result.Result<Array<unknown>, SessionInvalid> => {
  const { byId, entries, linear } = parsed
  if (linear) return Result.succeed(entries.slice())
  const leaf = entries.at(-1)
  if (!leaf) return Result.succeed([])
  const reversed: Array<unknown> = []
  const visited = new Set<unknown>()
  let current: unknown = leaf
  while (current) {
    const currentId = memberOf(current, "id")
    if (visited.has(currentId)) {
      return Result.fail(SessionInvalid.cycle(source, currentId))
    }
    visited.add(currentId)
    reversed.push(current)
    const parentId = memberOf(current, "parentId")
    if (parentId === null || parentId === undefined) break
    current = byId.get(parentId)
    if (!current) {
      return Result.fail(SessionInvalid.missingParent(source, parentId))
    }
  }
  return Result.succeed(reversed.reverse())
}

/**
 * `parseSessionResult` as an Effect.
 *
 * @category parsing
 * @since 0.1.0
 */
export const parseSessionEffect = (
  content: string,
  source: string = DEFAULT_SOURCE
): Effect.Effect<ParsedSession, SessionInvalid> =>
  Effect.suspend(() => Effect.fromResult(parseSessionResult(content, source)))

/**
 * `resolveActiveBranchResult` as an Effect.
 *
 * @category parsing
 * @since 0.1.0
 */
export const resolveActiveBranchEffect = (
  parsed: SessionTree,
  source: string = DEFAULT_SOURCE
): Effect.Effect<Array<unknown>, SessionInvalid> =>
  Effect.suspend(() => Effect.fromResult(resolveActiveBranchResult(parsed, source)))

/**
 * Parses Session text, throwing the reference's `RarebitQueryError` on failure.
 *
 * @category plain api
 * @since 0.1.0
 */
export const parseNativeSession = (content: string, source: string = DEFAULT_SOURCE): ParsedSession =>
  Result.getOrThrowWith(parseSessionResult(content, source), toQueryError)

/**
 * The active branch of a parsed Session, throwing the reference's
 * `RarebitQueryError` on failure.
 *
 * @category plain api
 * @since 0.1.0
 */
export const resolveActiveBranch = (parsed: SessionTree, source: string = DEFAULT_SOURCE): Array<unknown> =>
  Result.getOrThrowWith(resolveActiveBranchResult(parsed, source), toQueryError)
