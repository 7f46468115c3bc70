import { readFileSync } from "node:fs"

import { assert, describe, it } from "@effect/vitest"
import * as RefState from "@hypercarrier/rarebit/artifact-state"
import fc from "fast-check"

import { evidenceOf } from "../../src/session/SessionEvidence.js"
import type { SessionProjection } from "../../src/session/SessionProjection.js"
import type { ArtifactState, ProjectionInput } from "../../src/state/ArtifactState.js"
import { exactSelectionApplies, projectArtifactState, requestPrefixApplies } from "../../src/state/ArtifactState.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import type { Boundary, BranchEntry, CompactSelection, Status, Step } from "./ReceiptFixtures.js"
import {
  available,
  branchOf,
  compactOf,
  compactPrefixOf,
  hex,
  nativeSelectionOf,
  receiptOf,
  SELECTOR_VERSION
} from "./ReceiptFixtures.js"

// -- comparing outcomes --------------------------------------------------------

type Outcome =
  | { readonly threw: false; readonly value: unknown }
  | { readonly threw: true; readonly kind: string; readonly message: string }

const outcomeOf = (f: () => unknown): Outcome => {
  try {
    return { threw: false, value: f() }
  } catch (error) {
    return { threw: true, kind: (error as Error).constructor.name, message: (error as Error).message }
  }
}

/** Deep equality plus identical serialisation, so key order counts too. */
const assertSameOutcome = (ours: Outcome, reference: Outcome): void => {
  assert.deepStrictEqual(ours, reference)
  if (!ours.threw && !reference.threw) {
    assert.strictEqual(JSON.stringify(ours.value), JSON.stringify(reference.value))
  }
}

const referenceProject = RefState.projectRarebitArtifactState as (input?: unknown) => unknown
const referenceExact = RefState.exactSelectionApplies as (a: unknown, b: unknown) => boolean
const referencePrefix = RefState.requestPrefixApplies as (a: unknown, b: unknown) => boolean
const ourProject = projectArtifactState as (input?: unknown) => unknown
const projectAny = (input: unknown): ArtifactState => projectArtifactState(input as ProjectionInput)
const ourExact = exactSelectionApplies as (a: unknown, b: unknown) => boolean
const ourPrefix = requestPrefixApplies as (a: unknown, b: unknown) => boolean

// -- branches and native observations -----------------------------------------

const textArb = fc.constantFrom("alpha", "beta", "gamma", "alpha beta", "")
const idModeArb = fc.oneof(
  { weight: 24, arbitrary: fc.constant("index" as const) },
  { weight: 1, arbitrary: fc.constant("none" as const) },
  { weight: 1, arbitrary: fc.constant("dup" as const) }
)

/** One turn: usually a user message, some assistant continuations or tool traffic, often a final stop. */
const turnArb = fc.record({
  user: fc.oneof({ weight: 9, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
  middle: fc.array(fc.constantFrom<Step>("continuation", "continuation", "tool", "error"), { maxLength: 2 }),
  stop: fc.oneof({ weight: 7, arbitrary: fc.constant(true) }, { weight: 3, arbitrary: fc.constant(false) })
})

const branchArb: fc.Arbitrary<Array<BranchEntry>> = fc
  .tuple(
    fc.array(turnArb, { maxLength: 3 }),
    // At most 3 turns of 4 steps: one text and id mode per step.
    fc.array(fc.tuple(textArb, idModeArb), { minLength: 12, maxLength: 12 })
  )
  .map(([turns, labels]) => {
    const steps = turns.flatMap(({ middle, stop, user }): Array<Step> => [
      ...(user ? ["user" as const] : []),
      ...middle,
      ...(stop ? ["stop" as const] : [])
    ])
    return branchOf(steps.map((step, index) => {
      const [text, idMode] = labels[index]!
      return { step, text, id: idMode === "none" ? null : idMode === "dup" ? "dup" : `e${index}` }
    }))
  })

const brokenPayloads = [[null], [{ contentHash: hex("1") }], [{ contentHash: hex("1"), occurrenceIds: "x" }], "x"]

const nativeArb = (branch: ReadonlyArray<BranchEntry>): fc.Arbitrary<unknown> => {
  const selection = nativeSelectionOf(branch)
  const { selectorVersion: _omitted, ...manifestOnly } = selection
  const firstOccurrence = selection.occurrences[0]
  return fc.oneof(
    {
      weight: 14,
      arbitrary: fc.constantFrom(...Array<string>(14).fill("session-1"), "session-2").map((id) =>
        available(selection, id)
      )
    },
    { weight: 2, arbitrary: fc.constant(available(manifestOnly)) },
    { weight: 1, arbitrary: fc.constant(available({ ...selection, selectorVersion: "other-selector" })) },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        available(null),
        available({ ...selection, manifestHash: "not-a-hash" }),
        available({ ...selection, occurrences: "x" }),
        available({ ...selection, selectorVersion: "", manifest: {} }),
        available(
          firstOccurrence === undefined ? selection : {
            ...selection,
            occurrences: [{ ...firstOccurrence, order: 0.5 }, ...selection.occurrences.slice(1)]
          }
        )
      )
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(...brokenPayloads).map((payloads) => available({ ...selection, payloads }))
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom<unknown>(
        available(selection, ""),
        available(selection, 5),
        { availability: "available", selection },
        { availability: "available", sessionId: "session-1" }
      )
    },
    { weight: 5, arbitrary: fc.constant({ availability: "missing" }) },
    { weight: 6, arbitrary: fc.constant({ availability: "unreadable" }) },
    { weight: 1, arbitrary: fc.constant({ availability: "missing", sessionId: "session-1", selection }) },
    { weight: 1, arbitrary: fc.constantFrom({ availability: "gone" }, null, 3, "available") }
  )
}

// -- receipts ----------------------------------------------------------------

const observedAtArb = fc.constantFrom(
  "2026-07-25T10:00:00.000Z",
  "2026-07-25T10:00:00Z", // the same instant, spelled differently
  "2026-07-25T10:01:00.000Z",
  "2026-07-25T10:02:00.000Z",
  "2026-07-25T09:59:00.000Z"
)

const selectionChoiceArb = (branch: ReadonlyArray<BranchEntry>): fc.Arbitrary<CompactSelection> => {
  const occurrences = nativeSelectionOf(branch).occurrences
  const count = occurrences.length
  const lastUser = occurrences.findLastIndex((occurrence) => occurrence.role === "user")
  const unrelated = {
    manifestHash: hex("9"),
    selectorVersion: SELECTOR_VERSION,
    occurrenceCount: count,
    uniquePayloadCount: 0,
    latestUserSourceEntryId: "e0"
  }
  return fc.oneof(
    { weight: 6, arbitrary: fc.constant(compactOf(branch)) },
    // Cut right at the latest user message: a request, possibly settled since by a later stop.
    { weight: 5, arbitrary: fc.constant(compactPrefixOf(branch, lastUser + 1)) },
    {
      weight: 5,
      arbitrary: fc.nat(Math.max(0, count - lastUser - 1)).map((extra) =>
        compactPrefixOf(branch, lastUser < 0 ? 0 : lastUser + 1 + extra)
      )
    },
    { weight: 3, arbitrary: fc.nat(count).map((cut) => compactPrefixOf(branch, cut)) },
    { weight: 2, arbitrary: fc.constant(unrelated) },
    {
      weight: 2,
      arbitrary: fc.tuple(fc.nat(count), fc.constantFrom("user", "count", "selector")).map(([cut, perturb]) => {
        const prefix = compactPrefixOf(branch, cut)
        return perturb === "user"
          ? { ...prefix, latestUserSourceEntryId: "elsewhere" }
          : perturb === "count"
          ? { ...prefix, occurrenceCount: prefix.occurrenceCount + 1 }
          : { ...prefix, selectorVersion: "other-selector" }
      })
    }
  )
}

const boundaryArb = fc.constantFrom<Boundary>(
  "owner_request",
  "owner_request",
  "agent_settled",
  "agent_settled",
  "manual",
  "session_start"
)
const statusArb = fc.constantFrom<Status>(
  "ok",
  "ok",
  "ok",
  "ineligible",
  "inhibited",
  "unavailable_overflow",
  "failure"
)

const validReceiptArb = (branch: ReadonlyArray<BranchEntry>) =>
  fc
    .record({
      selection: selectionChoiceArb(branch),
      boundary: boundaryArb,
      status: statusArb,
      sessionId: fc.constantFrom(...Array<string>(30).fill("session-1"), "session-2"),
      jobChar: fc.constantFrom("a", "b", "c", "d"),
      observedAt: observedAtArb,
      implementationVersion: fc.constantFrom(
        "hc-rarebit-summary-v4" as const,
        "hc-rarebit-summary-v5" as const,
        "hc-rarebit-summary-v6" as const
      ),
      model: fc.constantFrom(null, { provider: "test", id: "model" }, { id: "reordered", provider: "test" }),
      needsAttention: fc.boolean()
    })
    .map((options) => receiptOf(options))

const breakReceipt = (receipt: Record<string, unknown>, how: string): unknown => {
  switch (how) {
    case "schema3":
      return { ...receipt, schemaVersion: 3 }
    case "extraKey":
      return { ...receipt, unexpected: true }
    case "badTime":
      return { ...receipt, observedAt: "not a time" }
    default: {
      const { promptVersion: _dropped, ...rest } = receipt
      return rest
    }
  }
}

const junkRecords: ReadonlyArray<unknown> = [
  null,
  7,
  "text",
  [],
  {},
  { type: "rarebit_summary" },
  { type: "rarebit_summary", sessionId: "session-2" },
  { type: "rarebit_summary", sessionId: "" },
  { type: "rarebit_head", protocolVersion: 1, sessionId: "session-2" },
  { type: "rarebit_title", schemaVersion: 4, status: "applied", sessionId: "session-3", title: "A title" }
]

const recordArb = (branch: ReadonlyArray<BranchEntry>): fc.Arbitrary<unknown> =>
  fc.oneof(
    { weight: 12, arbitrary: validReceiptArb(branch) },
    {
      weight: 3,
      arbitrary: fc
        .tuple(validReceiptArb(branch), fc.constantFrom("schema3", "schema3", "extraKey", "badTime", "dropKey"))
        .map(([receipt, how]) => breakReceipt(receipt, how))
    },
    { weight: 1, arbitrary: fc.constantFrom(...junkRecords) }
  )

const materializationArb = (branch: ReadonlyArray<BranchEntry>): fc.Arbitrary<unknown> =>
  fc.oneof(
    {
      weight: 20,
      arbitrary: fc.record({
        availability: fc.constantFrom("available", "available", "available", "missing", "unreadable", "unreadable"),
        records: fc.array(recordArb(branch), { maxLength: 4 })
      })
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        { availability: "available", records: "not an array" },
        { availability: "available" },
        { availability: "bogus", records: [] },
        null
      )
    }
  )

/** Absent keys, explicit `undefined` and odd values are all legitimate, and all handled differently. */
const optionalArb = <A>(arbitrary: fc.Arbitrary<A>, odd: ReadonlyArray<unknown> = []) =>
  fc.oneof(
    { weight: 20, arbitrary: arbitrary.map((value) => ({ present: true, value }) as const) },
    { weight: 2, arbitrary: fc.constant({ present: false } as const) },
    { weight: 1, arbitrary: fc.constant({ present: true, value: undefined } as const) },
    ...(odd.length === 0
      ? []
      : [{ weight: 1, arbitrary: fc.constantFrom(...odd).map((value) => ({ present: true, value }) as const) }])
  )

type Optional = { readonly present: false } | { readonly present: true; readonly value: unknown }

const inputArb: fc.Arbitrary<unknown> = branchArb.chain((branch) =>
  fc
    .tuple(
      optionalArb(nativeArb(branch)),
      optionalArb(materializationArb(branch)),
      optionalArb(fc.constantFrom("snapshot", "snapshot", "owner_request", "agent_settled"), ["bogus"]),
      optionalArb(fc.boolean(), [null, 1, ""]),
      fc.nat(60)
    )
    .map(([native, materialization, expectation, deadlineExpired, shape]) => {
      if (shape === 0) return undefined
      if (shape === 1) return null
      const input: Record<string, unknown> = {}
      const fields: ReadonlyArray<readonly [string, Optional]> = [
        ["native", native],
        ["materialization", materialization],
        ["expectation", expectation],
        ["deadlineExpired", deadlineExpired]
      ]
      for (const [key, option] of fields) if (option.present) input[key] = option.value
      return input
    })
)

// -- the properties -----------------------------------------------------------

const SYNC_STATES = [
  "assessment_current",
  "request_current",
  "settlement_pending",
  "request_source_pending",
  "assessment_source_pending",
  "awaiting_artifacts",
  "terminal_error"
] as const

const TERMINAL_REASONS = [
  "session_conflict",
  "native_malformed",
  "unsupported",
  "malformed",
  "materialization_unreadable",
  "materialization_missing",
  "settlement_timeout",
  "native_missing",
  "native_unreadable"
] as const

/** The reference's two input-validation messages, spelled out independently of the code under test. */
const RefStateMessages = {
  availability: "native and materialization availability must be available, missing, or unreadable",
  expectation: "Unsupported Rarebit artifact expectation"
}

const increment = (counts: Map<string, number>, key: string) => counts.set(key, (counts.get(key) ?? 0) + 1)

/** Coverage is only asserted at the default run count or above; smaller ad-hoc runs may miss rare states. */
const RUNS = fuzzRuns(1000)
const enforceCoverage = RUNS >= 1000

describe("ArtifactState against the reference", () => {
  it("projectArtifactState equals projectRarebitArtifactState on generated inputs", () => {
    const syncStates = new Map<string, number>()
    const terminalReasons = new Map<string, number>()
    const errors = new Map<string, number>()
    fc.assert(
      fc.property(inputArb, (input) => {
        const ours = outcomeOf(() => (input === undefined ? ourProject() : ourProject(input)))
        const reference = outcomeOf(() => (input === undefined ? referenceProject() : referenceProject(input)))
        assertSameOutcome(ours, reference)
        if (reference.threw) {
          increment(errors, reference.message)
          return
        }
        const state = reference.value as { syncState: string; projection: { reason: string } | null }
        increment(syncStates, state.syncState)
        if (state.syncState === "terminal_error") increment(terminalReasons, state.projection!.reason)
      }),
      { numRuns: RUNS }
    )
    if (enforceCoverage) {
      for (const syncState of SYNC_STATES) {
        assert.isTrue(
          syncStates.has(syncState),
          `syncState ${syncState} never produced: ${JSON.stringify([...syncStates])}`
        )
      }
      for (const reason of TERMINAL_REASONS) {
        assert.isTrue(
          terminalReasons.has(reason),
          `terminal ${reason} never produced: ${JSON.stringify([...terminalReasons])}`
        )
      }
      assert.isTrue(errors.has(RefStateMessages.availability), "the availability TypeError was never exercised")
      assert.isTrue(errors.has(RefStateMessages.expectation), "the expectation TypeError was never exercised")
    }
  })

  it("a Session's evidence (its selection without the texts) projects as the whole selection does", () => {
    const caseArb = branchArb.chain((branch) =>
      fc.tuple(
        fc.constant(branch),
        materializationArb(branch),
        fc.constantFrom("snapshot", "owner_request", "agent_settled"),
        fc.boolean()
      )
    )
    fc.assert(
      fc.property(caseArb, ([branch, materialization, expectation, deadlineExpired]) => {
        const selection = nativeSelectionOf(branch)
        const session = { id: "session-1", activeLeafId: null, startedAt: null }
        const evidence = evidenceOf({ session, selection } as unknown as SessionProjection)
        const input = { materialization, expectation, deadlineExpired }
        assertSameOutcome(
          outcomeOf(() => ourProject({ ...input, native: evidence })),
          outcomeOf(() => referenceProject({ ...input, native: available(selection, "session-1") }))
        )
      }),
      { numRuns: RUNS }
    )
  })

  it("exactSelectionApplies and requestPrefixApplies agree on generated receipt and native selections", () => {
    const outcomes = new Map<string, number>()
    const selectionArb = branchArb.chain((branch) =>
      fc.tuple(
        fc.constant(nativeSelectionOf(branch)),
        fc.array(selectionChoiceArb(branch), { minLength: 1, maxLength: 4 })
      )
    )
    fc.assert(
      fc.property(selectionArb, ([selection, receiptSelections]) => {
        for (const receiptSelection of receiptSelections) {
          const exact = outcomeOf(() => ourExact(receiptSelection, selection))
          const prefix = outcomeOf(() => ourPrefix(receiptSelection, selection))
          assertSameOutcome(exact, outcomeOf(() => referenceExact(receiptSelection, selection)))
          assertSameOutcome(prefix, outcomeOf(() => referencePrefix(receiptSelection, selection)))
          if (!exact.threw) increment(outcomes, `exact:${String(exact.value)}`)
          if (!prefix.threw) increment(outcomes, `prefix:${String(prefix.value)}`)
        }
      }),
      { numRuns: RUNS }
    )
    if (enforceCoverage) {
      for (const key of ["exact:true", "exact:false", "prefix:true", "prefix:false"]) {
        assert.isTrue(outcomes.has(key), `${key} never produced: ${JSON.stringify([...outcomes])}`)
      }
    }
  })

  it("the applicability predicates agree on arbitrary values, thrown TypeErrors included", () => {
    const looseSelectionArb = fc.oneof(
      fc.anything(),
      fc.record({
        selectorVersion: fc.constantFrom(undefined, SELECTOR_VERSION),
        occurrences: fc.oneof(fc.anything(), fc.array(fc.anything(), { maxLength: 3 })),
        payloads: fc.oneof(fc.anything(), fc.array(fc.anything(), { maxLength: 3 })),
        manifestHash: fc.constantFrom(undefined, null, hex("9"))
      }, { requiredKeys: [] })
    )
    const looseReceiptArb = fc.oneof(
      fc.anything(),
      fc.record({
        selectorVersion: fc.constantFrom(undefined, SELECTOR_VERSION),
        occurrenceCount: fc.oneof(fc.nat(3), fc.anything()),
        manifestHash: fc.constantFrom(undefined, null, hex("9")),
        latestUserSourceEntryId: fc.constantFrom(undefined, null, "e0")
      }, { requiredKeys: [] })
    )
    fc.assert(
      fc.property(looseReceiptArb, looseSelectionArb, (receiptSelection, selection) => {
        assertSameOutcome(
          outcomeOf(() => ourExact(receiptSelection, selection)),
          outcomeOf(() => referenceExact(receiptSelection, selection))
        )
        assertSameOutcome(
          outcomeOf(() => ourPrefix(receiptSelection, selection)),
          outcomeOf(() => referencePrefix(receiptSelection, selection))
        )
      }),
      { numRuns: RUNS }
    )
  })

  it("projectArtifactState agrees on arbitrary top-level values", () => {
    const fieldArb = fc.oneof(
      fc.anything(),
      fc.constantFrom({ availability: "missing" }, { availability: "available" })
    )
    const looseInputArb = fc.oneof(
      fc.anything(),
      fc.record({
        native: fieldArb,
        materialization: fc.oneof(
          fieldArb,
          fc.record({ availability: fc.constant("available"), records: fc.anything() })
        ),
        expectation: fc.oneof(fc.anything(), fc.constant("snapshot")),
        deadlineExpired: fc.anything()
      }, { requiredKeys: [] })
    )
    fc.assert(
      fc.property(looseInputArb, (input) => {
        assertSameOutcome(outcomeOf(() => ourProject(input)), outcomeOf(() => referenceProject(input)))
      }),
      { numRuns: RUNS }
    )
  })
})

// -- the reference's conformance corpus as native Sessions ----------------------

interface CorpusCase {
  readonly id: string
  readonly records: ReadonlyArray<{ readonly id?: string; readonly type: string }>
  readonly expected: { readonly activeBranchIds: ReadonlyArray<string> }
}

const corpus = JSON.parse(
  readFileSync(
    new URL("../../node_modules/@hypercarrier/rarebit/test/fixtures/conformance-corpus.v1.json", import.meta.url),
    "utf8"
  )
) as { readonly cases: ReadonlyArray<CorpusCase> }

describe("ArtifactState on the conformance corpus branches", () => {
  for (const corpusCase of corpus.cases) {
    const branch = corpusCase.expected.activeBranchIds.map((id) =>
      corpusCase.records.find((record) => record.id === id)
    ) as unknown as Array<BranchEntry>
    const selection = nativeSelectionOf(branch)
    const occurrences = selection.occurrences

    it(`${corpusCase.id}: every cut, boundary and deadline agrees with the reference`, () => {
      let compared = 0
      for (let cut = 0; cut <= occurrences.length; cut++) {
        for (const boundary of ["owner_request", "agent_settled", "manual", "session_start"] as const) {
          const receipt = receiptOf({ boundary, selection: compactPrefixOf(branch, cut) })
          for (const native of [available(selection), { availability: "missing" }, { availability: "unreadable" }]) {
            for (const expectation of ["snapshot", "owner_request", "agent_settled"]) {
              for (const deadlineExpired of [false, true]) {
                const input = {
                  native,
                  materialization: { availability: "available", records: [receipt] },
                  expectation,
                  deadlineExpired
                }
                assertSameOutcome(outcomeOf(() => ourProject(input)), outcomeOf(() => referenceProject(input)))
                compared++
              }
            }
          }
        }
      }
      assert.strictEqual(compared, (occurrences.length + 1) * 4 * 3 * 3 * 2)
    })

    it(`${corpusCase.id}: an owner request at the latest user message stays pending until the assistant's stop settles`, () => {
      const lastUser = occurrences.findLastIndex((occurrence) => occurrence.role === "user")
      const stopAfter = occurrences.slice(lastUser + 1).some((occurrence) => occurrence.outcome === "stop")
      const state = projectAny({
        native: available(selection),
        materialization: {
          availability: "available",
          records: [receiptOf({ boundary: "owner_request", selection: compactPrefixOf(branch, lastUser + 1) })]
        }
      })
      assert.strictEqual(state.syncState, stopAfter ? "settlement_pending" : "request_current")
      assert.strictEqual(state.applicability, "request_generation")
    })

    it(`${corpusCase.id}: a request cut before an earlier user message no longer applies`, () => {
      const userIndexes = occurrences.flatMap((occurrence, index) => (occurrence.role === "user" ? [index] : []))
      const cuts = userIndexes.slice(0, -1).map((index) => index + 1)
      for (const cut of cuts) {
        const state = projectAny({
          native: available(selection),
          materialization: {
            availability: "available",
            records: [receiptOf({ boundary: "owner_request", selection: compactPrefixOf(branch, cut) })]
          }
        })
        assert.strictEqual(state.syncState, "awaiting_artifacts")
      }
      assert.isTrue(userIndexes.length >= 1)
    })
  }
})
