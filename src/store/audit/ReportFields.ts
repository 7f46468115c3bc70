/**
 * How the operator's reports (the audit's findings, claim and lock reports)
 * quote what they found on disk.
 *
 * A report quotes files that may hold anything: values nested 100,000 levels
 * deep, megabyte keys or strings. Whatever they hold, a report stays small
 * and serialisable: parsed values are described without recursion, a
 * finding's detail is at most `MAX_DETAIL_CHARS` characters and a string
 * copied from a file at most `MAX_FIELD_CHARS`, longer text being cut and
 * ending in `…`.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import type { FileSystem } from "effect/FileSystem"
import type { PlatformError } from "effect/PlatformError"
import { errnoOf } from "../../io/ErrnoCode.js"
import { modifiedMs } from "../../protocol/internal/FileInfo.js"
import { isObjectRecord, memberOf } from "../../protocol/internal/JsonShape.js"
import { clipText } from "../../protocol/internal/Text.js"

/**
 * The most characters a finding's `detail` holds. Details quote what a bad
 * file contains (keys, types, states), so a file of megabytes could otherwise
 * be echoed whole; longer text is cut and ends in `…`.
 *
 * @category constants
 * @since 0.1.0
 */
export const MAX_DETAIL_CHARS = 300

/**
 * The most characters of a string field copied from a file into a report
 * (`claimedAt`, owner evidence); longer values are cut and end in `…`.
 *
 * @category constants
 * @since 0.1.0
 */
export const MAX_FIELD_CHARS = 256

/** A finding's detail, cut to `MAX_DETAIL_CHARS`. @internal */
export const clipDetail = (text: string): string => clipText(text, MAX_DETAIL_CHARS)

/** A string copied from a file, cut to `MAX_FIELD_CHARS`. @internal */
export const clipField = (text: string): string => clipText(text, MAX_FIELD_CHARS)

/** `clipField` of a field that may be absent (`null`). @internal */
export const clipNullableField = (text: string | null): string | null => (text === null ? null : clipField(text))

/** `u[key]` when it is a string, else `null`: a field of a parsed file, whatever it parsed to. @internal */
export const stringMember = (u: unknown, key: string): string | null => {
  const value = memberOf(u, key)
  return typeof value === "string" ? value : null
}

/** `1 byte`, `2 bytes`. @internal */
export const plural = (count: number, word: string): string => `${count} ${word}${count === 1 ? "" : "s"}`

/** An age in the largest unit that keeps it readable: `90 s old`, `3 min old`, `2 days old`. @internal */
export const ageText = (ms: number | null): string => {
  if (ms === null) return "of unknown age"
  const seconds = Math.max(0, Math.round(ms / 1000))
  if (seconds < 120) return `${seconds} s old`
  if (seconds < 7200) return `${Math.round(seconds / 60)} min old`
  if (seconds < 172_800) return `${Math.round(seconds / 3600)} h old`
  return `${Math.round(seconds / 86_400)} days old`
}

/**
 * A short description of any parsed JSON value, for details: a string quoted
 * and cut, a number or literal as written, containers by their size. Never
 * recursive, so a value nested 100,000 levels deep is "an array of 1 item".
 *
 * @internal
 */
export const describeJson = (value: unknown): string => {
  if (value === undefined) return "missing"
  if (typeof value === "string") return JSON.stringify(clipText(value, 40))
  if (Array.isArray(value)) return `an array of ${plural(value.length, "item")}`
  if (isObjectRecord(value)) return `an object with ${plural(Object.keys(value).length, "key")}`
  return String(value)
}

/** Why a file could not be read, by the platform error's reason and errno: `cannot be read (PermissionDenied, EACCES)`. @internal */
export const describeError = (error: PlatformError): string => {
  const code = errnoOf(error)
  return code === undefined ? `cannot be read (${error.reason._tag})` : `cannot be read (${error.reason._tag}, ${code})`
}

/** When `path` itself (never a link's target) was last modified, in epoch ms; `undefined` when that cannot be told. @internal */
export const modifiedAt = (fs: FileSystem, path: string): Effect.Effect<number | undefined> =>
  fs.lstat(path).pipe(
    Effect.map(modifiedMs),
    Effect.catch(() => Effect.succeed(undefined))
  )
