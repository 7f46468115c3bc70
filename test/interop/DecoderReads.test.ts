/**
 * Decoder-sensitive bytes, read by our store on the in-memory file system
 * and on the disk, and by the reference on disk (a copy of the memory
 * world's files, or the very same directory): a byte-order mark, a
 * non-shortest form, an encoded surrogate, a truncated sequence, NUL, CR,
 * U+2028 and the rest of `test/support/DecoderBytes.ts`, in the current head,
 * in the receipt it points at (re-hashed, so only decoding decides), in the
 * lines after it, at the start of the 64 KiB window and where history pages
 * resume. Current reads and history pages must be identical; a claim or a
 * lock that the reference cannot parse must not be parsed by us either.
 *
 * The two bugs this pins: a BOM before a head, or before the receipt a head
 * points at, made our reader report the receipt as available (the WHATWG
 * decoder strips the mark) where the reference reports it unreadable.
 */
import { assert } from "@effect/vitest"
import { Effect, Option } from "effect"
import { createHash } from "node:crypto"
import { mkdir, mkdtemp, rm, utimes, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"
import { auditStore } from "../../src/store/audit/SidecarAudit.js"
import { inspectCommitLock } from "../../src/store/lock/CommitLockRepair.js"
import type { CurrentRead, ReadCurrentOptions } from "../../src/store/RarebitStore.js"
import { branches, type LineEdit, SESSION_ID, straddlingWindow, validSidecar } from "../fuzz/FuzzKit.js"
import { setup } from "../store/StoreKit.js"
import { concatBytes, decoderSensitive, type Spot } from "../support/DecoderBytes.js"
import { fileSystemSuite, type World } from "../support/FileSystemSuite.js"
import { jobId, outcomeOf, referenceNative, sessionText, Store as Ref } from "../support/Reference.js"
import { report } from "../support/TestReport.js"
import { withoutRoot } from "./Interop.js"

type Kit = Effect.Success<ReturnType<typeof setup>>

const encoder = new TextEncoder()

/** A store on `root` with the fuzz kit's Session, whose receipts `validSidecar` holds. */
const setupKit = (root: string) =>
  Effect.gen(function*() {
    const kit = yield* setup(root, { writeSession: false, sessionId: SESSION_ID })
    yield* kit.fs.makeDirectory(kit.path.dirname(kit.sessionFile), { recursive: true })
    yield* kit.fs.writeFileString(kit.sessionFile, sessionText(SESSION_ID, branches[1]))
    return kit
  })

const writeSidecar = (kit: Kit, bytes: Uint8Array) =>
  Effect.gen(function*() {
    yield* kit.fs.makeDirectory(kit.path.dirname(kit.sidecar), { recursive: true, mode: 0o700 })
    yield* kit.fs.writeFile(kit.sidecar, bytes, { mode: 0o600 })
  })

/**
 * Where the reference finds the world's files on disk: the kit's own root
 * on disk, or for the memory world a disk copy of every file under it (bytes
 * and modification times), refreshed on every call.
 */
const referenceRoot = (kit: Kit, world: World) =>
  Effect.gen(function*() {
    if (world.name !== "memory") return kit.root
    const disk = yield* Effect.acquireRelease(
      Effect.promise(() => mkdtemp(join(tmpdir(), "rarebit-decoder-reads-"))),
      (dir) => Effect.promise(() => rm(dir, { recursive: true, force: true }))
    )
    for (const entry of yield* kit.fs.readDirectory(kit.root, { recursive: true })) {
      const source = kit.path.join(kit.root, entry)
      const target = join(disk, entry)
      const info = yield* kit.fs.stat(source)
      if (info.type === "Directory") {
        yield* Effect.promise(() => mkdir(target, { recursive: true, mode: 0o700 }))
      } else if (info.type === "File") {
        const bytes = yield* kit.fs.readFile(source)
        const mtime = Option.getOrThrow(info.mtime)
        yield* Effect.promise(async () => {
          await mkdir(join(target, ".."), { recursive: true, mode: 0o700 })
          await writeFile(target, bytes, { mode: 0o600 })
          await utimes(target, mtime, mtime)
        })
      }
    }
    return disk
  })

/** The reference's location arguments for the kit's Session under `root`. */
const referenceLocation = (kit: Kit, root: string) => ({
  sessionFile: join(root, relative(kit.root, kit.sessionFile)),
  sessionRoot: join(root, relative(kit.root, kit.sessionRoot)),
  rarebitRoot: join(root, relative(kit.root, kit.rarebitRoot))
})

const show = (value: unknown, root: string) => JSON.stringify(withoutRoot(value, root))

/**
 * Asserts that our store and the reference read the sidecar identically:
 * the current read with the Session read from disk and with the native
 * observation passed in, and every history page (limit 2) from 0 and from
 * each of `fromOffsets`. Returns our current read.
 */
const assertSameReads = (kit: Kit, world: World, label: string, fromOffsets: ReadonlyArray<number> = []) =>
  Effect.gen(function*() {
    const root = yield* referenceRoot(kit, world)
    const location = referenceLocation(kit, root)
    const native = yield* Effect.promise(() => referenceNative(location.sessionFile, location.sessionRoot))
    let current: CurrentRead | undefined
    for (const variant of [{}, { native: native as ReadCurrentOptions["native"] }]) {
      const mine = yield* kit.store.readCurrent({ sessionFile: kit.sessionFile, ...variant })
      const theirs = yield* Effect.promise(() => outcomeOf(() => Ref.readRarebitCurrent({ ...location, ...variant })))
      assert.isTrue(theirs.ok, `${label}: the reference's current read threw`)
      assert.strictEqual(show(mine, kit.root), show(theirs.ok && theirs.value, root), `${label}: current read`)
      current ??= mine
    }
    for (const start of [0, ...fromOffsets]) {
      let offset: number | null = start
      // Every page advances or ends; the bound only stops a bug from looping.
      for (let guard = 0; offset !== null && guard < 1000; guard++) {
        const from: number = offset
        const mine = yield* kit.store.readHistory({ sessionFile: kit.sessionFile, fromOffset: from, limit: 2 })
        const theirs = yield* Effect.promise(() =>
          outcomeOf(() => Ref.readRarebitHistory({ ...location, fromOffset: from, limit: 2 }))
        )
        assert.isTrue(theirs.ok, `${label}: the reference's history threw at ${from}`)
        assert.strictEqual(
          show(mine, kit.root),
          show(theirs.ok && theirs.value, root),
          `${label}: history page at ${from}`
        )
        offset = mine.nextOffset
      }
    }
    return current!
  })

const bom = decoderSensitive.bom

const edit = (target: LineEdit["target"], spot: Spot, name: string): LineEdit => ({
  target,
  spot,
  bytes: { name, bytes: decoderSensitive[name] }
})

/** Where the lines of an edited valid sidecar start, to resume history at them. */
const lineOffsets = (edits: ReadonlyArray<LineEdit>) => validSidecar(edits).lines.map((line) => line.offset)

/** Every spot an edit can take, the non-shortest forms at a quote, a brace and a letter. */
const spots: ReadonlyArray<Spot> = [
  { kind: "start" },
  { kind: "afterBrace" },
  { kind: "inString" },
  { kind: "beforeNewline" },
  ...[0, 1, 3].flatMap((pick) => ([2, 3, 4] as const).map((length): Spot => ({ kind: "overlong", pick, length })))
]

fileSystemSuite("decoder-sensitive reads against the reference", (it, world) => {
  it.effect("a BOM before the current head makes the sidecar unreadable, as the reference says", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setupKit(root)
      yield* writeSidecar(kit, validSidecar([edit("currentHead", { kind: "start" }, "bom")]).bytes)
      const current = yield* assertSameReads(kit, world, "BOM before the head")
      assert.strictEqual(current.availability, "unreadable")
      assert.strictEqual(current.diagnostics.reason, "sidecar_head_invalid")
      assert.isNull(current.receipt)
    }))

  it.effect("a BOM before the receipt the head points at makes it unreadable, though the hash verifies", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setupKit(root)
      yield* writeSidecar(kit, validSidecar([edit("currentReceipt", { kind: "start" }, "bom")]).bytes)
      const current = yield* assertSameReads(kit, world, "BOM before the receipt")
      assert.strictEqual(current.availability, "unreadable")
      assert.strictEqual(current.diagnostics.reason, "sidecar_head_invalid")
    }))

  it.effect("a BOM inside the receipt's text is text: available, with U+FEFF in the summary", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setupKit(root)
      yield* writeSidecar(kit, validSidecar([edit("currentReceipt", { kind: "inString" }, "bom")]).bytes)
      const current = yield* assertSameReads(kit, world, "BOM inside the summary")
      assert.strictEqual(current.availability, "available")
      const receipt = current.availability === "available" ? current.receipt : null
      assert.strictEqual(receipt !== null && "summary" in receipt ? receipt.summary : null, "o\uFEFFk")
    }))

  it.effect("a receipt that starts with a BOM is left out of history", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setupKit(root)
      const edits = [edit(0, { kind: "start" }, "bom")]
      yield* writeSidecar(kit, validSidecar(edits).bytes)
      yield* assertSameReads(kit, world, "BOM before the first receipt", lineOffsets(edits).slice(0, 2))
      const page = yield* kit.store.readHistory({ sessionFile: kit.sessionFile, limit: 100 })
      assert.deepStrictEqual(page.records.map((record) => record.record.jobId), [2, 3, 4, 5].map(jobId))
    }))

  it.effect(
    "every sensitive byte class in every spot of the current head and its receipt",
    ({ root }) =>
      Effect.gen(function*() {
        const kit = yield* setupKit(root)
        const answers = { available: 0, unreadable: 0 }
        for (const target of ["currentHead", "currentReceipt"] as const) {
          for (const spot of spots) {
            for (const name of Object.keys(decoderSensitive)) {
              // An overlong spot replaces a character; one pass per spot is enough.
              if (spot.kind === "overlong" && name !== "bom") continue
              const edits = [edit(target, spot, name)]
              yield* writeSidecar(kit, validSidecar(edits).bytes)
              const label = `${name} at ${JSON.stringify(spot)} of the ${target}`
              const offsets = lineOffsets(edits)
              // Resume history inside the edited line's first bytes.
              const at = target === "currentHead" ? offsets.at(-1)! : offsets[6]
              const current = yield* assertSameReads(kit, world, label, [at + 1, at + 2, at + 3])
              if (current.availability === "available") answers.available++
              else answers.unreadable++
              if (spot.kind === "start" && name.startsWith("bom")) {
                assert.strictEqual(current.availability, "unreadable", label)
              }
            }
          }
        }
        // Both answers must be reached, or the sweep is not deciding anything.
        report("decoder-sweep", `decoder sweep (${world.name}): ${JSON.stringify(answers)}`)
        assert.isAbove(answers.available, 10, JSON.stringify(answers))
        assert.isAbove(answers.unreadable, 10, JSON.stringify(answers))
      }),
    300_000
  )

  it.effect(
    "sensitive bytes in a head copy at the start of the 64 KiB window, and in a torn tail",
    ({ root }) =>
      Effect.gen(function*() {
        const kit = yield* setupKit(root)
        const { bytes, lines } = validSidecar()
        const head = lines.at(-1)!.bytes
        for (const name of ["bom", "truncated3", "overlongQuote", "continuations", "cr", "lineSeparator", "nul"]) {
          for (const atEnd of [false, true]) {
            for (let shift = -4; shift <= 4; shift++) {
              const sidecar = straddlingWindow(bytes, bytes.length, head, decoderSensitive[name], atEnd, shift)
              assert.isAbove(sidecar.length, 64 * 1024)
              yield* writeSidecar(kit, sidecar)
              yield* assertSameReads(
                kit,
                world,
                `${name} ${atEnd ? "before the newline" : "at the start"}, shift ${shift}`
              )
            }
          }
          yield* writeSidecar(
            kit,
            concatBytes(bytes, decoderSensitive[name], encoder.encode("{\"type\":\"rarebit_head\""))
          )
          yield* assertSameReads(kit, world, `${name} in a torn tail`)
        }
      }),
    300_000
  )

  it.effect("the audit calls a BOM head an invalid head and a BOM receipt an invalid record", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setupKit(root)
      const edits = [edit(1, { kind: "start" }, "bom"), edit(2, { kind: "start" }, "bom")]
      yield* writeSidecar(kit, validSidecar(edits).bytes)
      const offsets = lineOffsets(edits)
      const report = yield* auditStore({ rarebitRoot: kit.rarebitRoot })
      const found = report.findings.filter((finding) => finding.path === kit.sidecar)
      assert.deepStrictEqual(found.map((finding) => `${finding.kind}@${finding.offset}`), [
        `invalid_head@${offsets[1]}`,
        `invalid_record@${offsets[2]}`
      ])
    }))

  it.effect("a claim that starts with a BOM is torn for us, as the reference cannot parse it", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setupKit(root)
      const { bytes, lines } = validSidecar()
      yield* writeSidecar(kit, bytes)
      const receipt = lines[6]
      const claims = {
        // Settled with an exact pointer: a duplicate, were it parsed.
        settled: {
          jobId: jobId(4),
          state: "settled",
          leaseToken: "t".repeat(48),
          receiptRef: {
            receiptOffset: receipt.offset,
            receiptLength: receipt.bytes.length,
            receiptHash: createHash("sha256").update(receipt.bytes).digest("hex")
          }
        },
        // Active with a lease that ran out long ago: taken over, were it parsed.
        expired: {
          jobId: jobId(4),
          state: "active",
          leaseToken: "t".repeat(48),
          claimedAt: "1970-01-01T00:00:00.000Z",
          leaseMs: 1
        }
      }
      for (const [name, claim] of Object.entries(claims)) {
        const claimPath = kit.claimPath(jobId(4))
        yield* kit.fs.makeDirectory(kit.jobsDir, { recursive: true, mode: 0o700 })
        yield* kit.fs.writeFile(claimPath, concatBytes(bom, encoder.encode(`${JSON.stringify(claim)}\n`)), {
          mode: 0o600
        })
        const modified = Option.getOrThrow((yield* kit.fs.stat(claimPath)).mtime).getTime()
        // The claim was just written: a torn claim is in flight until its mtime is a lease old.
        const mine = yield* kit.store.reserve({ jobId: jobId(4), sessionFile: kit.sessionFile, now: modified + 1_000 })
        assert.strictEqual(mine._tag, "InFlight", `${name} claim after a BOM`)
        const location = referenceLocation(kit, yield* referenceRoot(kit, world))
        const theirs = yield* Effect.promise(() =>
          outcomeOf(() =>
            Ref.reserveRarebitJob({ ...location, jobId: jobId(4), leaseMs: 60_000, now: modified + 1_000 })
          )
        )
        assert.isFalse(theirs.ok, `${name}: the reference cannot parse the claim`)
        assert.strictEqual(!theirs.ok && theirs.errorClass, "SyntaxError")
      }
    }))

  it.effect("a lock that starts with a BOM is torn: no token, no owner evidence", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setupKit(root)
      const lock = {
        token: "a".repeat(48),
        claimedAt: "2026-01-01T00:00:00.000Z",
        owner: { pid: 10, hostname: "crash-host", bootId: "boot-1", startTicks: "10" }
      }
      yield* kit.fs.makeDirectory(kit.path.dirname(kit.lockPath), { recursive: true, mode: 0o700 })
      yield* kit.fs.writeFile(kit.lockPath, concatBytes(bom, encoder.encode(`${JSON.stringify(lock)}\n`)), {
        mode: 0o600
      })
      const inspected = yield* inspectCommitLock(kit.lockPath)
      assert.isTrue(inspected?.lock.torn)
      assert.isNull(inspected?.lock.tokenPrefix)
      assert.isNull(inspected?.lock.owner)
      assert.match(inspected!.key, /^torn-[0-9a-f]{32}$/)
    }))
})
