import { assert, describe, it } from "@effect/vitest"
import * as RefCore from "@hypercarrier/rarebit/core"
import { Result } from "effect"

import { registerOwnEvidence } from "../../src/protocol/internal/OwnEvidence.js"
import type { ArtifactState, ProjectionInput } from "../../src/state/ArtifactState.js"
import {
  exactSelectionApplies,
  INVALID_AVAILABILITY_MESSAGE,
  INVALID_EXPECTATION_MESSAGE,
  projectArtifactState,
  projectArtifactStateResult,
  requestPrefixApplies
} from "../../src/state/ArtifactState.js"
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
import type { Boundary, Status } from "./ReceiptFixtures.js"

const referenceSha256 = (RefCore as unknown as { readonly sha256: (value: unknown) => string }).sha256

// user, continuation, stop, user, continuation, stop
const branch = branchOf([
  { step: "user", text: "first request" },
  { step: "continuation", text: "working" },
  { step: "stop", text: "done" },
  { step: "user", text: "second request" },
  { step: "continuation", text: "working again" },
  { step: "stop", text: "done again" }
])
const upTo = (entries: number) => branch.slice(0, entries)

/** The native selection after the first `entries` branch entries. */
const nativeAt = (entries: number) => available(nativeSelectionOf(upTo(entries)))
const settledAt = (entries: number, observedAt: string, jobChar = "a", boundary: Boundary = "agent_settled") =>
  receiptOf({ boundary, observedAt, jobChar, selection: compactOf(upTo(entries)) })
const requestAt = (entries: number, observedAt: string, jobChar = "b") =>
  receiptOf({ boundary: "owner_request", observedAt, jobChar, selection: compactOf(upTo(entries)) })

const T1 = "2026-07-25T10:01:00.000Z"
const T2 = "2026-07-25T10:02:00.000Z"

const project = (input: unknown) => projectArtifactState(input as ProjectionInput)
const withRecords = (native: unknown, records: ReadonlyArray<unknown>, extra: Record<string, unknown> = {}) =>
  project({ native, materialization: { availability: "available", records }, ...extra })

describe("projectArtifactState", () => {
  describe("defaults", () => {
    it("no input means: native missing, no sidecar, a snapshot, deadline not reached", () => {
      const expected: ArtifactState = {
        syncState: "awaiting_artifacts",
        projection: null,
        applicability: "none",
        nativeRef: { availability: "missing", sessionId: null, selectionManifestHash: null },
        receiptRef: null,
        retry: { recommended: true, reason: "native_missing", deadlineExpired: false }
      }
      assert.deepStrictEqual(projectArtifactState(), expected)
      assert.deepStrictEqual(projectArtifactState({}), expected)
      assert.deepStrictEqual(
        project({ native: undefined, expectation: undefined, deadlineExpired: undefined }),
        expected
      )
      assert.strictEqual(JSON.stringify(projectArtifactState()), JSON.stringify(expected))
    })

    it("records that are not an array count as none", () => {
      const state = project({ native: nativeAt(3), materialization: { availability: "available", records: "x" } })
      assert.strictEqual(state.syncState, "awaiting_artifacts")
      assert.strictEqual(state.retry?.reason, "materialization_pending")
    })
  })

  describe("newest receipt", () => {
    it("a later observedAt wins regardless of position", () => {
      const later = settledAt(3, T2, "a")
      const earlier = settledAt(3, T1, "b")
      const state = withRecords(nativeAt(3), [later, earlier])
      assert.strictEqual(state.syncState, "assessment_current")
      assert.strictEqual(state.receiptRef?.jobId, hex("a"))
    })

    it("on an observedAt tie the record further down the sidecar wins", () => {
      const state = withRecords(nativeAt(3), [settledAt(3, T1, "a"), settledAt(3, T1, "b")])
      assert.strictEqual(state.receiptRef?.jobId, hex("b"))
    })

    it("ties are by instant, not by spelling", () => {
      const state = withRecords(nativeAt(3), [
        settledAt(3, "2026-07-25T10:01:00.000Z", "a"),
        settledAt(3, "2026-07-25T10:01:00Z", "b"),
        settledAt(3, "2026-07-25T10:00:59.999Z", "c")
      ])
      assert.strictEqual(state.receiptRef?.jobId, hex("b"))
    })
  })

  describe("settled assessment versus active request", () => {
    // After the second request the native branch holds 4 entries; the exact settlement is over the same 4.
    it("an agent_settled assessment newer than the request is current", () => {
      const state = withRecords(nativeAt(4), [requestAt(4, T1), settledAt(4, T2)])
      assert.strictEqual(state.syncState, "assessment_current")
      assert.strictEqual(state.applicability, "exact_selection")
      assert.strictEqual(state.retry, null)
    })

    it("a request newer than the settlement keeps its generation current", () => {
      const state = withRecords(nativeAt(4), [settledAt(4, T1), requestAt(4, T2)])
      assert.strictEqual(state.syncState, "request_current")
      assert.strictEqual(state.applicability, "request_generation")
      assert.strictEqual(state.projection?.status, "user_requested")
    })

    it("on a tie the one listed later wins", () => {
      assert.strictEqual(withRecords(nativeAt(4), [settledAt(4, T1), requestAt(4, T1)]).syncState, "request_current")
      assert.strictEqual(withRecords(nativeAt(4), [requestAt(4, T1), settledAt(4, T1)]).syncState, "assessment_current")
    })

    it("manual and session_start assessments do not end a request generation", () => {
      for (const boundary of ["manual", "session_start"] as const) {
        const state = withRecords(nativeAt(4), [requestAt(4, T1), settledAt(4, T2, "c", boundary)])
        assert.strictEqual(state.syncState, "request_current")
      }
      const alone = withRecords(nativeAt(4), [settledAt(4, T2, "c", "manual")])
      assert.strictEqual(alone.syncState, "assessment_current")
      assert.strictEqual(alone.receiptRef?.lifecycleBoundary, "manual")
    })

    it("an owner request is never shown as an exact assessment", () => {
      // Same manifest hash as the native selection, but a cut the native prefix cannot reproduce.
      const selection = { ...compactOf(upTo(4)), occurrenceCount: 5 }
      const request = receiptOf({ boundary: "owner_request", observedAt: T1, selection })
      assert.strictEqual(withRecords(nativeAt(4), [request]).syncState, "awaiting_artifacts")
      const settled = receiptOf({ boundary: "agent_settled", observedAt: T1, selection })
      assert.strictEqual(withRecords(nativeAt(4), [settled]).syncState, "assessment_current")
    })
  })

  describe("settlement pending", () => {
    it("assistant continuations after the cut keep the request current", () => {
      const state = withRecords(nativeAt(5), [requestAt(4, T1)])
      assert.strictEqual(state.syncState, "request_current")
      assert.strictEqual(state.retry, null)
    })

    it("an assistant stop after the cut means a settlement is due", () => {
      const state = withRecords(nativeAt(6), [requestAt(4, T1)], { deadlineExpired: true })
      assert.strictEqual(state.syncState, "settlement_pending")
      assert.strictEqual(state.applicability, "request_generation")
      assert.deepStrictEqual(state.retry, { recommended: false, reason: "settlement_pending", deadlineExpired: true })
      const fresh = withRecords(nativeAt(6), [requestAt(4, T1)])
      assert.deepStrictEqual(fresh.retry, { recommended: true, reason: "settlement_pending", deadlineExpired: false })
    })

    it("the settlement over the grown branch then becomes current", () => {
      const state = withRecords(nativeAt(6), [requestAt(4, T1), settledAt(6, T2)])
      assert.strictEqual(state.syncState, "assessment_current")
    })

    it("a later user message ends the request generation", () => {
      const state = withRecords(nativeAt(4), [requestAt(1, T1)])
      assert.strictEqual(state.syncState, "awaiting_artifacts")
    })
  })

  describe("native Session unavailable", () => {
    it("the newest receipt of the expected generation is shown as source-pending", () => {
      const request = withRecords({ availability: "missing" }, [requestAt(4, T1)], { expectation: "owner_request" })
      assert.strictEqual(request.syncState, "request_source_pending")
      assert.strictEqual(request.applicability, "request_cut")
      assert.deepStrictEqual(request.retry, {
        recommended: true,
        reason: "native_source_pending",
        deadlineExpired: false
      })
      const settled = withRecords({ availability: "unreadable" }, [settledAt(3, T1)], { expectation: "agent_settled" })
      assert.strictEqual(settled.syncState, "assessment_source_pending")
      assert.strictEqual(settled.applicability, "materialization_only")
      assert.deepStrictEqual(settled.nativeRef, {
        availability: "unreadable",
        sessionId: null,
        selectionManifestHash: null
      })
    })

    it("a newer receipt of the opposite generation hides it", () => {
      const state = withRecords({ availability: "missing" }, [requestAt(4, T1), settledAt(3, T2)], {
        expectation: "owner_request"
      })
      assert.strictEqual(state.syncState, "awaiting_artifacts")
      assert.strictEqual(state.retry?.reason, "native_missing")
    })

    it("a snapshot takes the newest receipt of any generation", () => {
      const state = withRecords({ availability: "missing" }, [settledAt(3, T2), requestAt(4, T1)])
      assert.strictEqual(state.syncState, "assessment_source_pending")
    })
  })

  describe("terminal errors", () => {
    const terminalReason = (input: unknown) => {
      const state = project(input)
      assert.strictEqual(state.syncState, "terminal_error")
      assert.strictEqual(state.applicability, "none")
      assert.strictEqual(state.receiptRef, null)
      assert.strictEqual(state.retry?.recommended, false)
      assert.strictEqual(state.retry?.deadlineExpired, true)
      assert.strictEqual(state.projection?.assessmentRef, null)
      return state.projection?.reason
    }
    const sidecar = (records: ReadonlyArray<unknown>, availability = "available") => ({ availability, records })

    it("session_conflict: two sessions in the sidecar, or a sidecar of another session", () => {
      const other = receiptOf({ sessionId: "session-2", selection: compactOf(upTo(3)) })
      assert.strictEqual(
        terminalReason({ native: { availability: "missing" }, materialization: sidecar([settledAt(3, T1), other]) }),
        "session_conflict"
      )
      assert.strictEqual(
        terminalReason({ native: nativeAt(3), materialization: sidecar([other]) }),
        "session_conflict"
      )
      // Invalid Summary-typed records name sessions too.
      assert.strictEqual(
        terminalReason({
          native: nativeAt(3),
          materialization: sidecar([{ type: "rarebit_summary", sessionId: "x" }])
        }),
        "session_conflict"
      )
    })

    it("native_malformed: an available Session without id or with a broken selection", () => {
      const selection = nativeSelectionOf(upTo(3))
      for (
        const native of [
          available(selection, ""),
          available(null),
          available({ ...selection, manifestHash: "short" }),
          available(nativeSelectionOf(branchOf([
            { step: "user", text: "a", id: "same" },
            { step: "stop", text: "b", id: "same" }
          ])))
        ]
      ) {
        assert.strictEqual(terminalReason({ native }), "native_malformed")
      }
    })

    const malformed = (native: unknown) => project({ native }).projection?.reason === "native_malformed"

    it("a caller's occurrence list is checked on every projection, even when it is the same list", () => {
      const selection = nativeSelectionOf(upTo(3)) as { occurrences: Array<Record<string, unknown>> }
      const native = available(selection)
      assert.isFalse(malformed(native))
      selection.occurrences[1] = { ...selection.occurrences[1], role: "narrator" }
      assert.isTrue(malformed(native))
    })

    it("the verdict on a list this package registered as its own is kept for that list", () => {
      const selection = nativeSelectionOf(upTo(3)) as { occurrences: Array<Record<string, unknown>> }
      registerOwnEvidence(selection.occurrences)
      const native = available(selection)
      assert.isFalse(malformed(native))
      // Only the Session cache registers lists, and it never changes them; this shows the verdict is remembered.
      selection.occurrences[1] = { ...selection.occurrences[1], role: "narrator" }
      assert.isFalse(malformed(native))
      // A new list (as a Session that changed produces) is checked afresh.
      assert.isTrue(
        malformed(available({ ...selection, occurrences: registerOwnEvidence([...selection.occurrences]) }))
      )
    })

    it("occurrences without a source entry id are not malformed", () => {
      const anonymous = nativeSelectionOf(branchOf([
        { step: "user", text: "a", id: null },
        { step: "stop", text: "b", id: null }
      ]))
      assert.strictEqual(anonymous.occurrences[0]?.sourceEntryId, null)
      const state = project({ native: available(anonymous) })
      assert.strictEqual(state.syncState, "awaiting_artifacts")
    })

    it("unsupported outranks malformed once the deadline passes", () => {
      const receipt = settledAt(3, T1)
      const older = { ...receipt, schemaVersion: 3 }
      const broken = { ...receipt, promptVersion: "" }
      const input = (records: ReadonlyArray<unknown>) => ({
        native: nativeAt(6),
        materialization: sidecar(records),
        deadlineExpired: true
      })
      assert.strictEqual(terminalReason(input([broken, older])), "unsupported")
      assert.strictEqual(terminalReason(input([broken])), "malformed")
      // Title receipts and junk are not Summary records and explain nothing.
      assert.strictEqual(terminalReason(input([{ type: "rarebit_title" }, null])), "settlement_timeout")
    })

    it("the remaining reasons follow what could not be read", () => {
      const expired = { deadlineExpired: true }
      assert.strictEqual(
        terminalReason({ native: nativeAt(3), materialization: sidecar([], "unreadable"), ...expired }),
        "materialization_unreadable"
      )
      assert.strictEqual(
        terminalReason({ native: nativeAt(3), materialization: sidecar([], "missing"), ...expired }),
        "materialization_missing"
      )
      assert.strictEqual(
        terminalReason({ native: nativeAt(3), materialization: sidecar([]), ...expired }),
        "settlement_timeout"
      )
      assert.strictEqual(terminalReason({ native: { availability: "unreadable" }, ...expired }), "native_unreadable")
      assert.strictEqual(terminalReason({ native: { availability: "missing" }, ...expired }), "native_missing")
      assert.strictEqual(
        terminalReason({ native: { availability: "missing" }, materialization: sidecar([], "unreadable"), ...expired }),
        "materialization_unreadable"
      )
    })
  })

  describe("projected status", () => {
    const cases: ReadonlyArray<readonly [Status, string, string]> = [
      ["ok", "finished", "all_requests_accomplished"],
      ["ineligible", "ineligible", "intrinsic_policy"],
      ["inhibited", "error", "inhibited"],
      ["unavailable_overflow", "error", "overflow"],
      ["failure", "error", "synthesis_failure"]
    ]
    for (const [status, expectedStatus, expectedReason] of cases) {
      it(`${status} receipts project ${expectedStatus}/${expectedReason}`, () => {
        const receipt = receiptOf({ status, selection: compactOf(upTo(3)) })
        const state = withRecords(nativeAt(3), [receipt])
        assert.strictEqual<unknown>(state.projection?.status, expectedStatus)
        assert.strictEqual(state.projection?.reason, expectedReason)
      })
    }

    it("the assessment ref carries the lineage, never the prose, with the model in a fixed key order", () => {
      const receipt = receiptOf({
        selection: compactOf(upTo(3)),
        observedAt: T2,
        model: { id: "m", provider: "p" }
      })
      const state = withRecords(nativeAt(3), [receipt])
      const expected = {
        jobId: hex("e"),
        sessionId: "session-1",
        branchLeafId: "leaf",
        selectionManifestHash: compactOf(upTo(3)).manifestHash,
        selectorVersion: SELECTOR_VERSION,
        lifecycleBoundary: "agent_settled",
        promptVersion: "rarebit-summary-v4",
        model: { provider: "p", id: "m" },
        observedAt: T2,
        schemaVersion: 4,
        implementationVersion: "hc-rarebit-summary-v6"
      }
      assert.strictEqual(JSON.stringify(state.receiptRef), JSON.stringify(expected))
      assert.strictEqual(JSON.stringify(state.projection?.assessmentRef), JSON.stringify(expected))
      assert.strictEqual(
        JSON.stringify(state.nativeRef),
        JSON.stringify({
          availability: "available",
          sessionId: "session-1",
          selectionManifestHash: nativeSelectionOf(upTo(3)).manifestHash
        })
      )
    })
  })

  describe("invalid input", () => {
    it("an unknown availability or expectation throws the reference's TypeError", () => {
      const availability = () => project({ native: { availability: "gone" } })
      assert.throws(availability, TypeError, INVALID_AVAILABILITY_MESSAGE)
      assert.throws(
        () => project({ materialization: { availability: "gone" } }),
        TypeError,
        INVALID_AVAILABILITY_MESSAGE
      )
      assert.throws(() => project({ expectation: "later" }), TypeError, INVALID_EXPECTATION_MESSAGE)
    })

    it("projectArtifactStateResult returns them as ProjectionInputInvalid", () => {
      const failed = projectArtifactStateResult({ expectation: "later" } as unknown as ProjectionInput)
      assert.isTrue(Result.isFailure(failed))
      if (Result.isFailure(failed)) {
        assert.strictEqual(failed.failure._tag, "ProjectionInputInvalid")
        assert.strictEqual(failed.failure.field, "expectation")
        assert.strictEqual(failed.failure.message, INVALID_EXPECTATION_MESSAGE)
      }
      const succeeded = projectArtifactStateResult()
      assert.isTrue(Result.isSuccess(succeeded))
      if (Result.isSuccess(succeeded)) assert.strictEqual(succeeded.success.syncState, "awaiting_artifacts")
    })

    it("a null input or native fails like a plain property read", () => {
      assert.throws(() => project(null), TypeError, "Cannot read properties of null (reading 'native')")
      assert.throws(
        () => project({ native: null }),
        TypeError,
        "Cannot read properties of null (reading 'availability')"
      )
    })
  })
})

describe("selection applicability", () => {
  const full = nativeSelectionOf(upTo(6))

  it("exactSelectionApplies needs the same manifest hash and selector version", () => {
    assert.isTrue(exactSelectionApplies(compactOf(upTo(6)), full))
    assert.isFalse(exactSelectionApplies(compactOf(upTo(5)), full))
    assert.isFalse(exactSelectionApplies({ ...compactOf(upTo(6)), selectorVersion: "other" }, full))
    const { selectorVersion: _omitted, ...manifestOnly } = full
    assert.isTrue(exactSelectionApplies(compactOf(upTo(6)), manifestOnly), "falls back to manifest.selectorVersion")
    assert.isTrue(
      exactSelectionApplies(undefined, undefined),
      "missing on both sides compares equal, as in the reference"
    )
  })

  it("requestPrefixApplies accepts a hashed prefix ending at the latest user message", () => {
    assert.isTrue(requestPrefixApplies(compactPrefixOf(upTo(6), 4), full))
    assert.isTrue(requestPrefixApplies(compactPrefixOf(upTo(6), 6), full))
    assert.isFalse(requestPrefixApplies(compactPrefixOf(upTo(6), 1), full), "an earlier user message")
    assert.isFalse(requestPrefixApplies({ ...compactPrefixOf(upTo(6), 4), manifestHash: hex("0") }, full))
    assert.isFalse(requestPrefixApplies({ ...compactPrefixOf(upTo(6), 4), occurrenceCount: 7 }, full))
    assert.isFalse(requestPrefixApplies({ ...compactPrefixOf(upTo(6), 4), occurrenceCount: 1.5 }, full))
    assert.isFalse(requestPrefixApplies({ ...compactPrefixOf(upTo(6), 4), selectorVersion: "other" }, full))
  })

  it("payloads shared across the cut are narrowed to the kept occurrences", () => {
    const repeated = branchOf([
      { step: "user", text: "same" },
      { step: "stop", text: "answer" },
      { step: "user", text: "same" }
    ])
    const selection = nativeSelectionOf(repeated)
    assert.strictEqual(selection.payloads.length, 2)
    // Cut after the first "same": its payload keeps only the first occurrence id.
    const narrowed = { ...compactPrefixOf(repeated, 1), latestUserSourceEntryId: "e2" }
    assert.isTrue(requestPrefixApplies(narrowed, selection))
    const unnarrowedHash = referenceSha256({
      selectorVersion: SELECTOR_VERSION,
      occurrences: (selection.manifest.occurrences as Array<unknown>).slice(0, 1),
      payloads: selection.manifest.payloads
    })
    assert.isFalse(requestPrefixApplies({ ...narrowed, manifestHash: unnarrowedHash }, selection))
  })
})
