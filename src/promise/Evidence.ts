/**
 * The reference's pure and Session functions, for plain callers: canonical
 * JSON, the selector, measurement, job identity, Session parsing and reading,
 * receipt validation and the artifact-state projection.
 *
 * The pure functions are this package's own implementations exported under
 * the reference's names; the two that touch the disk run the Effect Session
 * reader on the shared runtime and reject with the reference's errors.
 *
 * @since 0.1.0
 */
import { readSession, resolveSessionFile, type SessionRead } from "../session/SessionReader.js"
import { DEFAULT_RAREBIT_SESSION_ROOT } from "../store/StoreConfig.js"
import { runPromise } from "./Runtime.js"

export { sha256, stableJson } from "../protocol/CanonicalJson.js"
export { validateSummaryReceipt as validateRarebitArtifactReceipt } from "../protocol/SummaryReceipt.js"
export { validateTitleReceipt as validateRarebitTitleReceipt } from "../protocol/TitleReceipt.js"
export { rarebitJobIdentity } from "../session/JobIdentity.js"
export { measureRarebits } from "../session/Measurement.js"
export { RAREBIT_SELECTOR_VERSION, selectRarebits } from "../session/Selector.js"
export { parseNativeSession, resolveActiveBranch } from "../session/SessionParse.js"
export {
  exactSelectionApplies,
  projectArtifactState as projectRarebitArtifactState,
  requestPrefixApplies
} from "../state/ArtifactState.js"

/** `~/.pi/agent/sessions`, the same root the store defaults to. @category constants @since 0.1.0 */
export const DEFAULT_PI_SESSION_ROOT = DEFAULT_RAREBIT_SESSION_ROOT

/**
 * Resolves an existing Session JSONL path or one exact Session id under the
 * root.
 *
 * @category session
 * @since 0.1.0
 */
export function resolveRarebitSessionFile(
  reference: string,
  { sessionRoot = DEFAULT_PI_SESSION_ROOT }: { readonly sessionRoot?: string | undefined } = {}
): Promise<string> {
  return runPromise(resolveSessionFile(reference, { sessionRoot }))
}

/**
 * Reads a Session: its file, parse, active branch, selection and
 * measurement.
 *
 * **Details**
 *
 * The file is streamed, never held whole: besides the parsed entries it
 * returns, a read holds a constant amount plus one line (see
 * `SessionStream`). A Session the reference's `readFile(path, "utf8")`
 * cannot read rejects with the same `RangeError` ("File size (N) is greater
 * than 2 GiB", code `ERR_FS_FILE_TOO_LARGE`, or "Invalid string length").
 *
 * @category session
 * @since 0.1.0
 */
export function readRarebitSession(
  reference: string,
  { sessionRoot = DEFAULT_PI_SESSION_ROOT }: { readonly sessionRoot?: string | undefined } = {}
): Promise<SessionRead> {
  return runPromise(readSession(reference, { sessionRoot }))
}
