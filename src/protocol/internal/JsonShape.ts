/**
 * Shape predicates with the exact JavaScript semantics of the reference
 * validators.
 *
 * The reference decides validity with plain JavaScript tests, so their corner
 * cases are part of the protocol: `-0` is a non-negative integer, `1e300` is an
 * integer, arrays are not records, a key counts as present only when it is an
 * own property, and only own enumerable string keys can be excess. Both the
 * Schemas and the fast guards of this folder build on these helpers so the two
 * cannot drift apart on a leaf.
 *
 * @internal
 * @since 0.1.0
 */
import { type Schema, SchemaAST } from "effect"
import { SHA256_HEX_PATTERN } from "../CanonicalJson.js"
import { isoTimestampOf } from "./IsoTimestamp.js"

/** A non-null, non-array object: what the reference calls a plain object. @internal */
export const isObjectRecord = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/** The keys a record must own and the keys it may own. @internal */
export interface KeyShape {
  readonly required: ReadonlyArray<string>
  readonly allowed: ReadonlySet<string>
}

/** @internal */
export const keyShape = (required: ReadonlyArray<string>, optional: ReadonlyArray<string> = []): KeyShape => ({
  required,
  allowed: new Set([...required, ...optional])
})

/**
 * The key shape of a Schema struct's fields, so a hand-written guard checks
 * exactly the keys its Schema declares: a `Schema.optionalKey` field may be
 * absent, every other field is required.
 *
 * @internal
 */
export const keyShapeOf = (fields: Readonly<Record<string, Schema.Top>>): KeyShape => {
  const required: Array<string> = []
  const optional: Array<string> = []
  for (const [key, field] of Object.entries(fields)) (SchemaAST.isOptional(field.ast) ? optional : required).push(key)
  return keyShape(required, optional)
}

/**
 * A record owning every required key and no enumerable string key outside the
 * allowed set. Inherited properties never count as present, and symbol keys are
 * never excess, as in the reference.
 *
 * @internal
 */
export const hasKeyShape = (u: unknown, shape: KeyShape): u is Record<string, unknown> => {
  if (!isObjectRecord(u)) return false
  const required = shape.required
  for (let i = 0; i < required.length; i++) {
    if (!Object.hasOwn(u, required[i])) return false
  }
  const keys = Object.keys(u)
  for (let i = 0; i < keys.length; i++) {
    if (!shape.allowed.has(keys[i])) return false
  }
  return true
}

/** @internal */
export const isNonEmptyString = (u: unknown): u is string => typeof u === "string" && u.length > 0

/** @internal */
export const isNullableString = (u: unknown): u is string | null => u === null || typeof u === "string"

/** `null` or a non-empty string. @internal */
export const isNullableNonEmptyString = (u: unknown): u is string | null => u === null || isNonEmptyString(u)

/** @internal */
export const isSha256Hex = (u: unknown): u is string => typeof u === "string" && SHA256_HEX_PATTERN.test(u)

/** `Number.isInteger` semantics: `-0` and `1e300` pass, `NaN` and `1.5` fail. @internal */
export const isNonNegativeInteger = (u: unknown): u is number => Number.isInteger(u) && (u as number) >= 0

/** @internal */
export const isPositiveInteger = (u: unknown): u is number => Number.isInteger(u) && (u as number) > 0

/** `null`, or a finite number that is not negative (`-0` passes). @internal */
export const isNullableNonNegativeNumber = (u: unknown): u is number | null =>
  u === null || (Number.isFinite(u) && (u as number) >= 0)

/** A non-empty string that `Date.parse` accepts. @internal */
export const isParsableTimestamp = (u: unknown): u is string =>
  typeof u === "string" && u.length > 0 && Number.isFinite(Date.parse(u))

/**
 * The property key JavaScript would use for `u` in `table[u]`, or `undefined`
 * when converting `u` throws (an object whose `toString` is not callable).
 *
 * @internal
 */
export const propertyKeyOf = (u: unknown): string | symbol | undefined => {
  if (typeof u === "string" || typeof u === "symbol") return u
  try {
    return String(u)
  } catch {
    return undefined
  }
}

/**
 * The string that `RegExp.prototype.test` or `Date.parse` would convert `u`
 * to, or `undefined` where that conversion throws (a symbol, or an object
 * whose `toString` and `valueOf` yield no primitive).
 *
 * @internal
 */
export const stringCoercionOf = (u: unknown): string | undefined => {
  if (typeof u === "string") return u
  if (typeof u === "symbol") return undefined
  try {
    return String(u)
  } catch {
    return undefined
  }
}

/**
 * Exactly what `Date.prototype.toISOString` writes, e.g.
 * `2026-01-01T00:00:00.000Z`: the form the seed gives claim and lock times.
 *
 * @internal
 */
export const isIsoTimestamp = (u: unknown): u is string => {
  if (typeof u !== "string") return false
  const ms = Date.parse(u)
  return Number.isFinite(ms) && isoTimestampOf(ms) === u
}

/**
 * `u[key]` with optional-chaining semantics: `undefined` for `null` and
 * `undefined`, the (possibly inherited) property otherwise, primitives
 * included, as the seed's `value?.key` reads.
 *
 * @internal
 */
export const memberOf = (u: unknown, key: string): unknown =>
  u === null || u === undefined ? undefined : (u as Record<string, unknown>)[key]
