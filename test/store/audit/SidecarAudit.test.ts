/**
 * The full-scan audit, on the in-memory file system and on the real disk
 * (the commit-lock repair it reports for is in `CommitLockRepair.test.ts`).
 *
 * Sidecars are assembled line by line from valid receipts (the demo's
 * builders, checked by the v4 validators), heads made by `makeHead`, and
 * planted damage, so every expected finding's offset is known exactly. A
 * property test checks the scan against a small model of the protocol over
 * random sequences of such lines.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem, Layer, Path, PlatformError, Schema } from "effect"
import { TestClock } from "effect/testing"
import { sampleSession, summaryReceipt, titleReceipt } from "../../../src/cli/DemoSession.js"
import {
  type NonBlockingOpenCapable,
  nonBlockingOpenOf,
  NonBlockingOpenTypeId
} from "../../../src/io/NonBlockingOpen.js"
import { makeHead } from "../../../src/protocol/Head.js"
import { concatBytes } from "../../../src/protocol/internal/Bytes.js"
import { encodeClaimLine, makeSettledClaim } from "../../../src/protocol/JobClaim.js"
import { MAX_HISTORY_BYTES } from "../../../src/protocol/Limits.js"
import { type AuditFinding, auditStore } from "../../../src/store/audit/SidecarAudit.js"
import { inspectCommitLock, removeCommitLock } from "../../../src/store/lock/CommitLockRepair.js"
import { LockOwner, makeLockOwnerProbe } from "../../../src/store/lock/LockOwner.js"
import { readSidecarCurrent } from "../../../src/store/read/SidecarReader.js"
import { MemoryFileSystem } from "../../../src/testing/MemoryFileSystem.js"
import { makeCountingFileSystem } from "../../support/CountingFileSystem.js"
import { fileSystemSuite, memoryWorld } from "../../support/FileSystemSuite.js"
import { fuzzRuns } from "../../support/FuzzRuns.js"

const encoder = new TextEncoder()
const session = sampleSession("audit-session")
const hex = (n: number) => n.toString(16).padStart(64, "0")
const OBSERVED_AT = "2026-01-01T00:00:00.000Z"

/** Builds sidecar bytes line by line, remembering where each line starts. */
const sidecarBuilder = () => {
  const parts: Array<Uint8Array> = []
  let size = 0
  let lastHead: Uint8Array | undefined
  const push = (bytes: Uint8Array) => {
    const offset = size
    parts.push(bytes)
    size += bytes.length
    return offset
  }
  const line = (text: string) => push(encoder.encode(`${text}\n`))
  return {
    get size() {
      return size
    },
    line,
    raw: (text: string) => push(encoder.encode(text)),
    /** A summary receipt and the head that makes it current; returns the head's offset. */
    commit: (job: number) => {
      const record = summaryReceipt(session, { summary: `summary ${job}`, observedAt: OBSERVED_AT, jobId: hex(job) })
      const receipt = encoder.encode(`${JSON.stringify(record)}\n`)
      const receiptOffset = push(receipt)
      lastHead = encoder.encode(`${JSON.stringify(makeHead(session.id, receiptOffset, receipt))}\n`)
      return push(lastHead)
    },
    /** A head line that becomes the one titles repeat, whether or not it verifies. */
    head: (head: unknown) => {
      lastHead = encoder.encode(`${JSON.stringify(head)}\n`)
      return push(lastHead)
    },
    /** A title receipt followed by the current head repeated, as settle writes it. */
    title: (job: number) => {
      const offset = line(
        JSON.stringify(titleReceipt(session, { title: `title ${job}`, observedAt: OBSERVED_AT, jobId: hex(job) }))
      )
      const headOffset = lastHead === undefined ? undefined : push(lastHead)
      return { offset, headOffset }
    },
    bytes: () => concatBytes(parts, size)
  }
}

const writeSidecar = (root: string, bytes: Uint8Array) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const sidecar = path.join(root, "materializations-v4", "project", "session.jsonl")
    yield* fs.makeDirectory(path.dirname(sidecar), { recursive: true })
    yield* fs.writeFile(sidecar, bytes)
    return sidecar
  })

const kindsAndOffsets = (findings: ReadonlyArray<{ readonly kind: string; readonly offset: number | null }>) =>
  findings.map((item) => `${item.kind}@${item.offset}`)

/**
 * A store of `sidecars` sidecars (in two directories) of `commits` commits
 * each, and the settled claim of every receipt, all valid.
 */
const writeSettledStore = (root: string, sidecars: number, commits: number) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const jobs = path.join(root, "jobs-v4")
    yield* fs.makeDirectory(jobs, { recursive: true })
    const written: Array<{ readonly path: string; readonly size: number }> = []
    const claims: Array<string> = []
    let job = 0
    for (let index = 0; index < sidecars; index++) {
      const builder = sidecarBuilder()
      for (let commit = 0; commit < commits; commit++) {
        const receiptOffset = builder.size
        builder.commit(++job)
        const receipt = builder.bytes().subarray(receiptOffset)
        const receiptLine = receipt.subarray(0, receipt.indexOf(10) + 1)
        const claim = path.join(jobs, `${hex(job)}.json`)
        yield* fs.writeFileString(
          claim,
          encodeClaimLine(makeSettledClaim(hex(job), "0".repeat(32), makeHead(session.id, receiptOffset, receiptLine)))
        )
        claims.push(claim)
      }
      const sidecar = path.join(root, "materializations-v4", `project-${index % 2}`, `session-${index}.jsonl`)
      yield* fs.makeDirectory(path.dirname(sidecar), { recursive: true })
      yield* fs.writeFile(sidecar, builder.bytes())
      written.push({ path: sidecar, size: builder.size })
    }
    return { sidecars: written, claims }
  })

fileSystemSuite("SidecarAudit", (it) => {
  it.effect("a sidecar of commits and titles is clean, and every head is counted", ({ root }) =>
    Effect.gen(function*() {
      const builder = sidecarBuilder()
      builder.title(1)
      builder.commit(2)
      builder.title(3)
      builder.commit(4)
      const sidecar = yield* writeSidecar(root, builder.bytes())
      const report = yield* auditStore({ rarebitRoot: root })
      assert.isTrue(report.ok)
      assert.deepStrictEqual(report.findings, [])
      assert.deepStrictEqual(report.sidecars.map((item) => [item.path, item.receipts, item.heads, item.bytes]), [
        [sidecar, 4, 3, builder.size]
      ])
      assert.deepStrictEqual(report.sidecars[0].current, { availability: "available", reason: null })
    }))

  it.effect("a clean store of settled jobs: every sidecar and claim is read once, and every pointer verifies", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const { claims, sidecars } = yield* writeSettledStore(root, 6, 3)
      const counting = makeCountingFileSystem(fs)
      const report = yield* auditStore({ rarebitRoot: root }).pipe(
        Effect.provideService(FileSystem.FileSystem, counting.fs)
      )
      assert.isTrue(report.ok)
      assert.deepStrictEqual(report.findings, [])
      assert.deepStrictEqual(report.claims.map((claim) => claim.pointer), claims.map((): string | null => "verified"))
      for (const sidecar of sidecars) {
        assert.deepStrictEqual(counting.readsOf(sidecar.path), { reads: 1, bytes: sidecar.size }, sidecar.path)
      }
      for (const claim of claims) assert.strictEqual(counting.readsOf(claim).reads, 1, claim)
    }))

  it.effect("reads at most 16 files at once, and reports exactly what reading them one at a time reports", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const { claims, sidecars } = yield* writeSettledStore(root, 40, 2)
      // Damage among them: garbage and a torn tail, a claim whose pointer names other bytes, an orphan.
      for (const sidecar of sidecars.slice(5, 9)) {
        yield* fs.writeFile(sidecar.path, encoder.encode("{\"not\": 1}\n{\"ty"), { flag: "a" })
      }
      yield* fs.writeFileString(
        claims[3],
        encodeClaimLine(makeSettledClaim(hex(4), "0".repeat(32), makeHead(session.id, 1, encoder.encode("x\n"))))
      )
      yield* fs.writeFileString(
        `${root}/jobs-v4/${hex(999)}.json`,
        encodeClaimLine(makeSettledClaim(hex(999), "0".repeat(32), makeHead(session.id, 0, encoder.encode("x\n"))))
      )
      const oneAtATime = makeCountingFileSystem(fs, { oneAtATime: true })
      const sequential = yield* auditStore({ rarebitRoot: root }).pipe(
        Effect.provideService(FileSystem.FileSystem, oneAtATime.fs)
      )
      assert.strictEqual(oneAtATime.mostOpen(), 1)
      const shuffled = makeCountingFileSystem(fs, { shuffle: true })
      const concurrent = yield* auditStore({ rarebitRoot: root }).pipe(
        Effect.provideService(FileSystem.FileSystem, shuffled.fs)
      )
      assert.isTrue(shuffled.mostOpen() > 1 && shuffled.mostOpen() <= 16, `${shuffled.mostOpen()} open at once`)
      assert.strictEqual(shuffled.openNow(), 0)
      assert.deepStrictEqual(concurrent, sequential)
      // Both runs above read every file through Effects; on the real disk a
      // plain run reads small files in one synchronous call each, and must
      // report the same.
      assert.deepStrictEqual(yield* auditStore({ rarebitRoot: root }), sequential)
      assert.deepStrictEqual(
        [...new Set(sequential.findings.map((item) => item.kind))].sort(),
        ["claim_orphan", "claim_pointer_invalid", "invalid_record", "torn_tail", "uncommitted_tail"]
      )
      assert.strictEqual(sequential.sidecars.length, 40)
    }))

  it.effect("a job with receipts in many sidecars: its candidates are in walk order, however the reads end", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      // Job 7 has a receipt in every sidecar; its claim's pointer names bytes none of them holds.
      for (let index = 0; index < 24; index++) {
        const builder = sidecarBuilder()
        for (let commit = 0; commit <= index % 3; commit++) builder.commit(100 * index + commit)
        builder.commit(7)
        const sidecar = path.join(root, "materializations-v4", `project-${index % 3}`, `session-${index}.jsonl`)
        yield* fs.makeDirectory(path.dirname(sidecar), { recursive: true })
        yield* fs.writeFile(sidecar, builder.bytes())
      }
      yield* fs.makeDirectory(path.join(root, "jobs-v4"), { recursive: true })
      yield* fs.writeFileString(
        path.join(root, "jobs-v4", `${hex(7)}.json`),
        encodeClaimLine(makeSettledClaim(hex(7), "0".repeat(32), makeHead(session.id, 1, encoder.encode("x\n"))))
      )
      const oneAtATime = makeCountingFileSystem(fs, { oneAtATime: true })
      const sequential = yield* auditStore({ rarebitRoot: root }).pipe(
        Effect.provideService(FileSystem.FileSystem, oneAtATime.fs)
      )
      const walkOrder = sequential.sidecars.map((item) => item.path)
      assert.strictEqual(walkOrder.length, 24)
      assert.deepStrictEqual(kindsAndOffsets(sequential.findings), ["claim_pointer_invalid@null"])
      assert.strictEqual(
        sequential.findings[0].detail,
        `receiptRef does not verify against ${walkOrder.join(", ")}`.slice(0, 299) + "…"
      )
      assert.strictEqual(sequential.claims[0].sidecar, walkOrder[0])
      for (let round = 0; round < 3; round++) {
        const shuffled = makeCountingFileSystem(fs, { shuffle: true })
        const concurrent = yield* auditStore({ rarebitRoot: root }).pipe(
          Effect.provideService(FileSystem.FileSystem, shuffled.fs)
        )
        assert.deepStrictEqual(concurrent, sequential)
      }
    }))

  it.effect("lines that straddle the 1 MiB read chunks are scanned like any other", ({ root }) =>
    Effect.gen(function*() {
      const builder = sidecarBuilder()
      let job = 0
      while (builder.size + 4096 < MAX_HISTORY_BYTES) builder.commit(++job)
      const garbage = builder.line(`not json ${"x".repeat(MAX_HISTORY_BYTES - builder.size + 300)}`)
      while (builder.size < 2 * MAX_HISTORY_BYTES + 500) builder.commit(++job)
      const tornAt = builder.raw("{\"type\":\"rarebit_")
      yield* writeSidecar(root, builder.bytes())
      const report = yield* auditStore({ rarebitRoot: root })
      assert.isTrue(garbage < MAX_HISTORY_BYTES && garbage + 300 < builder.size)
      assert.deepStrictEqual(kindsAndOffsets(report.findings), [`invalid_record@${garbage}`, `torn_tail@${tornAt}`])
      assert.strictEqual(report.sidecars[0].receipts, job)
      assert.strictEqual(report.sidecars[0].heads, job)
    }))

  it.effect("a line longer than any record is invalid, without holding it all in memory", ({ root }) =>
    Effect.gen(function*() {
      const builder = sidecarBuilder()
      builder.commit(1)
      const long = builder.line(`{"type":"rarebit_summary","x":"${"y".repeat(200_000)}"}`)
      builder.commit(2)
      yield* writeSidecar(root, builder.bytes())
      const report = yield* auditStore({ rarebitRoot: root })
      assert.deepStrictEqual(kindsAndOffsets(report.findings), [`invalid_record@${long}`])
      assert.match(report.findings[0].detail, /exceeds the 49152-byte protocol limit/)
    }))

  it.effect("a dead owner's lock from another PID namespace, or naming none, is reported alive and not removed unforced", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      // The store's own rule, on a host where pid 4242 is gone from our namespace.
      const ours = { pid: 1, hostname: "host-a", bootId: "boot-1", startTicks: "10", pidNamespace: "pid:[4026531836]" }
      const probe = makeLockOwnerProbe(ours, (pid) => pid === 1 ? "10" : "gone")
      const gone = { ...ours, pid: 4242, startTicks: "77" }
      const { pidNamespace: _, ...goneWithoutNamespace } = gone
      const cases: Array<[string, Record<string, unknown>]> = [
        ["another PID namespace", { ...gone, pidNamespace: "pid:[4026532182]" }],
        ["no PID namespace", goneWithoutNamespace]
      ]
      yield* TestClock.setTime(Date.parse("2026-01-01T00:01:00.000Z"))
      for (const [index, [label, owner]] of cases.entries()) {
        const rarebitRoot = `${root}/${index}`
        const directory = `${rarebitRoot}/materializations-v4/p`
        const lockPath = `${directory}/session.jsonl.commit-lock`
        const text = `${JSON.stringify({ token: "c".repeat(48), claimedAt: "2026-01-01T00:00:00.000Z", owner })}\n`
        yield* fs.makeDirectory(directory, { recursive: true })
        yield* fs.writeFileString(lockPath, text)
        const inspected = yield* inspectCommitLock(lockPath).pipe(Effect.provideService(LockOwner, probe))
        assert.strictEqual(inspected!.lock.liveness, "unknown", label)
        const report = yield* auditStore({ rarebitRoot, staleAfterMs: 10_000 }).pipe(
          Effect.provideService(LockOwner, probe)
        )
        assert.deepStrictEqual(report.locks.map((lock) => lock.liveness), ["unknown"], label)
        assert.match(report.findings.find((f) => f.kind === "commit_lock_leftover")!.detail, /may be alive/, label)
        assert.deepStrictEqual(
          yield* removeCommitLock(lockPath, inspected!.key).pipe(Effect.provideService(LockOwner, probe)),
          { _tag: "OwnerMayBeAlive", liveness: "unknown" },
          label
        )
        assert.strictEqual(yield* fs.readFileString(lockPath), text, `${label}: kept`)
        assert.deepStrictEqual(yield* fs.readDirectory(directory), ["session.jsonl.commit-lock"], label)
        assert.deepStrictEqual(
          yield* removeCommitLock(lockPath, inspected!.key, { force: true }).pipe(
            Effect.provideService(LockOwner, probe)
          ),
          { _tag: "Removed" },
          `${label}: forced`
        )
      }
      // The same dead owner in our own namespace is reported dead and removed unforced.
      const lockPath = `${root}/session.jsonl.commit-lock`
      yield* fs.writeFileString(
        lockPath,
        `${JSON.stringify({ token: "d".repeat(48), claimedAt: "2026-01-01T00:00:00.000Z", owner: gone })}\n`
      )
      const inspected = yield* inspectCommitLock(lockPath).pipe(Effect.provideService(LockOwner, probe))
      assert.strictEqual(inspected!.lock.liveness, "dead")
      assert.deepStrictEqual(
        yield* removeCommitLock(lockPath, inspected!.key).pipe(Effect.provideService(LockOwner, probe)),
        { _tag: "Removed" }
      )
      assert.isFalse(yield* fs.exists(lockPath))
    }))
})

describe("SidecarAudit on a file system that refuses reads", () => {
  it.effect("reports a sidecar it cannot open as unreadable, and goes on with the rest", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const good = sidecarBuilder()
      good.commit(1)
      yield* fs.makeDirectory("/store/materializations-v4/p", { recursive: true })
      yield* fs.writeFile("/store/materializations-v4/p/a.jsonl", good.bytes())
      yield* fs.writeFile("/store/materializations-v4/p/b.jsonl", good.bytes())
      const denied = (path: string) =>
        Effect.fail(PlatformError.systemError({
          _tag: "PermissionDenied",
          module: "FileSystem",
          method: "open",
          pathOrDescriptor: path,
          cause: Object.assign(new Error("EACCES"), { code: "EACCES" })
        }))
      const open = nonBlockingOpenOf(fs)!
      // Both ways of opening refuse it: `open`, and the non-blocking open the store uses.
      const refusing: FileSystem.FileSystem & NonBlockingOpenCapable = {
        ...fs,
        open: (path, options) => path.endsWith("/a.jsonl") ? denied(path) : fs.open(path, options),
        [NonBlockingOpenTypeId]: (path, options) => path.endsWith("/a.jsonl") ? denied(path) : open(path, options)
      }
      const report = yield* auditStore({ rarebitRoot: "/store" }).pipe(
        Effect.provideService(FileSystem.FileSystem, refusing)
      )
      assert.deepStrictEqual(report.findings.map((item) => [item.kind, item.path, item.detail]), [
        ["sidecar_unreadable", "/store/materializations-v4/p/a.jsonl", "cannot be read (PermissionDenied, EACCES)"]
      ])
      assert.deepStrictEqual(report.sidecars.map((item) => item.receipts), [0, 1])
    }).pipe(Effect.provide(memoryWorld.layer)))
})

// ---------------------------------------------------------------------------
// The scan against a model
// ---------------------------------------------------------------------------

const Segment = Schema.Literals(["commit", "title", "garbage", "badHead", "brokenHead", "blank"])

/** What the protocol says about a sidecar made of these segments. */
const plant = (segments: ReadonlyArray<typeof Segment.Type>, torn: boolean) => {
  const builder = sidecarBuilder()
  const expected: Array<string> = []
  let headSeen = false
  let headBroken = false
  let firstAfterHead: number | undefined
  let job = 0
  const afterHead = (offset: number) => {
    if (headSeen && firstAfterHead === undefined) firstAfterHead = offset
  }
  for (const segment of segments) {
    switch (segment) {
      case "commit":
        builder.commit(++job)
        headSeen = true
        headBroken = false
        firstAfterHead = undefined
        break
      case "title": {
        // settle repeats the current head after a title, if there is one,
        // and a repeated head that does not verify is checked again.
        const { headOffset, offset } = builder.title(++job)
        if (headOffset === undefined) afterHead(offset)
        else {
          firstAfterHead = undefined
          if (headBroken) expected.push(`head_range_invalid@${headOffset}`)
        }
        break
      }
      case "garbage": {
        const offset = builder.line("{\"not\": \"a receipt\"}")
        expected.push(`invalid_record@${offset}`)
        afterHead(offset)
        break
      }
      case "badHead":
        expected.push(`invalid_head@${builder.line("{\"type\":\"rarebit_head\",\"protocolVersion\":2}")}`)
        break
      case "brokenHead": {
        const head = makeHead(session.id, 0, encoder.encode("not the receipt\n"))
        expected.push(`head_range_invalid@${builder.head(head)}`)
        headSeen = true
        headBroken = true
        firstAfterHead = undefined
        break
      }
      case "blank":
        builder.line("")
        break
    }
  }
  if (torn) expected.push(`torn_tail@${builder.raw("{\"type\":\"rarebit_su")}`)
  if (firstAfterHead !== undefined) expected.push(`uncommitted_tail@${firstAfterHead}`)
  return { bytes: builder.bytes(), expected, receipts: job }
}

describe("SidecarAudit against a model of the protocol", () => {
  it.effect.prop(
    "finds exactly the planted damage, at its offsets",
    [Schema.Array(Segment), Schema.Boolean],
    ([segments, torn]) =>
      Effect.gen(function*() {
        const { bytes, expected, receipts } = plant(segments, torn)
        yield* writeSidecar("/store", bytes)
        const report = yield* auditStore({ rarebitRoot: "/store" })
        const order = (list: ReadonlyArray<string>) => [...list].sort()
        assert.deepStrictEqual(
          order(kindsAndOffsets(report.findings)),
          order(expected),
          `segments ${JSON.stringify(segments)}, torn ${torn}`
        )
        assert.strictEqual(report.sidecars[0].receipts, receipts)
        // A torn or uncommitted tail is what a crash leaves: a notice, unless strict.
        const crashTraces = (item: AuditFinding) => item.kind === "torn_tail" || item.kind === "uncommitted_tail"
        for (const item of report.findings) {
          assert.deepStrictEqual(
            [item.kind, item.severity, item.expectedAfterCrash],
            crashTraces(item) ? [item.kind, "notice", true] : [item.kind, "damage", false]
          )
        }
        assert.strictEqual(report.ok, report.findings.every(crashTraces))
        const strict = yield* auditStore({ rarebitRoot: "/store", strict: true })
        assert.deepStrictEqual(order(kindsAndOffsets(strict.findings)), order(expected))
        assert.isTrue(strict.findings.every((item) => item.severity === "damage"))
        assert.strictEqual(strict.ok, expected.length === 0)
      }).pipe(Effect.provide(Layer.merge(MemoryFileSystem.layer, Path.layer))),
    { arbitrary: { runs: fuzzRuns(1000) } }
  )

  it.effect.prop(
    "says of every sidecar what the bounded current reader says, past its 64 KiB window too",
    [Schema.Array(Segment), Schema.Boolean, Schema.Boolean],
    ([segments, torn, large]) =>
      Effect.gen(function*() {
        // About 130 KiB of commits first: the reader's window then starts inside the file.
        const { bytes } = plant(
          large ? [...Array.from({ length: 150 }, () => "commit" as const), ...segments] : segments,
          torn
        )
        const sidecar = yield* writeSidecar("/store", bytes)
        const report = yield* auditStore({ rarebitRoot: "/store" })
        const current = yield* readSidecarCurrent(yield* FileSystem.FileSystem, sidecar)
        assert.deepStrictEqual(
          report.sidecars[0].current,
          { availability: current.availability, reason: current.diagnostics.reason ?? null },
          `segments ${JSON.stringify(segments)}, torn ${torn}, large ${large}`
        )
      }).pipe(Effect.provide(Layer.merge(MemoryFileSystem.layer, Path.layer))),
    { arbitrary: { runs: fuzzRuns(300) } }
  )
})
