/**
 * Current reads of sidecars that are read again and again (a poller's, a
 * settle's), which skip re-opening, re-parsing and re-validating a sidecar
 * whose verified bytes have not moved.
 *
 * Guarantees:
 * - Every answer is what `readSidecarCurrent` answers for the bytes on disk
 *   at read time, as fresh objects the caller may change. After an available
 *   read the cache keeps the file's identity and size, where the head and
 *   the receipt lie, and the SHA-256 of the bytes from just before the head
 *   (or from the receipt, when it lies that close) to the end. A later read
 *   of the same file at the same size reads those bytes again and hashes
 *   them, and a receipt before them is read again and checked against the
 *   head's `receiptHash` as a full read checks it; only if all match is the
 *   answer parsed again from the bytes just read (so every answer rests on
 *   bytes read this time, and nothing parsed is kept). Anything else
 *   (another size, another inode, different bytes, an unavailable answer, a
 *   failed or interrupted read) is a full read.
 * - Each cached sidecar stays open for reading (`io/HeldFiles`): every read
 *   starts with an `lstat` of the path, and the held file is used only while
 *   that shows the same device and inode, so a sidecar replaced by a rename
 *   is opened anew and the old file let go; one swapped in between the
 *   `lstat` and the open is read as the file opened and not kept. Reads in
 *   flight share the held file, which is never closed under them.
 * - Bounded by a `CacheBudget` (its own, or one shared with other caches):
 *   each sidecar is charged the bytes its proof keeps (at most 512: offsets,
 *   a digest and the diagnostics, whatever the size of its receipt), the
 *   least recently read are dropped beyond the budget's bytes (or beyond
 *   `capacity`, if given; once the budget thrashes, a sidecar read no more
 *   often than the least recently read one is not kept, see `CacheBudget`),
 *   and at most the budget's `maxOpenFiles` files are
 *   held, the least recently read let go first (such a sidecar is opened
 *   again at its next read; its proof stays). Everything still open is
 *   closed when the cache's scope ends; reads after that are full reads that
 *   hold nothing.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import type { File, FileSystem } from "effect/FileSystem"
import * as HeldFiles from "../io/HeldFiles.js"
import type { CacheBudget } from "../io/HeldFiles.js"
import { RecordArena, RecordReader, RecordWriter } from "../io/RecordArena.js"
import { fileIdentity } from "../protocol/internal/FileInfo.js"
import { NotRegularFile } from "./Errors.js"
import {
  confirmCurrent,
  currentOf,
  type CurrentProof,
  readSidecarCurrent,
  type SidecarCurrent,
  type SidecarDiagnostics,
  sidecarFailure,
  type SidecarReason
} from "./SidecarReader.js"

type Entry = HeldFiles.HeldEntry<ProofRecord | undefined>

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
  /** Proofs kept now, each as one record outside the heap (`RecordArena`); never more than `kept`. */
  readonly records: number
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

/**
 * Limits of a sidecar current cache.
 *
 * @category models
 * @since 0.1.0
 */
export interface SidecarCurrentCacheOptions {
  /** Sidecars kept at most, the least recently read dropped first; by default only the bytes bound them. */
  readonly capacity?: number | undefined
  /** Bytes of proofs kept, without a shared `budget`. Default 8 MiB. */
  readonly maxBytes?: number | undefined
  /** Sidecars held open at most, without a shared `budget`. Default 64. */
  readonly maxOpenFiles?: number | undefined
  /** A budget shared with other caches (the store shares one with its Session cache); overrides the two above. */
  readonly budget?: CacheBudget | undefined
}

/**
 * What an entry keeps of its sidecar's proof: the handle of one record in
 * the cache's `RecordArena`, outside the heap. As objects, a proof with its
 * digest, identity and diagnostics was ~250 bytes of heap a sidecar, kept
 * for every sidecar a poller reads; a record is ~180 bytes outside it.
 */
type ProofRecord = number

/** Bytes charged for a kept proof beside its record: the record's header and handle, and the proof decoded per read. */
const PROOF_RECORD_OVERHEAD_BYTES = 64

const writeProof = (writer: RecordWriter, proof: CurrentProof): Uint8Array => {
  const { diagnostics } = proof
  return writer.start().number(proof.size).number(proof.tailStart).number(proof.headOffset).number(
    proof.receiptOffset
  ).number(proof.receiptLength).number(diagnostics.tornTail ? 1 : 0).number(diagnostics.tailOffset ?? Number.NaN)
    .string(diagnostics.reason ?? "").string(proof.identity).string(proof.tailSha256).done()
}

/** The proof `writeProof` wrote, with its diagnostics' fields present exactly as they were. */
const readProof = (bytes: Uint8Array): CurrentProof => {
  const record = new RecordReader(bytes)
  const size = record.number()
  const tailStart = record.number()
  const headOffset = record.number()
  const receiptOffset = record.number()
  const receiptLength = record.number()
  const tornTail = record.number() === 1
  const tailOffset = record.number()
  const reason = record.string() as SidecarReason | ""
  const diagnostics: SidecarDiagnostics = Number.isNaN(tailOffset)
    ? reason === "" ? { tornTail } : { tornTail, reason }
    : reason === ""
    ? { tornTail, tailOffset }
    : { tornTail, tailOffset, reason }
  const identity = record.string()
  const tailSha256 = record.string()
  return { identity, size, tailStart, tailSha256, headOffset, receiptOffset, receiptLength, diagnostics }
}

/**
 * A sidecar current cache over `fs`, for the current scope.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeSidecarCurrentCache = Effect.fnUntraced(function*(
  fs: FileSystem,
  options: SidecarCurrentCacheOptions = {}
) {
  const counters = { full: 0, confirmed: 0, opened: 0 }
  const proofs = new RecordArena()
  const writer = new RecordWriter()
  /**
   * Keeps `proof` (or nothing) as what the entry's next read may rest on,
   * charged to the budget; the record it replaces is freed. A dropped entry
   * keeps nothing, so no record outlives its entry.
   */
  const keep = (entry: Entry, proof: CurrentProof | undefined): void => {
    if (entry.state !== undefined) proofs.free(entry.state)
    entry.state = undefined
    if (proof === undefined || !entry.live) return sidecars.setBytes(entry, 0)
    const record = writeProof(writer, proof)
    entry.state = proofs.put(record)
    sidecars.setBytes(entry, PROOF_RECORD_OVERHEAD_BYTES + record.length)
  }
  // Each entry's state is what the sidecar's last available answer rests on.
  const sidecars: HeldFiles.HeldFiles<ProofRecord | undefined> = yield* HeldFiles.make<ProofRecord | undefined>(fs, {
    capacity: options.capacity,
    budget: options.budget ??
      HeldFiles.makeBudget({ maxBytes: options.maxBytes ?? 8 * 1024 * 1024, maxOpenFiles: options.maxOpenFiles ?? 64 }),
    followSymlinks: false,
    initial: () => undefined,
    onDrop: (entry) => Effect.sync(() => keep(entry, undefined))
  })

  // Generator bodies are made once (`fnUntraced`), not per read: a generator
  // function made anew per call gives each read's generator a new hidden class
  // in the old generation, which holds that read's objects through young
  // collections until a full one (measured: ~3 KiB promoted per idle poll).
  const readHeld = Effect.fnUntraced(function*(
    entry: Entry,
    proof: CurrentProof | undefined,
    { file, info, opened }: HeldFiles.HeldUse
  ) {
    if (opened) counters.opened++
    const size = Number(info.size)
    const identity = fileIdentity(info)
    if (proof !== undefined && proof.identity === identity && proof.size === size) {
      const cached = yield* confirmCurrent(file, entry.path, proof)
      if (cached !== undefined) {
        counters.confirmed++
        return cached
      }
    }
    counters.full++
    const result = yield* currentOf(file, entry.path, size, identity)
    keep(entry, result.proof)
    return result.current
  })

  const readThrough = (entry: Entry, proof: CurrentProof | undefined, pathInfo: File.Info) =>
    entry.file.use(pathInfo, (held) => readHeld(entry, proof, held))

  const read: (path: string) => Effect.Effect<SidecarCurrent> = Effect.fnUntraced(
    function*(path: string) {
      const info = yield* fs.lstat(path)
      if (info.type !== "File") return yield* new NotRegularFile({ path })
      const entry = yield* sidecars.get(path)
      // The cache's scope has ended: read around it.
      if (entry === undefined) {
        counters.full++
        return yield* readSidecarCurrent(fs, path)
      }
      const proof = entry.state === undefined ? undefined : readProof(proofs.view(entry.state))
      return yield* readThrough(entry, proof, info).pipe(
        // A failed or interrupted read leaves no proof behind.
        Effect.onError(() => Effect.sync(() => keep(entry, undefined))),
        // What this read keeps may push out the least recently read sidecars (or Sessions, sharing the budget).
        Effect.tap(() => sidecars.fit(entry))
      )
    },
    // A sidecar that cannot be read is not held, nor its proof kept.
    (effect, path) => Effect.catch(effect, (error) => Effect.as(sidecars.invalidate(path), sidecarFailure(path, error)))
  )

  const stats = Effect.sync((): SidecarCurrentCacheStats => {
    const entries = [...sidecars.entries()]
    return {
      ...counters,
      kept: entries.length,
      held: entries.filter((entry) => entry.file.holding()).length,
      records: proofs.size
    }
  })
  return { read, stats } satisfies SidecarCurrentCache
})
