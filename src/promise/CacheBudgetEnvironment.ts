/**
 * The Promise API's cache budget, from the environment. A plain caller has
 * no layer to give a `StoreConfig` to, and the functions take the
 * reference's arguments and no more, so a process that polls more Sessions
 * than the default budget holds, or must keep less, says so here:
 *
 * - `RAREBIT_STORE_CACHE_MAX_BYTES`: estimated bytes of cached state over
 *   both caches, a whole number optionally followed by `KiB`, `MiB` or
 *   `GiB` (`64MiB`); `0` keeps no state, so every read is a full read.
 *
 * Unset or empty means the default (`DEFAULT_CACHE_BUDGET`). Anything else
 * is refused with a `RangeError` naming the variable, never read as the
 * default: a budget that silently did not apply would be found only when
 * the process ran out of memory.
 *
 * @since 0.1.0
 */
import { type CacheBudgetConfig, DEFAULT_CACHE_BUDGET } from "../store/StoreConfig.js"

/** @category constants @since 0.1.0 */
export const CACHE_MAX_BYTES_VARIABLE = "RAREBIT_STORE_CACHE_MAX_BYTES"

const UNIT_BYTES: Readonly<Record<string, number>> = { "": 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 }

const bytesOf = (value: string): number => {
  const match = /^(\d+)(KiB|MiB|GiB)?$/.exec(value.trim())
  const number = match === null ? Number.NaN : Number(match[1]) * UNIT_BYTES[match[2] ?? ""]
  if (!Number.isSafeInteger(number)) {
    throw new RangeError(
      `${CACHE_MAX_BYTES_VARIABLE} must be a whole number of bytes, optionally followed by KiB, MiB or GiB (e.g. 64MiB), got ${
        JSON.stringify(value)
      }`
    )
  }
  return number
}

/**
 * The budget `environment` sets, the default when it leaves it unset.
 * Throws a `RangeError` for a value that is not one.
 *
 * @category constructors
 * @since 0.1.0
 */
export const cacheBudgetFromEnvironment = (
  environment: Readonly<Record<string, string | undefined>>
): CacheBudgetConfig => {
  const maxBytes = environment[CACHE_MAX_BYTES_VARIABLE]
  return maxBytes === undefined || maxBytes === "" ? DEFAULT_CACHE_BUDGET : { maxBytes: bytesOf(maxBytes) }
}
