/**
 * Every command survives whatever is on disk: sidecar lines and Session
 * lines nested 100,000 levels deep, megabyte strings and keys, megabyte
 * arrays, `__proto__` keys and numbers like `1e309`; claims and locks as
 * deep, long and strange as fits in their 4 KiB bound (`MAX_CLAIM_BYTES`,
 * `MAX_LOCK_FILE_BYTES`), and claims and locks of megabytes, which are
 * reported unreadable without being parsed. Damage is reported as damage
 * (exit 1 from `verify`), other commands exit with their documented code,
 * never 4; every description of a bad file is bounded, and `--json` output
 * parses. Run in-process on both worlds.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem, Path } from "effect"
import { TestClock } from "effect/testing"
import { encodeHeadLine, makeHead } from "../../src/protocol/Head.js"
import { MAX_CLAIM_BYTES, MAX_LOCK_FILE_BYTES } from "../../src/protocol/Limits.js"
import { MAX_DETAIL_CHARS, MAX_FIELD_CHARS } from "../../src/store/audit/SidecarAudit.js"
import { summaryReceipt } from "../../src/testing/Receipts.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { cliIn, type CliRun, STACK_LINE } from "./CliHarness.js"

const DEEP = 100_000
const deepArray = "[".repeat(DEEP) + "]".repeat(DEEP)
const deepObject = "{\"a\":".repeat(DEEP) + "1" + "}".repeat(DEEP)
// Deep enough to overflow a recursive walk, short enough for the 48 KiB line limit.
const deepLineArray = "[".repeat(20_000) + "]".repeat(20_000)
// As deep as a claim or a lock can nest within its 4 KiB bound.
const deepClaimArray = "[".repeat(1_500) + "]".repeat(1_500)
const deepClaimObject = "{\"a\":".repeat(600) + "1" + "}".repeat(600)
const megabyte = "m".repeat(1_000_000)
const hex = (c: string) => c.repeat(64)

const branch = [
  { id: "u1", type: "message", message: { role: "user", content: "a question" } },
  { id: "a1", type: "message", message: { role: "assistant", content: "an answer", stopReason: "stop" } }
]

/** Lines that parse but nest, weigh or name things no writer would. */
const hostileSidecarLines = [
  `{"type":${deepLineArray}}`,
  `{"type":${deepArray}}`,
  `{"type":"rarebit_head","sessionId":${deepLineArray}}`,
  `{"type":"rarebit_summary","state":${deepLineArray}}`,
  `{"type":"rarebit_title","${"k".repeat(40_000)}":1}`,
  `{"__proto__":{"type":"rarebit_head"},"type":"x"}`,
  `{"type":"rarebit_head","protocolVersion":1,"sessionId":"s","receiptOffset":1e309,"receiptLength":1e309,` +
  `"receiptHash":"${hex("a")}"}`,
  `{"type":"${"t".repeat(40_000)}"}`,
  `[${"1e309,".repeat(5000)}1]`
]

/** Claims that fit in MAX_CLAIM_BYTES, so they are parsed: deep, long and strange within it. */
const hostileClaims: Record<string, string> = {
  [hex("1")]: `{"jobId":"${hex("1")}","state":${deepClaimArray}}`,
  [hex("2")]: `{"jobId":"${hex("2")}","state":${deepClaimObject}}`,
  [hex("3")]: `{"jobId":"${hex("3")}","state":"settled","leaseToken":"x","receiptRef":${deepClaimArray}}`,
  [hex("4")]:
    `{"jobId":"${hex("4")}","state":"active","leaseToken":"x","claimedAt":"Jan 1 2026 (${"m".repeat(3_000)})",` +
    `"leaseMs":1e309}`,
  [hex("5")]: `{"jobId":"${hex("5")}","state":"${"m".repeat(3_800)}"}`,
  [hex("6")]: `{"__proto__":{"state":"active"},"jobId":"${hex("6")}"}`,
  [hex("7")]: `[${"1e309,".repeat(600)}1]`,
  [hex("8")]: `{"jobId":"${hex("8")}","state":"active","leaseToken":"x","claimedAt":"2026-01-01T00:00:00.000Z",` +
    `"leaseMs":1,"${"m".repeat(3_000)}":1}`,
  [hex("9")]: `{"jobId":"${hex("9")}","state":"settled","leaseToken":"x","receiptRef":{"receiptOffset":0,` +
    `"receiptLength":10,"receiptHash":${"[".repeat(1_500)}"${hex("a")}"${"]".repeat(1_500)}}}`
}

const oversizedJobId = (n: number) => `${"b".repeat(63)}${n}`

/** Claims of up to megabytes, past MAX_CLAIM_BYTES: never parsed, each reported unreadable. */
const oversizedClaims: Record<string, string> = {
  [oversizedJobId(1)]: `{"jobId":"${oversizedJobId(1)}","state":${deepArray}}`,
  [oversizedJobId(2)]: `{"jobId":"${oversizedJobId(2)}","state":${deepObject}}`,
  [oversizedJobId(3)]: `{"jobId":"${oversizedJobId(3)}","state":"settled","leaseToken":"x","receiptRef":${deepArray}}`,
  [oversizedJobId(4)]: `{"jobId":"${oversizedJobId(4)}","state":"active","leaseToken":"x",` +
    `"claimedAt":"Jan 1 2026 (${megabyte})","leaseMs":1e309}`,
  [oversizedJobId(5)]: `{"jobId":"${oversizedJobId(5)}","state":"${megabyte}"}`,
  [oversizedJobId(6)]: `[${"1e309,".repeat(200_000)}1]`,
  [oversizedJobId(7)]: `{"jobId":"${oversizedJobId(7)}","state":"active","leaseToken":"x",` +
    `"claimedAt":"2026-01-01T00:00:00.000Z","leaseMs":1,"${megabyte}":1}`
}

/** A lock that fits in MAX_LOCK_FILE_BYTES with every field longer than a report shows. */
const hostileLock = `{"token":"${"ab".repeat(250)}","claimedAt":"Jan 1 2026 (${"m".repeat(500)})",` +
  `"owner":{"pid":1,"hostname":"${"h".repeat(500)}","bootId":"${"b".repeat(500)}",` +
  `"pidNamespace":"${"p".repeat(500)}"},"extra":${"[".repeat(150)}${"]".repeat(150)}}\n`

/** A lock of megabytes, past MAX_LOCK_FILE_BYTES: never parsed, so it has no owner to show. */
const oversizedLock = `{"token":"${"ab".repeat(500_000)}","claimedAt":"Jan 1 2026 (${megabyte})",` +
  `"owner":{"pid":1,"hostname":"${"h".repeat(1_000_000)}","bootId":"${"b".repeat(1_000_000)}",` +
  `"pidNamespace":"${"p".repeat(1_000_000)}"},"extra":${deepArray}}\n`

interface Planted {
  readonly flags: ReadonlyArray<string>
  /** A Session whose sidecar holds every hostile line, and whose lock is hostile. */
  readonly hostile: string
  /**
   * A Session with deep lines, a sidecar with a valid receipt whose sessionStatus nests 3,000 deep, and an
   * oversized lock.
   */
  readonly deep: string
  readonly hostileLock: string
  readonly oversizedLock: string
}

const plant = (root: string) =>
  Effect.gen(function*() {
    // The files are dated 2026; the audit judges their age from now.
    yield* TestClock.setTime(Date.parse("2027-01-01T00:00:00.000Z"))
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const sessionRoot = path.join(root, "sessions")
    const rarebitRoot = path.join(root, "rarebit")
    const write = (file: string, text: string) =>
      Effect.andThen(fs.makeDirectory(path.dirname(file), { recursive: true }), fs.writeFileString(file, text))

    const hostile = path.join(sessionRoot, "p", "hostile.jsonl")
    yield* write(
      hostile,
      [{ type: "session", id: "hostile" }, ...branch].map((v) => JSON.stringify(v)).join("\n") + "\n"
    )
    const hostileSidecar = path.join(rarebitRoot, "materializations-v4", "p", "hostile.jsonl")
    yield* write(hostileSidecar, hostileSidecarLines.join("\n") + "\n")
    yield* write(`${hostileSidecar}.commit-lock`, hostileLock)

    const deep = path.join(sessionRoot, "p", "deep.jsonl")
    yield* write(
      deep,
      [
        `{"type":"session","id":"deep","extra":${deepArray}}`,
        `{"id":"u1","type":"message","message":{"role":"user","content":"a question","x":${deepObject}}}`,
        `{"id":"u2","type":"message","message":{"role":"user","content":${deepArray}}}`,
        `{"id":"a1","type":"message","message":{"role":"assistant","content":[{"type":"text","text":${deepArray}}],` +
        `"stopReason":"stop"}}`
      ].join("\n") + "\n"
    )
    const receipt = summaryReceipt(branch, {
      sessionId: "deep",
      observedAt: "2026-01-01T00:00:00.000Z",
      jobId: hex("d"),
      summary: "a summary"
    })
    let status: unknown = receipt.sessionStatus
    for (let level = 0; level < 3000; level++) status = [status]
    const receiptLine = new TextEncoder().encode(`${JSON.stringify({ ...receipt, sessionStatus: status })}\n`)
    const headLine = encodeHeadLine(makeHead("deep", 0, receiptLine))
    const deepSidecar = path.join(rarebitRoot, "materializations-v4", "p", "deep.jsonl")
    yield* fs.makeDirectory(path.dirname(deepSidecar), { recursive: true })
    yield* fs.writeFile(deepSidecar, new Uint8Array([...receiptLine, ...headLine]))

    yield* fs.writeFileString(`${deepSidecar}.commit-lock`, oversizedLock)

    for (const [jobId, text] of Object.entries({ ...hostileClaims, ...oversizedClaims })) {
      yield* write(path.join(rarebitRoot, "jobs-v4", `${jobId}.json`), `${text}\n`)
    }
    return {
      flags: ["--root", rarebitRoot, "--session-root", sessionRoot],
      hostile,
      deep,
      hostileLock: `${hostileSidecar}.commit-lock`,
      oversizedLock: `${deepSidecar}.commit-lock`
    } satisfies Planted
  })

/** Output that says what happened in bounded text: no stack, no megabyte echo, lines of sane length. */
const assertBounded = (run: CliRun, label: string) => {
  assert.notMatch(run.stderr, STACK_LINE, label)
  assert.notMatch(run.stderr, /Maximum call stack/, label)
  assert.isBelow(run.stdout.length + run.stderr.length, 200_000, `${label}: output echoes the files`)
}

const assertHumanLines = (run: CliRun, label: string) => {
  for (const line of (run.stdout + run.stderr).split("\n")) assert.isAtMost(line.length, 1000, `${label}: ${line}`)
}

const parse = (run: CliRun, label: string): any => {
  try {
    return JSON.parse(run.stdout)
  } catch (error) {
    assert.fail(`${label}: --json output is not JSON (${String(error)}): ${run.stdout.slice(0, 200)}`)
  }
}

describe("hostile content", () => {
  it("the claims and the lock meant to be parsed fit in their bounds; the oversized ones do not", () => {
    for (const text of Object.values(hostileClaims)) assert.isAtMost(`${text}\n`.length, MAX_CLAIM_BYTES)
    for (const text of Object.values(oversizedClaims)) assert.isAbove(`${text}\n`.length, MAX_CLAIM_BYTES)
    assert.isAtMost(hostileLock.length, MAX_LOCK_FILE_BYTES)
    assert.isAbove(oversizedLock.length, MAX_LOCK_FILE_BYTES)
  })
})

fileSystemSuite("CLI on hostile content", (it) => {
  it.effect("verify reports every hostile file as damage, with bounded details, and exits 1", ({ root }) =>
    Effect.gen(function*() {
      const planted = yield* plant(root)
      const human = yield* cliIn(["verify", ...planted.flags])
      assert.strictEqual(human.code, 1, human.stderr)
      assertBounded(human, "verify")
      assertHumanLines(human, "verify")

      const run = yield* cliIn(["verify", "--json", ...planted.flags])
      assert.strictEqual(run.code, 1, run.stderr)
      assertBounded(run, "verify --json")
      const report = parse(run, "verify --json")
      const kinds = (path: string) =>
        report.findings.filter((item: any) => item.path.endsWith(path)).map((item: any) => item.kind)
      for (const item of report.findings) assert.isAtMost(item.detail.length, MAX_DETAIL_CHARS, item.detail)
      // Every hostile sidecar line is a finding of its own.
      assert.strictEqual(kinds("p/hostile.jsonl").length, hostileSidecarLines.length, JSON.stringify(report.findings))
      assert.deepStrictEqual(kinds("p/hostile.jsonl.commit-lock"), ["commit_lock_leftover"])
      const oversizedLockFindings = report.findings.filter((item: any) => item.path === planted.oversizedLock)
      assert.deepStrictEqual(oversizedLockFindings.map((item: any) => [item.kind, item.severity]), [
        ["commit_lock_leftover", "damage"]
      ])
      assert.match(oversizedLockFindings[0].detail, new RegExp(`^larger than ${MAX_LOCK_FILE_BYTES} bytes, `))
      for (const jobId of Object.keys(hostileClaims)) {
        const found = report.findings.filter((item: any) => item.jobId === jobId)
        assert.strictEqual(found.length, 1, `claim ${jobId}: ${JSON.stringify(found)}`)
        // Claims within the bound are read leniently, as the seed reads them: an
        // extra key does not spoil an expired lease, which the next reserve takes over.
        assert.deepStrictEqual(
          [found[0].kind, found[0].severity],
          jobId === hex("8") ? ["claim_expired", "notice"] : [found[0].kind, "damage"]
        )
        assert.notStrictEqual(found[0].kind, "claim_unreadable", `claim ${jobId} fits and is parsed`)
      }
      // Past the bound a claim is not parsed, whatever it holds: it is damage,
      // and counts as in flight until its lease has passed.
      for (const jobId of Object.keys(oversizedClaims)) {
        const found = report.findings.filter((item: any) => item.jobId === jobId)
        assert.deepStrictEqual(
          found.map((item: any) => [item.kind, item.severity]),
          [["claim_unreadable", "damage"]],
          jobId
        )
        assert.match(found[0].detail, new RegExp(`^is larger than ${MAX_CLAIM_BYTES} bytes; `), jobId)
      }
      assert.include(
        report.findings.find((item: any) => item.jobId === hex("1")).detail,
        "an array of 1 item"
      )
      for (const claim of report.claims) {
        if (claim.claimedAt !== null) assert.isAtMost(claim.claimedAt.length, MAX_FIELD_CHARS)
      }
      assert.isNull(report.claims.find((claim: any) => claim.jobId === hex("3")).receiptRef)
      assert.deepStrictEqual(report.claims.find((claim: any) => claim.jobId === hex("9")).receiptRef, {
        receiptOffset: 0,
        receiptLength: 10,
        receiptHash: hex("a")
      })
      // The valid receipt nested 3,000 deep is counted, not reported.
      assert.deepStrictEqual(kinds("p/deep.jsonl"), [])
    }))

  it.effect("jobs lists every hostile claim with bounded fields and exits 0", ({ root }) =>
    Effect.gen(function*() {
      const planted = yield* plant(root)
      const human = yield* cliIn(["jobs", ...planted.flags])
      assert.strictEqual(human.code, 0, human.stderr)
      assertBounded(human, "jobs")
      assertHumanLines(human, "jobs")
      const run = yield* cliIn(["jobs", "--json", ...planted.flags])
      assert.strictEqual(run.code, 0, run.stderr)
      assertBounded(run, "jobs --json")
      const report = parse(run, "jobs --json")
      assert.deepStrictEqual(
        report.claims.map((claim: any) => claim.jobId).sort(),
        [...Object.keys(hostileClaims), ...Object.keys(oversizedClaims)].sort()
      )
      for (const claim of report.claims) {
        if (claim.detail !== null) assert.isAtMost(claim.detail.length, MAX_DETAIL_CHARS)
        if (claim.claimedAt !== null) assert.isAtMost(claim.claimedAt.length, MAX_FIELD_CHARS)
      }
    }))

  it.effect("current and history read deep Sessions and sidecars, and exit 0", ({ root }) =>
    Effect.gen(function*() {
      const planted = yield* plant(root)
      for (const session of [planted.hostile, planted.deep]) {
        for (const command of [["current"], ["history"], ["history", "--all"]]) {
          for (const json of [false, true]) {
            const args = [...command, "--session", session, ...planted.flags, ...(json ? ["--json"] : [])]
            const run = yield* cliIn(args)
            const label = args.slice(0, 3).join(" ")
            assert.strictEqual(run.code, 0, `${label}: ${run.stderr}`)
            assertBounded(run, label)
            if (!json) {
              assertHumanLines(run, label)
              continue
            }
            const lines = command.includes("--all")
              ? run.stdout.trim().split("\n").filter((l) => l !== "")
              : [run.stdout]
            for (const line of lines) assert.doesNotThrow(() => JSON.parse(line), label)
          }
        }
      }
      const current = parse(yield* cliIn(["current", "--json", "--session", planted.deep, ...planted.flags]), "current")
      assert.strictEqual(current.availability, "available")
      let status = current.receipt.sessionStatus
      let depth = 0
      while (Array.isArray(status)) {
        status = status[0]
        depth++
      }
      assert.strictEqual(depth, 3000)
      assert.strictEqual(status, "finished")
    }))

  it.effect("unlock shows a hostile lock in bounded text, refuses it (5), and removes it with --force", ({ root }) =>
    Effect.gen(function*() {
      const planted = yield* plant(root)
      const fs = yield* FileSystem.FileSystem
      const human = yield* cliIn(["unlock", "--session", planted.hostile, ...planted.flags])
      assert.strictEqual(human.code, 5, human.stderr)
      assertBounded(human, "unlock")
      assertHumanLines(human, "unlock")
      const run = yield* cliIn(["unlock", "--json", "--session", planted.hostile, ...planted.flags])
      assert.strictEqual(run.code, 5, run.stderr)
      const report = parse(run, "unlock --json")
      assert.strictEqual(report.action, "refused")
      assert.isAtMost(report.lock.claimedAt.length, MAX_FIELD_CHARS)
      assert.isAtMost(report.lock.owner.hostname.length, MAX_FIELD_CHARS)
      assert.isAtMost(report.lock.owner.bootId.length, MAX_FIELD_CHARS)
      assert.isAtMost(report.lock.owner.pidNamespace.length, MAX_FIELD_CHARS)
      const forced = yield* cliIn(["unlock", "--force", "--json", "--session", planted.hostile, ...planted.flags])
      assert.strictEqual(forced.code, 0, forced.stderr)
      assert.strictEqual(parse(forced, "unlock --force").action, "removed")
      assert.isFalse(yield* fs.exists(planted.hostileLock))

      // A lock of megabytes is not read: it has no owner to show, only why it cannot be read.
      const oversizedHuman = yield* cliIn(["unlock", "--session", planted.deep, ...planted.flags])
      assert.strictEqual(oversizedHuman.code, 5, oversizedHuman.stderr)
      assertBounded(oversizedHuman, "unlock oversized")
      assertHumanLines(oversizedHuman, "unlock oversized")
      const oversized = parse(
        yield* cliIn(["unlock", "--json", "--session", planted.deep, ...planted.flags]),
        "unlock oversized"
      )
      assert.strictEqual(oversized.action, "refused")
      assert.strictEqual(oversized.lock.unreadable, `larger than ${MAX_LOCK_FILE_BYTES} bytes`)
      assert.isNull(oversized.lock.owner)
      assert.isTrue(yield* fs.exists(planted.oversizedLock))
      const oversizedForced = yield* cliIn(["unlock", "--force", "--json", "--session", planted.deep, ...planted.flags])
      assert.strictEqual(oversizedForced.code, 0, oversizedForced.stderr)
      assert.strictEqual(parse(oversizedForced, "unlock --force oversized").action, "removed")
      assert.isFalse(yield* fs.exists(planted.oversizedLock))
    }))
})
