/**
 * Packed evidence, as the Session cache keeps it for a Session at rest, must
 * read back as exactly the evidence it packed: the artifact-state projection
 * of every later poll rests on it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as fc from "fast-check"
import { accumulateText } from "../../src/session/SessionAccumulator.js"
import { type AvailableEvidence, evidenceOf, packEvidence, unpackEvidence } from "../../src/session/SessionEvidence.js"
import { sessionTextArb } from "./SessionArbitrary.js"

const decoded = (packed: Uint8Array) => new TextDecoder().decode(packed)

describe("packed Session evidence", () => {
  it("reads back as the evidence of any Session, packed compactly", () => {
    let compact = 0
    fc.assert(
      fc.property(sessionTextArb, (text) => {
        const projected = accumulateText(text)
        if (Result.isFailure(projected)) return
        const evidence = evidenceOf(projected.success)
        const packed = packEvidence(evidence)
        assert.deepStrictEqual(unpackEvidence(packed), JSON.parse(JSON.stringify(evidence)))
        if (evidence.selection.occurrences.length > 0) {
          // The selector's evidence always has the compact form: positions, not repeated ids and hashes.
          assert.strictEqual(decoded(packed)[0], "[")
          assert.isAtMost(packed.byteLength, 0.7 * JSON.stringify(evidence).length)
          compact++
        }
      }),
      { numRuns: 300 }
    )
    assert.isAbove(compact, 50)
  })

  it("evidence the compact form cannot rebuild is packed as it is", () => {
    const occurrence = {
      occurrenceId: "e1:0",
      sourceEntryId: "e1",
      order: 0,
      role: "user" as const,
      outcome: "user" as const,
      timestamp: null,
      contentHash: "a".repeat(64)
    }
    const base: AvailableEvidence = {
      availability: "available",
      sessionId: "s",
      selection: {
        occurrences: [occurrence],
        payloads: [{ contentHash: "a".repeat(64), occurrenceIds: ["e1:0"] }],
        manifestHash: "b".repeat(64),
        selectorVersion: "rarebit-selector-v1"
      }
    }
    const variants: ReadonlyArray<[string, AvailableEvidence]> = [
      ["as the selector makes it", base],
      ["an occurrence id not made from its entry and order", {
        ...base,
        selection: {
          ...base.selection,
          occurrences: [{ ...occurrence, occurrenceId: "other" }],
          payloads: [{ contentHash: "a".repeat(64), occurrenceIds: ["other"] }]
        }
      }],
      ["a payload naming an occurrence the list lacks", {
        ...base,
        selection: { ...base.selection, payloads: [{ contentHash: "a".repeat(64), occurrenceIds: ["e2:1"] }] }
      }],
      ["a payload without occurrences", {
        ...base,
        selection: { ...base.selection, payloads: [{ contentHash: "c".repeat(64), occurrenceIds: [] }] }
      }],
      ["a payload whose hash is not its occurrence's", {
        ...base,
        selection: { ...base.selection, payloads: [{ contentHash: "c".repeat(64), occurrenceIds: ["e1:0"] }] }
      }]
    ]
    for (const [label, evidence] of variants) {
      const packed = packEvidence(evidence)
      assert.deepStrictEqual(unpackEvidence(packed), evidence, label)
      assert.strictEqual(decoded(packed)[0], label === "as the selector makes it" ? "[" : "{", label)
    }
  })
})
