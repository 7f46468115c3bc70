/**
 * The Session accumulator on its own: fed any text line by line, in any
 * pieces, it answers what the uncached reader (parse, branch walk,
 * projection) answers for the same text, failures included, and results it
 * gave earlier stay as they were.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import fc from "fast-check"
import {
  parseSessionResult,
  projectSession,
  resolveActiveBranchResult,
  type SessionInvalid,
  type SessionProjection
} from "../../src/session/index.js"
import { accumulateText, SessionAccumulator } from "../../src/session/SessionAccumulator.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import { sessionTextArb, textArb } from "./SessionArbitrary.js"
import { header, message, turnsText } from "./SessionLines.js"

// ---- helpers --------------------------------------------------------------

type Outcome = Result.Result<SessionProjection, SessionInvalid>

/** The uncached reader's outcome for a text: parse, walk the branch, project. */
const freshOutcome = (text: string, source: string): Outcome => {
  const parsed = parseSessionResult(text, source)
  if (Result.isFailure(parsed)) return Result.fail(parsed.failure)
  const branch = resolveActiveBranchResult(parsed.success, source)
  if (Result.isFailure(branch)) return Result.fail(branch.failure)
  return Result.succeed(projectSession(parsed.success, branch.success))
}

const errorFields = (error: SessionInvalid) => ({
  kind: error.kind,
  message: error.message,
  source: error.source,
  line: error.line,
  entryId: error.entryId
})

const assertSameOutcome = (actual: Outcome, expected: Outcome, label: string) => {
  if (Result.isSuccess(expected)) {
    assert.isTrue(Result.isSuccess(actual), `${label}: expected success, got ${JSON.stringify(actual)}`)
    const value = (actual as Result.Success<SessionProjection, SessionInvalid>).success
    assert.deepStrictEqual(value, expected.success, label)
    // Key order too: JSON renderings must agree byte for byte.
    assert.strictEqual(JSON.stringify(value), JSON.stringify(expected.success), `${label}: JSON`)
  } else {
    assert.isTrue(Result.isFailure(actual), `${label}: expected ${expected.failure.message}`)
    const failure = (actual as Result.Failure<SessionProjection, SessionInvalid>).failure
    assert.deepStrictEqual(errorFields(failure), errorFields(expected.failure), label)
  }
}

// ---- the accumulator --------------------------------------------------------

describe("SessionAccumulator", () => {
  it("a whole text gives the uncached reader's outcome", () => {
    const text = turnsText(3)
    assertSameOutcome(accumulateText(text, "s.jsonl"), freshOutcome(text, "s.jsonl"), "turns")
    assertSameOutcome(accumulateText("", "s.jsonl"), freshOutcome("", "s.jsonl"), "empty")
    assertSameOutcome(accumulateText(header("h"), "s.jsonl"), freshOutcome(header("h"), "s.jsonl"), "header only")
  })

  it("an unterminated last line is parsed, and re-parsed once it is completed", () => {
    const accumulator = new SessionAccumulator("s.jsonl")
    const complete = turnsText(2).split("\n").slice(0, -1)
    for (const line of complete) accumulator.addLine(line)
    const next = message("u2", "a1", "user", "question 2")
    const torn = next.slice(0, 20)
    const tornText = `${complete.join("\n")}\n${torn}`
    const tornOutcome = accumulator.finish(torn)
    assertSameOutcome(tornOutcome, freshOutcome(tornText, "s.jsonl"), "torn")
    assert.strictEqual(Result.isFailure(tornOutcome) && tornOutcome.failure.line, complete.length + 1)
    assertSameOutcome(
      accumulator.finish(next),
      freshOutcome(`${complete.join("\n")}\n${next}`, "s.jsonl"),
      "completed"
    )
  })

  it("feeding any prefix of a Session, in any pieces, gives the uncached reader's outcome for it", () => {
    fc.assert(
      fc.property(sessionTextArb, fc.array(fc.nat(), { maxLength: 6 }), (text, rawCuts) => {
        const cuts = [...new Set([...rawCuts.map((cut) => cut % (text.length + 1)), text.length])].sort((a, b) => a - b)
        const accumulator = new SessionAccumulator("s.jsonl")
        let fed = 0
        for (const cut of cuts) {
          // Lines complete before `cut` are committed; the rest up to `cut` is the unterminated tail.
          const lastNewline = text.lastIndexOf("\n", cut - 1)
          if (lastNewline + 1 > fed) {
            for (const line of text.slice(fed, lastNewline).split("\n")) accumulator.addLine(line)
            fed = lastNewline + 1
          }
          const prefix = text.slice(0, cut)
          assertSameOutcome(accumulator.finish(text.slice(fed, cut)), freshOutcome(prefix, "s.jsonl"), `cut ${cut}`)
        }
      }),
      { numRuns: fuzzRuns(1000) }
    )
  })

  it("branch switches and duplicated texts keep the manifest hash right", () => {
    const stepsArb = fc.array(fc.tuple(fc.nat(20), textArb, fc.constantFrom("user", "assistant")), {
      minLength: 1,
      maxLength: 30
    })
    fc.assert(
      fc.property(stepsArb, (steps) => {
        // Every entry hangs off an earlier one, so the active branch jumps around as lines arrive.
        const lines = [header("sess-b")]
        const accumulator = new SessionAccumulator("s.jsonl")
        accumulator.addLine(lines[0])
        steps.forEach(([parent, text, role], index) => {
          const parentId = index === 0 ? null : `e${parent % index}`
          const line = message(`e${index}`, parentId, role, text)
          lines.push(line)
          accumulator.addLine(line)
          assertSameOutcome(accumulator.finish(""), freshOutcome(`${lines.join("\n")}\n`, "s.jsonl"), `step ${index}`)
        })
      }),
      { numRuns: fuzzRuns(300) }
    )
  })

  it("a growing branch with repeated texts gives fresh outcomes and leaves earlier outcomes as they were", () => {
    // Mostly appends to the current leaf (the path that extends the last selection), from a few texts
    // (so payloads gain occurrences), with an occasional jump back to an earlier entry.
    const stepsArb = fc.array(
      fc.tuple(
        fc.option(fc.nat(40), { freq: 6 }),
        fc.constantFrom("same", "again", "other"),
        fc.constantFrom("user", "assistant")
      ),
      { minLength: 1, maxLength: 40 }
    )
    fc.assert(
      fc.property(stepsArb, (steps) => {
        const lines = [header("sess-g")]
        const accumulator = new SessionAccumulator("s.jsonl")
        accumulator.addLine(lines[0])
        const earlier: Array<{ readonly outcome: unknown; readonly json: string }> = []
        let leaf: string | null = null
        steps.forEach(([jump, text, role], index) => {
          const parentId = jump === null || index === 0 ? leaf : `e${jump % index}`
          const line = message(`e${index}`, parentId, role, text)
          lines.push(line)
          leaf = `e${index}`
          accumulator.addLine(line)
          const outcome = accumulator.finish("")
          assertSameOutcome(outcome, freshOutcome(`${lines.join("\n")}\n`, "s.jsonl"), `step ${index}`)
          earlier.push({ outcome, json: JSON.stringify(outcome) })
        })
        // Results share arrays with later ones; none may have changed since it was returned.
        earlier.forEach(({ json, outcome }, index) =>
          assert.strictEqual(JSON.stringify(outcome), json, `outcome ${index}`)
        )
      }),
      { numRuns: fuzzRuns(300) }
    )
  })

  it("a branch growing at its leaf is walked from where the last walk ended, not from its root again", () => {
    const lines = [header("sess-w")]
    const accumulator = new SessionAccumulator("s.jsonl")
    accumulator.addLine(lines[0])
    const append = (id: string, parentId: string | null, text: string) => {
      const line = message(id, parentId, "user", text)
      lines.push(line)
      accumulator.addLine(line)
    }
    for (let index = 0; index < 2000; index++) {
      append(`e${index}`, index === 0 ? null : `e${index - 1}`, `t${index % 7}`)
    }
    assertSameOutcome(accumulator.finish(""), freshOutcome(`${lines.join("\n")}\n`, "s.jsonl"), "first")
    assert.strictEqual(accumulator.lastWalkSteps, 2000)
    for (let index = 2000; index < 2010; index++) {
      append(`e${index}`, `e${index - 1}`, `t${index % 7}`)
      assertSameOutcome(accumulator.finish(""), freshOutcome(`${lines.join("\n")}\n`, "s.jsonl"), `grown ${index}`)
      assert.strictEqual(accumulator.lastWalkSteps, 1, `grown ${index}`)
    }
    // Unchanged: nothing to walk.
    accumulator.finish("")
    assert.strictEqual(accumulator.lastWalkSteps, 0)
    // An unterminated entry at the leaf is walked on its own, and not kept as the branch.
    const torn = message("e2010", "e2009", "assistant", "half")
    assertSameOutcome(
      accumulator.finish(torn),
      freshOutcome(`${lines.join("\n")}\n${torn}`, "s.jsonl"),
      "provisional"
    )
    assert.strictEqual(accumulator.lastWalkSteps, 1)
    // A jump back to an early entry walks the whole new branch.
    append("b0", "e5", "back")
    assertSameOutcome(accumulator.finish(""), freshOutcome(`${lines.join("\n")}\n`, "s.jsonl"), "jump")
    assert.isAbove(accumulator.lastWalkSteps, 6)
    append("b1", "b0", "on")
    accumulator.finish("")
    assert.strictEqual(accumulator.lastWalkSteps, 1)
    // A missing parent: one step that cannot meet the branch, then the whole walk's one step to find it missing.
    append("c0", "nowhere", "lost")
    assertSameOutcome(accumulator.finish(""), freshOutcome(`${lines.join("\n")}\n`, "s.jsonl"), "missing parent")
    assert.strictEqual(accumulator.lastWalkSteps, 2)
  })

  it("forward references, cycles and missing parents among new entries give the uncached reader's outcome", () => {
    // Each step names as parent the leaf, an earlier entry, a later one (not there yet), itself, or nothing there.
    const parentArb = fc.oneof(
      fc.constant({ kind: "leaf" as const }),
      fc.record({ kind: fc.constant("earlier" as const), at: fc.nat(30) }),
      fc.record({ kind: fc.constant("later" as const), ahead: fc.integer({ min: 1, max: 3 }) }),
      fc.constant({ kind: "self" as const }),
      fc.constant({ kind: "absent" as const })
    )
    const stepsArb = fc.array(fc.tuple(fc.option(parentArb, { freq: 4 }), fc.boolean()), {
      minLength: 1,
      maxLength: 30
    })
    fc.assert(
      fc.property(stepsArb, (steps) => {
        const lines = [header("sess-h")]
        const accumulator = new SessionAccumulator("s.jsonl")
        accumulator.addLine(lines[0])
        let leaf: string | null = null
        steps.forEach(([parent, torn], index) => {
          const id = `e${index}`
          const parentId = parent === null || parent.kind === "leaf"
            ? leaf
            : parent.kind === "earlier"
            ? index === 0 ? null : `e${parent.at % index}`
            : parent.kind === "later"
            ? `e${index + parent.ahead}`
            : parent.kind === "self"
            ? id
            : "nowhere"
          const line = message(id, parentId, index % 2 === 0 ? "user" : "assistant", `text ${index % 3}`)
          if (torn) {
            // Seen unterminated first, then completed.
            const text = `${lines.join("\n")}\n${line}`
            assertSameOutcome(accumulator.finish(line), freshOutcome(text, "s.jsonl"), `torn ${index}`)
          }
          lines.push(line)
          leaf = id
          accumulator.addLine(line)
          assertSameOutcome(accumulator.finish(""), freshOutcome(`${lines.join("\n")}\n`, "s.jsonl"), `step ${index}`)
        })
      }),
      { numRuns: fuzzRuns(500) }
    )
  })
})
