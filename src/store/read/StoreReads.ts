/**
 * The store's reads: a Session's sidecar path, its current receipt with the
 * artifact-state projection, and its history, page by page or as a stream.
 *
 * Reads never fail for what they find on disk: a damaged or missing sidecar
 * is a result (`availability`, `diagnostics.reason`), and only a caller's
 * mistake (a path outside the rules, bounds outside the protocol's, a
 * malformed `native` or `expectation`) is an error. The one exception is the
 * `history` stream, which has no page to say it on: it fails with
 * `HistoryUnreadable` at the offset it could not read. Reads are bounded
 * (`SidecarReader`) and write nothing.
 *
 * @since 0.1.0
 */
import { Effect, Option, Stream } from "effect"
import { withVerifiedSummaries } from "../../protocol/internal/VerifiedReceipts.js"
import { MAX_HISTORY_RECORDS } from "../../protocol/Limits.js"
import {
  type ArtifactState,
  type NativeObservation,
  projectArtifactStateResult,
  type ProjectionInput
} from "../../state/ArtifactState.js"
import { HistoryBoundsInvalid, HistoryUnreadable } from "../Errors.js"
import { locate, type LocationOverrides } from "../StoreConfig.js"
import type { StoreContext } from "../StoreContext.js"
import { historyBoundsValid, readSidecarHistoryPage, type SidecarCurrent } from "./SidecarReader.js"

/**
 * Options of `readCurrent`.
 *
 * **Details**
 *
 * The types say what a caller should pass; the store still checks every
 * value at run time, so a JavaScript caller's mistake is a typed failure
 * (`SessionFileRequired`, `ProjectionInputInvalid`, ...), not a defect.
 *
 * @category models
 * @since 0.1.0
 */
export interface ReadCurrentOptions extends LocationOverrides {
  /** The Session JSONL file whose sidecar is read. */
  readonly sessionFile: string
  /** The native observation, when the caller already has it; otherwise the Session is read. */
  readonly native?: NativeObservation | null | undefined
  readonly expectation?: ProjectionInput["expectation"]
  readonly deadlineExpired?: boolean | undefined
}

/**
 * A current read: the sidecar's answer plus the artifact-state projection.
 *
 * Discriminated by `availability`: only an `"available"` read has a
 * `receipt` (and a `head`), so narrow on it before reading the receipt.
 *
 * @category models
 * @since 0.1.0
 */
export type CurrentRead = SidecarCurrent & { readonly artifactState: ArtifactState }

/** Options of `readHistory` and `history`. @category models @since 0.1.0 */
export interface ReadHistoryOptions extends LocationOverrides {
  /** The Session JSONL file whose sidecar is read. */
  readonly sessionFile: string
  /** Absolute byte offset to start at; default 0. */
  readonly fromOffset?: number | undefined
  /** Records per page, 1–1000; default 100. */
  readonly limit?: number | undefined
}

const checkHistoryBounds = (fromOffset: number, limit: number) =>
  historyBoundsValid(fromOffset, limit) ? Effect.void : Effect.fail(new HistoryBoundsInvalid({ fromOffset, limit }))

/**
 * The read operations of one store instance.
 *
 * **Details**
 *
 * The polling paths (`materializationPath`, `readCurrent`) record their
 * spans with `useSpan`: timing and outcome, under the caller's span,
 * without making it the parent of the work inside (which opens no spans of
 * its own). `Effect.fn` or `withSpan` would also capture a call site per
 * call and move the fiber to a new context; together that measured 30–45 µs
 * of a ~0.45 ms growing-Session poll.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeReads = (ctx: StoreContext) => {
  const materializationPath = (sessionFile: unknown, overrides: LocationOverrides = {}) =>
    Effect.useSpan(
      "RarebitStore.materializationPath",
      () =>
        ctx.identify(sessionFile, locate(ctx.config, overrides)).pipe(
          Effect.flatMap((canonical) => ctx.sidecarPath(canonical.sessionFile, canonical.location))
        )
    )

  const readCurrentUntraced = Effect.fnUntraced(function*(options: ReadCurrentOptions) {
    // One spelling from here on: the sidecar, its cache entry and the Session cache's key.
    const { sessionFile, location } = yield* ctx.identify(options.sessionFile, locate(ctx.config, options))
    const sidecar = yield* ctx.sidecarPath(sessionFile, location)
    const native = options.native ?? (yield* ctx.observeNative(sessionFile, location))
    const current = yield* ctx.readSidecar(sidecar)
    // The sidecar reader's records are Summary receipts it verified for this answer.
    const artifactState = yield* withVerifiedSummaries(
      current.records,
      () =>
        Effect.fromResult(projectArtifactStateResult({
          native,
          materialization: { availability: current.availability, records: current.records },
          expectation: options.expectation,
          deadlineExpired: options.deadlineExpired
        }))
    )
    return { ...current, artifactState } satisfies CurrentRead
  })

  const readCurrent = (options: ReadCurrentOptions) =>
    Effect.useSpan("RarebitStore.readCurrent", () => readCurrentUntraced(options))

  const readHistory = Effect.fn("RarebitStore.readHistory")(function*(options: ReadHistoryOptions) {
    const fromOffset = options.fromOffset ?? 0
    const limit = options.limit ?? 100
    yield* checkHistoryBounds(fromOffset, limit)
    const { sessionFile, location } = yield* ctx.identify(options.sessionFile, locate(ctx.config, options))
    const sidecar = yield* ctx.sidecarPath(sessionFile, location)
    return yield* readSidecarHistoryPage(ctx.fs, sidecar, fromOffset, limit)
  })

  const history = (options: ReadHistoryOptions) =>
    Stream.unwrap(Effect.gen(function*() {
      const fromOffset = options.fromOffset ?? 0
      const limit = options.limit ?? MAX_HISTORY_RECORDS
      yield* checkHistoryBounds(fromOffset, limit)
      const { sessionFile, location } = yield* ctx.identify(options.sessionFile, locate(ctx.config, options))
      const sidecar = yield* ctx.sidecarPath(sessionFile, location)
      return Stream.paginate(fromOffset, (offset: number) =>
        readSidecarHistoryPage(ctx.fs, sidecar, offset, limit).pipe(
          Effect.flatMap((page) =>
            page.availability === "unreadable"
              ? Effect.fail(new HistoryUnreadable({ path: sidecar, offset }))
              : Effect.succeed([page.records, Option.fromNullishOr(page.nextOffset)] as const)
          )
        ))
    }))

  return { materializationPath, readCurrent, readHistory, history }
}
