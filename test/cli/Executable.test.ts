/**
 * The installed executable, spawned exactly as a user runs it
 * (`node dist/cli/main.js …`): real exit codes, stdout and stderr, no
 * terminal (so no colors, no progress), and the guided demo.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { appendFile, cp, mkdir, mkdtemp, rm, stat, symlink, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { entry, makeRoots, type Roots, Store, summaryReceipt, titleReceipt, writeSession } from "../support/Reference.js"
import {
  CLI,
  liveOwnerEvidence,
  Ours,
  REPO,
  rootFlags,
  runCli,
  settleWith,
  STACK_LINE,
  writeLock
} from "./CliHarness.js"

let roots: Roots
let torn: string

const branch = [entry("u1", "user", "a question"), entry("a1", "assistant", "an answer")]
const ANSI = /\u001b\[/

beforeAll(async () => {
  roots = await makeRoots("rarebit-cli-exe-")
  await writeSession(roots.sessionFile, "exe-session", branch)
  await settleWith("reference", roots, roots.sessionFile, 1, summaryReceipt(branch, "exe-session"))
  await settleWith("ours", roots, roots.sessionFile, 2, titleReceipt(branch, "exe-session"))
  torn = join(roots.sessionRoot, "project", "torn.jsonl")
  await writeSession(torn, "torn-session", branch)
})

afterAll(async () => {
  await roots?.cleanup()
})

describe("node dist/cli/main.js", () => {
  it("current --json prints readRarebitCurrent's object and exits 0", async () => {
    const run = await runCli(["current", "--session", roots.sessionFile, "--json", ...rootFlags(roots)])
    assert.strictEqual(run.code, 0, run.stderr)
    assert.deepStrictEqual(
      JSON.parse(run.stdout),
      await Ours.readRarebitCurrent({ sessionFile: roots.sessionFile, ...roots.location })
    )
  })

  it("exits 3 for a missing Session and 2 for a bad invocation, with one line and a hint, no stack", async () => {
    const missing = await runCli(["current", "--session", join(roots.sessionRoot, "gone.jsonl"), ...rootFlags(roots)])
    assert.strictEqual(missing.code, 3)
    assert.match(missing.stderr, /^rarebit-store: Pi Session file not found: .*gone\.jsonl\nhint: .+\n$/)
    const invalid = await runCli(["history", "--session", roots.sessionFile, "--limit", "0", ...rootFlags(roots)])
    assert.strictEqual(invalid.code, 2)
    assert.match(invalid.stderr, /^rarebit-store: .*outside protocol bounds\nhint: .+\n$/)
    for (const run of [missing, invalid]) {
      assert.strictEqual(run.stdout, "")
      assert.notMatch(run.stderr, STACK_LINE)
    }
  })

  it("verify exits 0 on a sound store, 0 for what a crash leaves, and 1 for it under --strict", async () => {
    const sound = await runCli(["verify", ...rootFlags(roots)])
    assert.strictEqual(sound.code, 0, sound.stdout + sound.stderr)
    await settleWith("ours", roots, torn, 3, summaryReceipt(branch, "torn-session"))
    const sidecar = Store.rarebitMaterializationPath(torn, roots.location)
    await appendFile(sidecar, "{\"type\":")
    const crashed = await runCli(["verify", "--json", ...rootFlags(roots)])
    assert.strictEqual(crashed.code, 0, crashed.stderr)
    const notices = JSON.parse(crashed.stdout)
    assert.deepStrictEqual(notices.findings.map((item: any) => [item.kind, item.path, item.severity]), [
      ["torn_tail", sidecar, "notice"]
    ])
    const strict = await runCli(["verify", "--strict", "--json", ...rootFlags(roots)])
    assert.strictEqual(strict.code, 1)
    const report = JSON.parse(strict.stdout)
    assert.deepStrictEqual(report.findings.map((item: any) => [item.kind, item.path, item.severity]), [
      ["torn_tail", sidecar, "damage"]
    ])
  })

  it("reports a claim nested 100,000 levels deep as damage in valid JSON, not a stack overflow (exit 1, not 4)", async () => {
    const deep = await makeRoots("rarebit-cli-exe-deep-")
    try {
      const claimPath = join(deep.rarebitRoot, "jobs-v4", `${"d".repeat(64)}.json`)
      await mkdir(dirname(claimPath), { recursive: true })
      await writeFile(claimPath, `{"jobId":"${"d".repeat(64)}","state":${"[".repeat(100_000)}${"]".repeat(100_000)}}\n`)
      const verify = await runCli(["verify", "--json", ...rootFlags(deep)])
      assert.strictEqual(verify.code, 1, verify.stderr)
      assert.notMatch(verify.stderr, /Maximum call stack|\n\s+at /)
      const report = JSON.parse(verify.stdout)
      assert.deepStrictEqual(report.findings.map((item: any) => [item.kind, item.path]), [["claim_invalid", claimPath]])
      const jobs = await runCli(["jobs", ...rootFlags(deep)])
      assert.strictEqual(jobs.code, 0, jobs.stderr)
      assert.match(jobs.stdout, /invalid +d{16}… its state is an array of 1 item/)
    } finally {
      await deep.cleanup()
    }
  })

  it("unlock refuses a live owner's lock with exit 5 and leaves it in place", async () => {
    const lockPath = `${Store.rarebitMaterializationPath(roots.sessionFile, roots.location)}.commit-lock`
    await writeLock(lockPath, "7".repeat(48), Date.now() - 60_000, liveOwnerEvidence())
    try {
      const run = await runCli(["unlock", "--session", roots.sessionFile, ...rootFlags(roots)])
      assert.strictEqual(run.code, 5)
      assert.match(run.stdout, new RegExp(`pid ${process.pid}`))
      assert.isTrue(await stat(lockPath).then(() => true, () => false))
    } finally {
      await rm(lockPath, { force: true })
    }
  })

  it("demo runs the guided tour, shows the fenced worker, verifies clean and removes its directory", async () => {
    // Without NO_COLOR: output that is not a terminal still has no colors.
    const run = await runCli(["demo"], { NO_COLOR: "" })
    assert.strictEqual(run.code, 0, run.stderr)
    assert.notMatch(run.stdout, ANSI)
    assert.match(run.stdout, /A +reserved the summary job with a 300 ms lease/)
    assert.match(run.stdout, /B +reserved the same job: A's lease had run out/)
    assert.match(run.stdout, /A +woke up and tried to settle: FENCED \(LeaseFenced: .*fenced by a newer worker\)/)
    assert.match(run.stdout, /settled a title receipt/)
    // What the protocol wrote: the claim while held and once settled, the raw sidecar lines, the claims.
    assert.match(run.stdout, /\{"jobId":"[0-9a-f]{64}","state":"active","leaseToken":"[0-9a-f]{8}…","claimedAt":"[^"]+","leaseMs":600000/)
    assert.match(run.stdout, /\{"jobId":"[0-9a-f]{64}","state":"settled","leaseToken":"[0-9a-f]{8}…","receiptRef":\{"receiptOffset":0,/)
    assert.match(run.stdout, /rarebit_summary +\{"schemaVersion":4,"type":"rarebit_summary".*… \(\d+ characters\)/)
    assert.match(run.stdout, /rarebit_head +\{"type":"rarebit_head","protocolVersion":1,.*"receiptHash":"[0-9a-f]{64}"\}\n/)
    assert.match(run.stdout, /jobs\n +2 claim\(s\) under .* \(2 settled\)/)
    assert.match(run.stdout, /sync assessment_current/)
    assert.match(run.stdout, /OK: no damage/)
    assert.notMatch(run.stdout, /explore what was kept/)
    const directory = /temp dir +(\S+)/.exec(run.stdout)?.[1]
    assert.isDefined(directory)
    assert.isFalse(await stat(directory!).then(() => true, () => false))
  })

  it("demo --keep --json keeps its store, which the other commands can then read", async () => {
    const run = await runCli(["demo", "--keep", "--json"])
    assert.strictEqual(run.code, 0, run.stderr)
    const demo = JSON.parse(run.stdout)
    try {
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
      const verify = await runCli([...demo.explore[3].split(" ").slice(1), "--json"])
      assert.strictEqual(verify.code, 0, verify.stderr)
      assert.isTrue(JSON.parse(verify.stdout).ok)
      const current = await Ours.readRarebitCurrent({
        sessionFile: demo.sessionFile,
        sessionRoot: join(demo.directory, "sessions"),
        rarebitRoot: join(demo.directory, "rarebit")
      })
      assert.deepStrictEqual(current, demo.current)
    } finally {
      await rm(demo.directory, { recursive: true, force: true })
    }
  })

  it("stops quietly with exit 141 when its reader closes the pipe, still removing the demo directory", async () => {
    const child = spawn(process.execPath, [CLI, "demo"], { cwd: REPO, stdio: ["ignore", "pipe", "pipe"] })
    let seen = ""
    let stderr = ""
    child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk))
    const directory = await new Promise<string>((resolve) =>
      child.stdout.setEncoding("utf8").on("data", (chunk) => {
        seen += chunk
        const match = /temp dir +(\S+)/.exec(seen)
        if (match !== null) {
          child.stdout.destroy()
          resolve(match[1])
        }
      })
    )
    const code = await new Promise((resolve) => child.on("close", resolve))
    assert.strictEqual(code, 141)
    assert.notMatch(stderr, /EPIPE|\n\s+at /)
    assert.isFalse(await stat(directory).then(() => true, () => false))
  })

  it("colors only when asked to (FORCE_COLOR), and never under NO_COLOR", async () => {
    const args = ["current", "--session", roots.sessionFile, ...rootFlags(roots)]
    const forced = await runCli(args, { NO_COLOR: "", FORCE_COLOR: "1" })
    assert.strictEqual(forced.code, 0, forced.stderr)
    assert.match(forced.stdout, ANSI)
    const vetoed = await runCli(args, { NO_COLOR: "1", FORCE_COLOR: "1" })
    assert.strictEqual(vetoed.code, 0, vetoed.stderr)
    assert.notMatch(vetoed.stdout, ANSI)
  })

  it("--help shows the commands; --version the version", async () => {
    const help = await runCli(["--help"])
    assert.strictEqual(help.code, 0)
    for (const command of ["current", "history", "jobs", "verify", "unlock", "demo"]) assert.include(help.stdout, command)
    const version = await runCli(["--version"])
    assert.strictEqual(version.code, 0)
    assert.match(version.stdout, /rarebit-store v0\.1\.0/)
  })

  it("--version reads the package.json of the installed package it runs from", async () => {
    const installed = await mkdtemp(join(tmpdir(), "rarebit-installed-"))
    try {
      await cp(join(REPO, "dist"), join(installed, "dist"), { recursive: true })
      await writeFile(join(installed, "package.json"), JSON.stringify({ name: "rarebit-store", version: "9.8.7-test", type: "module" }))
      await symlink(join(REPO, "node_modules"), join(installed, "node_modules"))
      const run = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
        const child = spawn(process.execPath, [join(installed, "dist", "cli", "main.js"), "--version"], {
          cwd: tmpdir(),
          stdio: ["ignore", "pipe", "ignore"]
        })
        let stdout = ""
        child.stdout.setEncoding("utf8").on("data", (chunk) => (stdout += chunk))
        child.on("close", (code) => resolve({ code, stdout }))
      })
      assert.strictEqual(run.code, 0)
      assert.strictEqual(run.stdout.trim(), "rarebit-store v9.8.7-test")
    } finally {
      await rm(installed, { recursive: true, force: true })
    }
  })
})
