/**
 * The bounded current reader: one 64 KiB window plus one verified receipt
 * range, fail-closed heads, every `reason`, and the artifact-state projection
 * (compared with the reference's) in every result.
 */
import { assert } from "@effect/vitest"
import { Effect, Result } from "effect"
import { sha256Hex } from "../../src/protocol/CanonicalJson.js"
import * as ArtifactState from "../../src/state/ArtifactState.js"
import type { CurrentRead } from "../../src/store/RarebitStore.js"
import { fileSystemSuite, rewriteInPlace } from "../support/FileSystemSuite.js"
import { canListOpenFiles, openPaths } from "../support/OpenFiles.js"
import {
  branchOf,
  jobId,
  type Json,
  nativeOf,
  referenceProjection,
  summaryReceipt,
  titleReceipt
} from "../support/Receipts.js"
import {
  appendRaw,
  appendReceiptWithHead,
  assertNoOpenHandles,
  bytesOf,
  headFor,
  headLine,
  type Kit,
  receiptLine,
  setup,
  sizeOf
} from "./StoreKit.js"

const TAIL = 64 * 1024

const read = (kit: Kit, options: Record<string, unknown> = {}) =>
  Effect.tap(
    kit.store.readCurrent({ sessionFile: kit.sessionFile, ...options }),
    () => assertNoOpenHandles(kit.fs, "after readCurrent")
  )

/** The reference's projection of what the read found, for the native the store should have used. */
const assertProjection = (
  kit: Kit,
  current: CurrentRead,
  options: { native?: Json; expectation?: string; deadlineExpired?: boolean } = {}
) =>
  assert.deepStrictEqual(
    current.artifactState,
    referenceProjection({
      native: options.native ?? nativeOf(kit.sessionId, kit.branch),
      materialization: { availability: current.availability, records: current.records },
      expectation: options.expectation,
      deadlineExpired: options.deadlineExpired
    })
  )

const assertUnreadableHead = (current: CurrentRead, head: Json | null, tornTail = false) => {
  assert.strictEqual(current.availability, "unreadable")
  assert.isNull(current.receipt)
  assert.deepStrictEqual(current.records, [])
  assert.deepStrictEqual(current.head, head)
  assert.deepStrictEqual(current.diagnostics, { tornTail, reason: "sidecar_head_invalid" })
}

/** A filler line of exactly `size` bytes including its newline; valid JSON, not a receipt. */
const filler = (size: number): string => `${JSON.stringify({ pad: "x".repeat(size - 11) })}\n`

fileSystemSuite("RarebitStore.readCurrent", (it) => {
  it.effect("a missing sidecar is missing, with the projection of the Session", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const current = yield* read(kit)
      assert.deepStrictEqual({ ...current, artifactState: null }, {
        availability: "missing",
        path: kit.sidecar,
        receipt: null,
        records: [],
        head: null,
        diagnostics: { tornTail: false, reason: "sidecar_missing" },
        artifactState: null
      })
      assertProjection(kit, current)
      assert.strictEqual(current.artifactState.nativeRef?.sessionId, "s")
    }))

  it.effect("an empty sidecar is missing / sidecar_empty, without tailOffset", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* appendRaw(kit, "")
      const current = yield* read(kit)
      assert.strictEqual(current.availability, "missing")
      assert.deepStrictEqual(current.diagnostics, { tornTail: false, reason: "sidecar_empty" })
      assertProjection(kit, current)
    }))

  it.effect("receipts without a head are missing / sidecar_head_missing: the last line is never current", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* appendRaw(kit, receiptLine(summaryReceipt(kit.branch, "s", { jobId: jobId(1) })))
      const current = yield* read(kit)
      assert.strictEqual(current.availability, "missing")
      assert.isNull(current.receipt)
      assert.isNull(current.head)
      assert.deepStrictEqual(current.diagnostics, { tornTail: false, reason: "sidecar_head_missing" })
      assertProjection(kit, current)
    }))

  it.effect("a valid head makes its receipt current", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const receipt = summaryReceipt(kit.branch, "s", { jobId: jobId(1) })
      const { head } = yield* appendReceiptWithHead(kit, receipt)
      const current = yield* read(kit)
      assert.deepStrictEqual({ ...current, artifactState: null }, {
        availability: "available",
        path: kit.sidecar,
        receipt,
        records: [receipt],
        head,
        diagnostics: { tornTail: false, tailOffset: 0 },
        artifactState: null
      })
      assertProjection(kit, current)
      assert.strictEqual(current.artifactState.syncState, "assessment_current")
    }))

  it.effect("the last valid head wins, not the last receipt", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const first = summaryReceipt(kit.branch, "s", { jobId: jobId(1) })
      const second = summaryReceipt(kit.branch, "s", { jobId: jobId(2) })
      yield* appendReceiptWithHead(kit, first)
      const { head } = yield* appendReceiptWithHead(kit, second)
      // A later receipt with the earlier head repeated: the head, not the last line, decides.
      yield* appendRaw(kit, receiptLine(titleReceipt(kit.branch, "s", { jobId: jobId(3) })) + headLine(head))
      const current = yield* read(kit)
      assert.strictEqual(current.availability, "available")
      assert.deepStrictEqual(current.receipt, second)
      assert.deepStrictEqual(current.diagnostics, { tornTail: false, tailOffset: 0 })
    }))

  it.effect("a torn tail is reported but the committed head is still available", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const receipt = summaryReceipt(kit.branch, "s", { jobId: jobId(1) })
      yield* appendReceiptWithHead(kit, receipt)
      yield* appendRaw(kit, "{\"type\":\"rarebit_head\",\"protocolVer")
      const current = yield* read(kit)
      assert.strictEqual(current.availability, "available")
      assert.deepStrictEqual(current.receipt, receipt)
      assert.deepStrictEqual(current.diagnostics, { tornTail: true, tailOffset: 0 })
      assertProjection(kit, current)
    }))

  it.effect("complete records after the head are an uncommitted tail", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const receipt = summaryReceipt(kit.branch, "s", { jobId: jobId(1) })
      yield* appendReceiptWithHead(kit, receipt)
      yield* appendRaw(kit, receiptLine(summaryReceipt(kit.branch, "s", { jobId: jobId(2) })))
      const current = yield* read(kit)
      assert.strictEqual(current.availability, "available")
      assert.deepStrictEqual(current.receipt, receipt)
      assert.deepStrictEqual(current.diagnostics, {
        tornTail: false,
        tailOffset: 0,
        reason: "sidecar_uncommitted_tail"
      })
      // An unparsable line after the head that is not head-like counts too, and does not fail the read.
      yield* appendRaw(kit, "not json\n")
      const again = yield* read(kit)
      assert.strictEqual(again.availability, "available")
      assert.strictEqual(again.diagnostics.reason, "sidecar_uncommitted_tail")
    }))

  it.effect("an invalid head after a valid one fails closed instead of falling back", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const { head } = yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: jobId(1) }))
      yield* appendRaw(kit, headLine({ ...head, protocolVersion: 2 }))
      const current = yield* read(kit)
      assertUnreadableHead(current, head)
      assertProjection(kit, current)
      assert.notStrictEqual(current.artifactState.syncState, "assessment_current")
    }))

  it.effect("every kind of broken head after the current one fails closed", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const { head } = yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: jobId(1) }))
      const base = yield* kit.fs.readFile(kit.sidecar)
      const broken: Array<string> = [
        headLine({ ...head, sessionId: "" }),
        headLine({ ...head, receiptOffset: -1 }),
        headLine({ ...head, receiptLength: 0 }),
        headLine({ ...head, receiptLength: 48 * 1024 + 1 }),
        headLine({ ...head, receiptHash: "A".repeat(64) }),
        headLine({ type: "rarebit_head" }),
        "{\"type\":\"rarebit_head\",\"protocolVersion\":1,\n",
        "garbage \"rarebit_head\" garbage\n"
      ]
      for (const line of broken) {
        yield* kit.fs.writeFile(kit.sidecar, base)
        yield* appendRaw(kit, line)
        // A valid-looking receipt after the broken head does not rescue it.
        yield* appendRaw(kit, receiptLine(summaryReceipt(kit.branch, "s", { jobId: jobId(2) })))
        assertUnreadableHead(yield* read(kit), head)
      }
    }))

  it.effect("an invalid head before the last valid one is ignored", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* appendRaw(kit, "garbage \"rarebit_head\"\n" + headLine({ type: "rarebit_head", protocolVersion: 9 }))
      const receipt = summaryReceipt(kit.branch, "s", { jobId: jobId(1) })
      yield* appendReceiptWithHead(kit, receipt)
      const current = yield* read(kit)
      assert.strictEqual(current.availability, "available")
      assert.deepStrictEqual(current.receipt, receipt)
    }))

  it.effect("an invalid head with no valid head before it is unreadable with head null", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* appendRaw(kit, receiptLine(summaryReceipt(kit.branch, "s", { jobId: jobId(1) })))
      yield* appendRaw(kit, headLine({ type: "rarebit_head", protocolVersion: 1 }))
      assertUnreadableHead(yield* read(kit), null)
    }))

  it.effect("a head whose range does not verify is unreadable / sidecar_head_invalid", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const receipt = summaryReceipt(kit.branch, "s", { jobId: jobId(1) })
      const line = receiptLine(receipt)
      const length = bytesOf(line).length
      yield* appendRaw(kit, line)
      const size = yield* sizeOf(kit.fs, kit.sidecar)
      const good = headFor("s", 0, line)
      const cases: Array<[string, Json]> = [
        ["range outside the file", { ...good, receiptOffset: size }],
        ["range past the end", { ...good, receiptLength: length + 1000 }],
        ["hash mismatch", { ...good, receiptHash: "0".repeat(64) }],
        ["no trailing newline", {
          ...good,
          receiptLength: length - 1,
          receiptHash: sha256Hex(bytesOf(line).subarray(0, length - 1))
        }],
        ["wrong sessionId", { ...good, sessionId: "other" }]
      ]
      const base = yield* kit.fs.readFile(kit.sidecar)
      for (const [label, head] of cases) {
        yield* kit.fs.writeFile(kit.sidecar, base)
        yield* appendRaw(kit, headLine(head))
        const current = yield* read(kit)
        assert.strictEqual(current.availability, "unreadable", label)
        assert.deepStrictEqual(current.head, head, label)
        assert.deepStrictEqual(current.diagnostics, { tornTail: false, reason: "sidecar_head_invalid" }, label)
        assertProjection(kit, current)
      }
      // The torn-tail flag survives a head that does not verify.
      yield* kit.fs.writeFile(kit.sidecar, base)
      yield* appendRaw(kit, headLine({ ...good, receiptHash: "0".repeat(64) }) + "{\"torn\"")
      assert.deepStrictEqual((yield* read(kit)).diagnostics, { tornTail: true, reason: "sidecar_head_invalid" })
    }))

  it.effect("a head pointing at a Title receipt, or an invalid Summary, is unreadable", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const title = titleReceipt(kit.branch, "s", { jobId: jobId(1) })
      const { head: titleHead } = yield* appendReceiptWithHead(kit, title)
      assertUnreadableHead(yield* read(kit), titleHead)
      const invalid = { ...summaryReceipt(kit.branch, "s", { jobId: jobId(2) }), extra: true }
      const { head } = yield* appendReceiptWithHead(kit, invalid)
      assertUnreadableHead(yield* read(kit), head)
      // A head over a line that is not JSON at all.
      const offset = yield* sizeOf(kit.fs, kit.sidecar)
      yield* appendRaw(kit, "not json\n" + headLine(headFor("s", offset, "not json\n")))
      assertUnreadableHead(yield* read(kit), headFor("s", offset, "not json\n"))
    }))

  it.effect("a sidecar larger than the window is read from its last 64 KiB, the first partial line dropped", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const receipt = summaryReceipt(kit.branch, "s", { jobId: jobId(1) })
      // The receipt is far before the window; only its head is inside.
      const { head } = yield* appendReceiptWithHead(kit, receipt, { head: false })
      yield* appendRaw(kit, filler(40_000) + filler(40_000))
      yield* appendRaw(kit, headLine(head))
      const size = yield* sizeOf(kit.fs, kit.sidecar)
      assert.isAbove(size, TAIL)
      const current = yield* read(kit)
      assert.strictEqual(current.availability, "available")
      assert.deepStrictEqual(current.receipt, receipt)
      assert.deepStrictEqual(current.diagnostics, { tornTail: false, tailOffset: size - TAIL })
      assertProjection(kit, current)
    }))

  it.effect("the window's first partial line is never parsed, even when its suffix is a valid head", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const line = receiptLine(summaryReceipt(kit.branch, "s", { jobId: jobId(1) }))
      yield* appendRaw(kit, line)
      const head = headLine(headFor("s", 0, line))
      // One long line whose last part, seen alone, is a valid head for the receipt, and
      // after it a filler line sized so that the window starts exactly at that part.
      const headLength = bytesOf(head).length
      yield* appendRaw(kit, `${"x".repeat(1000)}${head}${filler(TAIL - headLength)}`)
      const size = yield* sizeOf(kit.fs, kit.sidecar)
      assert.strictEqual(size - TAIL, bytesOf(line).length + 1000)
      const current = yield* read(kit)
      assert.strictEqual(current.availability, "missing")
      assert.deepStrictEqual(current.diagnostics, { tornTail: false, reason: "sidecar_head_missing" })
    }))

  it.effect("a window inside one unterminated line is an empty torn tail", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* appendRaw(kit, "{\"type\":\"rarebit_head\"," + "y".repeat(TAIL + 10))
      const current = yield* read(kit)
      assert.strictEqual(current.availability, "missing")
      assert.deepStrictEqual(current.diagnostics, { tornTail: true, reason: "sidecar_empty" })
    }))

  it.effect("a symlink at the sidecar path is unreadable and never followed", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const receipt = summaryReceipt(kit.branch, "s", { jobId: jobId(1) })
      // A perfectly valid sidecar elsewhere, reachable only through the link.
      const target = kit.path.join(root, "target.jsonl")
      const line = receiptLine(receipt)
      yield* kit.fs.writeFileString(target, line + headLine(headFor("s", 0, line)))
      yield* kit.fs.makeDirectory(kit.path.dirname(kit.sidecar), { recursive: true })
      yield* kit.fs.symlink(target, kit.sidecar)
      const current = yield* read(kit)
      assert.deepStrictEqual({ ...current, artifactState: null }, {
        availability: "unreadable",
        path: kit.sidecar,
        receipt: null,
        records: [],
        head: null,
        diagnostics: { tornTail: false, reason: "sidecar_unreadable" },
        artifactState: null
      })
      assertProjection(kit, current)
    }))

  it.effect("a directory at the sidecar path is unreadable", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* kit.fs.makeDirectory(kit.sidecar, { recursive: true })
      const current = yield* read(kit)
      assert.strictEqual(current.availability, "unreadable")
      assert.deepStrictEqual(current.diagnostics, { tornTail: false, reason: "sidecar_unreadable" })
    }))

  it.effect("a native observation passed in is used instead of reading the Session", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const receipt = summaryReceipt(kit.branch, "s", { jobId: jobId(1) })
      yield* appendReceiptWithHead(kit, receipt)
      const read1 = yield* read(kit)
      assertProjection(kit, read1)
      assert.strictEqual(read1.artifactState.syncState, "assessment_current")

      const missing = { availability: "missing" }
      const read2 = yield* read(kit, { native: missing })
      assertProjection(kit, read2, { native: missing })
      assert.strictEqual(read2.artifactState.nativeRef?.availability, "missing")

      // A native selection with more evidence than the receipt covers makes it stale.
      const longer = branchOf([["user", "first request"], ["assistant", "done"], ["user", "second request"]])
      const native = nativeOf("s", longer)
      const read3 = yield* read(kit, { native, expectation: "agent_settled", deadlineExpired: true })
      assertProjection(kit, read3, { native, expectation: "agent_settled", deadlineExpired: true })
      assert.notStrictEqual(read3.artifactState.syncState, "assessment_current")
    }))

  it.effect("a receipt the store vouched for is validated again once a caller changes and projects it", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: jobId(1) }))
      // Twice: once from a full read, once from the cache's confirmed copy.
      for (const pass of ["full", "confirmed"]) {
        const current = yield* read(kit)
        assert.strictEqual(current.artifactState.syncState, "assessment_current", pass)
        const changed = { ...current.receipt!, schemaVersion: 5 }
        const unchanged = current.receipt!
        ;(unchanged as Record<string, unknown>).assessment = "not an assessment"
        for (const receipt of [changed, unchanged]) {
          const input = {
            native: nativeOf(kit.sessionId, kit.branch),
            materialization: { availability: "available", records: [receipt] }
          }
          const ours = ArtifactState.projectArtifactStateResult(input as unknown as ArtifactState.ProjectionInput)
          assert.isTrue(Result.isSuccess(ours), pass)
          assert.deepStrictEqual((ours as Result.Success<unknown, unknown>).success, referenceProjection(input), pass)
          assert.notStrictEqual(
            (ours as Result.Success<ArtifactState.ArtifactState, unknown>).success.syncState,
            "assessment_current",
            pass
          )
        }
      }
    }))

  it.effect("the native observation is read from the Session: missing, unreadable, available", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { writeSession: false })
      const absent = yield* read(kit)
      // A Session path that does not exist is a failed query, which the seed reports as unreadable.
      assertProjection(kit, absent, { native: { availability: "unreadable" } })
      yield* kit.fs.makeDirectory(kit.path.dirname(kit.sessionFile), { recursive: true })
      yield* kit.fs.writeFileString(kit.sessionFile, "not a session\n")
      const unreadable = yield* read(kit)
      assertProjection(kit, unreadable, { native: { availability: "unreadable" } })
      const other = yield* setup(root)
      assertProjection(other, yield* read(other))
    }))

  it.effect("with cacheSessions: false a Session rewritten in place (same size and mtime) is read as it is now", ({ root }) =>
    Effect.gen(function*() {
      // Long answers around the changed question keep it away from both ends of the file,
      // where the Session cache compares bytes: only a read of the whole Session sees it.
      const messages = (middle: string) =>
        branchOf([
          ["user", "first"],
          ["assistant", "x".repeat(10_000)],
          ["user", middle],
          ["assistant", "y".repeat(10_000)],
          ["user", "third"]
        ])
      const before = messages("middle B")
      const after = messages("middle C")
      for (const cacheSessions of [false, true]) {
        const kit = yield* setup(`${root}/${cacheSessions}`, { branch: before, config: { cacheSessions } })
        yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, "s", { jobId: jobId(1) }))
        assertProjection(kit, yield* read(kit))
        const text = yield* kit.fs.readFileString(kit.sessionFile)
        const rewritten = text.replace("middle B", "middle C")
        assert.strictEqual(Buffer.byteLength(rewritten), Buffer.byteLength(text), "same size")
        yield* rewriteInPlace(kit.fs, kit.sessionFile, rewritten)
        const again = yield* read(kit)
        // The default cache trusts the unchanged size and mtime (the documented limit); off, it is not asked.
        assertProjection(kit, again, { native: nativeOf("s", cacheSessions ? before : after) })
      }
    }))

  it.effect("an unsupported expectation is a typed failure, not a result", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const error = yield* Effect.flip(read(kit, { expectation: "sometime" }))
      assert.strictEqual(error._tag, "ProjectionInputInvalid")
      yield* assertNoOpenHandles(kit.fs, "after a failed readCurrent")
      for (const expectation of ["owner_request", "agent_settled", "snapshot"]) {
        const current = yield* read(kit, { expectation })
        assertProjection(kit, current, { expectation })
      }
    }))

  it.effect("no Session or sidecar file stays open between polls", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { config: { cacheBudget: { maxBytes: 32 * 1024 * 1024 } } })
      yield* appendReceiptWithHead(kit, summaryReceipt(kit.branch, kit.sessionId, { jobId: jobId(1) }))
      const text = yield* kit.fs.readFileString(kit.sessionFile)
      const sidecarBytes = yield* kit.fs.readFile(kit.sidecar)
      const sessions = [kit.sessionFile]
      for (const n of [1, 2, 3]) {
        const sessionFile = kit.path.join(kit.sessionRoot, "project", `copy-${n}.jsonl`)
        yield* kit.fs.writeFileString(sessionFile, text)
        const sidecar = kit.path.join(kit.rarebitRoot, "materializations-v4", "project", `copy-${n}.jsonl`)
        yield* kit.fs.writeFile(sidecar, sidecarBytes, { mode: 0o600 })
        sessions.push(sessionFile)
      }
      // Where the disk's descriptors cannot be listed (no /proc), the memory world's answer is the one checked.
      const held = () => canListOpenFiles(kit.fs) ? openPaths(kit.fs).filter((open) => open.startsWith(root)).length : 0
      let most = 0
      for (let round = 0; round < 3; round++) {
        for (const sessionFile of sessions) {
          const current = yield* kit.store.readCurrent({ sessionFile })
          assert.strictEqual(current.availability, "available")
          assert.strictEqual(current.artifactState.nativeRef?.availability, "available")
          most = Math.max(most, held())
        }
      }
      // Eight files were read (four Sessions, four sidecars), each just written, so each was read from its bytes.
      assert.strictEqual(most, 0)
    }))
})
