/**
 * A Session's evidence, as the Session cache keeps it for an idle Session:
 * its manifest's occurrences and payloads, without a single selected text,
 * with the same hashes as its projection.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as fc from "fast-check"
import { accumulateText } from "../../src/session/SessionAccumulator.js"
import { evidenceOf } from "../../src/session/SessionEvidence.js"
import { sessionTextArb } from "./SessionArbitrary.js"

describe("Session evidence", () => {
  it("is the projection's manifest, with no text in it", () => {
    let selected = 0
    fc.assert(
      fc.property(sessionTextArb, (text) => {
        const projected = accumulateText(text)
        if (Result.isFailure(projected)) return
        const { selection, session } = projected.success
        const evidence = evidenceOf(projected.success)
        assert.strictEqual(evidence.sessionId, session.id)
        assert.strictEqual(evidence.selection.manifestHash, selection.manifestHash)
        assert.deepStrictEqual(evidence.selection.occurrences, selection.manifest.occurrences)
        assert.deepStrictEqual(evidence.selection.payloads, selection.manifest.payloads)
        for (const occurrence of evidence.selection.occurrences) assert.notProperty(occurrence, "text")
        for (const payload of evidence.selection.payloads) assert.notProperty(payload, "text")
        if (evidence.selection.occurrences.length > 0) selected++
      }),
      { numRuns: 200 }
    )
    assert.isAbove(selected, 30)
  })
})
