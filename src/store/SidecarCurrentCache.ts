/**
 * Current reads of sidecars that are read again and again (a poller's, a
 * settle's), which skip re-opening, re-parsing and re-validating a sidecar
 * whose verified bytes have not moved.
 *
 * Guarantees:
 * - Every answer is what `readSidecarCurrent` answers for the bytes on disk
 *   at read time, as fresh objects the caller may change. After an available
 *   read the cache keeps the file's identity and size, the bytes from just
 *   before the head to the end, and the receipt's bytes. A later read of the
 *   same file at the same size reads exactly those bytes again and compares
 *   them; only if they are identical is the earlier answer rebuilt (so every
 *   answer still rests on bytes read this time). Anything else (another
 *   size, another inode, different bytes, an unavailable answer, a failed
 *   or interrupted read) is a full read.
 * - Each cached sidecar stays open for reading (an `io/HeldFile`): every read
 *   starts with an `lstat` of the path, and the held file is used only while
 *   that shows the same device and inode, so a sidecar replaced by a rename
 *   is opened anew and the old file let go; one swapped in between the
 *   `lstat` and the open is read as the file opened and not kept. Reads in
 *   flight share the held file, which is never closed under them.
 * - Bounded: the least recently read sidecars beyond `capacity` are dropped,
 *   and their files closed. Everything still open is closed when the cache's
 *   scope ends; reads after that are full reads that hold nothing.
 *
 * @since 0.1.0
 */
import { Effect, ScopedCache } from "effect"
import type { File, FileSystem } from "effect/FileSystem"
import * as HeldFile from "../io/HeldFile.js"
import { sameBytes } from "../protocol/internal/Bytes.js"
import { fileIdentity } from "../protocol/internal/FileInfo.js"
import { copyJson } from "../protocol/internal/JsonCopy.js"
import { NotRegularFile } from "./Errors.js"
import {
  currentOf,
  type CurrentProof,
  readRange,
  readSidecarCurrent,
  type SidecarCurrent,
  sidecarFailure
} from "./SidecarReader.js"

/** One cached sidecar: what its last available answer rests on, and its file. */
interface Slot {
  proof: CurrentProof | undefined
  readonly file: HeldFile.HeldFile
}

/**
 * How a sidecar current cache answered, and what it keeps.
 *
 * @category models
 * @since 0.1.0
 */
export interface SidecarCurrentCacheStats {
  /** Reads answered by a full read. */
  readonly full: number
  /** Reads answered by comparing the remembered bytes. */
  readonly confirmed: number
  /** Times a sidecar was opened. */
  readonly opened: number
  /** Sidecars kept now. */
  readonly kept: number
  /** Sidecars held open now. */
  readonly held: number
}

/**
 * Current reads through a cache of verified bytes and held files.
 *
 * @category models
 * @since 0.1.0
 */
export interface SidecarCurrentCache {
  /** The current read of the sidecar at `path`, as `readSidecarCurrent` answers it. */
  readonly read: (path: string) => Effect.Effect<SidecarCurrent>
  readonly stats: Effect.Effect<SidecarCurrentCacheStats>
}

const sameBytesAt = (file: File, position: number, expected: Uint8Array) =>
  Effect.map(readRange(file, position, expected.length), (actual) => sameBytes(actual, expected))

/**
 * A sidecar current cache over `fs`, for the current scope, keeping at most
 * `capacity` sidecars.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeSidecarCurrentCache = Effect.fnUntraced(function*(fs: FileSystem, capacity: number = 64) {
  const counters = { full: 0, confirmed: 0, opened: 0 }
  const cache = yield* ScopedCache.make<string, Slot>({
    capacity,
    lookup: (path) => Effect.map(HeldFile.make(fs, path, { followSymlinks: false }), (file) => ({ proof: undefined, file }))
  })
  // Runs before the cache closes (finalizers run last added first): from then on reads go around it.
  let ended = false
  yield* Effect.addFinalizer(() => Effect.sync(() => ended = true))

  const drop = (path: string): Effect.Effect<void> =>
    Effect.suspend(() => ended ? Effect.void : ScopedCache.invalidate(cache, path))

  /** The earlier answer, if the bytes it rests on are still there; fresh objects, since callers may change theirs. */
  const confirm = (file: File, path: string, proof: CurrentProof) =>
    Effect.gen(function*() {
      if (!(yield* sameBytesAt(file, proof.tailStart, proof.tail))) return undefined
      const receiptInTail = proof.receiptOffset >= proof.tailStart
      if (!receiptInTail && !(yield* sameBytesAt(file, proof.receiptOffset, proof.receipt))) return undefined
      const receipt = copyJson(proof.receiptRecord)
      return {
        availability: "available",
        path,
        receipt,
        records: [receipt],
        head: copyJson(proof.headRecord),
        diagnostics: { ...proof.diagnostics }
      } satisfies SidecarCurrent
    })

  const readThrough = (path: string, slot: Slot, proof: CurrentProof | undefined, pathInfo: File.Info) =>
    slot.file.use(pathInfo, ({ file, info, opened }) =>
      Effect.gen(function*() {
        if (opened) counters.opened++
        const size = Number(info.size)
        const identity = fileIdentity(info)
        if (proof !== undefined && proof.identity === identity && proof.size === size) {
          const cached = yield* confirm(file, path, proof)
          if (cached !== undefined) {
            counters.confirmed++
            slot.proof = proof
            return cached
          }
        }
        counters.full++
        const result = yield* currentOf(file, path, size, identity)
        slot.proof = result.proof
        return result.current
      })).pipe(Effect.catchTag("FileNotRegular", () => Effect.fail(new NotRegularFile({ path }))))

  const read = (path: string): Effect.Effect<SidecarCurrent> =>
    Effect.gen(function*() {
      const info = yield* fs.lstat(path)
      if (info.type !== "File") return yield* new NotRegularFile({ path })
      if (ended) {
        counters.full++
        return yield* readSidecarCurrent(fs, path)
      }
      const slot = yield* ScopedCache.get(cache, path)
      const proof = slot.proof
      // Cleared while the read runs: a failed or interrupted read leaves no proof behind.
      slot.proof = undefined
      return yield* readThrough(path, slot, proof, info)
    }).pipe(
      Effect.catch((error) => Effect.as(drop(path), sidecarFailure(path, error)))
    )

  const stats = Effect.map(
    ScopedCache.values(cache),
    (slots): SidecarCurrentCacheStats => ({
      ...counters,
      kept: slots.length,
      held: slots.filter((slot) => slot.file.holding()).length
    })
  )
  return { read, stats } satisfies SidecarCurrentCache
})
