/**
 * `rarebit-store sessions`. In-process on both worlds: the table (80
 * columns, most recently active first, footer counts), `--json` (the
 * store's entries, orphans, live claims), `--state`, and the exit codes.
 * As a process: `--follow --json` prints a settle by our store and one by
 * the reference's, Ctrl-C exits 130 and a closed pipe 141; and the table in
 * a real pseudo-terminal at 80 and 200 columns, in colour unless NO_COLOR.
 */
import { afterEach, assert, beforeEach, describe, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { spawnSync } from "node:child_process"
import { mkdir } from "node:fs/promises"
import { dirname, join } from "node:path"
import { setup } from "../store/StoreKit.js"
import { settleJob } from "../store/WatchKit.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { sessionText } from "../support/Receipts.js"
import { entry, makeRoots, type Roots, summaryReceipt, writeSession } from "../support/Reference.js"
import { CLI, cliIn, REPO, rootFlags, settleWith, spawnCliLines } from "./CliHarness.js"

// Built from a string: the linter refuses a control character in a regular expression literal.
const ANSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*[A-Za-z]`, "g")

fileSystemSuite("rarebit-store sessions, in-process", (it) => {
  const populate = (root: string) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* settleJob(kit, 1)
      const others: Array<string> = []
      for (const name of ["a/older.jsonl", "b/deep/newest.jsonl", "c/middle.jsonl"]) {
        const file = kit.path.join(kit.sessionRoot, name)
        yield* kit.fs.makeDirectory(kit.path.dirname(file), { recursive: true })
        yield* kit.fs.writeFileString(file, sessionText(name, kit.branch).text)
        others.push(file)
      }
      const at = (seconds: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, seconds))
      yield* kit.fs.utimes(kit.sessionFile, at(0), at(0))
      yield* kit.fs.utimes(others[0]!, at(1), at(1))
      yield* kit.fs.utimes(others[2]!, at(2), at(2))
      yield* kit.fs.utimes(others[1]!, at(3), at(3))
      return { kit, flags: ["--session-root", kit.sessionRoot], root: ["--root", kit.rarebitRoot] }
    })

  it.effect("the table: 80 columns, most recently active first, counts by state", ({ root }) =>
    Effect.gen(function*() {
      const { flags: sessionRootFlag, root: rootFlag } = yield* populate(root)
      const flags = [...sessionRootFlag, ...rootFlag]
      const run = yield* cliIn(["sessions", ...flags])
      assert.strictEqual(run.code, 0, run.stderr)
      const lines = run.stdout.trimEnd().split("\n")
      for (const line of lines) assert.isAtMost(line.length, 80, line)
      assert.match(lines[0]!, /^SESSION +SYNC STATE +AVAILABLE +SETTLED +SUMMARY \/ TITLE$/)
      const rows = lines.slice(1, 5)
      assert.deepStrictEqual(
        rows.map((row) => row.split(/\s+/)[0]),
        ["b/deep/newest.jsonl", "c/middle.jsonl", "a/older.jsonl", "project/trace.jsonl"]
      )
      assert.match(rows[3]!, /^project\/trace\.jsonl +assessment_current +available +\S+ +summary 1$/)
      assert.match(rows[0]!, /^b\/deep\/newest\.jsonl +awaiting_artifacts +missing +- *$/)
      assert.strictEqual(lines[5], "4 Sessions: 3 awaiting_artifacts, 1 assessment_current")
      assert.lengthOf(lines, 6)
    }))

  it.effect("--json: the store's entries, written as one document; --state filters", ({ root }) =>
    Effect.gen(function*() {
      const { flags: sessionRootFlag, kit, root: rootFlag } = yield* populate(root)
      const flags = [...sessionRootFlag, ...rootFlag]
      const run = yield* cliIn(["sessions", "--json", ...flags])
      assert.strictEqual(run.code, 0, run.stderr)
      const document = JSON.parse(run.stdout)
      const entries = [...(yield* Stream.runCollect(kit.store.sessions()))]
      assert.deepStrictEqual(document, {
        sessionRoot: kit.sessionRoot,
        rarebitRoot: kit.rarebitRoot,
        sessions: entries,
        orphanSidecars: [],
        activeClaims: 0
      })
      const filtered = yield* cliIn(["sessions", "--json", "--state", "assessment_current", ...flags])
      assert.deepStrictEqual(
        JSON.parse(filtered.stdout).sessions.map((e: { sessionFile: string }) => e.sessionFile),
        [kit.sessionFile]
      )
      const both = yield* cliIn([
        "sessions",
        "--json",
        "--state",
        "assessment_current",
        "--state",
        "awaiting_artifacts",
        ...flags
      ])
      assert.lengthOf(JSON.parse(both.stdout).sessions, 4)
      const bad = yield* cliIn(["sessions", "--state", "nonsense", ...flags])
      assert.strictEqual(bad.code, 2)
    }))

  it.effect("exit codes: a missing Session root is 3 with the JSON error; a missing Rarebit root lists missing", ({ root }) =>
    Effect.gen(function*() {
      const { flags: sessionRootFlag, root: rootFlag } = yield* populate(root)
      const missing = yield* cliIn(["sessions", "--json", ...rootFlag, "--session-root", `${root}/nowhere`])
      assert.strictEqual(missing.code, 3)
      assert.strictEqual(missing.stdout, "", "nothing printed before the failure")
      assert.deepStrictEqual(JSON.parse(missing.stderr).error.tag, "SessionRootNotFound")
      assert.deepStrictEqual(JSON.parse(missing.stderr).error.exitCode, 3)
      const noStore = yield* cliIn(["sessions", "--json", ...sessionRootFlag, "--root", `${root}/no-store`])
      assert.strictEqual(noStore.code, 0, noStore.stderr)
      const sessions: Array<{ availability: string }> = JSON.parse(noStore.stdout).sessions
      assert.deepStrictEqual(sessions.map((e) => e.availability), ["missing", "missing", "missing", "missing"])
    }))
})

describe("rarebit-store sessions, as a process", () => {
  const branch = [entry("u1", "user", "a question"), entry("a1", "assistant", "an answer")]
  let roots: Roots
  let second: string
  beforeEach(async () => {
    roots = await makeRoots("rarebit-cli-sessions-")
    second = join(roots.sessionRoot, "other", "second.jsonl")
    await mkdir(dirname(second), { recursive: true })
    await writeSession(roots.sessionFile, "followed", branch)
    await writeSession(second, "second", branch)
    await mkdir(roots.rarebitRoot)
  })
  afterEach(async () => {
    await roots?.cleanup()
  })

  it("--follow --json prints a settle by our store and one by the reference's; Ctrl-C exits 130", async () => {
    const run = spawnCliLines(["sessions", "--follow", "--json", ...rootFlags(roots)])
    const initial = [JSON.parse((await run.lines.next()).value), JSON.parse((await run.lines.next()).value)]
    assert.deepStrictEqual(initial.map((e) => e.sessionFile).sort(), [roots.sessionFile, second].sort())
    await settleWith("ours", roots, roots.sessionFile, 1, summaryReceipt(branch, "followed", { summary: "ours" }))
    const ours = JSON.parse((await run.lines.next()).value)
    assert.deepStrictEqual([ours.sessionFile, ours.summary, ours.syncState], [
      roots.sessionFile,
      "ours",
      "assessment_current"
    ])
    await settleWith("reference", roots, second, 2, summaryReceipt(branch, "second", { summary: "theirs" }))
    let theirs = JSON.parse((await run.lines.next()).value)
    // The reference writes receipt and head in two writes; a read between them is a state of its own.
    while (theirs.summary !== "theirs") theirs = JSON.parse((await run.lines.next()).value)
    assert.deepStrictEqual([theirs.sessionFile, theirs.availability], [second, "available"])
    run.signal("SIGINT")
    const end = await run.closed
    assert.strictEqual(end.code, 130)
    assert.match(end.stderr, /"tag":"Interrupted"/)
  }, 30_000)

  it("--follow ends with exit 141 and no message when its reader closes the pipe", async () => {
    const run = spawnCliLines(["sessions", "--follow", ...rootFlags(roots)])
    assert.match((await run.lines.next()).value, /^SESSION /)
    run.closeStdout()
    await settleWith("ours", roots, roots.sessionFile, 1, summaryReceipt(branch, "followed", { summary: "unread" }))
    const end = await run.closed
    assert.strictEqual(end.code, 141)
    assert.notMatch(end.stderr, /EPIPE|\n\s+at /)
  }, 30_000)

  const hasScript = spawnSync("script", ["--version"]).status === 0

  describe.skipIf(!hasScript)("in a pseudo-terminal", () => {
    /** Runs the table in a pty of `columns` columns (util-linux `script`), and returns what the terminal got. */
    const inTerminal = (columns: number, env: Record<string, string> = {}) => {
      const command = `stty cols ${columns} rows 40; '${process.execPath}' '${CLI}' sessions ${
        rootFlags(roots).map((flag) => `'${flag}'`).join(" ")
      }`
      const result = spawnSync("script", ["-qec", command, "/dev/null"], {
        cwd: REPO,
        env: { ...process.env, NO_COLOR: "", FORCE_COLOR: "", ...env },
        encoding: "utf8"
      })
      assert.strictEqual(result.status, 0, result.stderr)
      return result.stdout.replace(/\r/g, "").trimEnd().split("\n")
    }

    it("fits 80 and 200 columns, in colour unless NO_COLOR", async () => {
      await settleWith("ours", roots, second, 1, summaryReceipt(branch, "second", { summary: "x".repeat(300) }))
      for (const columns of [80, 200]) {
        const lines = inTerminal(columns)
        assert.isTrue(lines.some((line) => line.includes("\u001b[")), "coloured on a terminal")
        const plain = lines.map((line) => line.replace(ANSI, ""))
        for (const line of plain) assert.isAtMost(line.length, columns, line)
        // The long summary is cut to the width, not wrapped.
        const row = plain.find((line) => line.startsWith("other/second.jsonl"))!
        assert.isAtLeast(row.length, columns - 2, row)
        assert.match(row, /…$/)
      }
      const uncoloured = inTerminal(80, { NO_COLOR: "1" })
      assert.isFalse(uncoloured.some((line) => line.includes("\u001b[")), "NO_COLOR")
    }, 30_000)
  })
})
