/**
 * The parse of a Pi Session fed line by line, keeping only what its
 * projection needs: the header, and per entry its tree links, its prose
 * length and, when the selector picks it, its text (never the long tool
 * outputs). Pure: the Session cache feeds it the lines it reads, and feeds
 * a grown Session's new lines to the same accumulator.
 *
 * Guarantees: after any lines, `finish` answers exactly what
 * `parseSessionResult`, `resolveActiveBranchResult` and `projectSession`
 * answer for the same text (the same projection, or the same
 * `SessionInvalid` with the same line number), with the unterminated last
 * line parsed but not kept, so a torn line completed later is read whole.
 * The state kept grows with the entries (see `retainedBytes`), not with the
 * bytes of the Session.
 *
 * @since 0.1.0
 */
import { Result } from "effect"
import { memberOf } from "../protocol/internal/JsonShape.js"
import { measurementOf } from "./Measurement.js"
import {
  makePick,
  type OrderedPicks,
  type Pick,
  pickRetainedBytes,
  SelectionBuilder,
  selectionOfPicks
} from "./SelectionBuild.js"
import { messageOf, messageTextBlocks, rarebitMetadata } from "./Selector.js"
import { SessionInvalid, type SessionTooLarge } from "./SessionErrors.js"
import { isLinearSession, isSessionHeader, parseLine, type SessionHeader, SessionLineParser } from "./SessionParse.js"
import { projectionOf, type SessionProjection } from "./SessionProjection.js"

/** A tree entry, reduced to what the branch walk, selection and measurement read. */
interface TreeNode {
  readonly id: string
  readonly parentId: unknown
  readonly prose: number
  readonly pick: Pick | null
}

type Mode = "empty" | "invalid" | "linear" | "tree"

/** A branch from `leaf` to its root: its picks in branch order, its prose, its length. */
interface WalkedBranch {
  readonly leaf: TreeNode
  readonly length: number
  readonly picks: ReadonlyArray<{ readonly order: number; readonly pick: Pick }>
  readonly prose: number
}

/** Prose chars (as `measureRarebits` counts them) and the selection pick of one entry. */
const contributionOf = (entry: unknown): { readonly prose: number; readonly pick: Pick | null } => {
  const message = messageOf(entry)
  if (message === undefined) return { prose: 0, pick: null }
  const blocks = messageTextBlocks(message)
  let prose = 0
  for (const text of blocks) prose += text.length
  if (blocks.length === 0) return { prose, pick: null }
  const metadata = rarebitMetadata(entry, 0)
  return { prose, pick: metadata === null ? null : makePick(metadata, blocks.join("\n")) }
}

const ENTRY_OVERHEAD_BYTES = 96

/** The projection of a Session whose branch has no entries; its arrays are its own, as every outcome's are. */
const emptyProjection = (header: SessionHeader): SessionProjection =>
  projectionOf(header, null, selectionOfPicks([]).selection, measurementOf(0, 0, 0))

/** The outcome of a Session read: its projection, the rule it breaks, or too large to read. */
export type SessionOutcome = Result.Result<SessionProjection, SessionInvalid | SessionTooLarge>

/**
 * The parse of a Session's complete lines so far, fed line by line.
 *
 * **Details**
 *
 * `addLine` takes each complete line (without its newline) in file order;
 * `finish` projects the lines fed so far plus an optional unterminated last
 * line, which is parsed but not kept. The outcome equals that of
 * `parseSessionResult`, `resolveActiveBranchResult` and `projectSession` on
 * the same text, errors included; only the reduced state is kept, never the
 * entries themselves.
 *
 * @category models
 * @since 0.1.0
 */
export class SessionAccumulator extends SessionLineParser {
  private mode: Mode = "empty"
  private header: SessionHeader | undefined = undefined
  // linear Sessions: every entry is on the branch, in file order
  private entryCount = 0
  private readonly linearPicks: Array<{ readonly order: number; readonly pick: Pick }> = []
  private linearProse = 0
  // The selection of the last outcome, extended by the next when the branch grew.
  private readonly selections = new SelectionBuilder()
  // tree Sessions
  private readonly byId = new Map<string, TreeNode>()
  private leaf: TreeNode | undefined = undefined
  private treeError: SessionInvalid | undefined = undefined
  /**
   * The last branch walked from a committed leaf, to root. A Session being
   * written mostly grows at its leaf, so the next walk stops where it meets
   * this leaf and takes the rest from here: a poll walks the entries added
   * since, not the whole branch again.
   */
  private lastBranch: WalkedBranch | undefined = undefined
  /** Nodes the last `finish` stepped through to find its branch (for tests). */
  lastWalkSteps = 0
  /** Estimated bytes this accumulator keeps alive. */
  retainedBytes = 0

  protected addRecord(record: unknown): void {
    switch (this.mode) {
      case "empty": {
        if (!isSessionHeader(record)) {
          this.mode = "invalid"
          return
        }
        this.header = record
        this.mode = isLinearSession(record) ? "linear" : "tree"
        return
      }
      case "invalid":
        return
      case "linear": {
        const { pick, prose } = contributionOf(record)
        if (pick !== null) {
          this.linearPicks.push({ order: this.entryCount, pick })
          this.retainedBytes += pickRetainedBytes(pick)
        }
        this.linearProse += prose
        this.entryCount++
        return
      }
      case "tree": {
        if (this.treeError !== undefined) return
        const node = this.treeNodeOf(record)
        if (node instanceof SessionInvalid) {
          this.treeError = node
          return
        }
        this.byId.set(node.id, node)
        this.leaf = node
        this.retainedBytes += ENTRY_OVERHEAD_BYTES + 2 * node.id.length +
          (node.pick === null ? 0 : pickRetainedBytes(node.pick))
        return
      }
    }
  }

  private treeNodeOf(record: unknown): TreeNode | SessionInvalid {
    const id = memberOf(record, "id")
    if (typeof id !== "string" || !id) return SessionInvalid.entryWithoutId(this.source)
    if (this.byId.has(id)) return SessionInvalid.duplicateId(this.source, id)
    const { pick, prose } = contributionOf(record)
    return { id, parentId: memberOf(record, "parentId"), prose, pick }
  }

  /**
   * The outcome for the lines fed so far followed by `trailing`, an
   * unterminated last line (empty when the text ends with a newline).
   */
  finish(trailing: string): Result.Result<SessionProjection, SessionInvalid> {
    if (this.malformedLine !== undefined) {
      return Result.fail(SessionInvalid.malformedJson(this.source, this.malformedLine))
    }
    let extra: { readonly value: unknown } | undefined
    if (trailing.trim()) {
      const parsed = parseLine(trailing)
      if (!parsed.ok) return Result.fail(SessionInvalid.malformedJson(this.source, this.lines + 1))
      extra = { value: parsed.value }
    }
    switch (this.mode) {
      case "empty":
        // The unterminated line, if any, is the header and there are no entries.
        return extra !== undefined && isSessionHeader(extra.value)
          ? Result.succeed(emptyProjection(extra.value))
          : Result.fail(SessionInvalid.invalidHeader(this.source))
      case "invalid":
        return Result.fail(SessionInvalid.invalidHeader(this.source))
      case "linear":
        return Result.succeed(this.finishLinear(extra))
      case "tree":
        return this.finishTree(extra)
    }
  }

  private finishLinear(extra: { readonly value: unknown } | undefined): SessionProjection {
    let picks: ReadonlyArray<{ readonly order: number; readonly pick: Pick }> = this.linearPicks
    let prose = this.linearProse
    if (extra !== undefined) {
      const contribution = contributionOf(extra.value)
      prose += contribution.prose
      if (contribution.pick !== null) picks = [...picks, { order: this.entryCount, pick: contribution.pick }]
    }
    return this.project(null, picks, prose)
  }

  private finishTree(extra: { readonly value: unknown } | undefined): Result.Result<SessionProjection, SessionInvalid> {
    if (this.treeError !== undefined) return Result.fail(this.treeError)
    let leaf = this.leaf
    let provisional: TreeNode | undefined
    if (extra !== undefined) {
      const node = this.treeNodeOf(extra.value)
      if (node instanceof SessionInvalid) return Result.fail(node)
      leaf = provisional = node
    }
    this.lastWalkSteps = 0
    if (leaf === undefined) return Result.succeed(emptyProjection(this.header!))
    const branch = this.extendLastBranch(leaf, provisional) ?? this.walkBranch(leaf, provisional)
    if (branch instanceof SessionInvalid) return Result.fail(branch)
    // Only a committed leaf's branch is kept: a provisional one may still change.
    if (provisional === undefined) this.lastBranch = branch
    return Result.succeed(this.project(leaf.id, branch.picks, branch.prose))
  }

  /** The node `node` names as its parent: `undefined` when it names none, `null` when that node is not there. */
  private parentOf(node: TreeNode, provisional: TreeNode | undefined): TreeNode | null | undefined {
    const parentId: unknown = node.parentId
    if (parentId === null || parentId === undefined) return undefined
    // The unterminated entry is not in `byId`, but an older entry may still name it as parent.
    if (provisional !== undefined && parentId === provisional.id) return provisional
    return this.byId.get(parentId as string) ?? null
  }

  /**
   * The branch from `leaf`, when walking up from it meets the last branch's
   * leaf: the nodes walked, then the last branch. Every node on the way is
   * one the last branch does not hold (ids are unique, and a node of the
   * last branch leads to the root without meeting its leaf), so a walk
   * longer than the nodes off that branch cannot meet it: `undefined` then,
   * and the whole walk decides (a cycle, a missing parent, another branch).
   */
  private extendLastBranch(leaf: TreeNode, provisional: TreeNode | undefined): WalkedBranch | undefined {
    const last = this.lastBranch
    if (last === undefined) return undefined
    if (leaf === last.leaf) return last
    const offBranch = this.byId.size + (provisional === undefined ? 0 : 1) - last.length
    const added: Array<TreeNode> = []
    let current: TreeNode | null | undefined = leaf
    while (current !== last.leaf) {
      if (current === undefined || current === null || added.length >= offBranch) {
        this.lastWalkSteps += added.length
        return undefined
      }
      added.push(current)
      current = this.parentOf(current, provisional)
    }
    this.lastWalkSteps += added.length
    const addedPicks: Array<{ readonly order: number; readonly pick: Pick }> = []
    let prose = last.prose
    let order = last.length
    for (let index = added.length - 1; index >= 0; index--, order++) {
      const node = added[index]
      prose += node.prose
      if (node.pick !== null) addedPicks.push({ order, pick: node.pick })
    }
    // A new array: earlier results share the last branch's picks.
    const picks = addedPicks.length === 0 ? last.picks : last.picks.concat(addedPicks)
    return { leaf, length: order, picks, prose }
  }

  /** The walk of `resolveActiveBranchResult`, over the reduced nodes, from `leaf` to its root. */
  private walkBranch(leaf: TreeNode, provisional: TreeNode | undefined): WalkedBranch | SessionInvalid {
    const reversed: Array<TreeNode> = []
    const visited = new Set<string>()
    let current: TreeNode | null | undefined = leaf
    while (current !== undefined) {
      if (current === null) {
        this.lastWalkSteps += reversed.length
        return SessionInvalid.missingParent(this.source, reversed[reversed.length - 1].parentId)
      }
      if (visited.has(current.id)) {
        this.lastWalkSteps += reversed.length
        return SessionInvalid.cycle(this.source, current.id)
      }
      visited.add(current.id)
      reversed.push(current)
      current = this.parentOf(current, provisional)
    }
    this.lastWalkSteps += reversed.length
    const picks: Array<{ readonly order: number; readonly pick: Pick }> = []
    let prose = 0
    for (let order = 0, index = reversed.length - 1; index >= 0; order++, index--) {
      const node = reversed[index]
      prose += node.prose
      if (node.pick !== null) picks.push({ order, pick: node.pick })
    }
    return { leaf, length: reversed.length, picks, prose }
  }

  /**
   * The projection of the branch's picks. Most appended lines (tool calls
   * and results, thinking) select nothing, and a line that selects something
   * usually extends the branch the last one ended: the builder then answers
   * with the last selection, or extends it by the new picks only.
   */
  private project(activeLeafId: string | null, picks: OrderedPicks, totalMessageProseChars: number): SessionProjection {
    const { rarebitChars, selection } = this.selections.selectionOf(picks)
    return projectionOf(
      this.header!,
      activeLeafId,
      selection,
      measurementOf(totalMessageProseChars, rarebitChars, selection.occurrences.length)
    )
  }
}

/**
 * The outcome of a whole Session text, computed through an accumulator (for
 * tests and one-shot callers).
 *
 * @category parsing
 * @since 0.1.0
 */
export const accumulateText = (text: string, source?: string): Result.Result<SessionProjection, SessionInvalid> => {
  const accumulator = new SessionAccumulator(source ?? "Pi Session")
  const lines = String(text).split("\n")
  const trailing = lines.pop() ?? ""
  for (const line of lines) accumulator.addLine(line)
  return accumulator.finish(trailing)
}
