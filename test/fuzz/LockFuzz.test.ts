/**
 * Commit lock fuzzing: a sidecar's lock file holds anything a crash, the
 * reference (which creates its lock empty, then writes it) or a hostile writer
 * could leave, decoder-sensitive bytes (a BOM, overlong forms, NUL, CR, ...)
 * included, sometimes with a break file beside it, and a worker settles.
 *
 * The lock may be broken only when it is a JSON object with a string token
 * and well-formed owner evidence, written in the worker's own host, boot,
 * PID namespace and time namespace, that proves its owner dead there (or is
 * the worker's own, leaked), and no other breaker got there first; then the
 * settle succeeds and the lock is gone.
 * Otherwise the settle fails with `LockHeld` and the lock file is left
 * byte for byte. Never a defect, never another error. Lock text is decoded
 * as the reference's `readFile(path, "utf8")` decodes it, so a lock that
 * starts with a BOM is not JSON: it proves nothing and is never broken.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Path } from "effect"
import { TestClock } from "effect/testing"
import fc from "fast-check"
import {
  acquire,
  asWorker,
  currentSummary,
  JOB1,
  LOCK,
  makeWorld,
  storeOn,
  T0,
  WORKER_PID_NAMESPACE
} from "../reliability/StoreWorld.js"
import { editLine, type SensitiveBytes, sensitiveBytes, type Spot, spot } from "../support/DecoderBytes.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import { report } from "../support/TestReport.js"

const encoder = new TextEncoder()

const DEAD_PID = 10
const WORKER_PID = 100
/** Another PID namespace: its pid 10 may well be alive. */
const OTHER_NAMESPACE = "pid:[4026532999]"

const owner = fc.record({
  pid: fc.oneof(
    fc.constant(DEAD_PID),
    fc.constant(WORKER_PID),
    fc.integer({ min: -3, max: 200 }),
    fc.string({ maxLength: 4 }),
    fc.double()
  ),
  hostname: fc.oneof(fc.constant("crash-host"), fc.constant("other-host"), fc.constant(""), fc.integer()),
  bootId: fc.oneof(fc.constant("boot-1"), fc.constant("boot-2"), fc.integer()),
  startTicks: fc.oneof(fc.constant(String(DEAD_PID)), fc.string({ maxLength: 3 }), fc.integer()),
  pidNamespace: fc.oneof(
    fc.constant(WORKER_PID_NAMESPACE),
    fc.constant(OTHER_NAMESPACE),
    fc.string({ maxLength: 3 }),
    fc.integer()
  ),
  timeNamespace: fc.oneof(fc.constant("time:[4026531834]"), fc.string({ maxLength: 3 }), fc.integer())
}, { requiredKeys: [] })

/** A dead owner's lock with some of its evidence perturbed: the cases that decide a break. */
const mostly = <A>(valid: A, ...invalid: ReadonlyArray<A>) =>
  fc.oneof({ weight: 6, arbitrary: fc.constant(valid) }, { weight: 1, arbitrary: fc.constantFrom(...invalid) })

const nearDeadLock = fc.record({
  pid: mostly<unknown>(DEAD_PID, WORKER_PID, WORKER_PID + 1, 0, -1, "10", 10.5),
  hostname: mostly<unknown>("crash-host", "other-host", "", undefined),
  bootId: mostly<unknown>("boot-1", "boot-2", undefined, 7),
  startTicks: mostly<unknown>("10", undefined, 10),
  pidNamespace: mostly<unknown>(WORKER_PID_NAMESPACE, OTHER_NAMESPACE, undefined, 4026531836, ""),
  // The worker's kernel has no time namespaces, so the valid value is none.
  timeNamespace: mostly<unknown>(undefined, "time:[4026531834]", 7),
  token: mostly<unknown>("b".repeat(48), "", "not hex", undefined, 5),
  ownerMissing: fc.integer({ min: 0, max: 9 }).map((n) => n === 0)
}).map(({ bootId, hostname, ownerMissing, pid, pidNamespace, startTicks, timeNamespace, token }) => ({
  text: encoder.encode(`${
    JSON.stringify({
      token,
      claimedAt: new Date(T0).toISOString(),
      ...(ownerMissing ? {} : { owner: { pid, hostname, bootId, startTicks, pidNamespace, timeNamespace } })
    })
  }\n`),
  description: "near a dead owner's"
}))

const plainLockContent: fc.Arbitrary<{ readonly text: Uint8Array; readonly description: string }> = fc.oneof(
  { weight: 4, arbitrary: nearDeadLock },
  fc.record({
    token: fc.oneof(fc.stringMatching(/^[a-f0-9]{48}$/), fc.string({ maxLength: 10 }), fc.integer(), fc.constant(null)),
    claimedAt: fc.oneof(fc.constant(new Date(T0).toISOString()), fc.string({ maxLength: 10 })),
    owner: fc.oneof(owner, fc.jsonValue({ maxDepth: 1 }))
  }, { requiredKeys: [] }).map((lock) => ({
    text: encoder.encode(`${JSON.stringify(lock)}\n`),
    description: "lock-shaped"
  })),
  fc.nat().map((cut) => {
    const whole = encoder.encode(
      `${
        JSON.stringify({
          token: "a".repeat(48),
          claimedAt: new Date(T0).toISOString(),
          owner: {
            pid: DEAD_PID,
            hostname: "crash-host",
            bootId: "boot-1",
            startTicks: "10",
            pidNamespace: WORKER_PID_NAMESPACE
          }
        })
      }\n`
    )
    return { text: whole.subarray(0, cut % (whole.length + 1)), description: "torn" }
  }),
  fc.uint8Array({ maxLength: 120 }).map((text) => ({ text, description: "random bytes" })),
  fc.jsonValue({ maxDepth: 2 }).map((value) => ({
    text: encoder.encode(JSON.stringify(value)),
    description: "any JSON"
  }))
)

const withSensitiveBytes = (
  lock: { readonly text: Uint8Array; readonly description: string },
  [{ bytes, name }, where]: readonly [SensitiveBytes, Spot]
) => ({ text: editLine(lock.text, where, bytes), description: `${lock.description}, ${name} at ${where.kind}` })

/**
 * A lock as above, or with decoder-sensitive bytes written into it; most
 * often a dead owner's lock behind them, the one a decoder that dropped a
 * BOM would break.
 */
const lockContent = fc.oneof(
  { weight: 4, arbitrary: plainLockContent },
  {
    weight: 2,
    arbitrary: fc.tuple(plainLockContent, fc.tuple(sensitiveBytes, spot)).map(([lock, s]) =>
      withSensitiveBytes(lock, s)
    )
  },
  {
    weight: 1,
    arbitrary: fc.tuple(nearDeadLock, sensitiveBytes).map(([lock, bytes]) =>
      withSensitiveBytes(lock, [bytes, { kind: "start" }])
    )
  }
)

/** Lock text as the reference decodes it (`readFile(path, "utf8")`): a BOM is kept. */
const nodeText = (bytes: Uint8Array): string => Buffer.from(bytes).toString("utf8")

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * The dead token, if worker 100 may break this lock: worked out from the lock
 * format here rather than with the store's `ownerEvidenceOf`, so a parser
 * that accepts evidence it should not (or rejects good evidence) is caught.
 */
const breakable = (text: Uint8Array): string | undefined => {
  let parsed: unknown
  try {
    parsed = JSON.parse(nodeText(text))
  } catch {
    return undefined
  }
  if (!isObject(parsed) || typeof parsed.token !== "string" || !isObject(parsed.owner)) return undefined
  const { bootId, hostname, pid, pidNamespace, startTicks, timeNamespace } = parsed.owner
  // Evidence must name one real process: a pid the kernel could hand out
  // (so never "10", 10.5, 0 or -1, which would still compare below 100) on a
  // named host, with every other field it has a string. Anything else proves
  // nothing, whatever the other fields say.
  if (typeof pid !== "number" || !Number.isSafeInteger(pid) || pid <= 0) return undefined
  if (typeof hostname !== "string" || hostname === "") return undefined
  for (const field of ["bootId", "startTicks", "pidNamespace", "timeNamespace"]) {
    if (field in parsed.owner && typeof parsed.owner[field] !== "string") return undefined
  }
  // Only a pid counted in the worker's own context names a process it can look at:
  // `workerProbe(100)` runs on crash-host, boot-1, in WORKER_PID_NAMESPACE, without time namespaces.
  if (hostname !== "crash-host" || bootId !== "boot-1" || pidNamespace !== WORKER_PID_NAMESPACE) return undefined
  if (timeNamespace !== undefined) return undefined
  // Every earlier worker has crashed: its pid is gone.
  if (pid < WORKER_PID) return parsed.token
  // The worker's own pid: with its own start time a lock it leaked, with another a reused pid.
  // Without a start time it is neither provably.
  if (pid === WORKER_PID && startTicks !== undefined) return parsed.token
  return undefined
}

const RUNS = fuzzRuns(200)

/** One case: a worker meets `content` as the lock of the sidecar it settles into. */
const lockCase = (content: { readonly text: Uint8Array; readonly description: string }, breakFileFirst: boolean) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(T0)
    const world = makeWorld()
    const store = yield* storeOn(world)
    const reservation = yield* acquire(store, JOB1).pipe(asWorker(WORKER_PID, "reserve"))
    yield* world.writeFile(LOCK, content.text, { flag: "wx", mode: 0o600 })
    const deadToken = breakable(content.text)
    const token = tokenOf(content.text)
    // A break file of a crashed breaker stops everyone from breaking this lock.
    const blocked = breakFileFirst && token !== undefined && /^[a-f0-9]+$/.test(token)
    if (blocked) yield* world.writeFileString(`${LOCK}.break-${token}`, "{}\n")
    const exit = yield* Effect.exit(store.settle(reservation, currentSummary).pipe(asWorker(WORKER_PID, "settle")))
    const label = `${content.description} lock ${JSON.stringify(nodeText(content.text))}`
    if (Exit.isFailure(exit)) {
      assert.isFalse(exit.cause.reasons.some(Cause.isDieReason), `${label}: ${Cause.pretty(exit.cause)}`)
    }
    const left = world.snapshot(LOCK).find((entry) => entry.path === LOCK)
    if (deadToken !== undefined && !blocked) {
      assert.isTrue(Exit.isSuccess(exit), `${label}: a dead owner's lock is broken`)
      assert.isUndefined(left, `${label}: no lock left`)
      return "broken" as const
    }
    assert.isTrue(Exit.isFailure(exit), `${label}: the lock must hold`)
    const error = Exit.isFailure(exit) ? exit.cause.reasons.find(Cause.isFailReason)?.error : undefined
    assert.strictEqual((error as { _tag?: string } | undefined)?._tag, "LockHeld", label)
    assert.deepStrictEqual(left?.data, content.text, `${label}: the lock file is untouched`)
    return "held" as const
  })

const tokenOf = (text: Uint8Array): string | undefined => {
  try {
    const token = (JSON.parse(nodeText(text)) as { token?: unknown } | null)?.token
    return typeof token === "string" ? token : undefined
  } catch {
    return undefined
  }
}

describe("lock fuzz", () => {
  it.effect("a lock is broken exactly when its evidence proves its owner dead", () =>
    Effect.gen(function*() {
      const cases = fc.sample(fc.tuple(lockContent, fc.boolean()), { numRuns: RUNS, seed: 6 })
      const tally = { broken: 0, held: 0 }
      for (const [content, breakFileFirst] of cases) tally[yield* lockCase(content, breakFileFirst)]++
      report("lock-fuzz", `lock fuzz: ${cases.length} locks, ${JSON.stringify(tally)}`)
      assert.isAbove(tally.broken, 0)
      assert.isAbove(tally.held, 0)
    }).pipe(Effect.provide(Path.layer)), 60_000 + RUNS * 50)
})
