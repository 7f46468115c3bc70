/**
 * The executable against hostile files (issue 12, item 1): a FIFO or
 * `/dev/zero` at the commit lock, a claim symlinked to a FIFO, a FIFO as the
 * sidecar. Every command answers promptly with its documented exit code.
 * Before the fix `verify` and `unlock` hung on a FIFO lock (a blocking open
 * on libuv's pool, which no signal interrupts) and read `/dev/zero` until
 * the process died; here each run is killed after `DEADLINE_MS` and then
 * fails the test.
 */
import { afterEach, assert, beforeEach, describe, it } from "@effect/vitest"
import { execFileSync, spawn } from "node:child_process"
import { lstat, mkdir, rm, symlink } from "node:fs/promises"
import { join } from "node:path"
import { entry, makeRoots, type Roots, Store, summaryReceipt, writeSession } from "../support/Reference.js"
import { CLI, REPO, rootFlags, settleWith } from "./CliHarness.js"

/** Generous on a loaded machine; a hang is unbounded. */
const DEADLINE_MS = 40_000

interface TimedRun {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  readonly timedOut: boolean
}

/** Spawns the CLI and kills it (SIGKILL) if it has not finished within the deadline. */
const runWithin = (args: ReadonlyArray<string>): Promise<TimedRun> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: REPO,
      env: { ...process.env, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      child.kill("SIGKILL")
    }, DEADLINE_MS)
    child.stdout.setEncoding("utf8").on("data", (chunk) => (stdout += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk))
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr, timedOut })
    })
  })

const assertPrompt = (run: TimedRun, label: string) =>
  assert.isFalse(run.timedOut, `${label} hung (killed after ${DEADLINE_MS} ms)\n${run.stdout}${run.stderr}`)

const branch = [entry("u1", "user", "a question"), entry("a1", "assistant", "an answer")]
const jobIdOf = (n: number) => n.toString(16).padStart(64, "0")

let roots: Roots
let sidecar: string
let lockPath: string

beforeEach(async () => {
  roots = await makeRoots("rarebit-cli-hostile-")
  await writeSession(roots.sessionFile, "hostile-session", branch)
  await settleWith("ours", roots, roots.sessionFile, 1, summaryReceipt(branch, "hostile-session"))
  sidecar = Store.rarebitMaterializationPath(roots.sessionFile, roots.location)
  lockPath = `${sidecar}.commit-lock`
})

afterEach(async () => {
  await roots?.cleanup()
})

const session = () => ["--session", roots.sessionFile, ...rootFlags(roots)]

describe("node dist/cli/main.js against hostile files", () => {
  it("a FIFO commit lock: verify reports it, unlock refuses it without --force and removes it with it", async () => {
    execFileSync("mkfifo", [lockPath])
    const verify = await runWithin(["verify", "--json", ...rootFlags(roots)])
    assertPrompt(verify, "verify")
    assert.strictEqual(verify.code, 1, verify.stderr)
    const findings = JSON.parse(verify.stdout).findings.filter((item: any) => item.path === lockPath)
    assert.deepStrictEqual(findings.map((item: any) => item.kind), ["commit_lock_leftover"])
    assert.match(findings[0].detail, /^a FIFO, not a regular file, /)

    const current = await runWithin(["current", "--json", ...session()])
    assertPrompt(current, "current")
    assert.strictEqual(current.code, 0, current.stderr)
    assert.strictEqual(JSON.parse(current.stdout).availability, "available")

    const refused = await runWithin(["unlock", "--json", ...session()])
    assertPrompt(refused, "unlock")
    assert.strictEqual(refused.code, 5, refused.stderr)
    assert.strictEqual(JSON.parse(refused.stdout).lock.unreadable, "a FIFO, not a regular file")
    assert.isTrue((await lstat(lockPath)).isFIFO(), "still there")

    const forced = await runWithin(["unlock", "--force", "--json", ...session()])
    assertPrompt(forced, "unlock --force")
    assert.strictEqual(forced.code, 0, forced.stderr)
    assert.strictEqual(JSON.parse(forced.stdout).action, "removed")
    assert.strictEqual(await lstat(lockPath).then(() => "present", (error) => error.code), "ENOENT")
  }, 4 * DEADLINE_MS)

  it("/dev/zero and /dev/urandom as the commit lock: verify and unlock finish without reading them", async () => {
    for (const device of ["/dev/zero", "/dev/urandom"]) {
      await symlink(device, lockPath)
      const verify = await runWithin(["verify", "--json", ...rootFlags(roots)])
      assertPrompt(verify, `verify ${device}`)
      assert.strictEqual(verify.code, 1, verify.stderr)
      const unlock = await runWithin(["unlock", "--json", ...session()])
      assertPrompt(unlock, `unlock ${device}`)
      assert.strictEqual(unlock.code, 5, unlock.stderr)
      assert.strictEqual(JSON.parse(unlock.stdout).lock.unreadable, "a symlink, not a regular file")
      await rm(lockPath)
    }
  }, 5 * DEADLINE_MS)

  it("a claim symlinked to a FIFO: jobs and verify report it as unreadable", async () => {
    const outside = join(roots.root, "outside")
    await mkdir(outside)
    execFileSync("mkfifo", [join(outside, "fifo")])
    const claimPath = join(roots.rarebitRoot, "jobs-v4", `${jobIdOf(2)}.json`)
    await symlink(join(outside, "fifo"), claimPath)
    const jobs = await runWithin(["jobs", "--json", ...rootFlags(roots)])
    assertPrompt(jobs, "jobs")
    assert.include([0, 1], jobs.code, jobs.stderr)
    const verify = await runWithin(["verify", "--json", ...rootFlags(roots)])
    assertPrompt(verify, "verify")
    assert.strictEqual(verify.code, 1, verify.stderr)
    const finding = JSON.parse(verify.stdout).findings.find((item: any) => item.path === claimPath)
    assert.strictEqual(finding?.kind, "claim_unreadable")
    assert.match(finding?.detail ?? "", /^is a symlink, not a regular file/)
    assert.isTrue((await lstat(join(outside, "fifo"))).isFIFO())
  }, 3 * DEADLINE_MS)

  it("a FIFO as the sidecar: current is unreadable, history and verify say so", async () => {
    await rm(sidecar)
    execFileSync("mkfifo", [sidecar])
    const current = await runWithin(["current", "--json", ...session()])
    assertPrompt(current, "current")
    assert.strictEqual(current.code, 0, current.stderr)
    assert.deepStrictEqual(
      [JSON.parse(current.stdout).availability, JSON.parse(current.stdout).diagnostics.reason],
      ["unreadable", "sidecar_unreadable"]
    )
    const history = await runWithin(["history", "--all", ...session()])
    assertPrompt(history, "history --all")
    assert.strictEqual(history.code, 4, history.stdout + history.stderr)
    const verify = await runWithin(["verify", "--json", ...rootFlags(roots)])
    assertPrompt(verify, "verify")
    assert.strictEqual(verify.code, 1, verify.stderr)
    const kinds = JSON.parse(verify.stdout).findings.filter((item: any) => item.path === sidecar).map((item: any) =>
      item.kind
    )
    assert.deepStrictEqual(kinds, ["sidecar_not_regular"])
  }, 4 * DEADLINE_MS)
})
