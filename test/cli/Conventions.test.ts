/**
 * What every command promises, run in-process on both worlds: no command
 * reports success on a store that is not there (exit 3), as distinct from an
 * empty store (exit 0); `--json` prints exactly one JSON document on stdout,
 * and a failure as one JSON line `{"error":{tag,message,hint,exitCode}}` on
 * stderr; `--version` is the package's.
 */
import { assert } from "@effect/vitest"
import { Effect, FileSystem, Path } from "effect"
import { readFileSync } from "node:fs"
import { reserveAcquired, setup } from "../store/StoreKit.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { summaryReceipt } from "../support/Receipts.js"
import { cliIn, type CliRun, REPO, STACK_LINE } from "./CliHarness.js"

const flagsFor = (path: Path.Path, root: string, rarebitRoot = path.join(root, "rarebit")) => [
  "--root",
  rarebitRoot,
  "--session-root",
  path.join(root, "sessions")
]

/** The commands that read a store, given a Session file. */
const readingCommands = (sessionFile: string): ReadonlyArray<ReadonlyArray<string>> => [
  ["current", "--session", sessionFile],
  ["history", "--session", sessionFile],
  ["history", "--session", sessionFile, "--all"],
  ["jobs"],
  ["verify"],
  ["unlock", "--session", sessionFile]
]

const errorDocument = (run: CliRun, label: string) => {
  const lines = run.stderr.split("\n").filter((line) => line !== "")
  assert.strictEqual(lines.length, 1, `${label}: one line on stderr: ${run.stderr}`)
  const document = JSON.parse(lines[0])
  assert.deepStrictEqual(Object.keys(document), ["error"], label)
  assert.deepStrictEqual(Object.keys(document.error), ["tag", "message", "hint", "exitCode"], label)
  assert.strictEqual(document.error.exitCode, run.code, label)
  return document.error as { tag: string; message: string; hint: string | null; exitCode: number }
}

fileSystemSuite("CLI conventions", (it) => {
  it.effect("no store at --root is exit 3 for every reading command, never an empty success", ({ root }) =>
    Effect.gen(function*() {
      const path = yield* Path.Path
      const kit = yield* setup(root)
      const missing = path.join(root, "no-such-store")
      for (const command of readingCommands(kit.sessionFile)) {
        const label = command.join(" ")
        const human = yield* cliIn([...command, ...flagsFor(path, root, missing)])
        assert.strictEqual(human.code, 3, `${label}: ${human.stdout}${human.stderr}`)
        assert.strictEqual(human.stdout, "", label)
        assert.strictEqual(human.stderr.split("\n")[0], `rarebit-store: no Rarebit store at ${missing}`, label)
        assert.match(human.stderr.split("\n")[1], /^hint: pass --root/, label)
        const json = yield* cliIn([...command, "--json", ...flagsFor(path, root, missing)])
        assert.strictEqual(json.code, 3, label)
        assert.strictEqual(json.stdout, "", label)
        const error = errorDocument(json, label)
        assert.deepStrictEqual([error.tag, error.message], ["StoreNotFound", `no Rarebit store at ${missing}`], label)
      }
      // A file where the root should be is a mistake in the invocation.
      const file = path.join(root, "a-file")
      yield* kit.fs.writeFileString(file, "")
      const notDirectory = yield* cliIn(["verify", "--json", ...flagsFor(path, root, file)])
      assert.strictEqual(notDirectory.code, 2)
      assert.strictEqual(errorDocument(notDirectory, "root is a file").tag, "StoreNotFound")
    }))

  it.effect("an empty store is a store: every reading command succeeds with nothing in it", ({ root }) =>
    Effect.gen(function*() {
      const path = yield* Path.Path
      const kit = yield* setup(root)
      yield* kit.fs.makeDirectory(kit.rarebitRoot, { recursive: true })
      const expectations: Record<string, RegExp> = {
        current: /\(missing\)/,
        history: /No sidecar yet/,
        jobs: /^0 claim\(s\)/,
        verify: /OK: no damage/,
        unlock: /No commit lock/
      }
      for (const command of readingCommands(kit.sessionFile)) {
        const run = yield* cliIn([...command, ...flagsFor(path, root)])
        assert.strictEqual(run.code, 0, `${command.join(" ")}: ${run.stderr}`)
        if (!command.includes("--all")) assert.match(run.stdout, expectations[command[0]], command.join(" "))
      }
    }))

  it.effect("--json prints one document on stdout for every command", ({ root }) =>
    Effect.gen(function*() {
      const path = yield* Path.Path
      const kit = yield* setup(root)
      yield* kit.store.settle(yield* reserveAcquired(kit), summaryReceipt(kit.branch, kit.sessionId))
      for (const command of readingCommands(kit.sessionFile)) {
        const run = yield* cliIn([...command, "--json", ...flagsFor(path, root)])
        const label = command.join(" ")
        assert.strictEqual(run.code, 0, `${label}: ${run.stderr}`)
        assert.strictEqual(run.stderr, "", label)
        const document = JSON.parse(run.stdout)
        assert.isTrue(typeof document === "object" && document !== null && !Array.isArray(document), label)
      }
      const page = JSON.parse(
        (yield* cliIn(["history", "--session", kit.sessionFile, "--json", ...flagsFor(path, root)])).stdout
      )
      const all = JSON.parse(
        (yield* cliIn(["history", "--session", kit.sessionFile, "--all", "--json", ...flagsFor(path, root)])).stdout
      )
      assert.deepStrictEqual(all, page)
      assert.strictEqual(all.records.length, 1)
    }))

  it.effect("--json failures are one JSON line on stderr, with the tag, message, hint and exit code", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const kit = yield* setup(root)
      yield* kit.store.settle(yield* reserveAcquired(kit), summaryReceipt(kit.branch, kit.sessionId))
      const flags = flagsFor(path, root)
      const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string, number]> = [
        [["current", "--session", path.join(kit.sessionRoot, "gone.jsonl")], "SessionNotFound", 3],
        [["history", "--session", kit.sessionFile, "--limit", "0"], "HistoryBoundsInvalid", 2],
        [["verify", "--no-such-flag"], "InvalidInvocation", 2],
        [["current"], "InvalidInvocation", 2]
      ]
      for (const [command, tag, code] of cases) {
        const label = command.join(" ")
        const run = yield* cliIn([...command, "--json", ...flags])
        assert.strictEqual(run.code, code, `${label}: ${run.stderr}`)
        assert.strictEqual(run.stdout, "", label)
        const error = errorDocument(run, label)
        assert.strictEqual(error.tag, tag, label)
        assert.isString(error.hint, label)
        assert.notMatch(run.stderr, STACK_LINE)
      }
      // A refusal still prints its report, and says why as JSON on stderr.
      yield* fs.writeFileString(
        kit.lockPath,
        `${JSON.stringify({ token: "c".repeat(48), claimedAt: "2026-01-01T00:00:00.000Z" })}\n`
      )
      const refused = yield* cliIn(["unlock", "--session", kit.sessionFile, "--json", ...flags])
      assert.strictEqual(refused.code, 5)
      assert.strictEqual(JSON.parse(refused.stdout).action, "refused")
      const error = errorDocument(refused, "unlock refused")
      assert.strictEqual(error.tag, "Refused")
      assert.match(error.hint!, /--force --token c{12}/)
    }))

  it.effect("--version is the package's version", () =>
    Effect.gen(function*() {
      const { version } = JSON.parse(readFileSync(`${REPO}/package.json`, "utf8"))
      const run = yield* cliIn(["--version"])
      assert.strictEqual(run.code, 0)
      assert.strictEqual(run.stdout.trim(), `rarebit-store v${version}`)
    }))
})
