/**
 * Sidecar mutation fuzzing: a valid sidecar is damaged the ways a crash, a
 * broken disk or a hostile writer could damage it (truncation, random bytes,
 * spliced and glued lines, huge lines, invalid UTF-8, heads pointing anywhere,
 * hash near-misses), and both implementations must read it identically —
 * current answer and every history page — without ever throwing.
 *
 * Before the damage, decoder-sensitive bytes (BOMs, overlong forms, encoded
 * surrogates, truncated sequences, NUL, CR, U+2028, F5..FF lead bytes, ...)
 * may be written into any line, the current head and its receipt most often,
 * with heads re-hashed over the edited receipts: a reader that decodes a
 * line otherwise than the reference's `Buffer#toString` accepts or refuses
 * it differently and fails here.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import * as Ours from "../../src/promise/index.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import { makeRoots, referenceNative, Store as Ref, writeSession } from "../support/Reference.js"
import { report } from "../support/TestReport.js"
import {
  assertSameReads,
  branches,
  lineEdit,
  mutate,
  mutation,
  SESSION_ID,
  validSidecar,
  writeBytes
} from "./FuzzKit.js"

const RUNS = fuzzRuns(150)

describe("sidecar fuzz", () => {
  it("the undamaged sidecar is current at its last summary", async () => {
    const roots = await makeRoots("rarebit-fuzz-base-")
    try {
      await writeSession(roots.sessionFile, SESSION_ID, branches[1])
      const { bytes, lines } = validSidecar()
      await writeBytes(Ref.rarebitMaterializationPath(roots.sessionFile, roots.location), bytes)
      const current = await Ours.readRarebitCurrent({ sessionFile: roots.sessionFile, ...roots.location })
      assert.strictEqual(current.availability, "available")
      assert.strictEqual(current.receipt?.jobId, "4".padStart(64, "0"))
      const history = await Ours.readRarebitHistory({ sessionFile: roots.sessionFile, ...roots.location })
      assert.strictEqual(history.records.length, lines.filter((line) => line.kind !== "head").length)
    } finally {
      await roots.cleanup()
    }
  })

  it("damaged sidecars: same current read and history as the reference, never a throw", async () => {
    const roots = await makeRoots("rarebit-fuzz-sidecar-")
    try {
      await writeSession(roots.sessionFile, SESSION_ID, branches[1])
      const native = await referenceNative(roots.sessionFile, roots.sessionRoot)
      const sidecar = Ref.rarebitMaterializationPath(roots.sessionFile, roots.location)
      const seen = { available: 0, missing: 0, unreadable: 0 }
      await fc.assert(
        fc.asyncProperty(
          fc.array(lineEdit, { maxLength: 2 }).chain((edits) =>
            fc.tuple(
              fc.constant(edits),
              // Edits alone are damage enough to compare on, half the time.
              edits.length > 0
                ? fc.oneof(fc.constant([]), fc.array(mutation, { minLength: 1, maxLength: 3 }))
                : fc.array(mutation, { minLength: 1, maxLength: 3 })
            )
          ),
          fc.constantFrom(1, 2, 7, 100, 1000),
          fc.double({ min: 0, max: 1, noNaN: true }),
          async ([edits, mutations], limit, fraction) => {
            const { bytes, lines } = validSidecar(edits)
            const damaged = mutate(bytes, lines, mutations)
            await writeBytes(sidecar, damaged)
            const fromOffset = Math.floor(fraction * (damaged.length + 1))
            const label = `${damaged.length} bytes, edits ${
              JSON.stringify(edits.map((edit) => ({ ...edit, bytes: edit.bytes.name })))
            }`
            await assertSameReads(roots, native, { limit, fromOffset, label })
            const current = await Ours.readRarebitCurrent({ sessionFile: roots.sessionFile, ...roots.location, native })
            seen[current.availability as keyof typeof seen]++
          }
        ),
        { numRuns: RUNS }
      )
      report("sidecar-fuzz", `sidecar fuzz: ${RUNS} damaged sidecars, current answers ${JSON.stringify(seen)}`)
      // The mutations must reach every answer, or the fuzzer is not testing much.
      assert.isAbove(seen.available, 0)
      assert.isAbove(seen.missing, 0)
      assert.isAbove(seen.unreadable, 0)
    } finally {
      await roots.cleanup()
    }
  }, 120_000 + RUNS * 200)
})
