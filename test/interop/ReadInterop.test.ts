/**
 * Read interoperability with the pinned reference: whatever either store
 * writes (settles making new or repeated heads, titles, takeovers, torn and
 * hand-made tails, invalid heads, hash near-misses, decoder-sensitive bytes
 * in heads and in receipts heads point at, sidecars whose tail window starts
 * mid-file), our `readRarebitCurrent` and `readRarebitHistory`
 * return deep-equal results to the reference's on the same directory, with
 * and without a `native` observation, with expectations and deadlines.
 */
import { afterEach, assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { appendFile, mkdir, readFile, rm, stat, symlink, truncate, writeFile } from "node:fs/promises"
import { dirname } from "node:path"
import { decoderSensitive, editLine, type Spot } from "../support/DecoderBytes.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import type { Json } from "../support/Receipts.js"
import {
  entry,
  jobId,
  makeRoots,
  outcomeOf,
  referenceSummary,
  referenceTitle,
  type Roots,
  sessionText,
  summaryReceipt,
  titleReceipt,
  writeSession
} from "../support/Reference.js"
import { assertSameReads, ours, reference, sha256, type StoreApi } from "./Interop.js"

const branches: ReadonlyArray<ReadonlyArray<Json>> = [
  [entry("u1", "user", "first request")],
  [entry("u1", "user", "first request"), entry("a1", "assistant", "done"), entry("u2", "user", "second")],
  [entry("u1", "user", "first request"), entry("u😀", "user", "naïve café ✓")]
]
const sessionIds = ["s", "s2"] as const

let cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  await Promise.all(cleanups.map((cleanup) => cleanup()))
  cleanups = []
})

const freshRoots = async () => {
  const roots = await makeRoots("rarebit-read-interop-")
  cleanups.push(roots.cleanup)
  return roots
}

const sidecarOf = (roots: Roots) => reference.rarebitMaterializationPath(roots.sessionFile, roots.location)

const sizeOf = async (path: string) => (await stat(path).catch(() => ({ size: 0 }))).size

/** Reserves `job` with `writer` and settles `receipt` on it; the outcome of the settle. */
const settleWith = async (writer: StoreApi, roots: Roots, job: number, receipt: Json, extra: Json = {}) => {
  const reservation = await writer.reserveRarebitJob({
    jobId: jobId(job),
    sessionFile: roots.sessionFile,
    ...roots.location,
    ...extra
  })
  assert.strictEqual(reservation.acquired, true, `${writer.name} acquires job ${job}`)
  return outcomeOf(() => writer.settleRarebitJob(reservation, receipt))
}

// ---------------------------------------------------------------------------
// Hand-made tails
// ---------------------------------------------------------------------------

interface ParsedLine {
  readonly offset: number
  readonly bytes: Buffer
  readonly record: any
}

const linesOf = (bytes: Buffer): Array<ParsedLine> => {
  const lines: Array<ParsedLine> = []
  let cursor = 0
  while (cursor < bytes.length) {
    const newline = bytes.indexOf(10, cursor)
    if (newline < 0) break
    const line = bytes.subarray(cursor, newline + 1)
    let record: unknown = null
    try {
      record = JSON.parse(line.subarray(0, -1).toString("utf8"))
    } catch {
      // kept unparsed
    }
    lines.push({ offset: cursor, bytes: line, record })
    cursor = newline + 1
  }
  return lines
}

/** The last head-shaped line of a sidecar, or a head made up for its first receipt. */
const someHead = (lines: ReadonlyArray<ParsedLine>): Json => {
  const head = lines.findLast((line) => line.record?.type === "rarebit_head" && line.record?.protocolVersion === 1)
  if (head !== undefined) return head.record
  const receipt = lines.find((line) => line.record?.type === "rarebit_summary") ?? lines[0]
  return {
    type: "rarebit_head",
    protocolVersion: 1,
    sessionId: receipt?.record?.sessionId ?? "s",
    receiptOffset: receipt?.offset ?? 0,
    receiptLength: receipt?.bytes.length ?? 1,
    receiptHash: receipt ? sha256(receipt.bytes) : "0".repeat(64)
  }
}

const headLine = (head: Json) => `${JSON.stringify(head)}\n`

/** The current head with the decoder-sensitive bytes `name` at `spot` (none for an overlong spot). */
const headWith = (lines: ReadonlyArray<ParsedLine>, spot: Spot, name?: string) =>
  Buffer.from(editLine(Buffer.from(headLine(someHead(lines))), spot, name ? decoderSensitive[name] : new Uint8Array(0)))

/**
 * A copy of the first summary receipt with decoder-sensitive bytes at
 * `spot`, appended with a head that points at the copy by hash, so whether
 * it is current depends only on how its text decodes.
 */
const pointedCopy = (lines: ReadonlyArray<ParsedLine>, size: number, spot: Spot, name: string) => {
  const receipt = lines.find((line) => line.record?.type === "rarebit_summary")
  if (receipt === undefined) return "\n"
  const edited = Buffer.from(editLine(receipt.bytes, spot, decoderSensitive[name]))
  const head = {
    type: "rarebit_head",
    protocolVersion: 1,
    sessionId: receipt.record.sessionId,
    receiptOffset: size,
    receiptLength: edited.length,
    receiptHash: sha256(edited)
  }
  return Buffer.concat([edited, Buffer.from(headLine(head))])
}

/** Appendable tails, computed from the sidecar's current bytes. */
const mutations: Record<string, (lines: ReadonlyArray<ParsedLine>, size: number) => string | Buffer> = {
  tornHead: () => "{\"type\":\"rarebit_head\"",
  tornReceipt: (lines) => {
    const receipt = lines.find((line) => typeof line.record?.type === "string" && line.record.type !== "rarebit_head")
    return receipt ? receipt.bytes.subarray(0, Math.floor(receipt.bytes.length / 2)) : "{\"ty"
  },
  newline: () => "\n",
  blankLines: () => "\n\n",
  garbage: () => "not json at all\n",
  versionHead: () => "{\"type\":\"rarebit_head\",\"protocolVersion\":999}\n",
  unparsableHead: () => "{\"type\":\"rarebit_head\",oops}\n",
  repeatHead: (lines) => headLine(someHead(lines)),
  hashFlip: (lines) => {
    const head = someHead(lines)
    const hash = String(head.receiptHash)
    return headLine({ ...head, receiptHash: hash.slice(0, -1) + (hash.endsWith("0") ? "1" : "0") })
  },
  hashUpper: (lines) =>
    headLine({ ...someHead(lines), receiptHash: String(someHead(lines).receiptHash).toUpperCase() }),
  hashArray: (lines) => headLine({ ...someHead(lines), receiptHash: [someHead(lines).receiptHash] }),
  lengthPlus: (lines) => headLine({ ...someHead(lines), receiptLength: Number(someHead(lines).receiptLength) + 1 }),
  lengthMinus: (lines) => headLine({ ...someHead(lines), receiptLength: Number(someHead(lines).receiptLength) - 1 }),
  offsetPlus: (lines) => headLine({ ...someHead(lines), receiptOffset: Number(someHead(lines).receiptOffset) + 1 }),
  offsetMinus: (lines) => headLine({ ...someHead(lines), receiptOffset: Number(someHead(lines).receiptOffset) - 1 }),
  stringOffset: (lines) => headLine({ ...someHead(lines), receiptOffset: String(someHead(lines).receiptOffset) }),
  otherSession: (lines) => headLine({ ...someHead(lines), sessionId: "other" }),
  extraKey: (lines) => headLine({ ...someHead(lines), extra: true }),
  beyondEnd: (lines, size) => headLine({ ...someHead(lines), receiptOffset: size + 10 }),
  headAtTitle: (lines) => {
    const title = lines.find((line) => line.record?.type === "rarebit_title")
    return title
      ? headLine({
        ...someHead(lines),
        receiptOffset: title.offset,
        receiptLength: title.bytes.length,
        receiptHash: sha256(title.bytes)
      })
      : "\n"
  },
  receiptCopy: (lines) => {
    const receipt = lines.find((line) => line.record?.type === "rarebit_summary")
    return receipt ? receipt.bytes.toString("utf8") : "\n"
  },
  multibyte: () => "{\"note\":\"😀 é ✓\"}\n",
  bomHead: (lines) => headWith(lines, { kind: "start" }, "bom"),
  overlongQuoteHead: (lines) => headWith(lines, { kind: "overlong", pick: 1, length: 2 }),
  crHead: (lines) => headWith(lines, { kind: "beforeNewline" }, "cr"),
  nulHead: (lines) => headWith(lines, { kind: "beforeNewline" }, "nul"),
  lineSeparatorHead: (lines) => headWith(lines, { kind: "afterBrace" }, "lineSeparator"),
  bomReceipt: (lines, size) => pointedCopy(lines, size, { kind: "start" }, "bom"),
  bomInReceiptText: (lines, size) => pointedCopy(lines, size, { kind: "inString" }, "bom"),
  lineSeparatorInReceiptText: (lines, size) => pointedCopy(lines, size, { kind: "inString" }, "lineSeparator"),
  surrogateInReceiptText: (lines, size) => pointedCopy(lines, size, { kind: "inString" }, "surrogateHigh"),
  overlongSlashInReceiptText: (lines, size) => pointedCopy(lines, size, { kind: "inString" }, "overlongSlash3"),
  truncatedBeforeReceiptNewline: (lines, size) => pointedCopy(lines, size, { kind: "beforeNewline" }, "truncated3"),
  bomTornHead: () => Buffer.concat([Buffer.from(decoderSensitive.bom), Buffer.from("{\"type\":\"rarebit_head\"")]),
  padding: () => `${" ".repeat(40 * 1024)}\n`
}

const appendMutation = async (roots: Roots, name: string) => {
  const path = sidecarOf(roots)
  const bytes = await readFile(path).catch(() => Buffer.alloc(0))
  await mkdir(dirname(path), { recursive: true })
  await appendFile(path, mutations[name](linesOf(bytes), bytes.length))
}

const offsetsOf = async (roots: Roots, fractions: ReadonlyArray<number>) => {
  const size = await sizeOf(sidecarOf(roots))
  return fractions.map((fraction) => Math.floor(fraction * (size + 2)))
}

// ---------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------

describe("ReadInterop", { concurrent: false }, () => {
  it("reads what the reference's service writes: new heads, repeated heads, titles", async () => {
    const roots = await freshRoots()
    await assertSameReads(roots, { step: "nothing written" })

    const first = await referenceSummary(roots, "s", branches[0])
    assert.strictEqual(first.record.type, "rarebit_summary")
    await assertSameReads(roots, { step: "first summary", fromOffsets: [1, 100] })

    await referenceTitle(roots, "s", branches[0], "u1")
    await assertSameReads(roots, { step: "title (repeated head)", limit: 1 })

    await referenceSummary(roots, "s", branches[1])
    await assertSameReads(roots, { step: "second summary (new head)", limit: 2 })

    // A receipt for a branch the Session has moved past repeats the previous head.
    const stale = await settleWith(reference, roots, 100, summaryReceipt(branches[0], "s"))
    assert.isTrue(stale.ok)
    await assertSameReads(roots, {
      step: "stale summary (repeated head)",
      fromOffsets: await offsetsOf(roots, [0.3, 0.7])
    })

    const lines = linesOf(await readFile(sidecarOf(roots)))
    assert.deepStrictEqual(
      lines.map((line) => line.record.type),
      [
        "rarebit_summary",
        "rarebit_head",
        "rarebit_title",
        "rarebit_head",
        "rarebit_summary",
        "rarebit_head",
        "rarebit_summary",
        "rarebit_head"
      ]
    )
    assert.deepStrictEqual(lines[7].record, lines[5].record, "the stale settle repeats the current head")
  })

  for (const [writerName, writer] of [["reference", reference], ["ours", ours]] as const) {
    it(`reads a takeover after an expired lease written by ${writerName}`, async () => {
      const roots = await freshRoots()
      await writeSession(roots.sessionFile, "s", branches[0])
      const common = { jobId: jobId(7), sessionFile: roots.sessionFile, ...roots.location, leaseMs: 1 }
      const old = await writer.reserveRarebitJob({ ...common, now: 0 })
      const fresh = await writer.reserveRarebitJob({ ...common, now: 10 })
      assert.strictEqual(fresh.acquired, true)
      const fenced = await outcomeOf(() => writer.settleRarebitJob(old, summaryReceipt(branches[0], "s")))
      assert.isFalse(fenced.ok)
      await assertSameReads(roots, { step: "fenced settle" })
      await writer.settleRarebitJob(fresh, summaryReceipt(branches[0], "s"))
      await assertSameReads(roots, { step: "takeover settle" })
    })

    it(`reads torn tails, invalid heads and hash near-misses after ${writerName} writes`, async () => {
      const roots = await freshRoots()
      await writeSession(roots.sessionFile, "s", branches[2])
      assert.isTrue((await settleWith(writer, roots, 1, summaryReceipt(branches[2], "s"))).ok)
      assert.isTrue((await settleWith(writer, roots, 2, titleReceipt(branches[2], "s"))).ok)
      const path = sidecarOf(roots)
      const base = await readFile(path)
      for (const name of Object.keys(mutations)) {
        await writeFile(path, base)
        await appendMutation(roots, name)
        await assertSameReads(roots, { step: `${name} appended`, fromOffsets: await offsetsOf(roots, [0.5, 0.95]) })
        // A torn or corrupt tail followed by the writer's next settle.
        assert.isTrue(
          (await settleWith(writer, roots, 10 + Object.keys(mutations).indexOf(name), summaryReceipt(branches[2], "s")))
            .ok
        )
        await assertSameReads(roots, { step: `${name} then a settle`, limit: 1 })
      }
    })

    it(`reads a sidecar whose tail window starts mid-file, written by ${writerName}`, async () => {
      const roots = await freshRoots()
      await writeSession(roots.sessionFile, "s", branches[1])
      for (let job = 1; job <= 5; job++) {
        const receipt = summaryReceipt(branches[1], "s", { summary: `${job}`.repeat(20_000 + job * 997) })
        assert.isTrue((await settleWith(writer, roots, job, receipt)).ok)
        await assertSameReads(roots, {
          step: `big receipt ${job}`,
          limit: 2,
          fromOffsets: await offsetsOf(roots, [0.25, 0.5, 0.75])
        })
      }
      const path = sidecarOf(roots)
      assert.isAbove(await sizeOf(path), 64 * 1024)
      const current = await ours.readRarebitCurrent({ sessionFile: roots.sessionFile, ...roots.location })
      assert.strictEqual(current.availability, "available")
      assert.isAbove(current.diagnostics.tailOffset, 0)
      // More than a window of lines after the last head: no head in the window at all.
      await appendFile(path, `${"x".repeat(70 * 1024)}\n`)
      await assertSameReads(roots, { step: "70 KiB after the head" })
      // Truncations that cut the window's first line at every kind of place.
      const size = await sizeOf(path)
      for (const cut of [1, 100, 20_000, 40_000, 65_536 - 1]) {
        await truncate(path, size - cut)
        await assertSameReads(roots, { step: `truncated by ${cut}` })
      }
    })
  }

  it("reads the same when the sidecar is missing, empty, a directory or a symlink", async () => {
    const roots = await freshRoots()
    await writeSession(roots.sessionFile, "s", branches[0])
    await assertSameReads(roots, { step: "missing sidecar" })
    assert.isTrue((await settleWith(ours, roots, 1, summaryReceipt(branches[0], "s"))).ok)
    const path = sidecarOf(roots)
    const bytes = await readFile(path)
    await writeFile(path, "")
    await assertSameReads(roots, { step: "empty sidecar" })
    await rm(path)
    await mkdir(path)
    await assertSameReads(roots, { step: "directory sidecar" })
    await rm(path, { recursive: true })
    await writeFile(`${path}.real`, bytes)
    await symlink(`${path}.real`, path)
    await assertSameReads(roots, { step: "symlinked sidecar" })
  })

  it("reads history pages bounded by 1 MiB, across a line longer than a page", async () => {
    const roots = await freshRoots()
    await writeSession(roots.sessionFile, "s", branches[1])
    const path = sidecarOf(roots)
    for (let job = 1; job <= 3; job++) {
      const writer = job % 2 === 0 ? ours : reference
      assert.isTrue(
        (await settleWith(writer, roots, job, summaryReceipt(branches[1], "s", { summary: "z".repeat(40_000) }))).ok
      )
      await appendFile(path, `${" ".repeat(450 * 1024)}\n`)
    }
    await appendFile(path, `${"{".repeat(1_200 * 1024)}\n`)
    assert.isTrue((await settleWith(ours, roots, 4, summaryReceipt(branches[1], "s"))).ok)
    assert.isAbove(await sizeOf(path), 2 * 1024 * 1024)
    await assertSameReads(roots, {
      step: "2.5 MiB sidecar",
      limit: 1000,
      fromOffsets: await offsetsOf(roots, [0.1, 0.45, 0.9])
    })
    await assertSameReads(roots, { step: "2.5 MiB sidecar, limit 1", limit: 1 })
  })

  it("reads an external Session's sidecar the same", async () => {
    const roots = await freshRoots()
    const external = { ...roots, sessionFile: `${roots.root}/outside/trace.jsonl` }
    await writeSession(external.sessionFile, "s", branches[0])
    const allow = { allowExternalSession: true }
    const reservation = await reference.reserveRarebitJob({
      jobId: jobId(1),
      sessionFile: external.sessionFile,
      ...roots.location,
      ...allow
    })
    await reference.settleRarebitJob(reservation, summaryReceipt(branches[0], "s"))
    assert.include(reservation.materializationPath, "/materializations-v4/external/")
    const base = { sessionFile: external.sessionFile, ...roots.location, ...allow }
    assert.deepStrictEqual(await ours.readRarebitCurrent(base), await reference.readRarebitCurrent(base))
    assert.deepStrictEqual(await ours.readRarebitHistory(base), await reference.readRarebitHistory(base))
    const mine = await ours.reserveRarebitJob({ ...base, jobId: jobId(1) })
    assert.strictEqual(mine.duplicate, true)
    assert.deepStrictEqual(mine, await reference.reserveRarebitJob({ ...base, jobId: jobId(1) }))
  })

  it("reads the same when the Session is missing, unparsable or of another session id", async () => {
    const roots = await freshRoots()
    await writeSession(roots.sessionFile, "s", branches[1])
    assert.isTrue((await settleWith(reference, roots, 1, summaryReceipt(branches[1], "s"))).ok)
    await writeFile(roots.sessionFile, "not a session\n")
    await assertSameReads(roots, { step: "unparsable Session" })
    await writeFile(roots.sessionFile, sessionText("s2", branches[1]))
    await assertSameReads(roots, { step: "other session id" })
    await rm(roots.sessionFile)
    await assertSameReads(roots, { step: "missing Session" })
    await mkdir(roots.sessionFile)
    await assertSameReads(roots, { step: "a directory as the Session" })
  })

  // -------------------------------------------------------------------------
  // Generated sequences: either store writes, both read the same after every step
  // -------------------------------------------------------------------------

  const writerArb = fc.constantFrom<"ours" | "reference">("ours", "reference")
  const apiOf = (name: "ours" | "reference") => (name === "ours" ? ours : reference)

  type Op =
    | { readonly kind: "session"; readonly branch: number; readonly sessionId: number }
    | {
      readonly kind: "summary"
      readonly writer: "ours" | "reference"
      readonly branch: number
      readonly sessionId: number
      readonly big: boolean
    }
    | { readonly kind: "title"; readonly writer: "ours" | "reference"; readonly branch: number }
    | {
      readonly kind: "takeover"
      readonly first: "ours" | "reference"
      readonly second: "ours" | "reference"
      readonly branch: number
    }
    | {
      readonly kind: "cross"
      readonly reserver: "ours" | "reference"
      readonly settler: "ours" | "reference"
      readonly branch: number
    }
    | { readonly kind: "mutation"; readonly name: string }
    | { readonly kind: "truncate"; readonly bytes: number }
    | { readonly kind: "remove" }

  const branchArb = fc.integer({ min: 0, max: branches.length - 1 })
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant("session" as const),
        branch: branchArb,
        sessionId: fc.integer({ min: 0, max: 1 })
      })
    },
    {
      weight: 5,
      arbitrary: fc.record({
        kind: fc.constant("summary" as const),
        writer: writerArb,
        branch: branchArb,
        sessionId: fc.integer({ min: 0, max: 1 }),
        big: fc.boolean()
      })
    },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant("title" as const), writer: writerArb, branch: branchArb }) },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant("takeover" as const),
        first: writerArb,
        second: writerArb,
        branch: branchArb
      })
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant("cross" as const),
        reserver: writerArb,
        settler: writerArb,
        branch: branchArb
      })
    },
    {
      weight: 4,
      arbitrary: fc.record({ kind: fc.constant("mutation" as const), name: fc.constantFrom(...Object.keys(mutations)) })
    },
    {
      weight: 1,
      arbitrary: fc.record({ kind: fc.constant("truncate" as const), bytes: fc.integer({ min: 1, max: 300 }) })
    },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("remove" as const) }) }
  )

  const apply = async (roots: Roots, op: Op, job: number, state: { sessionId: string }) => {
    const location = { sessionFile: roots.sessionFile, ...roots.location }
    switch (op.kind) {
      case "session":
        state.sessionId = sessionIds[op.sessionId]
        return writeSession(roots.sessionFile, state.sessionId, branches[op.branch])
      case "summary": {
        const summary = op.big ? { summary: "y".repeat(30_000) } : {}
        return settleWith(
          apiOf(op.writer),
          roots,
          job,
          summaryReceipt(branches[op.branch], sessionIds[op.sessionId], summary)
        )
      }
      case "title":
        return settleWith(apiOf(op.writer), roots, job, titleReceipt(branches[op.branch], state.sessionId))
      case "takeover": {
        const common = { ...location, jobId: jobId(job), leaseMs: 1 }
        const old = await apiOf(op.first).reserveRarebitJob({ ...common, now: 0 })
        const fresh = await apiOf(op.second).reserveRarebitJob({ ...common, now: 10 })
        assert.strictEqual(fresh.acquired, true)
        const receipt = summaryReceipt(branches[op.branch], state.sessionId)
        const settled = await outcomeOf(() => apiOf(op.second).settleRarebitJob(fresh, receipt))
        const fenced = await outcomeOf(() => apiOf(op.first).settleRarebitJob(old, receipt))
        assert.isFalse(fenced.ok, "the old lease is fenced")
        return settled
      }
      case "cross": {
        const reservation = await apiOf(op.reserver).reserveRarebitJob({ ...location, jobId: jobId(job) })
        return outcomeOf(() =>
          apiOf(op.settler).settleRarebitJob(reservation, summaryReceipt(branches[op.branch], state.sessionId))
        )
      }
      case "mutation":
        return appendMutation(roots, op.name)
      case "truncate": {
        const path = sidecarOf(roots)
        const size = await sizeOf(path)
        return size > 0 ? truncate(path, Math.max(0, size - op.bytes)) : undefined
      }
      case "remove":
        return rm(sidecarOf(roots), { force: true })
    }
  }

  it("agrees after every step of generated write sequences by either store", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb, { minLength: 1, maxLength: 8 }),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 2, maxLength: 2 }),
        fc.constantFrom(1, 2, 3, 100),
        async (ops, fractions, limit) => {
          const roots = await makeRoots("rarebit-read-interop-prop-")
          try {
            const state = { sessionId: "s" }
            await writeSession(roots.sessionFile, "s", branches[0])
            for (const [index, op] of ops.entries()) {
              await apply(roots, op, index + 1, state)
              await assertSameReads(roots, {
                step: `step ${index} ${JSON.stringify(op)}`,
                limit,
                fromOffsets: await offsetsOf(roots, fractions)
              })
            }
          } finally {
            await roots.cleanup()
          }
        }
      ),
      { numRuns: fuzzRuns(30) }
    )
  }, 60_000 + fuzzRuns(30) * 1_000)
})
