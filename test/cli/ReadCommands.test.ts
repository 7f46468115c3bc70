/**
 * `current`, `history` and `jobs` driven as a user would (command-line
 * arguments in, printed output and exit code out, run in-process; the
 * spawned executable is covered in `Executable.test.ts`), over a temporary
 * store whose sidecars were written by the reference store and by ours,
 * sometimes into the same sidecar. `--json` output must equal what the
 * library returns for the same call.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { join } from "node:path"
import {
  entry,
  jobId,
  makeRoots,
  type Roots,
  Store,
  summaryReceipt,
  titleReceipt,
  writeSession
} from "../support/Reference.js"
import { cli, Ours, rootFlags, settleWith, snapshotTree, STACK_LINE } from "./CliHarness.js"

let roots: Roots
let sessionA: string
let sessionB: string
let sessionC: string
let sessionEmpty: string

const branchA = [entry("a1", "user", "first question"), entry("a2", "assistant", "first answer")]
const branchB = [entry("b1", "user", "another question"), entry("b2", "assistant", "another answer")]
const branchC = [entry("c1", "user", "a long session"), entry("c2", "assistant", "with many receipts")]

beforeAll(async () => {
  roots = await makeRoots("rarebit-cli-read-")
  sessionA = roots.sessionFile
  sessionB = join(roots.sessionRoot, "project", "other.jsonl")
  sessionC = join(roots.sessionRoot, "deep", "nested", "many.jsonl")
  sessionEmpty = join(roots.sessionRoot, "project", "empty.jsonl")
  await writeSession(sessionA, "session-a", branchA)
  await writeSession(sessionB, "session-b", branchB)
  await writeSession(sessionC, "session-c", branchC)
  await writeSession(sessionEmpty, "session-empty", branchA)

  await settleWith("reference", roots, sessionA, 1, summaryReceipt(branchA, "session-a"))
  await settleWith("reference", roots, sessionA, 2, titleReceipt(branchA, "session-a"))
  await settleWith("ours", roots, sessionB, 3, summaryReceipt(branchB, "session-b", { summary: "ours" }))
  await settleWith("reference", roots, sessionB, 4, titleReceipt(branchB, "session-b"))
  // Both writers append to one sidecar, alternately.
  for (let n = 0; n < 7; n++) {
    const receipt = n % 3 === 2
      ? titleReceipt(branchC, "session-c", { title: `title ${n}` })
      : summaryReceipt(branchC, "session-c", { summary: `summary ${n}` })
    await settleWith(n % 2 === 0 ? "ours" : "reference", roots, sessionC, 10 + n, receipt)
  }
  // A live claim (ours) and one whose lease ran out an hour ago (the reference's).
  await Ours.reserveRarebitJob({ jobId: jobId(20), sessionFile: sessionB, leaseMs: 600_000, ...roots.location })
  await Store.reserveRarebitJob({
    jobId: jobId(21),
    sessionFile: sessionA,
    leaseMs: 1000,
    now: Date.now() - 3_600_000,
    ...roots.location
  })
})

afterAll(async () => {
  await roots?.cleanup()
})

const json = (stdout: string) => JSON.parse(stdout)

describe("rarebit-store current", () => {
  it.live("--json prints exactly readRarebitCurrent's object, whichever implementation wrote the sidecar", () =>
    Effect.gen(function*() {
      for (const sessionFile of [sessionA, sessionB, sessionC]) {
        const run = yield* cli(["current", "--session", sessionFile, "--json", ...rootFlags(roots)])
        assert.strictEqual(run.code, 0, run.stderr)
        const expected = yield* Effect.promise(() => Ours.readRarebitCurrent({ sessionFile, ...roots.location }))
        assert.strictEqual(expected.availability, "available")
        assert.deepStrictEqual(json(run.stdout), expected)
      }
    }))

  it.live("resolves a Session id exactly like its path, and global flags may precede the command", () =>
    Effect.gen(function*() {
      const byId = yield* cli([...rootFlags(roots), "--json", "current", "--session", "session-b"])
      const byPath = yield* cli(["current", "-s", sessionB, "--json", ...rootFlags(roots)])
      assert.strictEqual(byId.code, 0, byId.stderr)
      assert.deepStrictEqual(json(byId.stdout), json(byPath.stdout))
      assert.strictEqual(json(byId.stdout).receipt.summary, "ours")
    }))

  it.live("prints a readable summary by default", () =>
    Effect.gen(function*() {
      const run = yield* cli(["current", "--session", sessionA, ...rootFlags(roots)])
      assert.strictEqual(run.code, 0, run.stderr)
      const current = yield* Effect.promise(() => Ours.readRarebitCurrent({ sessionFile: sessionA, ...roots.location }))
      const head = current.head
      assert.match(run.stdout, /\(available\)/)
      assert.match(run.stdout, new RegExp(`receipt @ byte ${head?.receiptOffset}, ${head?.receiptLength} bytes`))
      assert.match(run.stdout, /rarebit_summary ok/)
      assert.notInclude(run.stdout, "\u001b[")
    }))

  it.live("reports a Session without a sidecar as missing, with exit 0", () =>
    Effect.gen(function*() {
      const run = yield* cli(["current", "--session", sessionEmpty, "--json", ...rootFlags(roots)])
      assert.strictEqual(run.code, 0, run.stderr)
      assert.strictEqual(json(run.stdout).availability, "missing")
      const expected = yield* Effect.promise(() =>
        Ours.readRarebitCurrent({ sessionFile: sessionEmpty, ...roots.location })
      )
      assert.deepStrictEqual(json(run.stdout), expected)
    }))

  it.live("exits 3 with one line and a hint when the Session does not exist", () =>
    Effect.gen(function*() {
      for (const reference of [join(roots.sessionRoot, "nope.jsonl"), "no-such-session-id"]) {
        const run = yield* cli(["current", "--session", reference, ...rootFlags(roots)])
        assert.strictEqual(run.code, 3)
        assert.strictEqual(run.stdout, "")
        const lines = run.stderr.trim().split("\n")
        assert.strictEqual(lines.length, 2, run.stderr)
        assert.match(lines[0], /^rarebit-store: (Pi Session file not found|No persisted Pi Session has exact ID)/)
        assert.match(lines[1], /^hint: /)
        assert.notMatch(run.stderr, STACK_LINE)
      }
    }))

  it.live("exits 2 for a Session outside the Session root, and reads it with --allow-external-session", () =>
    Effect.gen(function*() {
      const outside = join(roots.root, "elsewhere", "outside.jsonl")
      yield* Effect.promise(() => writeSession(outside, "session-outside", branchA))
      const refused = yield* cli(["current", "--session", outside, ...rootFlags(roots)])
      assert.strictEqual(refused.code, 2)
      assert.match(refused.stderr, /outside the configured Session root/)
      assert.match(refused.stderr, /hint: .*--allow-external-session/)
      const allowed = yield* cli([
        "current",
        "--session",
        outside,
        "--allow-external-session",
        "--json",
        ...rootFlags(roots)
      ])
      assert.strictEqual(allowed.code, 0, allowed.stderr)
      assert.deepStrictEqual(
        json(allowed.stdout),
        yield* Effect.promise(() =>
          Ours.readRarebitCurrent({ sessionFile: outside, allowExternalSession: true, ...roots.location })
        )
      )
    }))

  it.live("exits 2 for invocation mistakes, naming the problem and where help is", () =>
    Effect.gen(function*() {
      const cases: Array<[Array<string>, RegExp]> = [
        [["current"], /Missing required flag: --session/],
        [["curent"], /Unknown subcommand "curent".*did you mean/i],
        [["current", "--session", sessionA, "--bogus"], /Unrecognized flag: --bogus/],
        [["history", "--session", sessionA, "--limit", "many"], /Invalid value for flag --limit/]
      ]
      for (const [args, message] of cases) {
        const run = yield* cli([...args, ...rootFlags(roots)])
        assert.strictEqual(run.code, 2, `${args.join(" ")}: ${run.stderr}`)
        assert.match(run.stderr, message)
        assert.match(run.stderr, /hint: run 'rarebit-store.*--help' for usage/)
        assert.notMatch(run.stderr, STACK_LINE)
        assert.strictEqual(run.stdout, "")
      }
    }))
})

describe("rarebit-store history", () => {
  it.live("--json prints the page readRarebitHistory returns, at any offset and limit", () =>
    Effect.gen(function*() {
      const pages: Array<[number, number]> = [[0, 100], [0, 3], [1, 2], [2113, 4]]
      for (const [fromOffset, limit] of pages) {
        const run = yield* cli([
          "history",
          "--session",
          sessionC,
          "--from",
          String(fromOffset),
          "--limit",
          String(limit),
          "--json",
          ...rootFlags(roots)
        ])
        assert.strictEqual(run.code, 0, run.stderr)
        const request = { sessionFile: sessionC, fromOffset, limit, ...roots.location }
        const expected = yield* Effect.promise(() => Ours.readRarebitHistory(request))
        assert.deepStrictEqual(json(run.stdout), expected)
        assert.deepStrictEqual(
          json(run.stdout),
          yield* Effect.promise(() => Store.readRarebitHistory(request))
        )
      }
    }))

  it.live("--all prints one document of the page's shape with every receipt across pages, one per line, in order", () =>
    Effect.gen(function*() {
      const run = yield* cli(["history", "--session", sessionC, "--all", "--limit", "2", "--json", ...rootFlags(roots)])
      assert.strictEqual(run.code, 0, run.stderr)
      const expected: Array<unknown> = []
      let offset: number | null = 0
      let first: any
      while (offset !== null) {
        const request = { sessionFile: sessionC, fromOffset: offset, limit: 2, ...roots.location }
        const page: any = yield* Effect.promise(() => Ours.readRarebitHistory(request))
        first ??= page
        expected.push(...page.records)
        offset = page.nextOffset
      }
      const document = json(run.stdout)
      assert.strictEqual(document.records.length, 7)
      assert.deepStrictEqual(document, { ...first, records: expected, nextOffset: null })
      // Written as it is read: the head, one record per line, the end.
      const lines = run.stdout.trimEnd().split("\n")
      assert.strictEqual(lines.length, 1 + 7)
      assert.match(lines[0], /^\{"availability":"available","path":".*","records":\[$/)
      assert.deepStrictEqual(JSON.parse(lines[1].replace(/,$/, "")), expected[0])
      assert.match(lines.at(-1)!, /\],"nextOffset":null\}$/)
      // A page has the same layout and shape.
      const page = yield* cli(["history", "--session", sessionC, "--limit", "2", "--json", ...rootFlags(roots)])
      assert.deepStrictEqual(Object.keys(json(page.stdout)), Object.keys(document))
      assert.strictEqual(page.stdout.trimEnd().split("\n").length, 1 + 2)
    }))

  it.live("prints offsets and the next page by default", () =>
    Effect.gen(function*() {
      const request = { sessionFile: sessionC, limit: 3, ...roots.location }
      const page: any = yield* Effect.promise(() => Ours.readRarebitHistory(request))
      const run = yield* cli(["history", "--session", "session-c", "--limit", "3", ...rootFlags(roots)])
      assert.strictEqual(run.code, 0, run.stderr)
      for (const record of page.records) assert.include(run.stdout, `@${record.offset}`)
      assert.include(run.stdout, `next page: --from ${page.nextOffset}`)
    }))

  it.live("exits 2 for bounds outside the protocol", () =>
    Effect.gen(function*() {
      for (const args of [["--limit", "0"], ["--limit", "1001"], ["--from=-1"]]) {
        const run = yield* cli(["history", "--session", sessionC, ...args, ...rootFlags(roots)])
        assert.strictEqual(run.code, 2, `${args.join(" ")}: ${run.stderr}`)
        assert.match(run.stderr, /History offset and limit are outside protocol bounds/)
      }
    }))
})

describe("rarebit-store jobs", () => {
  it.live("--json lists every claim: settled with verified pointers, active, and expired", () =>
    Effect.gen(function*() {
      const run = yield* cli(["jobs", "--json", ...rootFlags(roots)])
      assert.strictEqual(run.code, 0, run.stderr)
      const report = json(run.stdout)
      const byJob = new Map<string, any>(report.claims.map((claim: any) => [claim.jobId, claim]))
      assert.strictEqual(report.claims.length, 13)
      for (const n of [1, 2, 3, 4, 10, 11, 12, 13, 14, 15, 16]) {
        const claim = byJob.get(jobId(n))
        assert.strictEqual(claim.state, "settled", `job ${n}`)
        assert.strictEqual(claim.pointer, "verified", `job ${n}`)
      }
      assert.strictEqual(byJob.get(jobId(3)).sidecar, Store.rarebitMaterializationPath(sessionB, roots.location))
      assert.strictEqual(byJob.get(jobId(20)).state, "active")
      assert.strictEqual(byJob.get(jobId(20)).expired, false)
      assert.strictEqual(byJob.get(jobId(21)).state, "active")
      assert.strictEqual(byJob.get(jobId(21)).expired, true)
      assert.notInclude(run.stdout, "leaseToken")
    }))

  it.live("--session lists only the claims of that Session's jobs and counts the others", () =>
    Effect.gen(function*() {
      const run = yield* cli(["jobs", "--session", sessionA, "--json", ...rootFlags(roots)])
      assert.strictEqual(run.code, 0, run.stderr)
      const report = json(run.stdout)
      assert.deepStrictEqual(report.claims.map((claim: any) => claim.jobId).sort(), [jobId(1), jobId(2)])
      assert.strictEqual(report.unattributedClaims, 11)
      assert.strictEqual(report.sessionFile, sessionA)
    }))

  it.live("prints one row per claim by default", () =>
    Effect.gen(function*() {
      const run = yield* cli(["jobs", ...rootFlags(roots)])
      assert.strictEqual(run.code, 0, run.stderr)
      assert.match(run.stdout, /13 claim\(s\)/)
      assert.match(run.stdout, /expired +0{15}/)
      assert.match(run.stdout, /active +0{15}.*lease left/)
      assert.match(run.stdout, /settled +0{15}.*receipt verified in materializations-v4\/project\/trace\.jsonl/)
    }))
})

describe("read-only commands", () => {
  it.live("write nothing: the store tree is byte-for-byte and time-for-time unchanged", () =>
    Effect.gen(function*() {
      const before = yield* Effect.promise(() => snapshotTree(roots.root))
      const runs = [
        ["current", "--session", sessionA],
        ["current", "--session", sessionEmpty],
        ["history", "--session", sessionEmpty],
        ["history", "--session", sessionC, "--all"],
        ["jobs"],
        ["jobs", "--session", sessionB],
        ["verify"],
        ["verify", "--session", sessionEmpty],
        ["unlock", "--session", sessionA]
      ]
      for (const args of runs) {
        const run = yield* cli([...args, ...rootFlags(roots)])
        assert.oneOf(run.code, [0, 1], `${args.join(" ")}: ${run.stderr}`)
      }
      assert.deepStrictEqual(yield* Effect.promise(() => snapshotTree(roots.root)), before)
    }))

  it.live("--help of every command shows its flags and an example, with exit 0", () =>
    Effect.gen(function*() {
      for (const command of ["current", "history", "jobs", "verify", "unlock", "demo"]) {
        const run = yield* cli([command, "--help"])
        assert.strictEqual(run.code, 0, run.stderr)
        assert.include(run.stdout, "EXAMPLES")
        assert.include(run.stdout, `rarebit-store ${command}`)
        assert.include(run.stdout, "--root")
      }
    }))
})
