/**
 * Command behaviour a user meets through the executable that needs no
 * process of its own to show, run in-process: exit codes and reports of
 * `verify`, `jobs` and `unlock` on both worlds, the help and version, and the
 * kept demo store over Node's services. `Executable.test.ts` keeps what only
 * a spawned `rarebit-store` shows (its real exit code and output streams,
 * colors, a closed pipe, the installed package's version); these assert the
 * same things these commands did there.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Path } from "effect"
import { TestClock } from "effect/testing"
import { rm } from "node:fs/promises"
import { join } from "node:path"
import { MAX_CLAIM_BYTES } from "../../src/protocol/Limits.js"
import { acquired, reserveAcquired, setup, writeLock } from "../store/StoreKit.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { jobId, sessionText, summaryReceipt, titleReceipt } from "../support/Receipts.js"
import { cli, cliIn, liveOwnerEvidence, Ours } from "./CliHarness.js"

const flagsFor = (path: Path.Path, root: string) => [
  "--root",
  path.join(root, "rarebit"),
  "--session-root",
  path.join(root, "sessions")
]

fileSystemSuite("rarebit-store, in-process", (it) => {
  it.effect("verify exits 0 on a sound store, 0 for what a crash leaves, and 1 for it under --strict", ({ root }) =>
    Effect.gen(function*() {
      const path = yield* Path.Path
      const kit = yield* setup(root, { sessionId: "exe-session" })
      yield* kit.store.settle(yield* reserveAcquired(kit, jobId(1)), summaryReceipt(kit.branch, kit.sessionId))
      yield* kit.store.settle(yield* reserveAcquired(kit, jobId(2)), titleReceipt(kit.branch, kit.sessionId))
      const sound = yield* cliIn(["verify", ...flagsFor(path, root)])
      assert.strictEqual(sound.code, 0, sound.stdout + sound.stderr)

      const torn = path.join(kit.sessionRoot, "project", "torn.jsonl")
      const tornSession = sessionText("torn-session")
      yield* kit.fs.writeFileString(torn, tornSession.text)
      const reservation = acquired(yield* kit.store.reserve({ jobId: jobId(3), sessionFile: torn }))
      yield* kit.store.settle(reservation, summaryReceipt(tornSession.branch, "torn-session"))
      const sidecar = path.join(kit.rarebitRoot, "materializations-v4", "project", "torn.jsonl")
      yield* kit.fs.writeFileString(sidecar, "{\"type\":", { flag: "a" })

      const crashed = yield* cliIn(["verify", "--json", ...flagsFor(path, root)])
      assert.strictEqual(crashed.code, 0, crashed.stderr)
      const notices = JSON.parse(crashed.stdout)
      assert.deepStrictEqual(notices.findings.map((item: any) => [item.kind, item.path, item.severity]), [
        ["torn_tail", sidecar, "notice"]
      ])
      const strict = yield* cliIn(["verify", "--strict", "--json", ...flagsFor(path, root)])
      assert.strictEqual(strict.code, 1)
      const report = JSON.parse(strict.stdout)
      assert.deepStrictEqual(report.findings.map((item: any) => [item.kind, item.path, item.severity]), [
        ["torn_tail", sidecar, "damage"]
      ])
    }))

  it.effect(
    "reports a claim nested 1,500 levels deep as damage in valid JSON, and one 100,000 deep as unreadable (exit 1, not 4)",
    ({ root }) =>
      Effect.gen(function*() {
        const path = yield* Path.Path
        const kit = yield* setup(root, { writeSession: false })
        const claimPath = kit.claimPath("d".repeat(64))
        const oversizedPath = kit.claimPath("e".repeat(64))
        yield* kit.fs.makeDirectory(kit.jobsDir, { recursive: true })
        yield* kit.fs.makeDirectory(kit.sessionRoot, { recursive: true })
        // The deepest array a claim can hold within MAX_CLAIM_BYTES: it is parsed and described.
        const deep = `{"jobId":"${"d".repeat(64)}","state":${"[".repeat(1_500)}${"]".repeat(1_500)}}\n`
        assert.isAtMost(deep.length, MAX_CLAIM_BYTES)
        yield* kit.fs.writeFileString(claimPath, deep)
        // Past the bound, a claim is not read at all.
        yield* kit.fs.writeFileString(
          oversizedPath,
          `{"jobId":"${"e".repeat(64)}","state":${"[".repeat(100_000)}${"]".repeat(100_000)}}\n`
        )
        const verify = yield* cliIn(["verify", "--json", ...flagsFor(path, root)])
        assert.strictEqual(verify.code, 1, verify.stderr)
        assert.notMatch(verify.stderr, /Maximum call stack|\n\s+at /)
        const report = JSON.parse(verify.stdout)
        assert.deepStrictEqual(report.findings.map((item: any) => [item.kind, item.path]), [
          ["claim_invalid", claimPath],
          ["claim_unreadable", oversizedPath]
        ])
        assert.match(report.findings[1].detail, new RegExp(`^is larger than ${MAX_CLAIM_BYTES} bytes; `))
        const jobs = yield* cliIn(["jobs", ...flagsFor(path, root)])
        assert.strictEqual(jobs.code, 0, jobs.stderr)
        assert.match(jobs.stdout, /invalid +d{16}… its state is an array of 1 item/)
        assert.match(jobs.stdout, new RegExp(`unreadable +e{16}… is larger than ${MAX_CLAIM_BYTES} bytes`))
      })
  )

  it.effect("unlock refuses a live owner's lock with exit 5 and leaves it in place", ({ root }) =>
    Effect.gen(function*() {
      const now = Date.parse("2026-07-26T12:00:00.000Z")
      yield* TestClock.setTime(now)
      const path = yield* Path.Path
      const kit = yield* setup(root, { sessionId: "exe-session" })
      yield* kit.store.settle(yield* reserveAcquired(kit, jobId(1)), summaryReceipt(kit.branch, kit.sessionId))
      yield* writeLock(kit, {
        token: "7".repeat(48),
        claimedAt: new Date(now - 60_000).toISOString(),
        owner: liveOwnerEvidence()
      })
      const run = yield* cliIn(["unlock", "--session", kit.sessionFile, ...flagsFor(path, root)])
      assert.strictEqual(run.code, 5)
      assert.match(run.stdout, new RegExp(`pid ${process.pid}`))
      assert.isTrue(yield* kit.fs.exists(kit.lockPath))
    }))

  it.effect("--help shows the commands; --version the version", () =>
    Effect.gen(function*() {
      const help = yield* cliIn(["--help"])
      assert.strictEqual(help.code, 0)
      for (const command of ["current", "history", "jobs", "verify", "unlock", "demo"]) {
        assert.include(help.stdout, command)
      }
      const version = yield* cliIn(["--version"])
      assert.strictEqual(version.code, 0)
      assert.match(version.stdout, /rarebit-store v0\.1\.0/)
    }))
})

describe("rarebit-store demo, in-process over Node's services", () => {
  it.live("demo --keep --json keeps its store, which the other commands can then read", () =>
    Effect.gen(function*() {
      const run = yield* cli(["demo", "--keep", "--json"])
      assert.strictEqual(run.code, 0, run.stderr)
      const demo = JSON.parse(run.stdout)
      yield* Effect.gen(function*() {
        assert.deepStrictEqual(demo.steps.map((step: any) => step.actor), ["A", "B", "B", "A", "-"])
        assert.match(demo.steps[3].event, /FENCED/)
        assert.strictEqual(demo.current.availability, "available")
        assert.strictEqual(demo.history.records.length, 2)
        assert.isTrue(demo.audit.ok)
        assert.deepStrictEqual(demo.jobs.map((claim: any) => claim.pointer), ["verified", "verified"])
        assert.match(demo.files.claimWhileHeld, /"state":"active"/)
        assert.match(demo.files.claimSettled, /"state":"settled"/)
        assert.deepStrictEqual(
          demo.files.sidecarLines.map((line: string) => JSON.parse(line).type),
          ["rarebit_summary", "rarebit_head", "rarebit_title", "rarebit_head"]
        )
        // The commands it prints to explore the kept store work as printed.
        const rarebitRoot = join(demo.directory, "rarebit")
        const sessionRoot = join(demo.directory, "sessions")
        assert.deepStrictEqual(demo.explore, [
          `rarebit-store current --root ${rarebitRoot} --session-root ${sessionRoot} --session ${demo.sessionFile}`,
          `rarebit-store history --root ${rarebitRoot} --session-root ${sessionRoot} --session ${demo.sessionFile}`,
          `rarebit-store jobs --root ${rarebitRoot} --session-root ${sessionRoot}`,
          `rarebit-store verify --root ${rarebitRoot} --session-root ${sessionRoot}`
        ])
        const verify = yield* cli([...demo.explore[3].split(" ").slice(1), "--json"])
        assert.strictEqual(verify.code, 0, verify.stderr)
        assert.isTrue(JSON.parse(verify.stdout).ok)
        const current = yield* Effect.promise(() =>
          Ours.readRarebitCurrent({
            sessionFile: demo.sessionFile,
            sessionRoot: join(demo.directory, "sessions"),
            rarebitRoot: join(demo.directory, "rarebit")
          })
        )
        assert.deepStrictEqual(current, demo.current)
      }).pipe(Effect.ensuring(Effect.promise(() => rm(demo.directory, { recursive: true, force: true }))))
    }))
})
