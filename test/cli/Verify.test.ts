/**
 * `rarebit-store verify` over stores written by both implementations, one
 * clean and one with every kind of damage the audit claims to find, each
 * planted in its own Session so that every finding can be checked by kind,
 * path, offset and job.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { appendFile, mkdir, readFile, rm, stat, symlink, utimes, writeFile } from "node:fs/promises"
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
import { cli, deadOwnerEvidence, type Implementation, rootFlags, settleWith, writeLock } from "./CliHarness.js"

const HOUR = 3_600_000

let clean: Roots
let damaged: Roots

const branch = (name: string) => [
  entry(`${name}-u`, "user", `question about ${name}`),
  entry(`${name}-a`, "assistant", "an answer")
]

const sessionOf = (roots: Roots, name: string) => join(roots.sessionRoot, "project", `${name}.jsonl`)
const sidecarOf = (roots: Roots, name: string) =>
  Store.rarebitMaterializationPath(sessionOf(roots, name), roots.location)
const claimOf = (roots: Roots, job: number) => join(roots.rarebitRoot, "jobs-v4", `${jobId(job)}.json`)

/** Writes Session `name` and settles a summary (and optionally a title) for it. */
const seed = async (roots: Roots, name: string, job: number, writer: Implementation, title?: Implementation) => {
  await writeSession(sessionOf(roots, name), name, branch(name))
  await settleWith(writer, roots, sessionOf(roots, name), job, summaryReceipt(branch(name), name))
  if (title !== undefined) {
    await settleWith(title, roots, sessionOf(roots, name), job + 1000, titleReceipt(branch(name), name))
  }
}

const sizeOf = async (path: string) => (await stat(path)).size

const backdate = (path: string, ms: number) => utimes(path, new Date(Date.now() - ms), new Date(Date.now() - ms))

/** Where each planted problem is, filled in while planting. */
const planted: Record<string, { path: string; offset?: number; jobId?: string }> = {}

beforeAll(async () => {
  clean = await makeRoots("rarebit-cli-verify-clean-")
  await seed(clean, "alpha", 1, "reference", "ours")
  await seed(clean, "beta", 2, "ours", "reference")
  const again = summaryReceipt(branch("beta"), "beta", { summary: "again" })
  await settleWith("reference", clean, sessionOf(clean, "beta"), 3, again)

  damaged = await makeRoots("rarebit-cli-verify-damaged-")
  const d = damaged
  await seed(d, "fine", 10, "reference", "ours")

  await seed(d, "torn", 11, "ours")
  planted.torn_tail = { path: sidecarOf(d, "torn"), offset: await sizeOf(sidecarOf(d, "torn")) }
  await appendFile(sidecarOf(d, "torn"), "{\"type\":\"rarebit_summ")

  await seed(d, "flipped", 12, "reference")
  const flipped = await readFile(sidecarOf(d, "flipped"), "utf8")
  const headOffset = Buffer.byteLength(flipped.slice(0, flipped.lastIndexOf("{\"type\":\"rarebit_head\"")))
  const hashAt = flipped.lastIndexOf("\"receiptHash\":\"") + "\"receiptHash\":\"".length
  const flippedChar = flipped[hashAt] === "0" ? "1" : "0"
  await writeFile(sidecarOf(d, "flipped"), flipped.slice(0, hashAt) + flippedChar + flipped.slice(hashAt + 1))
  planted.head_range_invalid = { path: sidecarOf(d, "flipped"), offset: headOffset }

  await seed(d, "badhead", 13, "ours")
  planted.invalid_head = { path: sidecarOf(d, "badhead"), offset: await sizeOf(sidecarOf(d, "badhead")) }
  await appendFile(
    sidecarOf(d, "badhead"),
    "{\"type\":\"rarebit_head\",\"protocolVersion\":1,\"sessionId\":\"badhead\"}\n"
  )

  await seed(d, "uncommitted", 14, "ours")
  const receiptLine = (await readFile(sidecarOf(d, "uncommitted"), "utf8")).split("\n")[0]
  planted.uncommitted_tail = { path: sidecarOf(d, "uncommitted"), offset: await sizeOf(sidecarOf(d, "uncommitted")) }
  await appendFile(sidecarOf(d, "uncommitted"), `${receiptLine}\n`)

  await seed(d, "garbage", 15, "reference")
  const garbageText = await readFile(sidecarOf(d, "garbage"), "utf8")
  const headLine = garbageText.trimEnd().split("\n").at(-1)!
  planted.invalid_record = { path: sidecarOf(d, "garbage"), offset: Buffer.byteLength(garbageText) }
  await appendFile(sidecarOf(d, "garbage"), `not json at all\n${headLine}\n`)

  await writeSession(sessionOf(d, "symlink"), "symlink", branch("symlink"))
  await symlink(sidecarOf(d, "fine"), sidecarOf(d, "symlink"))
  planted.sidecar_not_regular = { path: sidecarOf(d, "symlink") }

  await seed(d, "pointer", 16, "reference")
  const claim = JSON.parse(await readFile(claimOf(d, 16), "utf8"))
  claim.receiptRef.receiptOffset += 1
  await writeFile(claimOf(d, 16), `${JSON.stringify(claim)}\n`)
  planted.claim_pointer_invalid = { path: claimOf(d, 16), jobId: jobId(16) }

  await seed(d, "orphan", 17, "ours")
  await rm(sidecarOf(d, "orphan"))
  planted.claim_orphan = { path: claimOf(d, 17), jobId: jobId(17) }

  await mkdir(claimOf(d, 90))
  planted.claim_unreadable = { path: claimOf(d, 90), jobId: jobId(90) }
  await writeFile(claimOf(d, 91), "")
  planted.claim_invalid = { path: claimOf(d, 91), jobId: jobId(91) }
  await Store.reserveRarebitJob({
    jobId: jobId(92),
    sessionFile: sessionOf(d, "fine"),
    leaseMs: 1000,
    now: Date.now() - HOUR,
    ...d.location
  })
  planted.claim_expired = { path: claimOf(d, 92), jobId: jobId(92) }

  await seed(d, "deadlock", 18, "ours")
  await writeLock(`${sidecarOf(d, "deadlock")}.commit-lock`, "d".repeat(48), Date.now(), await deadOwnerEvidence())
  planted.dead_lock = { path: `${sidecarOf(d, "deadlock")}.commit-lock` }
  await seed(d, "oldlock", 19, "reference")
  await writeLock(`${sidecarOf(d, "oldlock")}.commit-lock`, "e".repeat(48), Date.now() - HOUR)
  planted.old_lock = { path: `${sidecarOf(d, "oldlock")}.commit-lock` }
  await seed(d, "freshlock", 20, "reference")
  await writeLock(`${sidecarOf(d, "freshlock")}.commit-lock`, "f".repeat(48), Date.now())
  planted.commit_lock_held = { path: `${sidecarOf(d, "freshlock")}.commit-lock` }

  const claimTemp = `${claimOf(d, 93)}.0123456789abcdef01234567.tmp`
  await writeFile(claimTemp, "{\"jobId\"")
  await backdate(claimTemp, HOUR)
  planted.temp_file_leftover = { path: claimTemp }
  const breakFile = `${sidecarOf(d, "fine")}.commit-lock.break-${"a".repeat(48)}`
  await writeFile(breakFile, "{}\n")
  await backdate(breakFile, HOUR)
  planted.break_file_leftover = { path: breakFile }
})

afterAll(async () => {
  await clean?.cleanup()
  await damaged?.cleanup()
})

const findingsOf = (stdout: string): Array<any> => JSON.parse(stdout).findings

interface Where {
  readonly path: string
  readonly offset?: number
  readonly jobId?: string
}

const expectFinding = (findings: Array<any>, kind: string, severity: string, where: Where, afterCrash = false) => {
  const match = findings.find((item) =>
    item.kind === kind && item.path === where.path &&
    (where.offset === undefined || item.offset === where.offset) &&
    (where.jobId === undefined || item.jobId === where.jobId)
  )
  assert.isDefined(match, `expected ${kind} at ${where.path}@${where.offset} in ${JSON.stringify(findings, null, 1)}`)
  assert.strictEqual(match.severity, severity, kind)
  assert.strictEqual(match.expectedAfterCrash, afterCrash, kind)
}

/** What a crash leaves and nothing is hurt by: notices, or damage under --strict. */
const CRASH_TRACES = ["torn_tail", "uncommitted_tail", "temp_file_leftover"]

describe("rarebit-store verify", () => {
  it.live("passes a clean store written by both implementations, exit 0", () =>
    Effect.gen(function*() {
      const run = yield* cli(["verify", "--json", ...rootFlags(clean)])
      assert.strictEqual(run.code, 0, run.stdout + run.stderr)
      const report = JSON.parse(run.stdout)
      assert.isTrue(report.ok)
      assert.deepStrictEqual(report.findings, [])
      assert.strictEqual(report.sidecars.length, 2)
      assert.deepStrictEqual(report.sidecars.map((sidecar: any) => sidecar.receipts), [2, 3])
      assert.strictEqual(report.claims.filter((claim: any) => claim.pointer === "verified").length, 5)
      const human = yield* cli(["verify", ...rootFlags(clean)])
      assert.strictEqual(human.code, 0)
      assert.match(human.stdout, /OK: no damage/)
    }))

  it.live("finds every planted kind of damage, at its path and offset, and exits 1", () =>
    Effect.gen(function*() {
      const run = yield* cli(["verify", "--json", ...rootFlags(damaged)])
      assert.strictEqual(run.code, 1, run.stderr)
      assert.strictEqual(run.stderr, "")
      const findings = findingsOf(run.stdout)
      for (
        const kind of [
          "head_range_invalid",
          "invalid_head",
          "invalid_record",
          "sidecar_not_regular",
          "claim_pointer_invalid",
          "claim_orphan",
          "claim_unreadable",
          "claim_invalid",
          "break_file_leftover"
        ]
      ) expectFinding(findings, kind, "damage", planted[kind])
      for (const kind of CRASH_TRACES) expectFinding(findings, kind, "notice", planted[kind], true)
      const strict = yield* cli(["verify", "--strict", "--json", ...rootFlags(damaged)])
      assert.strictEqual(strict.code, 1, strict.stderr)
      for (const kind of CRASH_TRACES) expectFinding(findingsOf(strict.stdout), kind, "damage", planted[kind], true)
      assert.strictEqual(findingsOf(strict.stdout).length, findings.length)
      assert.strictEqual(
        JSON.parse(strict.stdout).counts.damage,
        JSON.parse(run.stdout).counts.damage + CRASH_TRACES.length
      )
      expectFinding(findings, "commit_lock_leftover", "damage", planted.dead_lock)
      expectFinding(findings, "commit_lock_leftover", "damage", planted.old_lock)
      expectFinding(findings, "commit_lock_held", "notice", planted.commit_lock_held)
      expectFinding(findings, "claim_expired", "notice", planted.claim_expired)
      // Nothing is reported against the undamaged Session or its claims.
      assert.deepStrictEqual(findings.filter((item) => item.path === sidecarOf(damaged, "fine")), [])
      assert.deepStrictEqual(findings.filter((item) => item.jobId === jobId(10) || item.jobId === jobId(1010)), [])
    }))

  it.live("lists the damage with hints in its readable output", () =>
    Effect.gen(function*() {
      const run = yield* cli(["verify", ...rootFlags(damaged)])
      assert.strictEqual(run.code, 1)
      assert.match(run.stdout, /notice torn_tail +materializations-v4\/project\/torn\.jsonl @ \d+/)
      assert.match(run.stdout, /hint \(torn_tail\): .*a notice without --strict/)
      const strict = yield* cli(["verify", "--strict", ...rootFlags(damaged)])
      assert.match(strict.stdout, /DAMAGE torn_tail +materializations-v4\/project\/torn\.jsonl @ \d+/)
      assert.match(run.stdout, /notice commit_lock_held/)
      assert.match(run.stdout, /hint \(commit_lock_leftover\): .*rarebit-store unlock/)
      assert.match(run.stdout, /\d+ problem\(s\), \d+ notice\(s\)/)
    }))

  it.live("--session checks one Session: its sidecar, its lock and its jobs' claims", () =>
    Effect.gen(function*() {
      const fine = yield* cli(["verify", "--session", sessionOf(damaged, "fine"), "--json", ...rootFlags(damaged)])
      const fineReport = JSON.parse(fine.stdout)
      // The break file next to its lock is the one thing wrong with "fine".
      assert.strictEqual(fine.code, 1)
      assert.deepStrictEqual(fineReport.findings.map((item: any) => item.kind), ["break_file_leftover"])
      assert.deepStrictEqual(fineReport.claims.map((claim: any) => [claim.jobId, claim.pointer]).sort(), [
        [jobId(10), "verified"],
        [jobId(1010), "verified"]
      ])
      assert.strictEqual(fineReport.scope, "sidecar")

      // A torn tail alone is what a crash leaves: exit 0 with a notice, 1 under --strict.
      const torn = yield* cli(["verify", "--session", sessionOf(damaged, "torn"), "--json", ...rootFlags(damaged)])
      assert.strictEqual(torn.code, 0)
      assert.deepStrictEqual(findingsOf(torn.stdout).map((item) => [item.kind, item.offset, item.severity]), [
        ["torn_tail", planted.torn_tail.offset, "notice"]
      ])
      const tornHuman = yield* cli(["verify", "--session", sessionOf(damaged, "torn"), ...rootFlags(damaged)])
      assert.strictEqual(tornHuman.code, 0)
      assert.match(
        tornHuman.stdout,
        /OK: no damage, 1 notice\(s\) \(1 left by a crash; --strict counts them as damage\)/
      )
      const tornStrict = yield* cli([
        "verify",
        "--strict",
        "--session",
        sessionOf(damaged, "torn"),
        "--json",
        ...rootFlags(damaged)
      ])
      assert.strictEqual(tornStrict.code, 1)
      assert.deepStrictEqual(findingsOf(tornStrict.stdout).map((item) => [item.kind, item.offset, item.severity]), [
        ["torn_tail", planted.torn_tail.offset, "damage"]
      ])

      const fresh = yield* cli([
        "verify",
        "--session",
        sessionOf(damaged, "freshlock"),
        "--json",
        ...rootFlags(damaged)
      ])
      assert.strictEqual(fresh.code, 0)
      assert.deepStrictEqual(findingsOf(fresh.stdout).map((item) => item.kind), ["commit_lock_held"])

      const symlinked = yield* cli(["verify", "--session", "symlink", "--json", ...rootFlags(damaged)])
      assert.strictEqual(symlinked.code, 1)
      assert.deepStrictEqual(findingsOf(symlinked.stdout).map((item) => item.kind), ["sidecar_not_regular"])
    }))

  it.live("agrees with the bounded current reader about the sidecars it fails closed on", () =>
    Effect.gen(function*() {
      const report = JSON.parse((yield* cli(["verify", "--json", ...rootFlags(damaged)])).stdout)
      for (const name of ["flipped", "badhead"]) {
        const current = JSON.parse((yield* cli(["current", "--session", name, "--json", ...rootFlags(damaged)])).stdout)
        assert.strictEqual(current.availability, "unreadable")
        assert.strictEqual(current.diagnostics.reason, "sidecar_head_invalid")
        const summary = report.sidecars.find((sidecar: any) => sidecar.path === sidecarOf(damaged, name))
        assert.deepStrictEqual(summary.current, { availability: "unreadable", reason: "sidecar_head_invalid" })
      }
    }))
})
