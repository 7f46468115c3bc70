/**
 * Session fuzzing at the store's level: one Session file goes through a
 * random sequence of appends (whole lines, torn lines completed later, huge
 * lines, garbage, invalid UTF-8), truncations, replacements and removals,
 * and after every step the current read — which observes the Session
 * through our incremental Session cache — must equal the reference's, and
 * never throw.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { appendFile, rename, rm, stat, truncate, writeFile } from "node:fs/promises"
import * as Ours from "../../src/promise/index.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import { entry, makeRoots, outcomeOf, sessionText, Store as Ref } from "../support/Reference.js"
import { report } from "../support/TestReport.js"
import { SESSION_ID, validSidecar, writeBytes } from "./FuzzKit.js"

// A sequence is about 6 steps: `npm run fuzz`'s case budget buys an eighth as many sequences.
const RUNS = Math.max(1, Math.round(fuzzRuns(200) / 8))

type Op =
  | { readonly kind: "append"; readonly role: "user" | "assistant"; readonly text: string }
  | { readonly kind: "appendTorn"; readonly role: "user" | "assistant"; readonly text: string; readonly cut: number }
  | { readonly kind: "complete" }
  | { readonly kind: "garbage"; readonly bytes: Uint8Array; readonly newline: boolean }
  | { readonly kind: "huge"; readonly kiB: number }
  | { readonly kind: "truncate"; readonly fraction: number }
  | { readonly kind: "replace"; readonly entries: number; readonly sessionId: string }
  | { readonly kind: "remove" }

const role = fc.constantFrom("user" as const, "assistant" as const)
const text = fc.oneof(fc.string({ maxLength: 40 }), fc.constantFrom("", "  ", "é\u0000\u2028", "\ud83d\ude00"))

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant("append" as const), role, text }) },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant("appendTorn" as const), role, text, cut: fc.nat() })
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("complete" as const) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("garbage" as const),
      bytes: fc.oneof(
        fc.uint8Array({ maxLength: 30 }),
        fc.constant(Uint8Array.of(0xff, 0xfe)),
        fc.constant(Uint8Array.of(0xc0))
      ),
      newline: fc.boolean()
    })
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("huge" as const), kiB: fc.constantFrom(70, 200) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("truncate" as const),
      fraction: fc.double({ min: 0, max: 1, noNaN: true })
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("replace" as const),
      entries: fc.nat({ max: 5 }),
      sessionId: fc.constantFrom(SESSION_ID, SESSION_ID, "another-session")
    })
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("remove" as const) }) }
)

const encoder = new TextEncoder()

describe("session fuzz", () => {
  it("a Session changing under the store reads the same as the reference after every step", async () => {
    const steps = { total: 0, available: 0, unreadableNative: 0 }
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 12 }), async (ops) => {
        const roots = await makeRoots("rarebit-fuzz-session-")
        try {
          const base = { sessionFile: roots.sessionFile, ...roots.location }
          await writeBytes(Ref.rarebitMaterializationPath(roots.sessionFile, roots.location), validSidecar().bytes)
          await writeFile(roots.sessionFile, sessionText(SESSION_ID, [entry("u0", "user", "start")]))
          let torn: Uint8Array | undefined
          let count = 0
          for (const [index, step] of ops.entries()) {
            switch (step.kind) {
              case "append":
                await appendFile(roots.sessionFile, `${JSON.stringify(entry(`e${++count}`, step.role, step.text))}\n`)
                break
              case "appendTorn": {
                const line = encoder.encode(`${JSON.stringify(entry(`e${++count}`, step.role, step.text))}\n`)
                const cut = 1 + (step.cut % (line.length - 1))
                await appendFile(roots.sessionFile, line.subarray(0, cut))
                torn = line.subarray(cut)
                break
              }
              case "complete":
                if (torn !== undefined) await appendFile(roots.sessionFile, torn)
                torn = undefined
                break
              case "garbage":
                await appendFile(
                  roots.sessionFile,
                  step.newline ? Buffer.concat([step.bytes, Buffer.from("\n")]) : step.bytes
                )
                break
              case "huge":
                await appendFile(
                  roots.sessionFile,
                  `${
                    JSON.stringify({
                      type: "message",
                      id: `e${++count}`,
                      message: { role: "toolResult", content: "z".repeat(step.kiB * 1024) }
                    })
                  }\n`
                )
                break
              case "truncate": {
                const bytes = await stat(roots.sessionFile).then((info) => info.size, () => -1)
                if (bytes >= 0) await truncate(roots.sessionFile, Math.floor(step.fraction * bytes))
                torn = undefined
                break
              }
              case "replace": {
                const entries = Array.from(
                  { length: step.entries },
                  (_, n) => entry(`r${index}-${n}`, n % 2 === 0 ? "user" : "assistant", `text ${n}`)
                )
                await writeFile(`${roots.sessionFile}.next`, sessionText(step.sessionId, entries))
                await rename(`${roots.sessionFile}.next`, roots.sessionFile)
                torn = undefined
                break
              }
              case "remove":
                await rm(roots.sessionFile, { force: true })
                torn = undefined
                break
            }
            const mine = await outcomeOf(() => Ours.readRarebitCurrent(base))
            const theirs = await outcomeOf(() => Ref.readRarebitCurrent(base))
            assert.isTrue(mine.ok, `our current read threw after step ${index} ${JSON.stringify(step)}`)
            assert.strictEqual(
              JSON.stringify(mine),
              JSON.stringify(theirs),
              `after step ${index} ${JSON.stringify(step)}`
            )
            steps.total++
            const value = (mine as { value: any }).value
            if (value.artifactState?.nativeRef?.availability === "available") steps.available++
            if (value.artifactState?.nativeRef?.availability === "unreadable") steps.unreadableNative++
          }
        } finally {
          await roots.cleanup()
        }
      }),
      { numRuns: RUNS }
    )
    report("session-fuzz", `session fuzz: ${RUNS} sequences, ${JSON.stringify(steps)}`)
    assert.isAbove(steps.total, RUNS)
    // A run whose Sessions never read (or never failed to read) compared only half of the behaviour.
    assert.isAbove(steps.available, 0, "no step read an available Session")
    assert.isAbove(steps.unreadableNative, 0, "no step read an unreadable Session")
  }, 120_000 + RUNS * 2_000)
})
