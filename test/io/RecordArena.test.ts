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
    { weight: 6, arbitrary: fc.uint8Array({ maxLength: 3_000 }).map((put): Step => ({ put })) },
    // Longer than a chunk: a chunk of its own.
    {
      weight: 1,
      arbitrary: fc.integer({ min: 65_000, max: 70_000 }).map((length): Step => ({
        put: new Uint8Array(length).fill(length % 251)
      }))
    },
    { weight: 5, arbitrary: fc.nat().map((free): Step => ({ free })) }
  ),
  { maxLength: 600 }
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

  it("reclaims freed space between records that stay: putting and freeing forever keeps the chunks bounded", () => {
    const arena = new RecordArena()
    const model = new Map<number, Uint8Array>()
    const recent: Array<number> = []
    let lasting = 0
    for (let round = 0; round < 20_000; round++) {
      // Each record its own bytes and length, so that a record read at another's place shows.
      const record = new Uint8Array(900 + (round % 200)).fill(round % 251)
      const handle = arena.put(record)
      model.set(handle, record)
      // One in ten stays to the end, scattered among the others: their chunks never empty, only compacting reclaims them.
      if (round % 10 === 0) lasting += 8 + record.length
      else recent.push(handle)
      if (recent.length > 50) {
        const freed = recent.shift()!
        arena.free(freed)
        model.delete(freed)
      }
      if (round % 1_000 === 0) { for (const [kept, bytes] of model) assert.deepStrictEqual(arena.view(kept), bytes) }
    }
    // What stays, a quarter of each chunk more, and the chunks being filled.
    assert.isAtMost(arena.bytes, (lasting * 4) / 3 + 4 * 64 * 1024)
    for (const [kept, bytes] of model) assert.deepStrictEqual(arena.view(kept), bytes)
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
