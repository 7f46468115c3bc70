/**
 * The arena the caches keep their records in: every record reads back as
 * it was put for as long as its handle is in use, whatever was put and
 * freed around it (the buffer compacts and grows under it), and freed space
 * is reclaimed.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { RecordArena, RecordReader, RecordWriter } from "../../src/io/RecordArena.js"

type Step = { readonly put: Uint8Array } | { readonly free: number }

const steps = fc.array(
  fc.oneof(
    { weight: 3, arbitrary: fc.uint8Array({ maxLength: 3_000 }).map((put): Step => ({ put })) },
    { weight: 2, arbitrary: fc.nat().map((free): Step => ({ free })) }
  ),
  { maxLength: 300 }
)

describe("RecordArena", () => {
  it("reads back every record in use as it was put, through compactions and growth", () => {
    fc.assert(
      fc.property(steps, (plan) => {
        const arena = new RecordArena()
        const model = new Map<number, Uint8Array>()
        for (const step of plan) {
          if ("put" in step) {
            const handle = arena.put(step.put)
            assert.isFalse(model.has(handle), "a handle in use was given out again")
            model.set(handle, step.put.slice())
          } else if (model.size > 0) {
            const handles = [...model.keys()]
            const handle = handles[step.free % handles.length]
            arena.free(handle)
            model.delete(handle)
          }
          assert.strictEqual(arena.size, model.size)
        }
        for (const [handle, bytes] of model) assert.deepStrictEqual(arena.view(handle), bytes)
      }),
      { numRuns: 200 }
    )
  })

  it("reclaims freed space: putting and freeing forever keeps the buffer bounded", () => {
    const arena = new RecordArena()
    const record = new Uint8Array(1_000).fill(7)
    const kept: Array<number> = []
    for (let round = 0; round < 20_000; round++) {
      kept.push(arena.put(record))
      if (kept.length > 50) arena.free(kept.shift()!)
    }
    // 50 records of ~1 KB live: at most three times their bytes, rounded to a power of two.
    assert.isAtMost(arena.bytes, 256 * 1024)
    for (const handle of kept) assert.deepStrictEqual(arena.view(handle), record)
  })

  it("refuses a handle that is not in use: a defect, never a wrong record", () => {
    const arena = new RecordArena()
    const handle = arena.put(new Uint8Array([1]))
    arena.free(handle)
    assert.throws(() => arena.view(handle), RangeError)
    assert.throws(() => arena.free(handle), RangeError)
    assert.throws(() => arena.view(99), RangeError)
  })

  it("writes and reads numbers, strings and the rest in order", () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.double(), fc.string({ unit: "grapheme", maxLength: 400 })), { maxLength: 20 }),
        fc.uint8Array({ maxLength: 2_000 }),
        (fields, rest) => {
          const writer = new RecordWriter()
          // A record written before must not leak into the next.
          writer.start().string("x".repeat(5_000)).done()
          writer.start()
          for (const field of fields) {
            if (typeof field === "number") writer.number(field)
            else writer.string(field)
          }
          const arena = new RecordArena()
          const handle = arena.put(writer.rest(rest).done())
          const reader = new RecordReader(arena.view(handle))
          for (const field of fields) {
            if (typeof field === "number") {
              assert.strictEqual(Object.is(reader.number(), field) || Number.isNaN(field), true)
            } else assert.strictEqual(reader.string(), field)
          }
          assert.deepStrictEqual(reader.rest(), rest)
        }
      ),
      { numRuns: 200 }
    )
  })
})
