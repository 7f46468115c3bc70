/**
 * Comparing what our code and the reference did with the same input: both
 * returned deep-equal values, or both threw the same class, name, message
 * (and Node error `code`, when there is one).
 */
import { assert } from "@effect/vitest"

export type Outcome<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly error: unknown }

export const capture = <A>(f: () => A): Outcome<A> => {
  try {
    return { ok: true, value: f() }
  } catch (error) {
    return { ok: false, error }
  }
}

export const settle = <A>(f: () => Promise<A>): Promise<Outcome<A>> =>
  f().then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error }))

const describeOutcome = (outcome: Outcome<unknown>): string =>
  outcome.ok ? "succeeded" : `threw ${String(outcome.error)}`

export const assertSameOutcome = (ours: Outcome<unknown>, reference: Outcome<unknown>, label: string): void => {
  if (ours.ok && reference.ok) {
    assert.deepStrictEqual(ours.value, reference.value, label)
    return
  }
  if (!ours.ok && !reference.ok) {
    const a = ours.error as Error & { code?: unknown }
    const b = reference.error as Error & { code?: unknown }
    assert.strictEqual(Object.getPrototypeOf(a), Object.getPrototypeOf(b), `${label}: error class`)
    assert.strictEqual(a.name, b.name, `${label}: error name`)
    assert.strictEqual(a.message, b.message, `${label}: error message`)
    assert.strictEqual(a.code, b.code, `${label}: error code`)
    return
  }
  assert.fail(`${label}: ours ${describeOutcome(ours)}, reference ${describeOutcome(reference)}`)
}
