/**
 * Evidence lists this package built itself and never changes afterwards.
 *
 * The Session cache hands the same occurrence list to every poll of an
 * unchanged Session, and the artifact-state projection checks an occurrence
 * list on every read. Registering the cache's lists here lets the projection
 * remember its verdict for exactly those lists. Lists from anywhere else
 * (callers' own `native` observations) are checked every time.
 *
 * The lists are not frozen: frozen objects take other hidden classes in V8,
 * which made every later property read on them slower than the check saved.
 * Callers of the Session cache already treat its results as read-only.
 *
 * @internal
 */

const registered = new WeakSet<ReadonlyArray<unknown>>()

/** Registers a list this package built and will not change. @internal */
export const registerOwnEvidence = <A>(items: Array<A>): Array<A> => {
  registered.add(items)
  return items
}

/** Whether `value` is a list registered by `registerOwnEvidence`. @internal */
export const isOwnEvidence = (value: unknown): value is ReadonlyArray<unknown> =>
  Array.isArray(value) && registered.has(value)
