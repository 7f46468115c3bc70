/**
 * Summary receipts the store verified itself, trusted for one projection.
 *
 * A current read hands the projection the receipt it has just verified
 * (hash, newline, schema; or a fresh copy of one it verified earlier, whose
 * bytes it has just compared). Validating it again would repeat that work on
 * every poll. The store vouches for those records only while its own
 * synchronous projection call runs, so a record a caller later changes and
 * projects again is validated like any other.
 *
 * @internal
 */

const vouched = new WeakSet<object>()

/**
 * Runs `project` while `records` count as verified Summary receipts.
 * Every record must be one the caller verified and nobody else has seen.
 *
 * @internal
 */
export const withVerifiedSummaries = <A>(records: ReadonlyArray<object>, project: () => A): A => {
  for (const record of records) vouched.add(record)
  try {
    return project()
  } finally {
    for (const record of records) vouched.delete(record)
  }
}

/** Whether `record` is vouched for by a projection running now. @internal */
export const isVerifiedSummary = (record: unknown): boolean =>
  typeof record === "object" && record !== null && vouched.has(record)
