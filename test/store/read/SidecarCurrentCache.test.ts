/**
 * The current reader's cache of verified bytes: whatever happens to the
 * sidecar between two reads (appends, torn writes, bytes changed in place,
 * truncation, replacement), a cached read answers exactly what a fresh read
 * of the same bytes answers.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, FileSystem, Path } from "effect"
import fc from "fast-check"
import { createHash } from "node:crypto"
import { ByteCache, ENTRY_OVERHEAD_BYTES } from "../../../src/io/ByteCache.js"
import { makeSidecarCurrentCache } from "../../../src/store/read/SidecarCurrentCache.js"
import { currentOf, openRegularFile, readSidecarCurrent } from "../../../src/store/read/SidecarReader.js"
import { makeMemoryFileSystem } from "../../../src/testing/MemoryFileSystem.js"
import { fileSystemSuite } from "../../support/FileSystemSuite.js"
import { fuzzRuns } from "../../support/FuzzRuns.js"
import { jobId, summaryReceipt, titleReceipt } from "../../support/Receipts.js"
import { makeSpecial } from "../../support/SpecialFiles.js"
import { makeStallingFileSystem } from "../../support/StallingFileSystem.js"
import { makeSwappingFileSystem } from "../../support/SwappingFileSystem.js"
import {
  appendRaw,
  appendReceiptWithHead,
  bytesOf,
  headFor,
  headLine,
  type Kit,
  receiptLine,
  setup,
  sizeOf
} from "../StoreKit.js"

type Step =
  | { readonly kind: "summary"; readonly n: number }
  | { readonly kind: "title"; readonly n: number }
  | { readonly kind: "receiptOnly"; readonly n: number }
  | { readonly kind: "garbage"; readonly text: string }
  | { readonly kind: "torn"; readonly cut: number }
  | { readonly kind: "flip"; readonly fromEnd: number; readonly byte: number }
  | { readonly kind: "truncate"; readonly fromEnd: number }
  | { readonly kind: "replace" }
  | { readonly kind: "remove" }

const steps: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("summary" as const), n: fc.integer({ min: 1, max: 50 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("title" as const), n: fc.integer({ min: 1, max: 50 }) }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("receiptOnly" as const), n: fc.integer({ min: 1, max: 50 }) })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("garbage" as const),
      text: fc.constantFrom("{}\n", "not json\n", "{\"type\":\"rarebit_head\"}\n", "\n")
    })
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("torn" as const), cut: fc.integer({ min: 1, max: 120 }) }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("flip" as const),
      fromEnd: fc.integer({ min: 1, max: 3000 }),
      byte: fc.integer({ min: 32, max: 126 })
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("truncate" as const), fromEnd: fc.integer({ min: 1, max: 400 }) })
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("replace" as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("remove" as const) }) }
)

/** Overwrites one byte in place, keeping the size (and the inode). */
const overwriteByte = (kit: Kit, fromEnd: number, byte: number) =>
  Effect.scoped(Effect.gen(function*() {
    const size = yield* sizeOf(kit.fs, kit.sidecar)
    if (size === 0) return
    const file = yield* kit.fs.open(kit.sidecar, { flag: "r+" })
    yield* file.seek(BigInt(Math.max(0, size - fromEnd)), "start")
    yield* file.writeAll(new Uint8Array([byte]))
  }))

const apply = (kit: Kit, step: Step) =>
  Effect.gen(function*() {
    const exists = yield* Effect.map(Effect.result(kit.fs.stat(kit.sidecar)), (result) => result._tag === "Success")
    switch (step.kind) {
      case "summary":
        return yield* Effect.asVoid(
          appendReceiptWithHead(kit, summaryReceipt(kit.branch, kit.sessionId, { jobId: jobId(step.n) }))
        )
      case "title":
        return yield* Effect.asVoid(
          appendReceiptWithHead(kit, titleReceipt(kit.branch, kit.sessionId, { jobId: jobId(step.n) }))
        )
      case "receiptOnly":
        return yield* Effect.asVoid(
          appendReceiptWithHead(kit, summaryReceipt(kit.branch, kit.sessionId, { jobId: jobId(step.n) }), {
            head: false
          })
        )
      case "garbage":
        return yield* appendRaw(kit, step.text)
      case "torn":
        return yield* appendRaw(
          kit,
          JSON.stringify(summaryReceipt(kit.branch, kit.sessionId, { jobId: jobId(99) })).slice(0, step.cut)
        )
      case "flip":
        return exists ? yield* overwriteByte(kit, step.fromEnd, step.byte) : undefined
      case "truncate": {
        if (!exists) return
        const size = yield* sizeOf(kit.fs, kit.sidecar)
        return yield* kit.fs.truncate(kit.sidecar, Math.max(0, size - step.fromEnd))
      }
      case "replace": {
        if (!exists) return
        // Same bytes under a new inode, written beside and renamed over.
        const bytes = yield* kit.fs.readFile(kit.sidecar)
        yield* kit.fs.writeFile(`${kit.sidecar}.next`, bytes, { mode: 0o600 })
        return yield* kit.fs.rename(`${kit.sidecar}.next`, kit.sidecar)
      }
      case "remove":
        return exists ? yield* kit.fs.remove(kit.sidecar) : undefined
    }
  })

/** A store kit whose sidecar holds one summary and its head, and a fresh cache. */
const oneReceipt = (root: string) =>
  Effect.gen(function*() {
    const kit = yield* setup(root)
    const cache = yield* makeSidecarCurrentCache(kit.fs)
    yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, kit.sessionId, { jobId: jobId(1) }))
    return { kit, cache }
  })

fileSystemSuite("sidecar current cache", (it) => {
  it.effect("after any change, a cached read answers what a fresh read answers", ({ root }) =>
    Effect.gen(function*() {
      const services = yield* Effect.context<FileSystem.FileSystem | Path.Path>()
      let confirmed = 0
      let caseIndex = 0
      const run = (sequence: ReadonlyArray<Step>) =>
        Effect.gen(function*() {
          const kit = yield* setup(`${root}/case-${caseIndex++}`)
          const cache = yield* makeSidecarCurrentCache(kit.fs)
          yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, kit.sessionId, { jobId: jobId(1) }))
          for (const [index, step] of sequence.entries()) {
            // Read twice before each change: the second read is the one the cache can answer.
            for (const pass of ["first", "again"]) {
              const cached = yield* cache.read(kit.sidecar)
              const fresh = yield* readSidecarCurrent(kit.fs, kit.sidecar)
              assert.deepStrictEqual(
                cached,
                fresh,
                `before step ${index} (${pass}): ${JSON.stringify(sequence.slice(0, index))}`
              )
            }
            yield* apply(kit, step)
          }
          assert.deepStrictEqual(
            yield* cache.read(kit.sidecar),
            yield* readSidecarCurrent(kit.fs, kit.sidecar),
            JSON.stringify(sequence)
          )
          confirmed += (yield* cache.stats).confirmed
        }).pipe(Effect.provide(services))
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(
            fc.array(steps, { minLength: 1, maxLength: 30 }),
            (sequence) => Effect.runPromise(Effect.scoped(run(sequence)))
          ),
          { numRuns: fuzzRuns(60) }
        )
      )
      // The property must have exercised the cache's answers, not only full reads.
      assert.isAbove(confirmed, 0)
    }), 120_000)

  it.effect("after a cached read, a sidecar swapped for a link to itself, a FIFO or a device is refused without waiting", ({ root }) =>
    Effect.scoped(Effect.gen(function*() {
      for (const swapped of ["link to the moved sidecar", "fifo", "zero"] as const) {
        const { cache, kit } = yield* oneReceipt(`${root}/${swapped.split(" ")[0]}`)
        assert.strictEqual((yield* cache.read(kit.sidecar)).availability, "available", swapped)
        // The link's target is the very file the proof was made from: same identity, same bytes.
        const moved = `${kit.sidecar}.moved`
        yield* kit.fs.rename(kit.sidecar, moved)
        if (swapped === "link to the moved sidecar") yield* kit.fs.symlink(moved, kit.sidecar)
        else yield* makeSpecial(kit.sidecar, swapped)
        const after = yield* cache.read(kit.sidecar)
        assert.strictEqual(after.availability, "unreadable", swapped)
        assert.deepStrictEqual(after, yield* readSidecarCurrent(kit.fs, kit.sidecar), swapped)
        assert.strictEqual((yield* cache.stats).confirmed, 0, swapped)
      }
    })))

  it.effect("an unchanged sidecar is confirmed by its bytes, not parsed again", ({ root }) =>
    Effect.gen(function*() {
      const { cache, kit } = yield* oneReceipt(root)
      const first = yield* cache.read(kit.sidecar)
      const second = yield* cache.read(kit.sidecar)
      assert.strictEqual(first.availability, "available")
      assert.deepStrictEqual(second, first)
      assert.deepStrictEqual(yield* cache.stats, { full: 1, confirmed: 1, opened: 2, kept: 1 })
    }))

  it.effect("a byte changed inside the head or the receipt is seen; the answer fails closed", ({ root }) =>
    Effect.gen(function*() {
      for (const target of ["receipt", "head"] as const) {
        const kit = yield* setup(`${root}/${target}`)
        const cache = yield* makeSidecarCurrentCache(kit.fs)
        const { line } = yield* appendReceiptWithHead(
          kit,
          summaryReceipt(kit.branch, kit.sessionId, { jobId: jobId(1) })
        )
        assert.strictEqual((yield* cache.read(kit.sidecar)).availability, "available", target)
        const size = yield* sizeOf(kit.fs, kit.sidecar)
        if (target === "receipt") {
          // Inside the receipt: the head's hash no longer matches.
          yield* overwriteByte(kit, size - Math.floor(bytesOf(line).length / 2), "Z".charCodeAt(0))
        } else {
          // The head's last hash digit (before `"}\n`), changed to another hex digit: the head still
          // parses, and names a hash the receipt does not have.
          const bytes = yield* kit.fs.readFile(kit.sidecar)
          const digit = String.fromCharCode(bytes[size - 4]!)
          assert.match(digit, /^[0-9a-f]$/, "the byte is a digit of the head's hash")
          yield* overwriteByte(kit, 4, (digit === "0" ? "1" : "0").charCodeAt(0))
        }
        const after = yield* cache.read(kit.sidecar)
        assert.strictEqual(after.availability, "unreadable", target)
        assert.deepStrictEqual(after, yield* readSidecarCurrent(kit.fs, kit.sidecar), target)
        assert.strictEqual((yield* cache.stats).confirmed, 0, target)
      }
    }))

  it.effect("a byte changed inside a receipt before the tail window is seen; the answer fails closed", ({ root }) =>
    Effect.gen(function*() {
      const { cache, kit } = yield* oneReceipt(root)
      const receiptOffset = yield* sizeOf(kit.fs, kit.sidecar)
      const line = receiptLine(summaryReceipt(kit.branch, kit.sessionId, { jobId: jobId(2) }))
      // Over 64 KiB of other lines between the receipt and its head put the receipt outside the tail window.
      const filler = `${JSON.stringify({ pad: "x".repeat(1000) })}\n`.repeat(70)
      yield* appendRaw(kit, line + filler + headLine(headFor(kit.sessionId, receiptOffset, line)))
      assert.strictEqual((yield* cache.read(kit.sidecar)).availability, "available")
      assert.strictEqual((yield* cache.read(kit.sidecar)).availability, "available")
      assert.strictEqual((yield* cache.stats).confirmed, 1, "confirmed while unchanged")
      // Inside the receipt, far before the head: its hash no longer matches what the head names.
      const size = yield* sizeOf(kit.fs, kit.sidecar)
      yield* overwriteByte(kit, size - receiptOffset - Math.floor(bytesOf(line).length / 2), "Z".charCodeAt(0))
      const after = yield* cache.read(kit.sidecar)
      assert.strictEqual(after.availability, "unreadable")
      assert.deepStrictEqual(after, yield* readSidecarCurrent(kit.fs, kit.sidecar))
      assert.strictEqual((yield* cache.stats).confirmed, 1)
    }))

  it.effect("the newline before the head is part of what is compared, the receipt in the window or before it", ({ root }) =>
    Effect.gen(function*() {
      for (const receiptAt of ["in the window", "before the window"] as const) {
        const { cache, kit } = yield* oneReceipt(`${root}/${receiptAt.replaceAll(" ", "-")}`)
        const receiptOffset = yield* sizeOf(kit.fs, kit.sidecar)
        const line = receiptLine(summaryReceipt(kit.branch, kit.sessionId, { jobId: jobId(2) }))
        // Over 64 KiB of other lines between the receipt and its head put the receipt outside the tail window.
        const filler = receiptAt === "before the window"
          ? `${JSON.stringify({ pad: "x".repeat(1000) })}\n`.repeat(70)
          : ""
        const head = headLine(headFor(kit.sessionId, receiptOffset, line))
        yield* appendRaw(kit, line + filler + head)
        assert.strictEqual((yield* cache.read(kit.sidecar)).availability, "available", receiptAt)
        // The newline before the head's line: a space there glues the head to the line before it,
        // and no line of its own is a head any more.
        const size = yield* sizeOf(kit.fs, kit.sidecar)
        const newline = size - bytesOf(head).length - 1
        assert.strictEqual((yield* kit.fs.readFile(kit.sidecar))[newline], 10, `${receiptAt}: the byte is the newline`)
        yield* overwriteByte(kit, size - newline, " ".charCodeAt(0))
        const after = yield* cache.read(kit.sidecar)
        assert.deepStrictEqual(after, yield* readSidecarCurrent(kit.fs, kit.sidecar), receiptAt)
        assert.notStrictEqual((after.receipt as { jobId?: string } | null)?.jobId, jobId(2), receiptAt)
      }
    }))

  it.effect("a head at the very start pointing forward at its receipt is confirmed like any other", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const cache = yield* makeSidecarCurrentCache(kit.fs)
      const line = receiptLine(summaryReceipt(kit.branch, kit.sessionId, { jobId: jobId(1) }))
      // The head's own length depends on the offset it names: iterate to the fixed point.
      let head = headLine(headFor(kit.sessionId, 0, line))
      for (let pass = 0; pass < 3; pass++) head = headLine(headFor(kit.sessionId, bytesOf(head).length, line))
      yield* appendRaw(kit, head + line)
      const fresh = yield* readSidecarCurrent(kit.fs, kit.sidecar)
      assert.strictEqual(fresh.availability, "available")
      assert.deepStrictEqual(yield* cache.read(kit.sidecar), fresh)
      assert.deepStrictEqual(yield* cache.read(kit.sidecar), fresh)
      assert.deepStrictEqual(yield* cache.stats, { full: 1, confirmed: 1, opened: 2, kept: 1 })
    }))

  it.effect("answers are fresh objects: changing one does not change the next", ({ root }) =>
    Effect.gen(function*() {
      const { cache, kit } = yield* oneReceipt(root)
      const first = yield* cache.read(kit.sidecar)
      const second = yield* cache.read(kit.sidecar)
      ;(second.receipt as Record<string, unknown>).jobId = "changed by a caller"
      ;(second.head as Record<string, unknown>).receiptOffset = -1
      const third = yield* cache.read(kit.sidecar)
      assert.deepStrictEqual(third, first)
      assert.strictEqual((yield* cache.stats).confirmed, 2)
    }))

  it.effect("sidecars beyond the cache's bytes are dropped, least recently read first", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, kit.sessionId, { jobId: jobId(1) }))
      const copies = ["a", "b", "c"].map((name) => `${kit.sidecar}.${name}`)
      const bytes = yield* kit.fs.readFile(kit.sidecar)
      for (const copy of copies) yield* kit.fs.writeFile(copy, bytes, { mode: 0o600 })
      // What one sidecar's proof and entry cost.
      const probe = new ByteCache(Number.POSITIVE_INFINITY)
      yield* (yield* makeSidecarCurrentCache(kit.fs, { cache: probe })).read(copies[0])
      const one = probe.bytes
      // Its entry (a path's overhead) and at most 512 bytes of proof, whatever the size of the receipt and head.
      assert.isAtMost(
        one,
        ENTRY_OVERHEAD_BYTES + 2 * copies[0].length + 512,
        "a proof is charged its digest, not its bytes"
      )
      // Plain LRU (every new key admitted): the order is the cache's, the charge the sidecar cache's.
      const shared = new ByteCache(Math.floor(one * 2.5), 1)
      const cache = yield* makeSidecarCurrentCache(kit.fs, { cache: shared })
      yield* cache.read(copies[0])
      yield* cache.read(copies[1])
      assert.deepStrictEqual(yield* cache.stats, { full: 2, confirmed: 0, opened: 2, kept: 2 })
      yield* cache.read(copies[0])
      assert.deepStrictEqual(yield* cache.stats, { full: 2, confirmed: 1, opened: 3, kept: 2 })
      // A third does not fit: b, the least recently read, is dropped.
      yield* cache.read(copies[2])
      assert.deepStrictEqual(yield* cache.stats, { full: 3, confirmed: 1, opened: 4, kept: 2 })
      assert.isAtMost(shared.bytes, Math.floor(one * 2.5))
      yield* cache.read(copies[0])
      yield* cache.read(copies[1])
      assert.deepStrictEqual(yield* cache.stats, { full: 4, confirmed: 2, opened: 6, kept: 2 })
    }))

  it.effect("with maxBytes 0 nothing is kept, and every read is a full read", ({ root }) =>
    Effect.gen(function*() {
      const { kit } = yield* oneReceipt(root)
      const cache = yield* makeSidecarCurrentCache(kit.fs, { maxBytes: 0 })
      const fresh = yield* readSidecarCurrent(kit.fs, kit.sidecar)
      for (let poll = 0; poll < 3; poll++) assert.deepStrictEqual(yield* cache.read(kit.sidecar), fresh)
      assert.deepStrictEqual(yield* cache.stats, { full: 3, confirmed: 0, opened: 3, kept: 0 })
    }))

  it.effect("a proof keeps a digest of the bytes it rests on, neither the bytes nor the records parsed from them", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      for (const n of [1, 2, 3]) {
        yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, kit.sessionId, { jobId: jobId(n) }))
      }
      const size = yield* sizeOf(kit.fs, kit.sidecar)
      const { proof } = yield* Effect.scoped(Effect.flatMap(
        openRegularFile(kit.fs, kit.sidecar),
        ({ file, identity }) => currentOf(file, kit.sidecar, size, identity)
      ))
      assert.isDefined(proof)
      // The receipt just before its head: the tail holds both, from the receipt's first byte.
      assert.strictEqual(proof!.tailStart, proof!.receiptOffset)
      const bytes = yield* kit.fs.readFile(kit.sidecar)
      assert.strictEqual(proof!.tailSha256, createHash("sha256").update(bytes.subarray(proof!.tailStart)).digest("hex"))
      // Nothing but numbers, strings and the diagnostics: no bytes, no parsed receipt or head.
      for (const [key, value] of Object.entries(proof!)) {
        if (key !== "diagnostics") assert.include(["number", "string"], typeof value, key)
      }
    }))
})

describe("sidecar current cache holds no sidecar open between reads", () => {
  /** A memory world whose open descriptors can be listed, and a kit with one receipt on it. */
  const world = <A, E>(
    body: (
      memory: ReturnType<typeof makeMemoryFileSystem>,
      kit: Kit
    ) => Effect.Effect<A, E, FileSystem.FileSystem | Path.Path>
  ) => {
    const memory = makeMemoryFileSystem()
    return Effect.gen(function*() {
      const kit = yield* setup("/w")
      yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, kit.sessionId, { jobId: jobId(1) }))
      return yield* body(memory, kit)
    }).pipe(Effect.provideService(FileSystem.FileSystem, memory), Effect.provide(Path.layer))
  }
  const reads = (memory: ReturnType<typeof makeMemoryFileSystem>) =>
    memory.openDescriptors().filter(({ flag }) => flag === "r").map(({ path }) => path)

  /** Same bytes under a new inode, written beside and renamed over. */
  const replace = (kit: Kit, extra = "") =>
    Effect.gen(function*() {
      const bytes = yield* kit.fs.readFile(kit.sidecar)
      yield* kit.fs.writeFile(`${kit.sidecar}.next`, new Uint8Array([...bytes, ...bytesOf(extra)]), { mode: 0o600 })
      yield* kit.fs.rename(`${kit.sidecar}.next`, kit.sidecar)
    })

  /** Replaced by a copy with one more receipt and head. */
  const replaceWithNewer = (kit: Kit) =>
    Effect.gen(function*() {
      const offset = yield* sizeOf(kit.fs, kit.sidecar)
      const line = receiptLine(summaryReceipt(kit.branch, kit.sessionId, { jobId: jobId(3) }))
      yield* replace(kit, line + headLine(headFor(kit.sessionId, offset, line)))
    })

  it.effect("every poll opens the sidecar and closes it before it answers, also across appends", () =>
    world((memory, kit) =>
      Effect.scoped(Effect.gen(function*() {
        const cache = yield* makeSidecarCurrentCache(kit.fs)
        for (let poll = 0; poll < 4; poll++) {
          assert.deepStrictEqual(yield* cache.read(kit.sidecar), yield* readSidecarCurrent(kit.fs, kit.sidecar))
        }
        yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, kit.sessionId, { jobId: jobId(2) }))
        const grown = yield* cache.read(kit.sidecar)
        assert.strictEqual((grown.receipt as { jobId: string }).jobId, jobId(2))
        assert.deepStrictEqual(yield* cache.stats, { full: 2, confirmed: 3, opened: 5, kept: 1 })
        assert.deepStrictEqual(reads(memory), [])
      }))
    ))

  it.effect("a replaced or removed sidecar is read afresh, and nothing stays open", () =>
    world((memory, kit) =>
      Effect.gen(function*() {
        const cache = yield* makeSidecarCurrentCache(kit.fs)
        yield* cache.read(kit.sidecar)
        // Replaced by a rename: the new file is read whole.
        yield* replace(kit, "{}\n")
        const replaced = yield* cache.read(kit.sidecar)
        assert.deepStrictEqual(replaced, yield* readSidecarCurrent(kit.fs, kit.sidecar))
        assert.strictEqual((yield* cache.stats).opened, 2)
        assert.deepStrictEqual(reads(memory), [])
        // Removed: missing, and its proof is not kept.
        yield* kit.fs.remove(kit.sidecar)
        assert.strictEqual((yield* cache.read(kit.sidecar)).availability, "missing")
        assert.strictEqual((yield* cache.stats).kept, 0)
        assert.deepStrictEqual(reads(memory), [])
      })
    ))

  it.effect("a sidecar replaced between the lstat and the open is read as the file opened, then let go", () =>
    world((memory, kit) =>
      Effect.scoped(Effect.gen(function*() {
        // Renames a sidecar with a newer receipt over the path just before the cache's open runs.
        const swapping = makeSwappingFileSystem(memory, replaceWithNewer(kit))
        const cache = yield* makeSidecarCurrentCache(swapping.fs)
        yield* cache.read(kit.sidecar)
        yield* replace(kit, "{}\n")
        swapping.arm()
        const raced = yield* cache.read(kit.sidecar)
        assert.isFalse(swapping.armed(), "the swap ran")
        // The answer describes the file that was read, whole, not the size the lstat saw before the swap.
        assert.strictEqual((raced.receipt as { jobId: string }).jobId, jobId(3))
        assert.deepStrictEqual(raced, yield* readSidecarCurrent(kit.fs, kit.sidecar))
        assert.deepStrictEqual(reads(memory), [], "neither the old nor the raced file stays open")
        assert.deepStrictEqual(yield* cache.read(kit.sidecar), yield* readSidecarCurrent(kit.fs, kit.sidecar))
        assert.deepStrictEqual(reads(memory), [])
        assert.strictEqual((yield* cache.stats).opened, 3)
      }))
    ))

  it.effect("a read interrupted at any file-system call leaves nothing open, and the next read is right", () =>
    world((memory, kit) =>
      Effect.gen(function*() {
        const stalled = { unchanged: 0, replaced: 0 }
        for (let run = 0; run < 12; run++) {
          yield* Effect.scoped(Effect.gen(function*() {
            // Once armed, the read's `cut`-th file-system call never returns; then the read is interrupted.
            const cut = 1 + (run >> 1)
            const variant = run % 2 === 0 ? "unchanged" : "replaced"
            const { arm, disarm, fs: stalling, reached } = yield* makeStallingFileSystem(memory, cut)
            const cache = yield* makeSidecarCurrentCache(stalling)
            yield* cache.read(kit.sidecar)
            if (variant === "replaced") yield* replace(kit)
            arm()
            const read = yield* Effect.forkChild(cache.read(kit.sidecar))
            yield* Effect.raceFirst(
              Effect.andThen(Deferred.await(reached), Effect.sync(() => stalled[variant]++)),
              Fiber.await(read)
            )
            yield* Fiber.interrupt(read)
            disarm()
            assert.deepStrictEqual(reads(memory), [], `cut ${cut}`)
            assert.deepStrictEqual(
              yield* cache.read(kit.sidecar),
              yield* readSidecarCurrent(kit.fs, kit.sidecar),
              `after cut ${cut}`
            )
            assert.deepStrictEqual(reads(memory), [])
          }))
        }
        // A read of an unchanged sidecar makes 3 calls here (open, fstat, one read of the tail).
        assert.strictEqual(stalled.unchanged, 3)
        assert.isAtLeast(stalled.replaced, 3)
      })
    ))
})
