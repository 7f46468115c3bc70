/**
 * Which head follows a receipt in a sidecar: the rule that decides whether
 * a settled receipt becomes current.
 *
 * A head is the only way a receipt becomes current. After a receipt, the
 * settle writes a new head when the receipt is the semantic current summary
 * of the Session as it is now (the artifact-state projection of the native
 * observation, with the current receipt and this one, selects it), and
 * otherwise repeats the current head, if there is one, so the last head
 * stays the last line. A title receipt never becomes current. Pure: the
 * caller reads the Session and the sidecar.
 *
 * @since 0.1.0
 */
import { Result } from "effect"
import { type Head, makeHead } from "../../protocol/Head.js"
import type { Receipt } from "../../protocol/Receipt.js"
import { type NativeObservation, projectArtifactStateResult } from "../../state/ArtifactState.js"
import type { SidecarCurrent } from "../read/SidecarReader.js"

/**
 * Whether `record` is the semantic current summary for `native`, next to
 * the sidecar's current receipt.
 *
 * @category predicates
 * @since 0.1.0
 */
export const isSemanticCurrent = (native: NativeObservation, current: SidecarCurrent, record: Receipt): boolean => {
  if (native.availability !== "available" || record.type !== "rarebit_summary") return false
  const candidate = projectArtifactStateResult({
    native,
    materialization: { availability: "available", records: [current.receipt, record].filter(Boolean) }
  })
  return Result.isSuccess(candidate) && candidate.success.receiptRef?.jobId === record.jobId
}

/**
 * The head to write after a receipt line appended at `offset`: a new one
 * when the receipt becomes current, else the current head repeated (as
 * parsed, extra keys and all, as the reference does), else none.
 *
 * @category constructors
 * @since 0.1.0
 */
export const headAfter = (
  becomesCurrent: boolean,
  current: SidecarCurrent,
  sessionId: string,
  offset: number,
  line: Uint8Array
): Head | null => (becomesCurrent ? makeHead(sessionId, offset, line) : current.head)
