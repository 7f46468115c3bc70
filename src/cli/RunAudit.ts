/**
 * Runs the library's store audit for `jobs` and `verify`, with a progress
 * bar on a terminal and the live lock-owner probe.
 *
 * @since 0.1.0
 */
import { Effect, Option } from "effect"
import * as ProcessOwner from "../platform/ProcessOwner.js"
import { auditStore } from "../store/audit/SidecarAudit.js"
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
 * A path relative to `root` when it lies under it, for shorter tables. The
 * separator is the root's own: `\` after a drive letter or a UNC prefix
 * (Windows), `/` otherwise.
 *
 * @category formatting
 * @since 0.1.0
 */
export const relativeTo = (root: string, path: string): string => {
  const separator = /^(?:[A-Za-z]:|\\\\)/.test(root) ? "\\" : "/"
  const prefix = root.endsWith(separator) ? root : `${root}${separator}`
  return path.startsWith(prefix) && path.length > prefix.length ? path.slice(prefix.length) : path
}
