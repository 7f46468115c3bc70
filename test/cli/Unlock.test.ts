/**
 * `rarebit-store unlock`: shows a lock's evidence; refuses while its owner
 * may be alive; removes it with `--force` or when the owner is provably
 * gone; never removes a lock that was replaced since it was inspected.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { readFile, stat, utimes, writeFile } from "node:fs/promises"
import { makeDarwinOwnerProbe } from "../../src/platform/ProcessOwner.js"
import { LockOwner } from "../../src/store/lock/LockOwner.js"
import { entry, makeRoots, type Roots, Store, summaryReceipt, writeSession } from "../support/Reference.js"
import { cli, cliIn, deadOwnerEvidence, liveOwnerEvidence, rootFlags, settleWith, writeLock } from "./CliHarness.js"

let roots: Roots
let lockPath: string

const branch = [entry("u1", "user", "a question"), entry("a1", "assistant", "an answer")]

beforeAll(async () => {
  roots = await makeRoots("rarebit-cli-unlock-")
  await writeSession(roots.sessionFile, "unlock-session", branch)
  await settleWith("reference", roots, roots.sessionFile, 1, summaryReceipt(branch, "unlock-session"))
  lockPath = `${Store.rarebitMaterializationPath(roots.sessionFile, roots.location)}.commit-lock`
})

afterAll(async () => {
  await roots?.cleanup()
})

const exists = (path: string) => Effect.promise(() => stat(path).then(() => true, () => false))
const lockText = () => Effect.promise(() => readFile(lockPath, "utf8"))
const unlock = (...args: Array<string>) => cli(["unlock", "--session", roots.sessionFile, ...args, ...rootFlags(roots)])

describe("rarebit-store unlock", () => {
  it.live("has nothing to do without a lock", () =>
    Effect.gen(function*() {
      const run = yield* unlock()
      assert.strictEqual(run.code, 0, run.stderr)
      assert.match(run.stdout, /No commit lock at .*nothing to do/)
    }))
})

// Owner evidence of this machine's /proc; the Darwin probe's counterparts below run everywhere.
describe.runIf(process.platform === "linux")("rarebit-store unlock with Linux evidence", () => {
  it.live("refuses a live owner's lock (exit 5), showing its evidence, and removes it with --force", () =>
    Effect.gen(function*() {
      const owner = liveOwnerEvidence()
      yield* Effect.promise(() => writeLock(lockPath, "1".repeat(48), Date.now() - 60_000, owner))
      const before = yield* lockText()

      const refused = yield* unlock()
      assert.strictEqual(refused.code, 5)
      assert.match(refused.stdout, new RegExp(`pid ${owner.pid} on ${owner.hostname}`))
      assert.match(refused.stdout, /owner may be alive/)
      assert.match(refused.stderr, /refusing to remove the lock/)
      assert.match(refused.stderr, /hint: .*--force --token 111111111111/)
      assert.strictEqual(yield* lockText(), before)

      const asJson = yield* unlock("--json")
      assert.strictEqual(asJson.code, 5)
      const report = JSON.parse(asJson.stdout)
      assert.strictEqual(report.action, "refused")
      assert.strictEqual(report.lock.liveness, "unknown")
      assert.strictEqual(report.lock.owner.pid, owner.pid)
      assert.strictEqual(report.lock.tokenPrefix, "111111111111")

      const forced = yield* unlock("--force")
      assert.strictEqual(forced.code, 0, forced.stderr)
      assert.match(forced.stdout, /lock removed/)
      assert.isFalse(yield* exists(lockPath))
    }))

  it.live("removes a lock whose owner is provably gone without --force", () =>
    Effect.gen(function*() {
      const owner = yield* Effect.promise(() => deadOwnerEvidence())
      yield* Effect.promise(() => writeLock(lockPath, "2".repeat(48), Date.now(), owner))
      const run = yield* unlock("--json")
      assert.strictEqual(run.code, 0, run.stderr)
      const report = JSON.parse(run.stdout)
      assert.strictEqual(report.action, "removed")
      assert.strictEqual(report.lock.liveness, "dead")
      assert.isFalse(yield* exists(lockPath))
    }))

  it.live("refuses a gone pid's lock taken in another PID namespace (exit 5), naming it, and removes it with --force", () =>
    Effect.gen(function*() {
      // Gone here, but its namespace is another one: there it may be running.
      const owner = { ...(yield* Effect.promise(() => deadOwnerEvidence())), pidNamespace: "pid:[4026532999]" }
      yield* Effect.promise(() => writeLock(lockPath, "8".repeat(48), Date.now() - 3_600_000, owner))
      const before = yield* lockText()

      const refused = yield* unlock()
      assert.strictEqual(refused.code, 5)
      assert.match(refused.stdout, /PID namespace pid:\[4026532999\]/)
      assert.match(
        refused.stderr,
        /refusing to remove the lock: .*taken in another PID namespace \(pid:\[4026532999\]; this process is in pid:\[\d+\]\)/
      )
      assert.match(refused.stderr, /hint: .*--force --token 888888888888/)
      assert.strictEqual(yield* lockText(), before)

      const asJson = yield* unlock("--json")
      assert.strictEqual(asJson.code, 5)
      const report = JSON.parse(asJson.stdout)
      assert.strictEqual(report.action, "refused")
      assert.strictEqual(report.lock.liveness, "unknown")
      assert.strictEqual(report.lock.owner.pidNamespace, "pid:[4026532999]")
      assert.strictEqual(yield* lockText(), before)

      const forced = yield* unlock("--force")
      assert.strictEqual(forced.code, 0, forced.stderr)
      assert.isFalse(yield* exists(lockPath))
    }))

  it.live("refuses a gone pid's lock whose evidence names no PID namespace (an older version of this store)", () =>
    Effect.gen(function*() {
      const { pidNamespace: _, ...owner } = yield* Effect.promise(() => deadOwnerEvidence())
      yield* Effect.promise(() => writeLock(lockPath, "9".repeat(48), Date.now() - 3_600_000, owner))
      const refused = yield* unlock("--json")
      assert.strictEqual(refused.code, 5)
      assert.strictEqual(JSON.parse(refused.stdout).lock.liveness, "unknown")
      assert.match(refused.stderr, /does not name its PID namespace/)
      assert.isTrue(yield* exists(lockPath))
      const forced = yield* unlock("--force")
      assert.strictEqual(forced.code, 0, forced.stderr)
      assert.isFalse(yield* exists(lockPath))
    }))
})

describe("rarebit-store unlock with a Darwin probe", () => {
  const probe = makeDarwinOwnerProbe({
    pid: 501,
    hostname: () => "mac-a",
    bootSessionId: () => "5C3B9B1E-7A2D-4B8E-9F10-2A3B4C5D6E7F",
    processExists: (pid) => pid === 501 || pid === 502,
    startTimeText: (pid) => pid === 501 ? "Mon Dec  7 18:00:00 2026" : "Mon Dec  7 18:00:05 2026"
  })
  const unlockAsMac = (...args: Array<string>) =>
    cliIn(["unlock", "--session", roots.sessionFile, ...args, ...rootFlags(roots)]).pipe(
      Effect.provide(NodeServices.layer),
      Effect.provideService(LockOwner, probe)
    )

  it.live("removes a gone owner's lock, refuses a live one's and a Linux container's, naming why", () =>
    Effect.gen(function*() {
      const self = probe.current!
      yield* Effect.promise(() =>
        writeLock(lockPath, "a".repeat(48), Date.now() - 60_000, {
          ...self,
          pid: 502,
          startTicks: String(Date.UTC(2026, 11, 7, 18, 0, 5) / 1000)
        })
      )
      const alive = yield* unlockAsMac("--json")
      assert.strictEqual(alive.code, 5)
      assert.strictEqual(JSON.parse(alive.stdout).lock.liveness, "unknown")
      assert.match(alive.stderr, /pid 502 is a running process here/)
      assert.isTrue(yield* exists(lockPath))

      const linux = { pid: 999, hostname: "mac-a", bootId: self.bootId, startTicks: "1", pidNamespace: "pid:[1]" }
      yield* Effect.promise(() => writeLock(lockPath, "b".repeat(48), Date.now() - 60_000, linux))
      const container = yield* unlockAsMac()
      assert.strictEqual(container.code, 5)
      assert.match(container.stderr, /taken on linux and this process runs on darwin/)
      assert.isTrue(yield* exists(lockPath))

      const { bootId: _, ...withoutBoot } = { ...self, pid: 999 }
      yield* Effect.promise(() => writeLock(lockPath, "e".repeat(48), Date.now() - 60_000, withoutBoot))
      const unnamed = yield* unlockAsMac()
      assert.strictEqual(unnamed.code, 5)
      assert.match(unnamed.stderr, /does not name its boot \(sysctl could not read it\)/)
      assert.isTrue(yield* exists(lockPath))

      yield* Effect.promise(() => writeLock(lockPath, "c".repeat(48), Date.now() - 60_000, { ...self, pid: 999 }))
      const gone = yield* unlockAsMac("--json")
      assert.strictEqual(gone.code, 0, gone.stderr)
      const report = JSON.parse(gone.stdout)
      assert.deepStrictEqual([report.action, report.lock.liveness, report.lock.owner.platform], [
        "removed",
        "dead",
        "darwin"
      ])
      assert.isFalse(yield* exists(lockPath))
    }))
})

describe("rarebit-store unlock, whatever the platform", () => {
  it.live("refuses a reference lock without evidence, and removes it with --force", () =>
    Effect.gen(function*() {
      yield* Effect.promise(() => writeLock(lockPath, "3".repeat(48), Date.now() - 3_600_000))
      const refused = yield* unlock()
      assert.strictEqual(refused.code, 5)
      assert.match(refused.stdout, /no owner evidence/)
      assert.isTrue(yield* exists(lockPath))
      const forced = yield* unlock("--force")
      assert.strictEqual(forced.code, 0, forced.stderr)
      assert.isFalse(yield* exists(lockPath))
    }))

  it.live("never removes a lock that was replaced since it was inspected", () =>
    Effect.gen(function*() {
      yield* Effect.promise(() => writeLock(lockPath, "4".repeat(48), Date.now() - 3_600_000))
      const inspected = yield* unlock()
      assert.strictEqual(inspected.code, 5)
      assert.match(inspected.stdout, /444444444444…/)
      // Meanwhile the old holder went away and another writer took the lock.
      yield* Effect.promise(() => writeLock(lockPath, "5".repeat(48), Date.now()))
      const stale = yield* unlock("--force", "--token", "444444444444")
      assert.strictEqual(stale.code, 5)
      assert.match(stale.stderr, /replaced since you inspected it/)
      assert.include(yield* lockText(), "5".repeat(48))
    }))

  it.live("leaves the lock to a repair already in progress (its break file exists)", () =>
    Effect.gen(function*() {
      const token = "6".repeat(48)
      yield* Effect.promise(() => writeLock(lockPath, token, Date.now() - 3_600_000))
      const breakPath = `${lockPath}.break-${token}`
      yield* Effect.promise(() => writeFile(breakPath, "{}\n"))
      const run = yield* unlock("--force")
      assert.strictEqual(run.code, 5)
      assert.match(run.stdout, /Break file +.*break-6{48}/)
      assert.match(run.stderr, /another repair of this lock is in progress or crashed/)
      assert.isTrue(yield* exists(lockPath))
      assert.isTrue(yield* exists(breakPath))
    }))

  it.live("with --force clears a crashed breaker's stale break file and removes the lock", () =>
    Effect.gen(function*() {
      // A provably dead owner, so the plain run gets past the liveness check
      // and only the break file stands in its way.
      const owner = yield* Effect.promise(() => deadOwnerEvidence())
      const token = "7".repeat(48)
      yield* Effect.promise(() => writeLock(lockPath, token, Date.now() - 3_600_000, owner))
      const breakPath = `${lockPath}.break-${token}`
      yield* Effect.promise(() => writeFile(breakPath, `${JSON.stringify({ deadToken: token })}\n`))
      const anHourAgo = (Date.now() - 3_600_000) / 1000
      yield* Effect.promise(() => utimes(breakPath, anHourAgo, anHourAgo))

      const plain = yield* unlock()
      assert.strictEqual(plain.code, 5)
      assert.match(plain.stderr, /another repair of this lock is in progress or crashed/)
      assert.isTrue(yield* exists(lockPath))
      assert.isTrue(yield* exists(breakPath))

      const forced = yield* unlock("--force")
      assert.strictEqual(forced.code, 0, forced.stderr)
      assert.match(forced.stdout, /Break file +.*break-7{48}/)
      assert.match(forced.stdout, /lock removed/)
      assert.isFalse(yield* exists(lockPath))
      assert.isFalse(yield* exists(breakPath))
    }))
})
