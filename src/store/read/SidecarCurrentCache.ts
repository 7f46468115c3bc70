/**
 * Current reads of sidecars that are read again and again (a poller's, a
 * settle's), which skip re-parsing and re-validating a sidecar whose
 * verified bytes have not moved.
 *
 * Guarantees:
 * - Every answer is what `readSidecarCurrent` answers for the bytes on disk
 *   at read time, as fresh objects the caller may change. After an available
 *   read the cache keeps the file's identity and size, where the head and
 *   the receipt lie, and the SHA-256 of the bytes from just before the head
 *   (or from the receipt, when it lies that close) to the end (a
 *   `CurrentProof`, a plain object). A later read of the same file at the
 *   same size reads those bytes again and hashes them, and a receipt before
 *   them is read again and checked against the head's `receiptHash` as a
 *   full read checks it; only if all match is the answer parsed again from
 *   the bytes just read (so every answer rests on bytes read this time, and
 *   nothing parsed is kept). Anything else (another size, another inode,
 *   different bytes) is a full read, which keeps its own proof or none; an
 *   unavailable answer or a failed read keeps none. A proof is only ever a
 *   hint: it never answers without the bytes read now matching it.
 * - Every read opens the sidecar (never following a symlink, regular files
 *   only) and closes it before it answers: no file is held open between
 *   reads, so a Session's folder can always be removed. On a file system
 *   whose calls return at once (`SmallRegularRead`), a confirmation is one
 *   such call: open, `fstat`, one read of the proof's bytes, close.
 * - Bounded by a `ByteCache` (its own, or one shared with the Session
 *   cache): each sidecar is charged the bytes its proof keeps (at most 512:
 *   offsets, a digest and the diagnostics, whatever the size of its
 *   receipt), and the least recently read are dropped beyond its bytes.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import type { FileSystem } from "effect/FileSystem"
import { ByteCache } from "../../io/ByteCache.js"
import { smallRegularReadOf } from "../../io/NonBlockingOpen.js"
import {
  confirmCurrent,
  confirmFromTail,
  currentOf,
  type CurrentProof,
  openRegularFile,
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
  /** Sidecars whose proof is kept now. */
  readonly kept: number
}

/**
 * Current reads through a cache of verified bytes.
 *
 * @category models
 * @since 0.1.0
 */
export interface SidecarCurrentCache {
  /** The current read of the sidecar at `path`, as `readSidecarCurrent` answers it. */
  readonly read: (path: string) => Effect.Effect<SidecarCurrent>
  readonly stats: Effect.Effect<SidecarCurrentCacheStats>
}

/**
 * Limits of a sidecar current cache.
 *
 * @category models
 * @since 0.1.0
 */
export interface SidecarCurrentCacheOptions {
  /** Bytes of proofs kept, without a shared `cache`. Default 8 MiB. */
  readonly maxBytes?: number | undefined
  /** A cache shared with other caches (the store shares one with its Session cache); overrides `maxBytes`. */
  readonly cache?: ByteCache | undefined
}

/** Bytes a kept proof keeps alive: the object, its identity and digest strings, its diagnostics. */
const proofBytes = (proof: CurrentProof): number => 256 + 2 * (proof.identity.length + proof.tailSha256.length)

/**
 * A sidecar current cache over `fs`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeSidecarCurrentCache = (
  fs: FileSystem,
  options: SidecarCurrentCacheOptions = {}
): Effect.Effect<SidecarCurrentCache> => Effect.sync(() => makeUnsafe(fs, options))

const makeUnsafe = (fs: FileSystem, options: SidecarCurrentCacheOptions): SidecarCurrentCache => {
  const counters = { full: 0, confirmed: 0, opened: 0 }
  const proofs = (options.cache ?? new ByteCache(options.maxBytes ?? 8 * 1024 * 1024)).section<CurrentProof>()

  // Generator bodies are made once (`fnUntraced`), not per read: this runs on every poll.
  const readOpen = Effect.fnUntraced(function*(path: string, proof: CurrentProof | undefined) {
    const { file, identity, size } = yield* openRegularFile(fs, path)
    counters.opened++
    if (proof !== undefined && proof.identity === identity && proof.size === size) {
      const confirmed = yield* confirmCurrent(file, path, proof)
      if (confirmed !== undefined) {
        counters.confirmed++
        return confirmed
      }
    }
    counters.full++
    const result = yield* currentOf(file, path, size, identity)
    if (result.proof === undefined) proofs.delete(path)
    else proofs.set(path, result.proof, proofBytes(result.proof))
    return result.current
  })

  // On a file system whose calls return at once, the proof's bytes are read
  // in one call (open, fstat, one read, close), without a scope or a handle's
  // effects: most of a poll of an unchanged sidecar was their bookkeeping.
  const readSmall = smallRegularReadOf(fs)
  const confirmAtOnce = (path: string, proof: CurrentProof): SidecarCurrent | undefined => {
    if (readSmall === undefined) return undefined
    const read = readSmall(path, { limit: proof.size - proof.tailStart, noFollow: true, from: proof.tailStart })
    if (read === undefined || read.identity !== proof.identity || read.size !== proof.size) return undefined
    return confirmFromTail(path, proof, read.bytes)
  }

  const read: (path: string) => Effect.Effect<SidecarCurrent> = Effect.fnUntraced(
    function*(path: string) {
      // No `lstat` first: the open refuses what is not a regular file (symlinks included) by itself.
      // The proof is only a hint: every answer it gives is confirmed by the bytes read now.
      const proof = proofs.get(path)
      const confirmed = proof === undefined ? undefined : confirmAtOnce(path, proof)
      if (confirmed !== undefined) {
        counters.opened++
        counters.confirmed++
        return confirmed
      }
      return yield* Effect.scoped(readOpen(path, proof))
    },
    // A sidecar that cannot be read keeps no proof.
    (effect, path) =>
      Effect.catch(effect, (error) =>
        Effect.sync(() => {
          proofs.delete(path)
          return sidecarFailure(path, error)
        }))
  )

  const stats = Effect.sync((): SidecarCurrentCacheStats => ({ ...counters, kept: proofs.size() }))
  return { read, stats } satisfies SidecarCurrentCache
}
