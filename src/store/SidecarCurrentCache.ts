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
 * - Each cached sidecar stays open for reading (`io/HeldFiles`): every read
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
import { Effect } from "effect"
import type { File, FileSystem } from "effect/FileSystem"
import * as HeldFiles from "../io/HeldFiles.js"
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
  // Each entry's state is what the sidecar's last available answer rests on.
  const sidecars = yield* HeldFiles.make<CurrentProof | undefined>(fs, {
    capacity,
    followSymlinks: false,
    initial: () => undefined
  })

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

  const readThrough = (
    entry: HeldFiles.HeldEntry<CurrentProof | undefined>,
    proof: CurrentProof | undefined,
    pathInfo: File.Info
  ) =>
    entry.file.use(pathInfo, ({ file, info, opened }) =>
      Effect.gen(function*() {
        if (opened) counters.opened++
        const size = Number(info.size)
        const identity = fileIdentity(info)
        if (proof !== undefined && proof.identity === identity && proof.size === size) {
          const cached = yield* confirm(file, entry.path, proof)
          if (cached !== undefined) {
            counters.confirmed++
            entry.state = proof
            return cached
          }
        }
        counters.full++
        const result = yield* currentOf(file, entry.path, size, identity)
        entry.state = result.proof
        return result.current
      }))

  const read = (path: string): Effect.Effect<SidecarCurrent> =>
    Effect.gen(function*() {
      const info = yield* fs.lstat(path)
      if (info.type !== "File") return yield* new NotRegularFile({ path })
      const entry = yield* sidecars.get(path)
      // The cache's scope has ended: read around it.
      if (entry === undefined) {
        counters.full++
        return yield* readSidecarCurrent(fs, path)
      }
      const proof = entry.state
      // Cleared while the read runs: a failed or interrupted read leaves no proof behind.
      entry.state = undefined
      return yield* readThrough(entry, proof, info)
    }).pipe(
      // A sidecar that cannot be read is not held, nor its proof kept.
      Effect.catch((error) => Effect.as(sidecars.invalidate(path), sidecarFailure(path, error)))
    )

  const stats = Effect.sync((): SidecarCurrentCacheStats => {
    const entries = [...sidecars.entries()]
    return { ...counters, kept: entries.length, held: entries.filter((entry) => entry.file.holding()).length }
  })
  return { read, stats } satisfies SidecarCurrentCache
})
