/**
 * `Date.prototype.toISOString`, computed with arithmetic.
 *
 * The built-in is not free: V8's first call in a process loads ICU's time
 * zone names (the formatter shares its set-up with `Date.prototype.toString`),
 * which makes the process ~1 MiB larger for its whole life. A reader checks
 * claim times and a writer stamps them, often in processes that never format
 * a date otherwise, so the store writes the same string itself.
 *
 * @internal
 * @since 0.1.0
 */

const MS_PER_DAY = 86_400_000
/** The largest distance from the epoch a JS `Date` represents, in ms. */
const MAX_TIME_MS = 8.64e15
/** Days from 0000-03-01 to 1970-01-01 in the proleptic Gregorian calendar. */
const EPOCH_SHIFT_DAYS = 719_468
const DAYS_PER_ERA = 146_097

const pad = (value: number, width: number): string => String(value).padStart(width, "0")

/**
 * The string `new Date(time).toISOString()` returns, e.g.
 * `2026-01-01T00:00:00.000Z`, `+275760-09-13T00:00:00.000Z`. Throws the
 * built-in's `RangeError` where it would (a time that is not finite or out
 * of a `Date`'s range).
 *
 * A time that is not a number is converted by `new Date`, as the reference's
 * `new Date(now)` converts it: a plain caller's `now` reaches the claim
 * unchecked, and `"2026-01-01"` is a time to the reference. Constructing a
 * `Date` does not load ICU's time zone names; only formatting one does (a
 * local time such as `"2026-01-01T00:00"` loads the zone's rules, about a
 * third of those pages, as the reference's `Date.parse` of it does too).
 *
 * @internal
 */
export const isoTimestampOf = (time: number): string => {
  const ms = typeof time === "number" ? time : new Date(time).getTime()
  if (!(Math.abs(ms) <= MAX_TIME_MS)) throw new RangeError("Invalid time value")
  // `new Date(ms)` truncates towards zero (TimeClip).
  const clipped = Math.trunc(ms)
  const days = Math.floor(clipped / MS_PER_DAY)
  const msOfDay = clipped - days * MS_PER_DAY
  // Civil date from a day count (H. Hinnant's algorithm): eras of 400 years,
  // years starting on 1 March so that the leap day ends them.
  const shifted = days + EPOCH_SHIFT_DAYS
  const era = Math.floor(shifted / DAYS_PER_ERA)
  const dayOfEra = shifted - era * DAYS_PER_ERA
  const yearOfEra = Math.floor(
    (dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365
  )
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100))
  const marchMonth = Math.floor((5 * dayOfYear + 2) / 153)
  const day = dayOfYear - Math.floor((153 * marchMonth + 2) / 5) + 1
  const month = marchMonth < 10 ? marchMonth + 3 : marchMonth - 9
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
  const yearText = year >= 0 && year <= 9999 ? pad(year, 4) : `${year < 0 ? "-" : "+"}${pad(Math.abs(year), 6)}`
  const hours = Math.floor(msOfDay / 3_600_000)
  const minutes = Math.floor(msOfDay / 60_000) % 60
  const seconds = Math.floor(msOfDay / 1000) % 60
  return `${yearText}-${pad(month, 2)}-${pad(day, 2)}T${pad(hours, 2)}:${pad(minutes, 2)}:${pad(seconds, 2)}.${
    pad(msOfDay % 1000, 3)
  }Z`
}
