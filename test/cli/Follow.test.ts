/**
 * `rarebit-store current --follow`: the state, then each new state, until
 * interrupted. In-process on both worlds (the watch's waits driven through
 * `TestClock`): `--json` prints one `readRarebitCurrent` document per line,
 * the human output a header before each new state. As a spawned process: a
 * settle by another process, ours or the reference's, is printed; Ctrl-C
 * exits 130 with the usual line; a reader closing the pipe ends it with 141.
 */
import { afterEach, assert, beforeEach, describe, it } from "@effect/vitest"
import { Console, Effect, Fiber, Path, Queue } from "effect"
import { TestClock } from "effect/testing"
import { mkdir } from "node:fs/promises"
import { runCli as runCliEffect } from "../../src/cli/Cli.js"
import { makeSleepProbe, setup } from "../store/StoreKit.js"
import { settleJob } from "../store/WatchKit.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { entry, makeRoots, type Roots, summaryReceipt, writeSession } from "../support/Reference.js"
import { cliIn, cliTestServices, rootFlags, settleWith, spawnCliLines, type SpawnedCli } from "./CliHarness.js"

/** A console whose printed lines can be awaited one by one. */
const awaitableConsole = Effect.gen(function*() {
  const lines = yield* Queue.unbounded<string>()
  const errors: Array<string> = []
  const ignore = () => undefined
  const console: Console.Console = {
    assert: ignore,
    clear: ignore,
    count: ignore,
    countReset: ignore,
    debug: ignore,
    dir: ignore,
    dirxml: ignore,
    error: (...args) => void errors.push(args.map(String).join(" ")),
    group: ignore,
    groupCollapsed: ignore,
    groupEnd: ignore,
    info: ignore,
    // One call may print several lines.
    log: (...args) => {
      for (const line of args.map(String).join(" ").split("\n")) Queue.offerUnsafe(lines, line)
    },
    table: ignore,
    time: ignore,
    timeEnd: ignore,
    timeLog: ignore,
    trace: ignore,
    warn: ignore
  }
  return { console, lines, errors }
})

/**
 * Runs the CLI in a fiber with a clock that announces its waits; `line` takes the next printed line, passing
 * those waits.
 */
const follow = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const { console, errors, lines } = yield* awaitableConsole
    const probe = yield* makeSleepProbe
    const fiber = yield* probe.instrument(runCliEffect(args)).pipe(
      Effect.provideService(Console.Console, console),
      Effect.provide(cliTestServices),
      Effect.forkScoped
    )
    const line = Effect.gen(function*() {
      for (;;) {
        const got = yield* Effect.raceFirst(
          Effect.map(Queue.take(lines), (text) => ({ _tag: "line", text }) as const),
          Effect.raceFirst(
            Effect.map(probe.next, (ms) => ({ _tag: "wait", ms }) as const),
            Effect.map(Fiber.await(fiber), (exit) => ({ _tag: "ended", exit }) as const)
          )
        )
        if (got._tag === "line") return got.text
        if (got._tag === "ended") return assert.fail(`the CLI ended: ${String(got.exit)} ${errors.join("\n")}`)
        yield* TestClock.adjust(got.ms)
      }
    })
    return { line, fiber }
  })

const flagsFor = (path: Path.Path, root: string) => [
  "--root",
  path.join(root, "rarebit"),
  "--session-root",
  path.join(root, "sessions")
]

fileSystemSuite("rarebit-store current --follow, in-process", (it) => {
  it.effect("--json prints readRarebitCurrent's object, then one line per new state", ({ root }) =>
    Effect.gen(function*() {
      const path = yield* Path.Path
      const kit = yield* setup(root)
      yield* settleJob(kit, 1)
      const run = yield* follow([
        "current",
        "--session",
        kit.sessionFile,
        "--follow",
        "--json",
        ...flagsFor(path, root)
      ])
      const first = yield* run.line
      assert.notInclude(first, "\n", "one document per line")
      assert.deepStrictEqual(JSON.parse(first), yield* kit.store.readCurrent({ sessionFile: kit.sessionFile }))
      yield* settleJob(kit, 2)
      const second = JSON.parse(yield* run.line)
      assert.strictEqual(second.receipt.summary, "summary 2")
      assert.deepStrictEqual(second, yield* kit.store.readCurrent({ sessionFile: kit.sessionFile }))
      yield* Fiber.interrupt(run.fiber)
    }))

  it.effect("the human output prints the state, then a header and the state after each change", ({ root }) =>
    Effect.gen(function*() {
      const path = yield* Path.Path
      const kit = yield* setup(root)
      // An empty store: the Rarebit root, nothing in it yet.
      yield* kit.fs.makeDirectory(kit.rarebitRoot, { recursive: true })
      const run = yield* follow(["current", "--session", kit.sessionFile, "--follow", ...flagsFor(path, root)])
      const firstState: Array<string> = []
      for (let line = yield* run.line; !line.startsWith("Diagnostics"); line = yield* run.line) firstState.push(line)
      assert.match(firstState[1]!, /^Sidecar .* \(missing\)$/)
      yield* settleJob(kit, 1)
      assert.strictEqual(yield* run.line, "")
      assert.match(yield* run.line, /^-- \d{4}-\d\d-\d\dT.*Z changed \(the sidecar is another file now\) --$/)
      const next: Array<string> = []
      for (let line = yield* run.line; !line.startsWith("Diagnostics"); line = yield* run.line) next.push(line)
      assert.isTrue(next.some((line) => line === "Summary     \"summary 1\""), next.join("\n"))
      yield* Fiber.interrupt(run.fiber)
    }))

  it.effect("a missing store still fails at once with exit 3", ({ root }) =>
    Effect.gen(function*() {
      const run = yield* cliIn(["current", "--session", `${root}/s.jsonl`, "--follow", "--root", `${root}/nothing`])
      assert.strictEqual(run.code, 3, run.stderr)
    }))
})

/** Spawns `current --follow` and hands out its stdout line by line. */
const spawnFollow = (args: ReadonlyArray<string>): SpawnedCli => spawnCliLines(["current", ...args, "--follow"])

describe("rarebit-store current --follow, as a process", () => {
  const branch = [entry("u1", "user", "a question"), entry("a1", "assistant", "an answer")]
  let roots: Roots
  beforeEach(async () => {
    roots = await makeRoots("rarebit-cli-follow-")
    await writeSession(roots.sessionFile, "followed", branch)
  })
  afterEach(async () => {
    await roots?.cleanup()
  })

  it("prints a settle by our store and one by the reference's, and Ctrl-C ends it with exit 130", async () => {
    await settleWith("ours", roots, roots.sessionFile, 1, summaryReceipt(branch, "followed", { summary: "first" }))
    const run = spawnFollow(["--session", roots.sessionFile, "--json", ...rootFlags(roots)])
    const first = JSON.parse((await run.lines.next()).value)
    assert.strictEqual(first.receipt.summary, "first")
    await settleWith("ours", roots, roots.sessionFile, 2, summaryReceipt(branch, "followed", { summary: "ours" }))
    assert.strictEqual(JSON.parse((await run.lines.next()).value).receipt.summary, "ours")
    await settleWith(
      "reference",
      roots,
      roots.sessionFile,
      3,
      summaryReceipt(branch, "followed", { summary: "theirs" })
    )
    // The reference writes its receipt and its head in two writes: a read between them is a state of its
    // own (the head still names "ours", a receipt after it), so it may be printed once before "theirs".
    const afterReference = JSON.parse((await run.lines.next()).value)
    const theirs = afterReference.receipt.summary === "ours"
      ? JSON.parse((await run.lines.next()).value)
      : afterReference
    assert.strictEqual(theirs.receipt.summary, "theirs")
    run.signal("SIGINT")
    const end = await run.closed
    assert.strictEqual(end.code, 130)
    assert.strictEqual(
      end.stderr,
      "{\"error\":{\"tag\":\"Interrupted\",\"message\":\"interrupted (SIGINT)\",\"hint\":null,\"exitCode\":130}}\n"
    )
  }, 30_000)

  it("ends with exit 141 and no message when its reader closes the pipe", async () => {
    await mkdir(roots.rarebitRoot)
    const run = spawnFollow(["--session", roots.sessionFile, ...rootFlags(roots)])
    assert.match((await run.lines.next()).value, /^Session /)
    run.closeStdout()
    // The next state is written into the closed pipe.
    await settleWith("ours", roots, roots.sessionFile, 1, summaryReceipt(branch, "followed", { summary: "unread" }))
    const end = await run.closed
    assert.strictEqual(end.code, 141)
    assert.notMatch(end.stderr, /EPIPE|\n\s+at /)
  }, 30_000)
})
