/**
 * The store's one byte-bounded cache: what it keeps stays within its bytes,
 * the least recently used goes first, a hit makes an entry the most
 * recently used, a full cache admits few new keys (so a sweep over more keys
 * than fit still hits), and sections never see each other's keys.
 */
import { assert, describe, it } from "@effect/vitest"
import { ByteCache, ENTRY_OVERHEAD_BYTES, FULL_ADMIT_EVERY } from "../../src/io/ByteCache.js"

/** Bytes an entry of `key` is charged for a value of `bytes`. */
const charged = (key: string, bytes: number) => bytes + ENTRY_OVERHEAD_BYTES + 2 * key.length

describe("ByteCache", () => {
  it("keeps its total within maxBytes, evicting the least recently used first", () => {
    const cache = new ByteCache(3 * charged("a", 100))
    const section = cache.section<string>()
    for (const key of ["a", "b", "c"]) section.set(key, key, 100)
    assert.strictEqual(cache.bytes, 3 * charged("a", 100))
    // Its owner asks: the full cache takes it.
    section.set("d", "d", 100, true)
    assert.isAtMost(cache.bytes, cache.maxBytes)
    assert.deepStrictEqual([...section.values()], ["b", "c", "d"])
    assert.isUndefined(section.get("a"))
  })

  it("a hit makes an entry the most recently used", () => {
    const cache = new ByteCache(3 * charged("a", 100))
    const section = cache.section<string>()
    for (const key of ["a", "b", "c"]) section.set(key, key, 100)
    assert.strictEqual(section.get("a"), "a")
    section.set("d", "d", 100, true)
    // b, not a, was the least recently used.
    assert.isUndefined(section.get("b"))
    assert.deepStrictEqual([...section.values()], ["c", "a", "d"])
  })

  it("an entry larger than several others evicts as many as it needs", () => {
    const cache = new ByteCache(4 * charged("a", 100))
    const section = cache.section<string>()
    for (const key of ["a", "b", "c", "d"]) section.set(key, key, 100)
    section.set("e", "e", 2 * charged("a", 100), true)
    assert.deepStrictEqual([...section.values()], ["d", "e"])
    assert.isAtMost(cache.bytes, cache.maxBytes)
  })

  it("maxBytes 0 keeps nothing, and a value larger than the bound is not kept (nor what it replaced)", () => {
    const none = new ByteCache(0).section<string>()
    none.set("a", "a", 0)
    assert.isUndefined(none.get("a"))
    assert.strictEqual(none.size(), 0)
    const cache = new ByteCache(charged("a", 100))
    const section = cache.section<string>()
    section.set("a", "small", 100)
    section.set("a", "large", 101)
    assert.isUndefined(section.get("a"))
    assert.strictEqual(cache.bytes, 0)
  })

  it("sections share the bound but never each other's entries, and count their own entries and bytes", () => {
    const cache = new ByteCache(2 * charged("k", 10))
    const one = cache.section<number>()
    const two = cache.section<string>()
    one.set("k", 1, 10)
    // The same key in another section: never answered across sections, and the later replaces the earlier.
    two.set("k", "two", 10)
    assert.isUndefined(one.get("k"))
    assert.strictEqual(two.get("k"), "two")
    one.delete("k")
    assert.strictEqual(two.get("k"), "two", "a section deletes only its own entry")
    one.set("j", 1, 10)
    assert.deepStrictEqual([one.size(), two.size()], [1, 1])
    assert.strictEqual(one.bytes() + two.bytes(), cache.bytes)
    // A third entry evicts the least recently used of either section: "two"'s, once "one"'s is read again.
    one.get("j")
    one.set("i", 2, 10, true)
    assert.isUndefined(two.get("k"))
    assert.deepStrictEqual([one.size(), two.size(), two.bytes()], [2, 0, 0])
    assert.deepStrictEqual([...one.values()], [1, 2])
  })

  it("a full cache admits one new key in FULL_ADMIT_EVERY, and always updates a key it holds", () => {
    const cache = new ByteCache(3 * charged("k00", 100))
    const section = cache.section<string>()
    for (const key of ["k00", "k01", "k02"]) section.set(key, key, 100)
    for (let index = 1; index < FULL_ADMIT_EVERY; index++) section.set(`n${String(index).padStart(2, "0")}`, "new", 100)
    assert.deepStrictEqual([...section.values()], ["k00", "k01", "k02"], "refused while full")
    section.set("k01", "k01 again", 100)
    assert.deepStrictEqual([...section.values()], ["k00", "k02", "k01 again"], "a held key is updated, most recent")
    section.set("n99", "sixteenth", 100)
    assert.deepStrictEqual([...section.values()], ["k02", "k01 again", "sixteenth"], "its turn: evicts the oldest")
    section.set("n01", "refused again", 100)
    assert.deepStrictEqual([...section.values()], ["k02", "k01 again", "sixteenth"])
  })

  /** Hits of one sweep over `keys`, each missing key then set as a reader would. */
  const sweep = (section: ReturnType<ByteCache["section"]>, keys: ReadonlyArray<string>) => {
    let hits = 0
    for (const key of keys) {
      if (section.get(key) !== undefined) hits++
      else section.set(key, key, 100)
    }
    return hits
  }

  it("a round-robin over more keys than fit still hits most of those that fit", () => {
    const fit = 75
    const cache = new ByteCache(fit * charged("k000", 100))
    const section = cache.section()
    const keys = Array.from({ length: 100 }, (_, index) => `k${String(index).padStart(3, "0")}`)
    sweep(section, keys)
    const hits = [sweep(section, keys), sweep(section, keys), sweep(section, keys)]
    // Plain LRU evicts each key just before it comes round again: no hit at all.
    for (const count of hits) assert.isAtLeast(count, 0.6 * keys.length, `hits per sweep: ${hits}`)
    assert.isAtMost(cache.bytes, cache.maxBytes)
  })

  it("a new set of keys that fits takes a full cache over in a bounded number of sweeps", () => {
    const fit = 64
    const cache = new ByteCache(fit * charged("old00", 100))
    const section = cache.section()
    sweep(section, Array.from({ length: fit }, (_, index) => `old${String(index).padStart(2, "0")}`))
    const fresh = Array.from({ length: 32 }, (_, index) => `new${String(index).padStart(2, "0")}`)
    let sweeps = 0
    while (sweep(section, fresh) < fresh.length) {
      sweeps++
      assert.isAtMost(sweeps, 8 * FULL_ADMIT_EVERY, "the new keys never all came in")
    }
    assert.isAbove(sweeps, 1, "admitted at once: the full cache refused none")
  })
})
