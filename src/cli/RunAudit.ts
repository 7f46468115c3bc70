/**
 * Runs the library's store audit for `jobs` and `verify`, with a progress
 * bar on a terminal and the live lock-owner probe.
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import type { Path } from "effect/Path"
import * as ProcessOwner from "../platform/ProcessOwner.js"
import { auditStore } from "../store/audit/SidecarAudit.js"
import { relativeWithin } from "../store/MirroredPath.js"
import { toCliFailure } from "./CliFailure.js"
import { type Globals, requireStore, type ResolvedSession, resolveSession } from "./GlobalOptions.js"
import { makeProgress } from "./Output.js"

/**
 * Audits the whole store, or the sidecar of `--session` when given; fails
 * with exit 3 when there is no store at the root.
 *
 * @category audit
 * @since 0.1.0
 */
export const runAudit = (options: Globals, session: Option.Option<string>, strict: boolean = false) =>
  Effect.gen(function*() {
    yield* requireStore(options)
    const resolved: ResolvedSession | undefined = Option.isSome(session)
      ? yield* resolveSession(session.value, options)
      : undefined
    const progress = makeProgress()
    const report = yield* auditStore({
      rarebitRoot: options.rarebitRoot,
      sidecar: resolved?.sidecar,
      strict,
      onProgress: ({ done, path, total }) => total > 1 ? progress.update(done, total, path) : Effect.void
    }).pipe(
      Effect.ensuring(progress.clear),
      Effect.provide(ProcessOwner.layer),
      Effect.mapError(toCliFailure)
    )
    return { report, resolved }
  })

/**
 * A path relative to `root` when it lies under it (the store's own rule,
 * `relativeWithin`, in the platform's separators), for shorter tables;
 * otherwise the path as it is.
 *
 * @category formatting
 * @since 0.1.0
 */
export const relativeTo = (path: Path, root: string, file: string): string => relativeWithin(path, root, file) ?? file
