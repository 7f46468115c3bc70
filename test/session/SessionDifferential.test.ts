import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import fc from "fast-check"
import { readFileSync } from "node:fs"
import {
  measureRarebits,
  messageTextBlocks,
  parseNativeSession,
  parseSessionResult,
  RAREBIT_MEASUREMENT_VERSION,
  RAREBIT_SELECTOR_VERSION,
  rarebitMetadata,
  rarebitText,
  resolveActiveBranch,
  resolveActiveBranchResult,
  selectRarebits,
  SessionInvalid,
  toQueryError
} from "../../src/session/index.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import { Core, Session } from "../support/Reference.js"
import { assertSameOutcome, capture } from "./Outcome.js"
import { branchArb, sessionTextArb } from "./SessionArbitrary.js"

const pipeline = (
  parse: (content: string, source?: string) => any,
  resolve: (parsed: any, source?: string) => Array<unknown>,
  select: (branch: unknown) => any,
  measure: (branch: unknown, selection?: any) => unknown
) =>
(content: string, source: string | undefined) => {
  const parsed = parse(content, source)
  const branch = resolve(parsed, source)
  const selection = select(branch)
  const measurement = measure(branch, selection)
  return { parsed, branch, selection, measurement, json: JSON.stringify({ selection, measurement }) }
}

const ours = pipeline(parseNativeSession, resolveActiveBranch, selectRarebits, measureRarebits)
const theirs = pipeline(
  Session.parseNativeSession,
  Session.resolveActiveBranch,
  Core.selectRarebits,
  Core.measureRarebits
)

const sourceArb = fc.constantFrom<string | undefined>(undefined, undefined, "Pi Session", "sessions/run.jsonl")

describe("Session evidence against the reference", () => {
  it("exports the reference's version constants", () => {
    assert.strictEqual(RAREBIT_SELECTOR_VERSION, Core.RAREBIT_SELECTOR_VERSION)
    assert.strictEqual(RAREBIT_MEASUREMENT_VERSION, Core.RAREBIT_MEASUREMENT_VERSION)
  })

  it("parse, branch, selection and measurement equal the reference's, or fail the same way", () => {
    fc.assert(
      fc.property(sessionTextArb, sourceArb, (content, source) => {
        const mine = capture(() => ours(content, source))
        const reference = capture(() => theirs(content, source))
        assertSameOutcome(mine, reference, "pipeline")
        if (mine.ok) {
          // Same key order, not only the same members.
          assert.strictEqual(mine.value.json, (reference as { value: { json: string } }).value.json)
          assert.instanceOf(mine.value.parsed.byId, Map)
        }
      }),
      { numRuns: fuzzRuns(1000) }
    )
  })

  it("the Result forms agree with the throwing forms and classify the failure", () => {
    fc.assert(
      fc.property(sessionTextArb, sourceArb, (content, source) => {
        const label = source ?? "Pi Session"
        const parsed = parseSessionResult(content, source)
        const outcome: Result.Result<unknown, SessionInvalid> = Result.isFailure(parsed)
          ? parsed
          : resolveActiveBranchResult(parsed.success, source)
        const thrown = capture(() => resolveActiveBranch(parseNativeSession(content, source), source))
        if (Result.isSuccess(outcome)) {
          assert.isTrue(thrown.ok)
          return
        }
        const failure = outcome.failure
        assert.instanceOf(failure, SessionInvalid)
        assert.strictEqual(failure.source, label)
        assert.isFalse(thrown.ok)
        const error = (thrown as { error: Error }).error
        assert.strictEqual(error.message, failure.message)
        assert.strictEqual(error.name, "RarebitQueryError")
        assert.strictEqual(Object.getPrototypeOf(error), Error.prototype)
        switch (failure.kind) {
          case "malformed_json":
            assert.strictEqual(failure.message, `${label} contains malformed JSON at line ${failure.line}`)
            assert.isTrue(failure.line !== undefined && failure.line >= 1)
            break
          case "invalid_header":
            assert.strictEqual(failure.message, `${label} does not begin with a valid Pi Session header`)
            break
          case "entry_without_id":
            assert.strictEqual(failure.message, `${label} contains a Session entry without an ID`)
            break
          case "duplicate_id":
            assert.strictEqual(failure.message, `${label} contains duplicate Session entry ID ${failure.entryId}`)
            break
          case "cycle":
            assert.strictEqual(failure.message, `${label} contains a cycle at Session entry ${failure.entryId}`)
            break
          case "missing_parent":
            assert.strictEqual(failure.message, `${label} is missing parent Session entry ${failure.entryId}`)
            break
          default:
            assert.fail(`unexpected kind ${failure.kind}`)
        }
      }),
      { numRuns: fuzzRuns(1000) }
    )
  })

  it("selection and measurement of loose branches equal the reference's", () => {
    fc.assert(
      fc.property(branchArb, (branch) => {
        assertSameOutcome(capture(() => selectRarebits(branch)), capture(() => Core.selectRarebits(branch)), "select")
        assertSameOutcome(
          capture(() => measureRarebits(branch)),
          capture(() => Core.measureRarebits(branch)),
          "measure"
        )
        assert.strictEqual(JSON.stringify(selectRarebits(branch)), JSON.stringify(Core.selectRarebits(branch)))
        const entries = Array.isArray(branch) ? branch : [branch]
        entries.forEach((entry, order) => {
          const message = (entry as { message?: unknown } | null)?.message
          assert.deepStrictEqual(messageTextBlocks(message), Core.messageTextBlocks(message))
          assert.deepStrictEqual(messageTextBlocks(entry), Core.messageTextBlocks(entry))
          assert.deepStrictEqual(rarebitMetadata(entry, order), Core.rarebitMetadata(entry, order))
          assert.deepStrictEqual(rarebitMetadata(entry), Core.rarebitMetadata(entry))
          assert.strictEqual(rarebitText(entry), Core.rarebitText(entry))
        })
      }),
      { numRuns: fuzzRuns(1000) }
    )
  })
})

describe("SessionParse", () => {
  it("reports the 1-based line of malformed JSON, counting blank lines", () => {
    const result = parseSessionResult("{\"type\":\"session\",\"id\":\"s\"}\n\n{oops\n")
    assert.isTrue(Result.isFailure(result))
    const failure = (result as Result.Failure<unknown, SessionInvalid>).failure
    assert.strictEqual(failure.kind, "malformed_json")
    assert.strictEqual(failure.line, 3)
    assert.strictEqual(failure.message, "Pi Session contains malformed JSON at line 3")
  })

  it("a linear Session keeps every entry and indexes none", () => {
    const parsed = parseNativeSession(
      [JSON.stringify({ type: "session", id: "s" }), "null", JSON.stringify({ type: "message" })].join("\n")
    )
    assert.isTrue(parsed.linear)
    assert.strictEqual(parsed.byId.size, 0)
    assert.deepStrictEqual(resolveActiveBranch(parsed), [null, { type: "message" }])
  })

  it("a tree Session's branch runs from the root to the last entry, skipping other forks", () => {
    const lines = [
      { type: "session", version: 3, id: "s" },
      { type: "message", id: "a", parentId: null },
      { type: "message", id: "b", parentId: "a" },
      { type: "message", id: "c", parentId: "a" }
    ].map((record) => JSON.stringify(record))
    const branch = resolveActiveBranch(parseNativeSession(lines.join("\n")))
    assert.deepStrictEqual(branch.map((entry) => (entry as { id: string }).id), ["a", "c"])
  })

  it("a cycle is reported at the first entry met twice", () => {
    const lines = [
      { type: "session", version: 2, id: "s" },
      { type: "message", id: "a", parentId: "b" },
      { type: "message", id: "b", parentId: "a" }
    ].map((record) => JSON.stringify(record))
    const content = lines.join("\n")
    const error = capture(() => resolveActiveBranch(parseNativeSession(content)))
    assertSameOutcome(error, capture(() => Session.resolveActiveBranch(Session.parseNativeSession(content))), "cycle")
    assert.strictEqual((error as { error: Error }).error.message, "Pi Session contains a cycle at Session entry b")
  })

  it("toQueryError builds the reference's RarebitQueryError", () => {
    const error = toQueryError(new SessionInvalid({ kind: "cycle", message: "m", source: "s", entryId: "x" }))
    assert.strictEqual(Object.getPrototypeOf(error), Error.prototype)
    assert.strictEqual(error.name, "RarebitQueryError")
    assert.strictEqual(error.message, "m")
  })
})

describe("conformance corpus", () => {
  const corpus = JSON.parse(
    readFileSync(
      new URL("../../node_modules/@hypercarrier/rarebit/test/fixtures/conformance-corpus.v1.json", import.meta.url),
      "utf8"
    )
  )

  for (const testCase of corpus.cases as Array<any>) {
    it(`matches the human-reviewed expectation: ${testCase.id}`, () => {
      const content = (testCase.records as Array<unknown>).map((record) => JSON.stringify(record)).join("\n")
      const branch = resolveActiveBranch(parseNativeSession(content))
      const selection = selectRarebits(branch)
      assert.deepStrictEqual(branch.map((entry) => (entry as { id: string }).id), testCase.expected.activeBranchIds)
      assert.deepStrictEqual(
        selection.occurrences.map(({ outcome, role, sourceEntryId, text }) => ({ sourceEntryId, role, outcome, text })),
        testCase.expected.rarebits
      )
      const selected = new Set(selection.occurrences.map((occurrence) => occurrence.sourceEntryId))
      for (const excluded of testCase.expected.excludedEntryIds ?? []) assert.isFalse(selected.has(excluded))
    })
  }
})
