/**
 * Job claim files: `<rarebitRoot>/jobs-v4/<jobId>.json`, one JSON line.
 *
 * Guarantees:
 * - A claim appears whole or not at all: it is written to a private temp
 *   file, fsynced, then hard-linked into place for an exclusive create (or,
 *   where hard links are unsupported, renamed over an empty placeholder
 *   made with `wx`: see `DurableFile`), or renamed over the old claim for a
 *   replacement (and the directory fsynced, unless the caller makes it
 *   durable later or does not need it). Readers, ours or the reference's, never see a partial claim
 *   written by us.
 * - Reading is lenient like the reference (any JSON value is returned), and
 *   an empty or unparsable claim — which the reference can leave, since it
 *   rewrites claims in place — is reported as `Torn` with its modification
 *   time instead of failing.
 * - A claim is decoded exactly as the reference's `readFile(path, "utf8")`
 *   decodes it (`decodeUtf8`): a BOM is kept, so a claim that starts with
 *   one is not JSON and is `Torn` here, as the reference cannot parse it.
 * - Reading never blocks and never reads more than `MAX_CLAIM_BYTES + 1`
 *   bytes: a claim path holding a symlink, a FIFO, a device, a socket or an
 *   oversized file cannot be read, and is reported `Torn` too (with the
 *   `lstat` modification time and why), so it is in flight until the lease
 *   has passed since then, and is then replaced by a rename that never
 *   touches what it pointed at.
 * - A directory at a claim path is not waited for: no rename can replace
 *   it, and the reference's read of it fails at once. Reading it fails
 *   with the file system's own `EISDIR` from a read of the directory, the
 *   error the reference meets.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import type { SecureRandom } from "effect/crypto/SecureRandom"
import type { FileSystem } from "effect/FileSystem"
import type { Path } from "effect/Path"
import type { PlatformError } from "effect/PlatformError"
import { describeType, type NotDirectory, openDirectory, readBounded } from "../../io/RegularFile.js"
import { modifiedMs } from "../../protocol/internal/FileInfo.js"
import { decodeUtf8 } from "../../protocol/internal/Utf8.js"
import { encodeClaimLine, type JobClaim, parseClaim } from "../../protocol/JobClaim.js"
import { MAX_CLAIM_BYTES } from "../../protocol/Limits.js"
import { randomToken } from "../RandomToken.js"
import { installExclusive, removeIfPresent, syncDirectory, writeDurableTemp } from "./DurableFile.js"

/**
 * What a claim path holds. `Torn` is a claim that cannot be read as one:
 * unparsable, or (with `unreadable` saying why) not a regular file or
 * longer than `MAX_CLAIM_BYTES`.
 *
 * @category models
 * @since 0.1.0
 */
export type ClaimRead =
  | { readonly _tag: "Absent" }
  | { readonly _tag: "Parsed"; readonly claim: unknown }
  | { readonly _tag: "Torn"; readonly modifiedAtMs: number; readonly unreadable?: string }

/** A claim that is there but cannot be read, dated by the path itself (`lstat`, never through a link). */
const unreadableClaim = (
  fs: FileSystem,
  claimPath: string,
  unreadable: string
): Effect.Effect<ClaimRead, PlatformError> =>
  Effect.map(
    fs.lstat(claimPath),
    (info): ClaimRead => ({ _tag: "Torn", modifiedAtMs: modifiedMs(info) ?? 0, unreadable })
  )

/**
 * A directory at the claim path: the read the reference makes fails with
 * `EISDIR`, and so does this one, on a handle that can only be a directory
 * (so nothing swapped in can make it wait). Anything else found there by
 * then is unreadable like any other non-regular file.
 */
const directoryClaim = (fs: FileSystem, claimPath: string): Effect.Effect<ClaimRead, PlatformError> =>
  Effect.scoped(
    openDirectory(fs, claimPath).pipe(Effect.flatMap(({ file }) => file.readAlloc(1)))
  ).pipe(
    Effect.catchTag("NotDirectory", (error) => Effect.succeed(error.type)),
    Effect.flatMap((found) =>
      unreadableClaim(
        fs,
        claimPath,
        `${describeType(typeof found === "string" ? found : "Directory")}, not a regular file`
      )
    )
  )

/**
 * Reads a claim.
 *
 * @category readers
 * @since 0.1.0
 */
export const readClaim = (fs: FileSystem, claimPath: string): Effect.Effect<ClaimRead, PlatformError> =>
  readBounded(fs, claimPath, { maxBytes: MAX_CLAIM_BYTES, followSymlinks: false }).pipe(
    Effect.map((read): ClaimRead => {
      // The handle's own `fstat` dates a torn claim: the file that was read.
      const modifiedAtMs = modifiedMs(read.info) ?? 0
      if (read._tag === "TooLarge") {
        return { _tag: "Torn", modifiedAtMs, unreadable: `larger than ${MAX_CLAIM_BYTES} bytes` }
      }
      const parsed = parseClaim(decodeUtf8(read.bytes))
      return parsed._tag === "Parsed" ? parsed : { _tag: "Torn", modifiedAtMs }
    }),
    Effect.catchTag("FileNotRegular", (error) =>
      error.type === "Directory"
        ? directoryClaim(fs, claimPath)
        : unreadableClaim(fs, claimPath, `${describeType(error.type)}, not a regular file`)),
    Effect.catchReason("PlatformError", "NotFound", () => Effect.succeed<ClaimRead>({ _tag: "Absent" }))
  )

/**
 * Creates a claim only if none exists. Succeeds with `false` when one does.
 *
 * @category writers
 * @since 0.1.0
 */
export const createClaimExclusive: (
  fs: FileSystem,
  claimPath: string,
  claim: JobClaim
) => Effect.Effect<boolean, PlatformError, SecureRandom> = Effect.fnUntraced(function*(
  fs: FileSystem,
  claimPath: string,
  claim: JobClaim
) {
  const { tempPath } = yield* prepareClaim(fs, claimPath, claim)
  return yield* installExclusive(fs, tempPath, claimPath).pipe(Effect.ensuring(Effect.ignore(fs.remove(tempPath))))
}, Effect.uninterruptible)

/**
 * Replaces a claim atomically and durably.
 *
 * **Details**
 *
 * With `syncDirectory: false` the caller fsyncs the directory itself later
 * (settle does, after giving the commit lock back, so the lock is not held
 * across that fsync).
 *
 * @category writers
 * @since 0.1.0
 */
export const replaceClaim = (
  fs: FileSystem,
  path: Path,
  claimPath: string,
  claim: JobClaim,
  options: { readonly syncDirectory?: boolean } = {}
): Effect.Effect<void, PlatformError | NotDirectory, SecureRandom> =>
  Effect.gen(function*() {
    const prepared = yield* prepareClaim(fs, claimPath, claim)
    yield* installClaim(fs, prepared)
    if (options.syncDirectory !== false) yield* syncDirectory(fs, path.dirname(claimPath))
  }).pipe(Effect.uninterruptible)

/**
 * A claim written whole and fsynced to its private temp file, not yet in
 * place: nothing reads it until `installClaim` renames it over the claim.
 *
 * @category models
 * @since 0.1.0
 */
export interface PreparedClaim {
  readonly claimPath: string
  readonly tempPath: string
}

/**
 * The first half of `replaceClaim`: writes and fsyncs the claim to a fresh
 * temp file beside the claim path. The caller must install or discard it.
 *
 * @category writers
 * @since 0.1.0
 */
export const prepareClaim: (
  fs: FileSystem,
  claimPath: string,
  claim: JobClaim
) => Effect.Effect<PreparedClaim, PlatformError, SecureRandom> = Effect.fnUntraced(function*(
  fs: FileSystem,
  claimPath: string,
  claim: JobClaim
) {
  const tempPath = `${claimPath}.${yield* randomToken(12)}.tmp`
  yield* writeDurableTemp(fs, tempPath, encodeClaimLine(claim))
  return { claimPath, tempPath }
})

/**
 * The second half of `replaceClaim`: renames a prepared claim over the
 * claim path (the temp file is removed if the rename fails). The directory
 * fsync that makes the rename durable is the caller's.
 *
 * @category writers
 * @since 0.1.0
 */
export const installClaim = (fs: FileSystem, prepared: PreparedClaim): Effect.Effect<void, PlatformError> =>
  fs.rename(prepared.tempPath, prepared.claimPath).pipe(Effect.onError(() => discardClaim(fs, prepared)))

/**
 * Removes a prepared claim that will not be installed.
 *
 * @category writers
 * @since 0.1.0
 */
export const discardClaim = (fs: FileSystem, prepared: PreparedClaim): Effect.Effect<void> =>
  Effect.ignore(fs.remove(prepared.tempPath))

/**
 * Removes a claim; a claim already gone is not an error.
 *
 * @category writers
 * @since 0.1.0
 */
export const removeClaim: (fs: FileSystem, claimPath: string) => Effect.Effect<void, PlatformError> = removeIfPresent
