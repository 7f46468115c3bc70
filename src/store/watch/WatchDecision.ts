/**
 * The decision a watch makes after each read: emit it or not, and in which
 * epoch. Pure: it compares a read with what the last emission of its
 * Session left, kept in constant space (a state key, the sidecar file's
 * identity, the head's offset).
 *
 * The rules (see `CurrentWatch` for what they guarantee a consumer): two
 * reads are the same state when their `stateKey`s agree; another sidecar
 * file, or a head behind the last one in the same file, is a new epoch.
 *
 * @since 0.1.0
 */
import { sha256Hex } from "../../protocol/CanonicalJson.js"
import type { CurrentRead } from "../read/StoreReads.js"

/** Why a read was or was not emitted. @internal */
export type Decision = "initial" | "baseline" | "changed" | "new epoch" | "identical"

/** What the last emission of a Session was, in constant space. @internal */
export interface Emitted {
  readonly key: string
  readonly identity: string | null
  readonly headOffset: number
  readonly epoch: number
  readonly sequence: number
}

/**
 * What makes two reads the same state: availability, reason, head and
 * artifact state. Not `tornTail` nor `tailOffset`, which an unterminated
 * line moves without changing the answer; not the receipt, which the head's
 * hash names. Hashed, so a Session's remembered state is 64 characters.
 *
 * @internal
 */
export const stateKey = (current: CurrentRead): string =>
  sha256Hex(
    JSON.stringify([current.availability, current.diagnostics.reason ?? null, current.head, current.artifactState])
  )

/**
 * Whether to emit `current`, read from the sidecar file `identity` (`null`:
 * no file there; `undefined`: unknown, the path could not be examined, taken
 * as the last one's, so a passing failure does not pass for a new file; a
 * head that went backwards still does), after `last`.
 *
 * @internal
 */
export const decide = (
  last: Emitted | undefined,
  examined: string | null | undefined,
  current: CurrentRead,
  emitFirst: boolean
): { readonly decision: Decision; readonly last: Emitted | undefined; readonly emitted: boolean } => {
  const identity = examined === undefined ? (last?.identity ?? null) : examined
  const key = stateKey(current)
  // A read that could not read the file says nothing of where its head is: the last known one stands.
  const unread = current.diagnostics.reason === "sidecar_unreadable"
  const headOffset = unread && last !== undefined ? last.headOffset : current.head?.receiptOffset ?? -1
  if (last === undefined) {
    return {
      decision: emitFirst ? "initial" : "baseline",
      // A baseline is remembered as "emitted" before the first emission, so the first change is sequence 0.
      last: { key, identity, headOffset, epoch: 0, sequence: emitFirst ? 0 : -1 },
      emitted: emitFirst
    }
  }
  const otherFile = identity !== last.identity
  // Appends only move a head forward: a head behind the last one in the same file means it was rewritten.
  const rewritten = !otherFile && headOffset < last.headOffset
  if (otherFile || rewritten) {
    return {
      decision: "new epoch",
      last: { key, identity, headOffset, epoch: last.epoch + 1, sequence: last.sequence + 1 },
      emitted: true
    }
  }
  if (key === last.key) return { decision: "identical", last, emitted: false }
  return {
    decision: "changed",
    last: { key, identity, headOffset, epoch: last.epoch, sequence: last.sequence + 1 },
    emitted: true
  }
}
