/**
 * `isoTimestampOf` is `Date.prototype.toISOString` without the built-in:
 * the same string for every time a `Date` holds, from the first instant to
 * the last, fractional milliseconds and `-0` included, and the same
 * `RangeError` outside that range. Held against the built-in at the range's
 * edges, around the year boundaries where the format changes (0, 9999,
 * negative years), around leap days and era boundaries, and over generated
 * times of the whole range.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { isoTimestampOf } from "../../src/protocol/internal/IsoTimestamp.js"
import { fuzzRuns } from "../support/FuzzRuns.js"

const builtIn = (ms: number): string => new Date(ms).toISOString()
const MAX = 8.64e15

describe("isoTimestampOf", () => {
  it("writes what toISOString writes at fixed times and at the range's edges", () => {
    assert.strictEqual(isoTimestampOf(0), "1970-01-01T00:00:00.000Z")
    assert.strictEqual(isoTimestampOf(1_767_225_600_000), "2026-01-01T00:00:00.000Z")
    assert.strictEqual(isoTimestampOf(MAX), "+275760-09-13T00:00:00.000Z")
    assert.strictEqual(isoTimestampOf(-MAX), "-271821-04-20T00:00:00.000Z")
    assert.strictEqual(isoTimestampOf(-1), "1969-12-31T23:59:59.999Z")
    for (const ms of [-0, 0.9, -0.9, 1.5, -1.5, MAX - 0.5, -MAX + 0.5, 951_782_400_000, 4_107_542_400_000]) {
      assert.strictEqual(isoTimestampOf(ms), builtIn(ms), String(ms))
    }
  })

  it("writes four-digit years from 0 to 9999 and signed six-digit years outside them", () => {
    for (const year of [-10_000, -1, 0, 1, 99, 100, 400, 1600, 1900, 2000, 2100, 9999, 10_000, 99_999, 100_000]) {
      const date = new Date(Date.UTC(2000, 0, 1))
      date.setUTCFullYear(year)
      for (const delta of [-86_400_001, -1, 0, 1, 86_400_000 * 59, 86_400_000 * 60, 86_400_000 * 365]) {
        const ms = date.getTime() + delta
        assert.strictEqual(isoTimestampOf(ms), builtIn(ms), `${year} ${delta}`)
      }
    }
  })

  it("converts a time that is not a number as new Date does", () => {
    // A plain caller's `now` reaches a claim unchecked: the reference formats whatever `new Date` makes of it.
    const odd: ReadonlyArray<unknown> = ["2026-01-01", "2026-01-01T12:00:00.5Z", new Date(86_400_000), "42", true, null]
    for (const time of odd) {
      assert.strictEqual(isoTimestampOf(time as number), new Date(time as number).toISOString(), String(time))
    }
    for (const time of ["soon", undefined, {}]) {
      assert.throws(() => isoTimestampOf(time as unknown as number), RangeError)
    }
  })

  it("throws RangeError where toISOString does", () => {
    for (const ms of [Number.NaN, Infinity, -Infinity, MAX + 1, -MAX - 1, 1e300]) {
      assert.throws(() => builtIn(ms), RangeError)
      assert.throws(() => isoTimestampOf(ms), RangeError)
    }
  })

  it("agrees with toISOString over generated times of the whole range", () => {
    const near = (center: number) => fc.integer({ min: -100_000_000, max: 100_000_000 }).map((d) => center + d)
    fc.assert(
      fc.property(
        fc.oneof(
          fc.integer({ min: -MAX, max: MAX }),
          fc.double({ min: -MAX, max: MAX, noNaN: true }),
          near(0),
          near(Date.UTC(2000, 1, 29)),
          near(Date.UTC(1600, 2, 1)),
          near(Date.UTC(-1, 11, 31))
        ),
        (ms) => isoTimestampOf(ms) === builtIn(ms)
      ),
      { numRuns: fuzzRuns(20_000) }
    )
  })
})
