/**
 * A file on disk is hostile: a FIFO, a socket, `/dev/zero`, `/dev/urandom`,
 * a symlink to a FIFO or an oversized file at any path the store opens —
 * commit lock, claim, break file, sidecar, Session — gives a typed result
 * within the protocol's normal bounds, never a hang and never an unbounded
 * read (issue 12, item 1).
 *
 * Before the store opened files through `io/RegularFile`, these hung on the
 * disk (a FIFO's blocking open waits for a writer forever) or read
 * `/dev/zero` until the process died; in the memory world the model dies
 * where Linux would hang ("would block forever", "unbounded read"). Each
 * test has a timeout, so a hang fails it instead of the whole run.
 */
import { assert } from "@effect/vitest"
import { Cause, Effect, Exit, FileSystem, Option, Scope, Stream } from "effect"
import { modifiedMs } from "../../src/protocol/internal/FileInfo.js"
import { MAX_CLAIM_BYTES, MAX_LOCK_FILE_BYTES } from "../../src/protocol/Limits.js"
import { auditStore } from "../../src/store/audit/SidecarAudit.js"
import { breakFilePath, createBreakFile } from "../../src/store/lock/CommitLock.js"
import { inspectCommitLock, removeCommitLock } from "../../src/store/lock/CommitLockRepair.js"
import { LockOwner, type LockOwnerProbe } from "../../src/store/lock/LockOwner.js"
import { writeDurableTemp } from "../../src/store/write/DurableFile.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { jobId, summaryReceipt } from "../support/Receipts.js"
import { makeSpecial, makeSymlinkToSpecial, type SpecialKind } from "../support/SpecialFiles.js"
import {
  acquired,
  claimOf,
  FAST_RETRY,
  type Kit,
  LEASE_MS,
  reserveAcquired,
  runDriven,
  setup,
  strayFiles
} from "./StoreKit.js"

/** Long enough for a slow shared machine, short enough that a hang fails here. */
const TIMEOUT_MS = 30_000

/** What can be planted at a path: the special files, a symlink to a FIFO elsewhere, an oversized regular file. */
type Hostile = SpecialKind | "fifo-link" | "oversized"

const SPECIAL: ReadonlyArray<Hostile> = ["fifo", "socket", "zero", "urandom", "fifo-link"]

const plant = (kit: Kit, path: string, hostile: Hostile, oversize = 1024 * 1024) =>
  Effect.gen(function*() {
    yield* kit.fs.makeDirectory(kit.path.dirname(path), { recursive: true, mode: 0o700 })
    if (hostile === "oversized") return yield* kit.fs.writeFileString(path, `${"x".repeat(oversize)}\n`)
    if (hostile === "fifo-link") {
      const outside = kit.path.join(kit.root, "outside")
      yield* kit.fs.makeDirectory(outside, { recursive: true })
      return yield* makeSymlinkToSpecial(path, kit.path.join(outside, `fifo-${kit.path.basename(path)}`), "fifo")
    }
    yield* makeSpecial(path, hostile)
  })

/** What `lstat` says of a path, to show that nothing replaced or followed it. */
const typeAt = (kit: Kit, path: string) =>
  Effect.map(Effect.option(kit.fs.lstat(path)), Option.map((info) => info.type))

const failureOf = (exit: Exit.Exit<unknown, unknown>): any =>
  Exit.isFailure(exit) ? (exit.cause.reasons.find(Cause.isFailReason) as any)?.error : undefined

const JOB = jobId(1)
const OTHER = jobId(2)

fileSystemSuite("Hostile files at the store's paths", (it) => {
  it.effect(
    "at the commit lock: settle, release and a takeover give LockHeld; the file is left alone",
    ({ root }) =>
      Effect.gen(function*() {
        for (const hostile of [...SPECIAL, "oversized"] as const) {
          const kit = yield* setup(`${root}/${hostile}`, { config: { lockRetry: FAST_RETRY } })
          const first = yield* reserveAcquired(kit, JOB)
          const second = yield* reserveAcquired(kit, OTHER)
          yield* plant(kit, kit.lockPath, hostile, MAX_LOCK_FILE_BYTES)
          const before = yield* typeAt(kit, kit.lockPath)
          const settled = yield* runDriven(kit.store.settle(second, summaryReceipt(kit.branch, "s")))
          assert.strictEqual(failureOf(settled.exit)?._tag, "LockHeld", `${hostile}: settle`)
          assert.strictEqual(settled.sleeps.length, FAST_RETRY.attempts - 1)
          const released = yield* runDriven(kit.store.release(first))
          assert.strictEqual(failureOf(released.exit)?._tag, "LockHeld", `${hostile}: release`)
          const takeover = yield* runDriven(
            kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile, now: 2 * LEASE_MS })
          )
          assert.strictEqual(failureOf(takeover.exit)?._tag, "LockHeld", `${hostile}: takeover`)
          assert.deepStrictEqual(yield* typeAt(kit, kit.lockPath), before, `${hostile}: never broken or removed`)
          assert.strictEqual((yield* claimOf(kit, OTHER)).state, "active")
          assert.isFalse(yield* kit.fs.exists(kit.sidecar))
          assert.deepStrictEqual(yield* strayFiles(kit), [])
        }
      }),
    TIMEOUT_MS
  )

  it.effect(
    "at the commit lock: the audit and the repair read it as unreadable; only a forced removal takes it",
    ({ root }) =>
      Effect.gen(function*() {
        for (const hostile of [...SPECIAL, "oversized"] as const) {
          const kit = yield* setup(`${root}/${hostile}`, { config: { lockRetry: FAST_RETRY } })
          yield* plant(kit, kit.lockPath, hostile, MAX_LOCK_FILE_BYTES)
          const inspected = yield* inspectCommitLock(kit.lockPath)
          assert.isDefined(inspected, hostile)
          const { key, lock } = inspected!
          assert.strictEqual(lock.torn, true)
          assert.strictEqual(lock.liveness, "no_evidence")
          assert.match(
            lock.unreadable ?? "",
            hostile === "oversized" ? /^larger than 4096 bytes$/ : /^a (FIFO|socket|symlink), not a regular file$/,
            hostile
          )
          const report = yield* auditStore({ rarebitRoot: kit.rarebitRoot })
          const findings = report.findings.filter((item) => item.path === kit.lockPath)
          assert.deepStrictEqual(findings.map((item) => [item.kind, item.severity]), [[
            "commit_lock_leftover",
            "damage"
          ]], hostile)
          // Nothing in it proves its owner dead, so only a forced repair takes it; that one
          // names exactly this file, and afterwards the sidecar is usable again.
          assert.deepStrictEqual(yield* removeCommitLock(kit.lockPath, key), {
            _tag: "OwnerMayBeAlive",
            liveness: "no_evidence"
          }, hostile)
          assert.isTrue(Option.isSome(yield* typeAt(kit, kit.lockPath)), `${hostile}: an unforced repair left it`)
          assert.deepStrictEqual(yield* removeCommitLock(kit.lockPath, key, { force: true }), { _tag: "Removed" })
          assert.isTrue(Option.isNone(yield* typeAt(kit, kit.lockPath)))
          const reservation = yield* reserveAcquired(kit, JOB)
          yield* kit.store.settle(reservation, summaryReceipt(kit.branch, "s"))
          assert.strictEqual((yield* claimOf(kit, JOB)).state, "settled", hostile)
        }
      }).pipe(Effect.provideService(LockOwner, { current: undefined, isProvablyDead: () => Effect.succeed(true) })),
    TIMEOUT_MS
  )

  it.effect(
    "a held lock replaced by a FIFO: the release leaves it, the next queued holder re-reads it and gives up",
    ({ root }) =>
      Effect.gen(function*() {
        const kit = yield* setup(root, { config: { lockRetry: FAST_RETRY } })
        const reservations = yield* Effect.forEach([JOB, OTHER], (job) => reserveAcquired(kit, job))
        let swapped = false
        const scope = yield* Effect.scope
        // The first holder's lock becomes a FIFO while it holds it: its release and the
        // hand-over re-read by the second fiber both read the lock path.
        const hook = Effect.suspend(() => {
          if (swapped) return Effect.void
          swapped = true
          return Effect.andThen(Effect.orDie(kit.fs.remove(kit.lockPath)), makeSpecial(kit.lockPath, "fifo")).pipe(
            Effect.provideService(FileSystem.FileSystem, kit.fs),
            Effect.provideService(Scope.Scope, scope)
          )
        })
        const outcomes = yield* runDriven(
          Effect.forEach(
            reservations,
            (reservation) =>
              Effect.exit(
                kit.store.settle(reservation, summaryReceipt(kit.branch, "s"), { hooks: { afterLeaseValidated: hook } })
              ),
            { concurrency: "unbounded" }
          )
        )
        assert.isTrue(swapped)
        assert.isTrue(Exit.isSuccess(outcomes.exit))
        const exits = Exit.isSuccess(outcomes.exit) ? outcomes.exit.value : []
        assert.deepStrictEqual(exits.map((exit) => Exit.isSuccess(exit) ? "settled" : failureOf(exit)?._tag).sort(), [
          "LockHeld",
          "settled"
        ])
        assert.deepStrictEqual(
          yield* typeAt(kit, kit.lockPath),
          Option.some("FIFO"),
          "a lock it cannot read is not removed"
        )
      }),
    TIMEOUT_MS
  )

  it.effect(
    "at a dead lock's break file: the breaker gives up with LockHeld and touches neither",
    ({ root }) =>
      Effect.gen(function*() {
        const here = { pid: 1, hostname: "here" }
        const everyoneDead: LockOwnerProbe = { current: here, isProvablyDead: () => Effect.succeed(true) }
        for (const hostile of SPECIAL) {
          const kit = yield* setup(`${root}/${hostile}`, { config: { lockRetry: FAST_RETRY } })
          const reservation = yield* reserveAcquired(kit, JOB)
          const dead = {
            token: "d".repeat(48),
            claimedAt: new Date(0).toISOString(),
            owner: { pid: 999, hostname: "here" }
          }
          yield* kit.fs.writeFileString(kit.lockPath, `${JSON.stringify(dead)}\n`, { mode: 0o600 })
          const breakPath = breakFilePath(kit.lockPath, dead.token)
          yield* plant(kit, breakPath, hostile)
          const before = yield* typeAt(kit, breakPath)
          const { exit } = yield* runDriven(
            kit.store.settle(reservation, summaryReceipt(kit.branch, "s")).pipe(
              Effect.provideService(LockOwner, everyoneDead)
            )
          )
          assert.strictEqual(failureOf(exit)?._tag, "LockHeld", hostile)
          assert.deepStrictEqual(yield* typeAt(kit, breakPath), before)
          assert.strictEqual(JSON.parse(yield* kit.fs.readFileString(kit.lockPath)).token, dead.token)
        }
      }),
    TIMEOUT_MS
  )

  it.effect(
    "at a claim: in flight until its lease has passed since its lstat time, then replaced; a settle is fenced",
    ({ root }) =>
      Effect.gen(function*() {
        for (const hostile of [...SPECIAL, "oversized"] as const) {
          const kit = yield* setup(`${root}/${hostile}`, { config: { lockRetry: FAST_RETRY } })
          const owner = yield* reserveAcquired(kit, JOB)
          yield* kit.fs.remove(kit.claimPath(JOB))
          yield* plant(kit, kit.claimPath(JOB), hostile, MAX_CLAIM_BYTES)
          const planted = yield* kit.fs.lstat(kit.claimPath(JOB))
          const plantedAt = modifiedMs(planted) ?? 0
          const fenced = yield* Effect.flip(kit.store.settle(owner, summaryReceipt(kit.branch, "s")))
          assert.strictEqual(fenced._tag, "LeaseFenced", `${hostile}: settle`)
          yield* kit.store.release(owner)
          const inFlight = yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile, now: plantedAt })
          assert.strictEqual(inFlight._tag, "InFlight", hostile)
          const report = yield* auditStore({ rarebitRoot: kit.rarebitRoot })
          const claim = report.claims.find((item) => item.jobId === JOB)
          assert.strictEqual(claim?.state, "unreadable", hostile)
          assert.deepStrictEqual(
            report.findings.filter((item) => item.jobId === JOB).map((item) => item.kind),
            ["claim_unreadable"]
          )
          const taken = acquired(
            yield* kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile, now: plantedAt + LEASE_MS + 1 })
          )
          assert.strictEqual(
            (yield* claimOf(kit, JOB)).leaseToken,
            taken.leaseToken,
            `${hostile}: replaced by a rename`
          )
          if (hostile === "fifo-link") {
            const outside = kit.path.join(kit.root, "outside", `fifo-${JOB}.json`)
            assert.deepStrictEqual(yield* typeAt(kit, outside), Option.some("FIFO"), "the link's target is untouched")
          }
          yield* kit.store.settle(taken, summaryReceipt(kit.branch, "s"))
          assert.strictEqual((yield* claimOf(kit, JOB)).state, "settled")
        }
      }),
    TIMEOUT_MS
  )

  it.effect(
    "a directory at a claim: reserve, settle and release fail with the EISDIR of reading it, and leave it",
    ({ root }) =>
      Effect.gen(function*() {
        const kit = yield* setup(root, { config: { lockRetry: FAST_RETRY } })
        const owner = yield* reserveAcquired(kit, JOB)
        yield* kit.fs.remove(kit.claimPath(JOB))
        yield* kit.fs.makeDirectory(kit.claimPath(JOB), { mode: 0o700 })
        // No rename can replace a directory, so it is not waited for as in flight: the
        // reference's read of it fails at once, with this error.
        const eisdir = (error: { readonly _tag: string }, label: string) => {
          assert.strictEqual(error._tag, "StoreIo", label)
          const cause = (error as any).cause?.reason?.cause
          assert.deepStrictEqual([cause?.code, cause?.message], [
            "EISDIR",
            "EISDIR: illegal operation on a directory, read"
          ], label)
        }
        eisdir(yield* Effect.flip(kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile })), "reserve")
        eisdir(yield* Effect.flip(kit.store.settle(owner, summaryReceipt(kit.branch, "s"))), "settle")
        eisdir(yield* Effect.flip(kit.store.release(owner)), "release")
        assert.deepStrictEqual(yield* typeAt(kit, kit.claimPath(JOB)), Option.some("Directory"))
        const report = yield* auditStore({ rarebitRoot: kit.rarebitRoot })
        assert.deepStrictEqual(
          report.findings.filter((item) => item.jobId === JOB).map((item) => item.kind),
          ["claim_unreadable"]
        )
        assert.deepStrictEqual(yield* strayFiles(kit), [])
        assert.isFalse(yield* kit.fs.exists(kit.lockPath))
      }),
    TIMEOUT_MS
  )

  it.effect(
    "at the sidecar: reads are unreadable, the history stream fails typed, a settle is NotRegularFile",
    ({ root }) =>
      Effect.gen(function*() {
        for (const hostile of SPECIAL) {
          const kit = yield* setup(`${root}/${hostile}`, { config: { lockRetry: FAST_RETRY } })
          const reservation = yield* reserveAcquired(kit, JOB)
          yield* plant(kit, kit.sidecar, hostile)
          const current = yield* kit.store.readCurrent({ sessionFile: kit.sessionFile })
          assert.deepStrictEqual([current.availability, current.diagnostics.reason], [
            "unreadable",
            "sidecar_unreadable"
          ], hostile)
          const page = yield* kit.store.readHistory({ sessionFile: kit.sessionFile })
          assert.deepStrictEqual([page.availability, page.records.length], ["unreadable", 0])
          const streamed = yield* Effect.flip(Stream.runCollect(kit.store.history({ sessionFile: kit.sessionFile })))
          assert.strictEqual(streamed._tag, "HistoryUnreadable")
          const settled = yield* Effect.flip(kit.store.settle(reservation, summaryReceipt(kit.branch, "s")))
          assert.strictEqual(settled._tag, "NotRegularFile", hostile)
          const other = yield* kit.store.reserve({ jobId: OTHER, sessionFile: kit.sessionFile })
          assert.strictEqual(other._tag, "Acquired")
          const report = yield* auditStore({ rarebitRoot: kit.rarebitRoot })
          assert.deepStrictEqual(
            report.findings.filter((item) => item.path === kit.sidecar).map((item) => item.kind),
            ["sidecar_not_regular"]
          )
          assert.isFalse(yield* kit.fs.exists(kit.lockPath))
        }
      }),
    TIMEOUT_MS
  )

  it.effect(
    "at the Session: the native observation is unreadable and a settle still completes",
    ({ root }) =>
      Effect.gen(function*() {
        for (const hostile of SPECIAL) {
          const kit = yield* setup(`${root}/${hostile}`, { writeSession: false })
          yield* plant(kit, kit.sessionFile, hostile)
          const current = yield* kit.store.readCurrent({ sessionFile: kit.sessionFile })
          assert.strictEqual(current.artifactState.nativeRef?.availability, "unreadable", hostile)
          const reservation = yield* reserveAcquired(kit, JOB)
          yield* kit.store.settle(reservation, summaryReceipt(kit.branch, "s"))
          assert.strictEqual((yield* claimOf(kit, JOB)).state, "settled")
        }
      }),
    TIMEOUT_MS
  )

  it.effect(
    "temp and break files are created exclusively: never through a symlink, a FIFO or an existing file",
    ({ root }) =>
      Effect.gen(function*() {
        const kit = yield* setup(root)
        const directory = kit.path.dirname(kit.sidecar)
        yield* kit.fs.makeDirectory(directory, { recursive: true })
        const outside = kit.path.join(root, "outside.txt")
        yield* kit.fs.writeFileString(outside, "keep")
        yield* kit.fs.chmod(outside, 0o644)
        for (const taken of ["symlink", "fifo", "file"] as const) {
          const plantAt = (path: string) =>
            taken === "symlink"
              ? kit.fs.symlink(outside, path)
              : taken === "fifo"
              ? makeSpecial(path, "fifo")
              : kit.fs.writeFileString(path, "someone else's")
          const temp = kit.path.join(directory, `trace.jsonl.commit-lock.${taken}.tmp`)
          yield* plantAt(temp)
          const error = yield* Effect.flip(writeDurableTemp(kit.fs, temp, "ours\n"))
          assert.strictEqual(error.reason._tag, "AlreadyExists", taken)
          assert.isTrue(
            Option.isSome(yield* typeAt(kit, temp)),
            `${taken}: a temp path it did not create is not removed`
          )
          const lockPath = kit.path.join(directory, `${taken}.commit-lock`)
          yield* plantAt(breakFilePath(lockPath, "dead"))
          assert.isFalse(yield* createBreakFile(kit.fs, lockPath, "dead"), taken)
          assert.isTrue(Option.isSome(yield* typeAt(kit, breakFilePath(lockPath, "dead"))))
        }
        assert.strictEqual(yield* kit.fs.readFileString(outside), "keep")
        assert.strictEqual((yield* kit.fs.stat(outside)).mode & 0o777, 0o644)
      }),
    TIMEOUT_MS
  )

  it.effect(
    "a Session replaced by a FIFO between its stat and its open is unreadable, not a hang",
    ({ root }) =>
      Effect.gen(function*() {
        const base = yield* FileSystem.FileSystem
        let armed = false
        let sessionFile = ""
        // Right after the cache's stat of the Session saw a regular file, a FIFO takes its place.
        const scope = yield* Effect.scope
        const swapping: FileSystem.FileSystem = {
          ...base,
          stat: (path) =>
            Effect.tap(base.stat(path), () =>
              armed && path === sessionFile
                ? Effect.andThen(
                  Effect.sync(() => void (armed = false)),
                  Effect.andThen(
                    Effect.orDie(base.remove(path)),
                    makeSpecial(path, "fifo").pipe(
                      Effect.provideService(FileSystem.FileSystem, base),
                      Effect.provideService(Scope.Scope, scope)
                    )
                  )
                )
                : Effect.void)
        }
        const kit = yield* setup(root, { fs: swapping })
        sessionFile = kit.sessionFile
        armed = true
        const current = yield* kit.store.readCurrent({ sessionFile: kit.sessionFile })
        assert.isFalse(armed, "the swap happened")
        assert.strictEqual(current.artifactState.nativeRef?.availability, "unreadable")
        assert.deepStrictEqual(yield* typeAt(kit, kit.sessionFile), Option.some("FIFO"))
      }),
    TIMEOUT_MS
  )
})
