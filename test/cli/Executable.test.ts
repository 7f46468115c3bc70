/**
 * The installed executable, spawned exactly as a user runs it
 * (`node dist/cli/main.js …`), for what only a process shows: its real exit
 * codes, stdout and stderr with no stack trace, no terminal (so no colors,
 * no progress) unless colors are forced, a reader closing the pipe, and the
 * version of the package it was installed from. The guided demo runs here
 * too, since its output is colorless only because stdout is no terminal.
 * Command behaviour that needs no process is in `InProcess.test.ts` and the
 * other files of this folder.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { cp, mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { entry, makeRoots, type Roots, summaryReceipt, titleReceipt, writeSession } from "../support/Reference.js"
import { CLI, Ours, REPO, rootFlags, runCli, settleWith, STACK_LINE } from "./CliHarness.js"

let roots: Roots

const branch = [entry("u1", "user", "a question"), entry("a1", "assistant", "an answer")]
/** The start of every ANSI color sequence. */
const ANSI = "\u001b["

beforeAll(async () => {
  roots = await makeRoots("rarebit-cli-exe-")
  await writeSession(roots.sessionFile, "exe-session", branch)
  await settleWith("reference", roots, roots.sessionFile, 1, summaryReceipt(branch, "exe-session"))
  await settleWith("ours", roots, roots.sessionFile, 2, titleReceipt(branch, "exe-session"))
})

afterAll(async () => {
  await roots?.cleanup()
})

/**
 * Runs the executable with `args` after a preload module of `lines`, written
 * under the roots as `name` (`node --import`), stdout ignored.
 */
const runWithPreload = async (name: string, lines: ReadonlyArray<string>, args: ReadonlyArray<string>) => {
  const preload = join(roots.root, name)
  await writeFile(preload, lines.join("\n"))
  return new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, ["--import", preload, CLI, ...args], {
      cwd: REPO,
      stdio: ["ignore", "ignore", "pipe"]
    })
    let stderr = ""
    child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk))
    child.on("close", (code) => resolve({ code, stderr }))
  })
}

describe("node dist/cli/main.js", () => {
  it("current --json prints readRarebitCurrent's object and exits 0", async () => {
    const run = await runCli(["current", "--session", roots.sessionFile, "--json", ...rootFlags(roots)])
    assert.strictEqual(run.code, 0, run.stderr)
    assert.deepStrictEqual(
      JSON.parse(run.stdout),
      await Ours.readRarebitCurrent({ sessionFile: roots.sessionFile, ...roots.location })
    )
  })

  it("reads over the direct file system: store files are opened on the calling thread, never on libuv's pool", async () => {
    // Node's `fs` is wrapped before the executable loads, for CommonJS and ES module users alike.
    const log = join(roots.root, "opens.json")
    const run = await runWithPreload(
      "record-opens.mjs",
      [
        "import fs from \"node:fs\"",
        "import { syncBuiltinESMExports } from \"node:module\"",
        "const opens = []",
        "const { open, openSync } = fs",
        "fs.open = function (path, ...rest) { opens.push([\"pool\", String(path)]); return open.call(this, path, ...rest) }",
        "fs.openSync = function (path, ...rest) { opens.push([\"direct\", String(path)]); return openSync.call(this, path, ...rest) }",
        "syncBuiltinESMExports()",
        `process.on("exit", () => fs.writeFileSync(${JSON.stringify(log)}, JSON.stringify(opens)))`
      ],
      ["current", "--session", roots.sessionFile, "--json", ...rootFlags(roots)]
    )
    assert.strictEqual(run.code, 0, run.stderr)
    const opens = JSON.parse(await readFile(log, "utf8")) as Array<[string, string]>
    const ofStore = opens.filter(([, path]) => path.startsWith(`${roots.root}/`) && path !== log)
    assert.deepStrictEqual(ofStore.filter(([how]) => how === "pool"), [])
    assert.includeDeepMembers(ofStore, [["direct", roots.sessionFile]])
    assert.isTrue(ofStore.some(([, path]) => path.startsWith(join(roots.rarebitRoot, "materializations-v4"))))
  })

  it("opens stdin only for a command that reads it: not for current, for the wizard", async () => {
    const preload = join(roots.root, "record-stdin.mjs")
    await writeFile(
      preload,
      [
        "const stdin = Object.getOwnPropertyDescriptor(process, \"stdin\")",
        "Object.defineProperty(process, \"stdin\", { ...stdin, get() { process.env.STDIN_OPENED = \"yes\"; return stdin.get.call(process) } })",
        "process.on(\"exit\", () => process.stderr.write(`stdin opened: ${process.env.STDIN_OPENED ?? \"no\"}\\n`))"
      ].join("\n")
    )
    const spawned = (args: ReadonlyArray<string>) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, ["--import", preload, CLI, ...args], {
          cwd: REPO,
          env: { ...process.env, NO_COLOR: "1" },
          stdio: ["pipe", "pipe", "pipe"]
        })
        let stdout = ""
        let stderr = ""
        child.stdout.setEncoding("utf8").on("data", (chunk) => (stdout += chunk))
        child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk))
        child.stdin.end()
        child.on("close", (code) => resolve({ code, stdout, stderr }))
      })
    const current = await spawned(["current", "--session", roots.sessionFile, "--json", ...rootFlags(roots)])
    assert.strictEqual(current.code, 0, current.stderr)
    assert.strictEqual(current.stderr, "stdin opened: no\n")
    // The wizard asks on the terminal; with its input at an end, it stops there.
    const wizard = await spawned(["--wizard"])
    assert.strictEqual(wizard.code, 0, wizard.stderr)
    assert.include(wizard.stdout, "Command wizard")
    assert.include(wizard.stdout, "Wizard cancelled.")
    assert.include(wizard.stderr, "stdin opened: yes\n")
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

  it("demo runs the guided tour, shows the fenced worker, verifies clean and removes its directory", async () => {
    // Without NO_COLOR: output that is not a terminal still has no colors.
    const run = await runCli(["demo"], { NO_COLOR: "" })
    assert.strictEqual(run.code, 0, run.stderr)
    assert.notInclude(run.stdout, ANSI)
    assert.match(run.stdout, /A +reserved the summary job with a 300 ms lease/)
    assert.match(run.stdout, /B +reserved the same job: A's lease had run out/)
    assert.match(run.stdout, /A +woke up and tried to settle: FENCED \(LeaseFenced: .*fenced by a newer worker\)/)
    assert.match(run.stdout, /settled a title receipt/)
    // What the protocol wrote: the claim while held and once settled, the raw sidecar lines, the claims.
    assert.match(
      run.stdout,
      /\{"jobId":"[0-9a-f]{64}","state":"active","leaseToken":"[0-9a-f]{8}…","claimedAt":"[^"]+","leaseMs":600000/
    )
    assert.match(
      run.stdout,
      /\{"jobId":"[0-9a-f]{64}","state":"settled","leaseToken":"[0-9a-f]{8}…","receiptRef":\{"receiptOffset":0,/
    )
    assert.match(run.stdout, /rarebit_summary +\{"schemaVersion":4,"type":"rarebit_summary".*… \(\d+ characters\)/)
    assert.match(
      run.stdout,
      /rarebit_head +\{"type":"rarebit_head","protocolVersion":1,.*"receiptHash":"[0-9a-f]{64}"\}\n/
    )
    assert.match(run.stdout, /jobs\n +2 claim\(s\) under .* \(2 settled\)/)
    assert.match(run.stdout, /sync assessment_current/)
    assert.match(run.stdout, /OK: no damage/)
    assert.notMatch(run.stdout, /explore what was kept/)
    const directory = /temp dir +(\S+)/.exec(run.stdout)?.[1]
    assert.isDefined(directory)
    assert.isFalse(await stat(directory!).then(() => true, () => false))
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
    assert.include(forced.stdout, ANSI)
    const vetoed = await runCli(args, { NO_COLOR: "1", FORCE_COLOR: "1" })
    assert.strictEqual(vetoed.code, 0, vetoed.stderr)
    assert.notInclude(vetoed.stdout, ANSI)
  })

  it("--version reads the package.json of the installed package it runs from", async () => {
    const installed = await mkdtemp(join(tmpdir(), "rarebit-installed-"))
    try {
      await cp(join(REPO, "dist"), join(installed, "dist"), { recursive: true })
      await writeFile(
        join(installed, "package.json"),
        JSON.stringify({ name: "rarebit-store", version: "9.8.7-test", type: "module" })
      )
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
