/**
 * Terminal output of the CLI: colors, JSON, progress, human-friendly units.
 *
 * Colors are used only when stdout is a terminal and `NO_COLOR` is unset
 * (Effect's `TerminalCapabilities` decides, honouring `FORCE_COLOR` and
 * `TERM=dumb` too). Progress goes to stderr, and only when stderr is a
 * terminal, so piped output and `--json` stay clean.
 *
 * @since 0.1.0
 */
import { Console, Effect } from "effect"
import { TerminalCapabilities } from "effect/cli"
import { jsonLineGroups, jsonText } from "./JsonText.js"

/**
 * Text styles; the identity when colors are off.
 *
 * @category models
 * @since 0.1.0
 */
export interface Style {
  readonly bold: (text: string) => string
  readonly dim: (text: string) => string
  readonly red: (text: string) => string
  readonly green: (text: string) => string
  readonly yellow: (text: string) => string
  readonly cyan: (text: string) => string
}

const sgr = (open: number, close: number) => (text: string) => `\u001b[${open}m${text}\u001b[${close}m`

const plain = (text: string) => text

/** Styles for the given color choice. @category constructors @since 0.1.0 */
export const makeStyle = (colors: boolean): Style =>
  colors
    ? {
      bold: sgr(1, 22),
      dim: sgr(2, 22),
      red: sgr(31, 39),
      green: sgr(32, 39),
      yellow: sgr(33, 39),
      cyan: sgr(36, 39)
    }
    : { bold: plain, dim: plain, red: plain, green: plain, yellow: plain, cyan: plain }

/**
 * The styles for stdout as it is now.
 *
 * @category constructors
 * @since 0.1.0
 */
export const style: Effect.Effect<Style> = Effect.gen(function*() {
  const capabilities = yield* TerminalCapabilities.TerminalCapabilities
  return makeStyle(capabilities.canColor)
})

/** A source's availability, green when available, yellow when missing, red when unreadable. */
export const availabilityText = (s: Style, availability: string): string =>
  availability === "available"
    ? s.green(availability)
    : availability === "missing"
    ? s.yellow(availability)
    : s.red(availability)

/**
 * Prints a value as indented JSON on stdout.
 *
 * **Details**
 *
 * Written by `jsonText`, so a record nested deeper than `JSON.stringify`
 * can go still prints as valid JSON.
 *
 * @category output
 * @since 0.1.0
 */
export const printJson = (value: unknown): Effect.Effect<void> =>
  Effect.suspend(() => {
    // A few lines at a time, so a large report (`verify` over a whole store)
    // is never held as one string: the same bytes, a newline at the end.
    const groups = jsonLineGroups(value, 2)
    const next = (): Effect.Effect<void> => {
      const group = groups.next()
      return group.done === true ? Effect.void : Effect.andThen(Console.log(group.value), next)
    }
    return next()
  })

/**
 * Prints a value as one line of compact JSON on stdout (NDJSON).
 *
 * @category output
 * @since 0.1.0
 */
export const printJsonLine = (value: unknown): Effect.Effect<void> => Console.log(jsonText(value) ?? "null")

/**
 * Prints lines on stdout.
 *
 * @category output
 * @since 0.1.0
 */
export const printLines = (lines: ReadonlyArray<string>): Effect.Effect<void> =>
  lines.length === 0 ? Effect.void : Console.log(lines.join("\n"))

/**
 * A progress line on stderr, redrawn in place, or nothing when stderr is
 * not a terminal.
 *
 * @category models
 * @since 0.1.0
 */
export interface Progress {
  readonly update: (done: number, total: number, label: string) => Effect.Effect<void>
  readonly clear: Effect.Effect<void>
}

const BAR_WIDTH = 24
const REDRAW_MS = 80

/**
 * Makes a progress line; `enabled` overrides terminal detection (tests).
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeProgress = (enabled: boolean = process.stderr.isTTY === true): Progress => {
  let lastDraw = 0
  let drawn = false
  const columns = () => Math.max(40, process.stderr.columns ?? 80)
  const update = (done: number, total: number, label: string) =>
    Effect.sync(() => {
      if (!enabled) return
      const now = Date.now()
      if (now - lastDraw < REDRAW_MS && done < total) return
      lastDraw = now
      const ratio = total > 0 ? Math.min(1, done / total) : 0
      const filled = Math.round(ratio * BAR_WIDTH)
      const head = `[${"#".repeat(filled)}${" ".repeat(BAR_WIDTH - filled)}] ${done}/${total} `
      const room = columns() - head.length - 1
      const tail = label.length > room ? `…${label.slice(label.length - room + 1)}` : label
      process.stderr.write(`\r\u001b[2K${head}${tail}`)
      drawn = true
    })
  const clear = Effect.sync(() => {
    if (enabled && drawn) process.stderr.write("\r\u001b[2K")
    drawn = false
  })
  return { update, clear }
}

/**
 * A duration in the largest sensible unit, e.g. `4m12s`, `850ms`.
 *
 * @category formatting
 * @since 0.1.0
 */
export const formatDuration = (ms: number): string => {
  const abs = Math.abs(ms)
  if (abs < 1000) return `${Math.round(abs)}ms`
  const seconds = Math.floor(abs / 1000)
  if (seconds < 60) return `${seconds}s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 60) return `${minutes}m${String(seconds % 60).padStart(2, "0")}s`
  const hours = Math.floor(minutes / 60)
  if (hours < 48) return `${hours}h${String(minutes % 60).padStart(2, "0")}m`
  return `${Math.floor(hours / 24)}d`
}

/**
 * A byte count in B, KiB or MiB.
 *
 * @category formatting
 * @since 0.1.0
 */
export const formatBytes = (bytes: number): string =>
  bytes < 1024
    ? `${bytes} B`
    : bytes < 1024 * 1024
    ? `${(bytes / 1024).toFixed(1)} KiB`
    : `${(bytes / 1024 / 1024).toFixed(1)} MiB`

/**
 * The first `length` characters of a hash or id, for tables.
 *
 * @category formatting
 * @since 0.1.0
 */
export const short = (id: unknown, length: number = 12): string =>
  typeof id === "string" ? (id.length > length ? `${id.slice(0, length)}…` : id) : String(id)

/**
 * Any value from a record as short display text: strings as they are,
 * other values by their string form, or `fallback` where that conversion
 * throws (an array nested too deep to convert); cut to `max` characters.
 *
 * @category formatting
 * @since 0.1.0
 */
export const displayText = (value: unknown, max: number = 80, fallback: string = "(unprintable)"): string => {
  let text: string
  try {
    text = typeof value === "string" ? value : String(value)
  } catch {
    text = fallback
  }
  return text.length > max ? `${text.slice(0, max - 1)}…` : text
}

/**
 * One line of prose, cut to `max` characters.
 *
 * @category formatting
 * @since 0.1.0
 */
export const snippet = (text: unknown, max: number = 72): string => {
  if (typeof text !== "string") return ""
  const line = text.replace(/\s+/g, " ").trim()
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}
