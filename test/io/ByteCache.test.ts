/**
 * The store's one byte-bounded cache: what it keeps stays within its bytes,
 * the least recently used goes first, a hit makes an entry the most
 * recently used, and sections never see each other's keys.
 */
import { assert, describe, it } from "@effect/vitest"
import { ByteCache, ENTRY_OVERHEAD_BYTES } from "../../src/io/ByteCache.js"

/** Bytes an entry of `key` is charged for a value of `bytes`. */
const charged = (key: string, bytes: number) => bytes + ENTRY_OVERHEAD_BYTES + 2 * key.length

describe("ByteCache", () => {
  it("keeps its total within maxBytes, evicting the least recently used first", () => {
    const cache = new ByteCache(3 * charged("a", 100))
    const section = cache.section<string>()
    for (const key of ["a", "b", "c"]) section.set(key, key, 100)
    assert.strictEqual(cache.bytes, 3 * charged("a", 100))
    section.set("d", "d", 100)
    assert.isAtMost(cache.bytes, cache.maxBytes)
    assert.deepStrictEqual([...section.values()], ["b", "c", "d"])
    assert.isUndefined(section.get("a"))
  })

  it("a hit makes an entry the most recently used", () => {
    const cache = new ByteCache(3 * charged("a", 100))
    const section = cache.section<string>()
    for (const key of ["a", "b", "c"]) section.set(key, key, 100)
    assert.strictEqual(section.get("a"), "a")
    section.set("d", "d", 100)
    // b, not a, was the least recently used.
    assert.isUndefined(section.get("b"))
    assert.deepStrictEqual([...section.values()], ["c", "a", "d"])
  })

  it("an entry larger than several others evicts as many as it needs", () => {
    const cache = new ByteCache(4 * charged("a", 100))
    const section = cache.section<string>()
    for (const key of ["a", "b", "c", "d"]) section.set(key, key, 100)
    section.set("e", "e", 2 * charged("a", 100))
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
    one.set("i", 2, 10)
    assert.isUndefined(two.get("k"))
    assert.deepStrictEqual([one.size(), two.size(), two.bytes()], [2, 0, 0])
    assert.deepStrictEqual([...one.values()], [1, 2])
  })
})
