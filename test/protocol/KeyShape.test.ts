import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { hasKeyShape, keyShapeOf } from "../../src/protocol/internal/JsonShape.js"

describe("keyShapeOf", () => {
  const shape = keyShapeOf(
    Schema.Struct({ a: Schema.String, b: Schema.optionalKey(Schema.Number), c: Schema.NullOr(Schema.String) }).fields
  )

  it("requires every field but the optional keys, and allows no other key", () => {
    assert.deepStrictEqual(shape.required, ["a", "c"])
    assert.deepStrictEqual([...shape.allowed].sort(), ["a", "b", "c"])
    assert.isTrue(hasKeyShape({ a: "x", c: null }, shape))
    assert.isTrue(hasKeyShape({ a: "x", b: 1, c: null }, shape))
    assert.isFalse(hasKeyShape({ a: "x" }, shape))
    assert.isFalse(hasKeyShape({ a: "x", c: null, d: 1 }, shape))
  })
})
