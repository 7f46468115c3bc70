/**
 * The Promise API's cache budget, from the environment. A plain caller has
 * no layer to give a `StoreConfig` to, and the functions take the
 * reference's arguments and no more, so a process that polls more Sessions
 * than the default budget holds, or must keep less, says so here:
 *
 * - `RAREBIT_STORE_CACHE_MAX_BYTES`: estimated bytes of cached state over
 *   both caches, a whole number optionally followed by `KiB`, `MiB` or
 *   `GiB` (`64MiB`); `0` keeps no state, so every read is a full read.
 * - `RAREBIT_STORE_CACHE_MAX_OPEN_FILES`: files held open between reads, a
 *   whole number; `0` holds none (each read opens and closes its files).
 *
 * Unset or empty means the default (`DEFAULT_CACHE_BUDGET`). Anything else
 * is refused with a `RangeError` naming the variable, never read as the
 * default: a budget that silently did not apply would be found only when
 * the process ran out of memory or descriptors.
 *
 * @since 0.1.0
 */
import { type CacheBudgetConfig, DEFAULT_CACHE_BUDGET } from "../store/StoreConfig.js"

/** @category constants @since 0.1.0 */
export const CACHE_MAX_BYTES_VARIABLE = "RAREBIT_STORE_CACHE_MAX_BYTES"
/** @category constants @since 0.1.0 */
export const CACHE_MAX_OPEN_FILES_VARIABLE = "RAREBIT_STORE_CACHE_MAX_OPEN_FILES"

const UNIT_BYTES: Readonly<Record<string, number>> = { "": 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 }

const wholeNumber = (name: string, value: string, units: boolean): number => {
  const match = /^(\d+)(KiB|MiB|GiB)?$/.exec(value.trim())
  const number = match === null || (!units && match[2] !== undefined)
    ? Number.NaN
    : Number(match[1]) * UNIT_BYTES[match[2] ?? ""]
  if (!Number.isSafeInteger(number)) {
    throw new RangeError(
      `${name} must be a whole number${
        units ? " of bytes, optionally followed by KiB, MiB or GiB (e.g. 64MiB)" : ""
      }, got ${JSON.stringify(value)}`
    )
  }
  return number
}

/**
 * The budget `environment` sets, the default for what it leaves unset.
 * Throws a `RangeError` for a value that is not one.
 *
 * @category constructors
 * @since 0.1.0
 */
export const cacheBudgetFromEnvironment = (
  environment: Readonly<Record<string, string | undefined>>
): CacheBudgetConfig => {
  const maxBytes = environment[CACHE_MAX_BYTES_VARIABLE]
  const maxOpenFiles = environment[CACHE_MAX_OPEN_FILES_VARIABLE]
  return {
    maxBytes: maxBytes === undefined || maxBytes === ""
      ? DEFAULT_CACHE_BUDGET.maxBytes
      : wholeNumber(CACHE_MAX_BYTES_VARIABLE, maxBytes, true),
    maxOpenFiles: maxOpenFiles === undefined || maxOpenFiles === ""
      ? DEFAULT_CACHE_BUDGET.maxOpenFiles
      : wholeNumber(CACHE_MAX_OPEN_FILES_VARIABLE, maxOpenFiles, false)
  }
}
