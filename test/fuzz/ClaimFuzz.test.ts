/**
 * Claim fuzzing: a job claim is replaced by anything a crash, the reference
 * (which rewrites claims in place) or a hostile writer could leave — torn
 * prefixes, random bytes, JSON of every shape, active claims of any age,
 * settled claims pointing anywhere near a real receipt, any of them with
 * decoder-sensitive bytes (a BOM, overlong forms, NUL, CR, ...) before, in
 * or after the JSON — and `reserve` is called by both implementations on
 * identical copies of the directory.
 *
 * Both must give the same answer (acquired, duplicate with the same record,
 * in flight, or the same error class and message) with two documented
 * exceptions: the reference throws `SyntaxError` on a torn claim, where ours
 * waits for its lease (in flight, or a takeover once its modification time is
 * older than the lease); and ours completes a crashed settlement (duplicate)
 * where the reference takes the job over, when the sidecar already holds a
 * receipt of that job.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { cp, readFile, utimes, writeFile } from "node:fs/promises"
import { join } from "node:path"
import * as Ours from "../../src/promise/index.js"
import { editLine, sensitiveBytes, spot } from "../support/DecoderBytes.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import { jobId, makeRoots, outcomeOf, type Roots, Store as Ref, writeSession } from "../support/Reference.js"
import { report } from "../support/TestReport.js"
import { branches, nearMissReference, SESSION_ID, validSidecar, writeBytes } from "./FuzzKit.js"

const RUNS = fuzzRuns(100)
const LEASE_MS = 60_000
const encoder = new TextEncoder()

/** Jobs 1-5 have receipts in the sidecar; job 9 has none. */
const jobs = fc.constantFrom(jobId(9), jobId(9), jobId(3), jobId(5))

const { bytes: sidecarBytes, lines } = validSidecar()
const receipts = lines.filter((line) => line.kind !== "head")

interface ClaimCase {
  readonly job: string
  readonly content: Uint8Array
  /** How old the claim file's modification time is. */
  readonly mtimeAgeMs: number
  readonly description: string
}

const json = (value: unknown) => encoder.encode(`${JSON.stringify(value)}\n`)

const activeClaim = fc.record({
  ageMs: fc.oneof(fc.integer({ min: 0, max: 3 * LEASE_MS }), fc.constant(LEASE_MS), fc.constant(LEASE_MS + 1)),
  leaseMs: fc.oneof(fc.constant(LEASE_MS), fc.integer({ min: -5, max: 10 * LEASE_MS }), fc.constant(null)),
  claimedAt: fc.option(fc.oneof(fc.string({ maxLength: 30 }), fc.integer()), { nil: undefined }),
  sidecarOffset: fc.option(fc.oneof(fc.nat({ max: sidecarBytes.length + 10 }), fc.integer(), fc.string()), {
    nil: undefined
  })
})

const settledRef = fc.tuple(
  fc.nat(),
  fc.constantFrom("exact", "offset-", "offset+", "length-", "length+", "hash", "junk")
)
  .map(([pick, miss]) => {
    const target = receipts[pick % receipts.length]
    const ref = nearMissReference(
      target,
      miss === "junk" ? "exact" : miss,
      (exact) => `${exact.slice(0, 63)}${exact[63] === "0" ? "1" : "0"}`
    )
    return miss === "junk" ? { receiptOffset: "0" } : ref
  })

const plainClaimCase: fc.Arbitrary<ClaimCase> = fc.tuple(jobs, fc.integer({ min: 0, max: 3 * LEASE_MS })).chain((
  [job, mtimeAgeMs]
) =>
  fc.oneof(
    activeClaim.map((claim) => ({
      job,
      mtimeAgeMs,
      description: "active",
      content: json({
        jobId: job,
        state: "active",
        leaseToken: "t".repeat(48),
        claimedAt: claim.claimedAt ?? new Date(Date.now() - claim.ageMs).toISOString(),
        leaseMs: claim.leaseMs,
        ...(claim.sidecarOffset === undefined ? {} : { sidecarOffset: claim.sidecarOffset })
      })
    })),
    settledRef.map((receiptRef) => ({
      job,
      mtimeAgeMs,
      description: "settled",
      content: json({ jobId: job, state: "settled", leaseToken: "t".repeat(48), receiptRef })
    })),
    // Torn: a prefix of a whole claim, as the reference leaves between its truncate and its write.
    fc.nat().map((cut) => {
      const whole = json({
        jobId: job,
        state: "active",
        leaseToken: "t".repeat(48),
        claimedAt: new Date().toISOString(),
        leaseMs: LEASE_MS
      })
      return { job, mtimeAgeMs, description: "torn", content: whole.subarray(0, cut % whole.length) }
    }),
    fc.uint8Array({ maxLength: 200 }).map((content) => ({ job, mtimeAgeMs, description: "random bytes", content })),
    fc.jsonValue({ maxDepth: 3 }).map((value) => ({ job, mtimeAgeMs, description: "any JSON", content: json(value) })),
    fc.record({
      state: fc.oneof(fc.constantFrom("active", "settled", "released"), fc.jsonValue({ maxDepth: 1 })),
      claimedAt: fc.jsonValue({ maxDepth: 1 }),
      leaseMs: fc.jsonValue({ maxDepth: 1 }),
      receiptRef: fc.jsonValue({ maxDepth: 2 })
    }, { requiredKeys: [] }).map((fields) => ({ job, mtimeAgeMs, description: "claim-shaped", content: json(fields) }))
  )
)

/**
 * A claim as above, a third of the time with decoder-sensitive bytes
 * written into it: a claim the reference's `readFile(path, "utf8")` cannot
 * parse (a BOM before the JSON) must be torn for us too, never a duplicate
 * or a takeover read through a decoder that drops the mark.
 */
const claimCase: fc.Arbitrary<ClaimCase> = fc.tuple(
  plainClaimCase,
  fc.oneof({ weight: 2, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.tuple(sensitiveBytes, spot) })
).map(([claim, sensitive]) =>
  sensitive === undefined ? claim : {
    ...claim,
    description: `${claim.description}, ${sensitive[0].name} at ${sensitive[1].kind}`,
    content: editLine(claim.content, sensitive[1], sensitive[0].bytes)
  }
)

/** A reservation outcome with its random parts (tokens, times) left out. */
const shapeOf = (value: any) => {
  if (value?.acquired === true) return { acquired: true, jobId: value.jobId, claimPath: value.claimPath }
  if (value?.duplicate === true) return { duplicate: true, record: value.record }
  if (value?.inFlight === true) return { inFlight: true }
  return { unexpected: value }
}

const prepareTwin = async (source: Roots, name: string) => {
  const target = join(source.root, name)
  await cp(source.rarebitRoot, target, { recursive: true, preserveTimestamps: true })
  return target
}

describe("claim fuzz", () => {
  it("reserve over any claim: the reference's answer, or a documented, safer one", async () => {
    const roots = await makeRoots("rarebit-fuzz-claim-")
    const tally = { same: 0, tornWait: 0, tornTakeover: 0, recovered: 0 }
    let round = 0
    try {
      await writeSession(roots.sessionFile, SESSION_ID, branches[1])
      await fc.assert(
        fc.asyncProperty(claimCase, async (claim) => {
          round++
          // Two identical directories, one per implementation, since reserve writes.
          const base = join(roots.root, `case-${round}`)
          const sidecarIn = (rarebitRoot: string) =>
            Ref.rarebitMaterializationPath(roots.sessionFile, { sessionRoot: roots.sessionRoot, rarebitRoot })
          await writeBytes(sidecarIn(base), sidecarBytes)
          const claimPath = join(base, "jobs-v4", `${claim.job}.json`)
          await writeBytes(claimPath, claim.content)
          const mtime = new Date(Date.now() - claim.mtimeAgeMs)
          await utimes(claimPath, mtime, mtime)
          const twin = await prepareTwin({ ...roots, rarebitRoot: base }, `case-${round}-reference`)
          const now = Date.now()
          const input = (rarebitRoot: string) => ({
            jobId: claim.job,
            sessionFile: roots.sessionFile,
            sessionRoot: roots.sessionRoot,
            rarebitRoot,
            leaseMs: LEASE_MS,
            now
          })
          const mine = await outcomeOf(() => Ours.reserveRarebitJob(input(base)))
          const theirs = await outcomeOf(() => Ref.reserveRarebitJob(input(twin)))
          const label = `${claim.description} claim ${JSON.stringify(Buffer.from(claim.content).toString("utf8"))}`
          const mineValue = mine.ok ? shapeOf(mine.value) : mine
          const theirValue = theirs.ok ? { ...shapeOf(theirs.value), claimPath: undefined } : theirs

          const result = mine.ok ? (mine.value as any) : undefined
          const recoverable = claim.job !== jobId(9)
          if (!theirs.ok && theirs.errorClass === "SyntaxError") {
            // Ours never throws on a torn claim: it waits out the lease from the file's modification time,
            // then takes the job over (or, if the sidecar has its receipt, completes the settlement).
            assert.isDefined(result, `ours threw on a claim the reference cannot parse: ${label}`)
            const expired = claim.mtimeAgeMs > LEASE_MS + 1_000
            if (Math.abs(claim.mtimeAgeMs - LEASE_MS) > 1_000) {
              const tookOver = result.acquired === true || (recoverable && result.duplicate === true)
              assert.strictEqual(tookOver, expired, label)
              if (!expired) assert.strictEqual(result.inFlight, true, label)
            }
            if (result.inFlight === true) tally.tornWait++
            else tally.tornTakeover++
          } else if (result?.duplicate === true && theirs.ok && (theirs.value as any).acquired === true) {
            // Ours recovered a settlement the reference would run again: the sidecar holds this job's receipt.
            assert.isTrue(recoverable, label)
            assert.strictEqual(result.record.jobId, claim.job, label)
            tally.recovered++
          } else {
            const normalized = mine.ok ? { ...mineValue, claimPath: undefined } : mineValue
            const record = (value: any) =>
              value?.record === undefined ? value : { ...value, record: { ...value.record, path: undefined } }
            assert.deepStrictEqual(record(normalized), record(theirValue), label)
            tally.same++
          }

          // Whatever ours wrote, the claim parses.
          const after = await readFile(claimPath).catch(() => undefined)
          if (after !== undefined && result?.acquired === true) {
            assert.doesNotThrow(() => JSON.parse(after.toString("utf8")), label)
          }
        }),
        { numRuns: RUNS }
      )
      report("claim-fuzz", `claim fuzz: ${round} claims, ${JSON.stringify(tally)}`)
      assert.isAbove(tally.same, 0)
      assert.isAbove(tally.tornWait + tally.tornTakeover, 0)
    } finally {
      await roots.cleanup()
    }
  }, 120_000 + RUNS * 300)

  it("a torn claim never makes ours throw, and never blocks past its lease", async () => {
    const roots = await makeRoots("rarebit-fuzz-torn-")
    try {
      await writeSession(roots.sessionFile, SESSION_ID, branches[1])
      const claimPath = join(roots.rarebitRoot, "jobs-v4", `${jobId(9)}.json`)
      await writeBytes(claimPath, new Uint8Array(0))
      const input = { jobId: jobId(9), sessionFile: roots.sessionFile, ...roots.location, leaseMs: LEASE_MS }
      const fresh = await Ours.reserveRarebitJob({ ...input, now: Date.now() })
      assert.strictEqual(fresh.inFlight, true)
      const theirs = await outcomeOf(() => Ref.reserveRarebitJob({ ...input, now: Date.now() }))
      assert.isFalse(theirs.ok)
      const old = new Date(Date.now() - 2 * LEASE_MS)
      await utimes(claimPath, old, old)
      const later = await Ours.reserveRarebitJob({ ...input, now: Date.now() })
      assert.strictEqual(later.acquired, true)
      assert.strictEqual(JSON.parse(await readFile(claimPath, "utf8")).leaseToken, later.acquired && later.leaseToken)
      await writeFile(claimPath, "")
    } finally {
      await roots.cleanup()
    }
  })
})
