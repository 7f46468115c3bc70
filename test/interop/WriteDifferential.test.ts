/**
 * Write differential against the pinned reference: one generated sequence of
 * store calls runs through our plain API on one root and through the
 * reference on an identical root. After every call the results (or error
 * class and message), the sidecar bytes, the claims, and the file modes must
 * be the same.
 *
 * Deliberate differences, masked or avoided here and pinned in
 * `DeliberateDifferences` below:
 * - our active claims carry an extra `sidecarOffset` key, and our claims and
 *   lock files are written whole (temp file, fsync, link or rename), so a
 *   reader never sees a half-written one; lock files carry an extra `owner`;
 * - lease tokens are random in both, so they are masked (`claimedAt` is
 *   compared: every reserve here passes `now`);
 * - when a lock cannot be created at all (its directory is gone), the Node
 *   error names our temp file (`<lock>.<token>.tmp`) rather than the lock;
 * - release of a claim the lease does not own returns without taking the lock;
 * - a receipt and its head are appended in one write, and a head over 8 KiB
 *   is refused before anything is written (the reference appends the receipt
 *   first, then throws, leaving an orphan receipt);
 * - a settled claim whose sidecar is missing fails with "settled job receipt
 *   pointer is invalid" where the reference leaks ENOENT.
 */
import { afterEach, assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { copyFile, mkdir, readdir, readFile, rm, stat, writeFile } from "node:fs/promises"
import { dirname, join } from "node:path"
import { fuzzRuns } from "../support/FuzzRuns.js"
import type { Json } from "../support/Receipts.js"
import {
  entry,
  jobId,
  makeRoots,
  type Outcome,
  outcomeOf,
  referenceNative,
  type Roots,
  summaryReceipt,
  titleReceipt,
  writeSession
} from "../support/Reference.js"
import { comparable, ours, reference, snapshot, type StoreApi } from "./Interop.js"

const branches: ReadonlyArray<ReadonlyArray<Json>> = [
  [entry("u1", "user", "first request")],
  [entry("u1", "user", "first request"), entry("a1", "assistant", "done")],
  [entry("u1", "user", "first request"), entry("a1", "assistant", "done"), entry("u2", "user", "more")]
]

// ---------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------

type ReceiptKind =
  | "summaryCurrent"
  | "summary0"
  | "summary2"
  | "title"
  | "titleFailure"
  | "otherSession"
  | "extraKey"
  | "missingKey"
  | "wrongType"
  | "noType"
  | "tooLarge"
  | "notAnObject"

type Op =
  | {
    readonly kind: "reserve"
    readonly job: number
    readonly now: number
    readonly leaseMs: number
    readonly native: boolean
    readonly hook: "none" | "changeSession" | "throw"
  }
  | { readonly kind: "reserveInvalid"; readonly variant: string }
  | { readonly kind: "settle"; readonly handle: number; readonly receipt: ReceiptKind }
  | { readonly kind: "settleUnacquired"; readonly variant: "null" | "empty" | "notAcquired" }
  | { readonly kind: "release"; readonly handle: number }
  | { readonly kind: "session"; readonly branch: number }
  | { readonly kind: "claim"; readonly job: number; readonly content: string }
  | { readonly kind: "copyClaim"; readonly from: number; readonly to: number }

const invalidReserves: Record<string, (roots: Roots) => Json> = {
  jobIdUpper: () => ({ jobId: "A".repeat(64) }),
  jobIdShort: () => ({ jobId: "a".repeat(63) }),
  jobIdNumber: () => ({ jobId: 7 }),
  leaseZero: () => ({ leaseMs: 0 }),
  leaseNaN: () => ({ leaseMs: Number.NaN }),
  leaseInfinity: () => ({ leaseMs: Number.POSITIVE_INFINITY }),
  leaseString: () => ({ leaseMs: "5" }),
  leaseFraction: () => ({ leaseMs: 0.5 }),
  outsideRoot: (roots) => ({ sessionFile: join(roots.root, "elsewhere.jsonl") }),
  noSession: () => ({ sessionFile: "  " })
}

/**
 * Hand-written claims that parse (unparsable ones are an open difference,
 * see `OpenDifferences`): odd JSON values, settled claims without a usable
 * pointer, active claims whose lease fields only `Date.parse` or
 * `Number.isFinite` would accept or refuse.
 */
const handClaims = [
  "null",
  "[]",
  "\"active\"",
  "5",
  "{}",
  "{\"state\":\"settled\"}",
  "{\"state\":\"settled\",\"receiptRef\":null}",
  "{\"state\":\"settled\",\"receiptRef\":{}}",
  "{\"state\":\"settled\",\"receiptRef\":{\"receiptOffset\":0,\"receiptLength\":1,\"receiptHash\":\"" + "0".repeat(64) +
  "\"}}",
  "{\"state\":\"active\",\"claimedAt\":\"1970-01-01T00:00:00.000Z\",\"leaseMs\":\"5\"}",
  "{\"state\":\"active\",\"claimedAt\":\"1970-01-01T00:00:00.000Z\",\"leaseMs\":5}",
  "{\"state\":\"active\",\"claimedAt\":[\"1970-01-01T00:00:00.000Z\"],\"leaseMs\":5}",
  "{\"state\":\"active\",\"claimedAt\":0,\"leaseMs\":5}",
  "{\"state\":\"active\",\"claimedAt\":\"not a time\",\"leaseMs\":5}",
  "{\"state\":\"active\",\"claimedAt\":\"1970-01-01T00:00:00.020Z\",\"leaseMs\":null}",
  "{\"state\":\"ACTIVE\",\"claimedAt\":\"1970-01-01T00:00:00.000Z\",\"leaseMs\":1}"
] as const

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant("reserve" as const),
      job: fc.integer({ min: 1, max: 3 }),
      now: fc.integer({ min: 0, max: 40 }),
      leaseMs: fc.constantFrom(1, 5, 20, 600_000),
      native: fc.boolean(),
      hook: fc.constantFrom("none" as const, "none" as const, "changeSession" as const, "throw" as const)
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("reserveInvalid" as const),
      variant: fc.constantFrom(...Object.keys(invalidReserves))
    })
  },
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant("settle" as const),
      handle: fc.nat(),
      receipt: fc.constantFrom<ReceiptKind>(
        "summaryCurrent",
        "summaryCurrent",
        "summary0",
        "summary2",
        "title",
        "titleFailure",
        "otherSession",
        "extraKey",
        "missingKey",
        "wrongType",
        "noType",
        "tooLarge",
        "notAnObject"
      )
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("settleUnacquired" as const),
      variant: fc.constantFrom("null" as const, "empty" as const, "notAcquired" as const)
    })
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("release" as const), handle: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("session" as const),
      branch: fc.integer({ min: 0, max: branches.length - 1 })
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("claim" as const),
      job: fc.integer({ min: 1, max: 3 }),
      content: fc.constantFrom(...handClaims)
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("copyClaim" as const),
      from: fc.integer({ min: 1, max: 3 }),
      to: fc.integer({ min: 1, max: 3 })
    })
  }
)

/** One implementation's world: its store, its root, its reservations so far. */
interface World {
  readonly api: StoreApi
  readonly roots: Roots
  readonly handles: Array<any>
  branch: number
}

const receiptFor = (kind: ReceiptKind, world: World): unknown => {
  const current = branches[world.branch]
  switch (kind) {
    case "summaryCurrent":
      return summaryReceipt(current, "s")
    case "summary0":
      return summaryReceipt(branches[0], "s")
    case "summary2":
      return summaryReceipt(branches[2], "s", { summary: "a later one" })
    case "title":
      return titleReceipt(current, "s")
    case "titleFailure": {
      const { synthesis: _synthesis, ...rest } = titleReceipt(current, "s")
      return {
        ...rest,
        status: "failure",
        title: null,
        retryable: true,
        error: { name: "Error", message: "model down" }
      }
    }
    case "otherSession":
      return summaryReceipt(current, "other")
    case "extraKey":
      return { ...summaryReceipt(current, "s"), unexpected: true }
    case "missingKey": {
      const { model: _model, ...rest } = titleReceipt(current, "s")
      return rest
    }
    case "wrongType":
      return { ...summaryReceipt(current, "s"), type: "rarebit_other" }
    case "noType": {
      const { type: _type, ...rest } = summaryReceipt(current, "s")
      return rest
    }
    case "tooLarge":
      return summaryReceipt(current, "s", { summary: "x".repeat(49 * 1024) })
    case "notAnObject":
      return "rarebit_summary"
  }
}

const hooksFor = (hook: "none" | "changeSession" | "throw", world: World) => {
  switch (hook) {
    case "none":
      return null
    case "changeSession":
      return {
        afterLeaseValidated: async () => {
          world.branch = (world.branch + 1) % branches.length
          await writeSession(world.roots.sessionFile, "s", branches[world.branch])
        }
      }
    case "throw":
      return {
        afterLeaseValidated: async () => {
          throw new RangeError("hook refused")
        }
      }
  }
}

const apply = async (world: World, op: Op): Promise<Outcome> => {
  const { api, roots } = world
  const base = { sessionFile: roots.sessionFile, ...roots.location }
  switch (op.kind) {
    case "reserve": {
      const native = op.native ? await referenceNative(roots.sessionFile, roots.sessionRoot) : null
      const outcome = await outcomeOf(() =>
        api.reserveRarebitJob({
          ...base,
          jobId: jobId(op.job),
          now: op.now,
          leaseMs: op.leaseMs,
          native,
          hooks: hooksFor(op.hook, world)
        })
      )
      if (outcome.ok) world.handles.push(outcome.value)
      return outcome
    }
    case "reserveInvalid":
      return outcomeOf(() =>
        api.reserveRarebitJob({ ...base, jobId: jobId(1), now: 0, ...invalidReserves[op.variant](roots) })
      )
    case "settle": {
      if (world.handles.length === 0) return { ok: true, value: "no reservation yet" }
      const reservation = world.handles[op.handle % world.handles.length]
      return outcomeOf(() => api.settleRarebitJob(reservation, receiptFor(op.receipt, world)))
    }
    case "settleUnacquired": {
      const reservation = op.variant === "null"
        ? null
        : op.variant === "empty"
        ? {}
        : { ...world.handles.at(-1), acquired: false }
      return outcomeOf(() => api.settleRarebitJob(reservation, summaryReceipt(branches[world.branch], "s")))
    }
    case "release": {
      if (world.handles.length === 0) return outcomeOf(() => api.releaseRarebitJob({}))
      return outcomeOf(() => api.releaseRarebitJob(world.handles[op.handle % world.handles.length]))
    }
    case "session":
      world.branch = op.branch
      await writeSession(roots.sessionFile, "s", branches[op.branch])
      return { ok: true, value: undefined }
    case "claim": {
      const claimPath = join(roots.rarebitRoot, "jobs-v4", `${jobId(op.job)}.json`)
      await mkdir(dirname(claimPath), { recursive: true, mode: 0o700 })
      // An active claim starts where the sidecar ends now, as a live worker's would: an expired
      // claim with an older receipt of its job is the open crash-recovery difference (see
      // `OpenDifferences`), which ours resolves by completing the settlement.
      const claim = JSON.parse(op.content)
      const active = typeof claim === "object" && claim !== null && claim.state === "active"
      const sidecar = world.api.rarebitMaterializationPath(roots.sessionFile, roots.location)
      const sidecarOffset = active ? (await stat(sidecar).catch(() => ({ size: 0 }))).size : 0
      await writeFile(claimPath, `${active ? JSON.stringify({ ...claim, sidecarOffset }) : op.content}\n`, {
        mode: 0o600
      })
      return { ok: true, value: undefined }
    }
    case "copyClaim": {
      // Within one root, so a settled claim's pointer now names another job's receipt. Only
      // settled claims are copied: an active one would carry the wrong `sidecarOffset` (ours)
      // into the open crash-recovery difference.
      const claimOf = (job: number) => join(roots.rarebitRoot, "jobs-v4", `${jobId(job)}.json`)
      return outcomeOf(async () => {
        const text = await readFile(claimOf(op.from), "utf8")
        if (JSON.parse(text)?.state === "settled") await copyFile(claimOf(op.from), claimOf(op.to))
      })
    }
  }
}

const makeWorld = async (api: StoreApi): Promise<World> => {
  const roots = await makeRoots(`rarebit-write-diff-${api.name}-`)
  await writeSession(roots.sessionFile, "s", branches[0])
  return { api, roots, handles: [], branch: 0 }
}

/**
 * The reference's outcome, with its ENOENT for a settled claim whose sidecar
 * is missing read as ours (a deliberate difference).
 */
const asOurs = (theirs: Outcome, mine: Outcome): Outcome =>
  !theirs.ok && theirs.code === "ENOENT" && / lstat '.*materializations-v4\//.test(theirs.message) && !mine.ok &&
    mine.message === "Rarebit settled job receipt pointer is invalid"
    ? mine
    : theirs

/** Runs `ops` in both worlds, comparing results and files after every step. */
const runBoth = async (ops: ReadonlyArray<Op>): Promise<void> => {
  const mine = await makeWorld(ours)
  const theirs = await makeWorld(reference)
  try {
    for (const [index, op] of ops.entries()) {
      const label = `step ${index} ${JSON.stringify(op)}`
      const a = await apply(mine, op)
      const b = await apply(theirs, op)
      const [resultA, resultB] = [comparable(a, mine.roots), comparable(asOurs(b, a), theirs.roots)]
      assert.deepStrictEqual(resultA, resultB, `result of ${label}`)
      assert.strictEqual(JSON.stringify(resultA), JSON.stringify(resultB), `key order of the result of ${label}`)
      assert.deepStrictEqual(await snapshot(mine.roots), await snapshot(theirs.roots), `files after ${label}`)
      assert.strictEqual(mine.branch, theirs.branch)
    }
    const readA = await outcomeOf(() =>
      ours.readRarebitCurrent({ sessionFile: mine.roots.sessionFile, ...mine.roots.location })
    )
    const readB = await outcomeOf(() =>
      reference.readRarebitCurrent({ sessionFile: theirs.roots.sessionFile, ...theirs.roots.location })
    )
    assert.deepStrictEqual(comparable(readA, mine.roots), comparable(readB, theirs.roots), "current read at the end")
  } finally {
    await Promise.all([mine.roots.cleanup(), theirs.roots.cleanup()])
  }
}

let cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  await Promise.all(cleanups.map((cleanup) => cleanup()))
  cleanups = []
})

describe("WriteDifferential", { concurrent: false }, () => {
  it("settle, duplicate reserve, fenced settle and release leave the same files", async () => {
    await runBoth([
      { kind: "reserve", job: 1, now: 0, leaseMs: 600_000, native: false, hook: "none" },
      { kind: "reserve", job: 1, now: 5, leaseMs: 600_000, native: false, hook: "none" },
      { kind: "settle", handle: 0, receipt: "summaryCurrent" },
      { kind: "reserve", job: 1, now: 6, leaseMs: 600_000, native: true, hook: "none" },
      { kind: "settle", handle: 2, receipt: "summaryCurrent" },
      { kind: "reserve", job: 2, now: 0, leaseMs: 1, native: false, hook: "none" },
      { kind: "reserve", job: 2, now: 10, leaseMs: 1, native: false, hook: "none" },
      { kind: "settle", handle: 3, receipt: "title" },
      { kind: "release", handle: 3 },
      { kind: "settle", handle: 4, receipt: "title" },
      { kind: "reserve", job: 3, now: 0, leaseMs: 5, native: false, hook: "changeSession" },
      { kind: "settle", handle: 6, receipt: "summaryCurrent" },
      { kind: "release", handle: 6 },
      { kind: "reserve", job: 3, now: 1, leaseMs: 5, native: false, hook: "throw" },
      { kind: "settle", handle: 7, receipt: "summaryCurrent" },
      { kind: "settleUnacquired", variant: "notAcquired" }
    ])
  })

  it("agrees on generated sequences of reserves, settles and releases", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 14 }), (ops) => runBoth(ops)),
      { numRuns: fuzzRuns(30) }
    )
  }, 60_000 + fuzzRuns(30) * 500)
})

describe("DeliberateDifferences", { concurrent: false }, () => {
  const fresh = async (api: StoreApi) => {
    const roots = await makeRoots(`rarebit-write-diff-${api.name}-`)
    cleanups.push(roots.cleanup)
    return roots
  }

  /** Settles `reservation` and returns the keys of the commit lock as it stood while the settle held it. */
  const lockKeysDuringSettle = async (api: StoreApi, reservation: { readonly materializationPath: string }) => {
    let lockKeys: Array<string> | undefined
    await api.settleRarebitJob(
      {
        ...reservation,
        hooks: {
          afterLeaseValidated: async () => {
            lockKeys = Object.keys(JSON.parse(await readFile(`${reservation.materializationPath}.commit-lock`, "utf8")))
          }
        }
      },
      summaryReceipt(branches[0], "s")
    )
    return lockKeys
  }

  it("an 8 KiB+ head: both throw the same RangeError; only the reference leaves the receipt behind", async () => {
    const results: Array<{ outcome: unknown; sidecar: Buffer | null; claims: Array<string> }> = []
    for (const api of [ours, reference]) {
      const roots = await fresh(api)
      const sessionId = "s".repeat(9 * 1024)
      await writeSession(roots.sessionFile, sessionId, branches[0])
      const reservation = await api.reserveRarebitJob({
        jobId: jobId(1),
        sessionFile: roots.sessionFile,
        ...roots.location
      })
      const outcome = await outcomeOf(() => api.settleRarebitJob(reservation, summaryReceipt(branches[0], sessionId)))
      const sidecar = await readFile(api.rarebitMaterializationPath(roots.sessionFile, roots.location)).catch(() =>
        null
      )
      results.push({ outcome, sidecar, claims: await readdir(join(roots.rarebitRoot, "jobs-v4")) })
    }
    const [mine, theirs] = results
    assert.deepStrictEqual(mine.outcome, theirs.outcome)
    assert.deepStrictEqual(mine.outcome, {
      ok: false,
      errorClass: "RangeError",
      message: "Rarebit head exceeds protocol byte limit"
    })
    // Both delete the claim so the job can be retried.
    assert.deepStrictEqual(mine.claims, [])
    assert.deepStrictEqual(theirs.claims, [])
    // Ours writes nothing; the reference appended the receipt before checking the head.
    assert.isTrue(mine.sidecar === null || mine.sidecar.length === 0)
    assert.isAbove(theirs.sidecar?.length ?? 0, 9 * 1024)
  })

  it("a settled claim whose sidecar is gone: ours says the pointer is invalid, the reference leaks ENOENT", async () => {
    const outcomes: Array<Outcome> = []
    for (const api of [ours, reference]) {
      const roots = await fresh(api)
      await writeSession(roots.sessionFile, "s", branches[0])
      const input = { jobId: jobId(1), sessionFile: roots.sessionFile, ...roots.location }
      await api.settleRarebitJob(await api.reserveRarebitJob(input), summaryReceipt(branches[0], "s"))
      await rm(api.rarebitMaterializationPath(roots.sessionFile, roots.location))
      outcomes.push(await outcomeOf(() => api.reserveRarebitJob(input)))
    }
    const [mine, theirs] = outcomes
    assert.deepStrictEqual(mine, {
      ok: false,
      errorClass: "Error",
      message: "Rarebit settled job receipt pointer is invalid"
    })
    assert.isFalse(theirs.ok)
    assert.strictEqual((theirs as { code?: unknown }).code, "ENOENT")
  })

  it("release of a claim the lease does not own: ours returns without the lock, the reference takes it first", async () => {
    const outcomes: Array<Outcome> = []
    for (const api of [ours, reference]) {
      const roots = await fresh(api)
      const claimPath = join(roots.rarebitRoot, "jobs-v4", `${jobId(1)}.json`)
      const materializationPath = join(roots.rarebitRoot, "materializations-v4", "gone", "trace.jsonl")
      outcomes.push(
        comparable(await outcomeOf(() => api.releaseRarebitJob({ claimPath, materializationPath })), roots) as Outcome
      )
    }
    const [mine, theirs] = outcomes
    // Ours checks ownership first (a claim not owned now can never be owned
    // by that lease again), so there is nothing to lock and nothing fails.
    assert.isTrue(mine!.ok)
    assert.isFalse(theirs!.ok)
    assert.strictEqual(
      (theirs as Extract<Outcome, { ok: false }>).message,
      "ENOENT: no such file or directory, open '<root>/rarebit/materializations-v4/gone/trace.jsonl.commit-lock'"
    )
  })

  it("claims and locks: ours add `sidecarOffset` / `owner`, otherwise the reference's keys in its order", async () => {
    const roots = await fresh(ours)
    await writeSession(roots.sessionFile, "s", branches[0])
    const reservation = await ours.reserveRarebitJob({
      jobId: jobId(1),
      sessionFile: roots.sessionFile,
      ...roots.location,
      now: 0
    })
    const claimText = await readFile(reservation.claimPath, "utf8")
    assert.deepStrictEqual(Object.keys(JSON.parse(claimText)), [
      "jobId",
      "state",
      "leaseToken",
      "claimedAt",
      "leaseMs",
      "sidecarOffset"
    ])
    assert.deepStrictEqual(await lockKeysDuringSettle(ours, reservation), ["token", "claimedAt", "owner"])
    assert.deepStrictEqual(Object.keys(JSON.parse(await readFile(reservation.claimPath, "utf8"))), [
      "jobId",
      "state",
      "leaseToken",
      "receiptRef"
    ])

    const theirRoots = await fresh(reference)
    await writeSession(theirRoots.sessionFile, "s", branches[0])
    const theirs = await reference.reserveRarebitJob({
      jobId: jobId(1),
      sessionFile: theirRoots.sessionFile,
      ...theirRoots.location,
      now: 0
    })
    assert.deepStrictEqual(await lockKeysDuringSettle(reference, theirs), ["token", "claimedAt"])
  })
})
