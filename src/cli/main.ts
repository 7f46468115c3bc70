#!/usr/bin/env node
/**
 * The `rarebit-store` executable: runs the CLI on the process arguments over
 * Node's services and exits with the code it reports.
 *
 * Ctrl-C (SIGINT), SIGTERM, a closed terminal (SIGHUP) and, on Windows,
 * Ctrl-Break (SIGBREAK) interrupt the run: finalizers still run (commit
 * locks are released, the progress line is cleared, the demo's temporary
 * directory removed), then one line `rarebit-store: interrupted (SIGINT)`
 * goes to stderr and the process exits 130 (SIGINT), 143 (SIGTERM), 129
 * (SIGHUP) or 149 (SIGBREAK), the shell's 128 + signal number; under `--json` that line is the JSON error
 * `{"error":{"tag":"Interrupted",…}}`. A second signal while finalizers run exits at once. Long scans stay
 * interruptible: the file-system calls made on the calling thread are short
 * (stats, opens, reads of at most 1 MiB), and Effect's runtime yields to the
 * event loop, where signals are handled, every couple of thousand steps.
 *
 * The commands run over `DirectFileSystem` (short calls on the calling
 * thread, a non-blocking open that refuses FIFOs and devices), as
 * `NodeStore.layer` does, not over the thread-pool file system. Next to it
 * come only the Node services the command line needs: path, stdio and the
 * terminal (`--wizard` prompts), made when first used. The child-process
 * spawner the CLI's environment asks for refuses to spawn: no command runs
 * another program (but for the lock owner probe on macOS, which reads the
 * boot session and start times with `sysctl` and `ps` when a lock is first
 * judged), and Node's `child_process` module is not loaded at every start.
 *
 * The package runs this module bundled (`dist/cli/main.bundle.cjs`, see
 * `scripts/bundle.mjs`), started from a V8 code cache.
 *
 * When stdout is a pipe that closes early (`rarebit-store history --all |
 * head`), the run is interrupted the same way and the process exits 141
 * (128 + SIGPIPE) without a message.
 *
 * @since 0.1.0
 */
import * as NodePath from "@effect/platform-node/NodePath"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeStdio from "@effect/platform-node/NodeStdio"
import * as NodeTerminal from "@effect/platform-node/NodeTerminal"
import { Cause, Effect, Exit, Layer, PlatformError, Runtime, Scope, Terminal } from "effect"
import { ChildProcessSpawner } from "effect/process"
import * as DirectFileSystem from "../platform/DirectFileSystem.js"
import * as ProcessOwner from "../platform/ProcessOwner.js"
import { errorJson, jsonRequested, runCli } from "./Cli.js"

const args = process.argv.slice(2)

const BROKEN_PIPE_EXIT = 141
// 128 + the signal's number, as a shell reports it (SIGBREAK is Windows' 21).
const SIGNAL_EXIT = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129, SIGBREAK: 149 } as const
type Signal = keyof typeof SIGNAL_EXIT

let brokenPipe = false
let received: Signal | undefined

const onStreamError = (error: NodeJS.ErrnoException) => {
  // Once the terminal is gone (SIGHUP), writing to it fails with EIO: the
  // command is ending anyway, and its exit code says why.
  if (received === "SIGHUP" && error.code === "EIO") return
  if (error.code !== "EPIPE") throw error
  if (brokenPipe) return
  brokenPipe = true
  // The runtime interrupts the main fiber on SIGINT; reuse that path.
  process.emit("SIGINT")
}
process.stdout.on("error", onStreamError)
process.stderr.on("error", onStreamError)

/** Whether a SIGTERM being emitted is a SIGHUP or SIGBREAK passed on to the runtime, not a second signal. */
let forwarding = false

const onSignal = (signal: Signal) => {
  if (brokenPipe || forwarding) return
  if (received !== undefined) process.exit(SIGNAL_EXIT[received])
  received = signal
}

// Registered before the runtime's own listeners (which interrupt the main
// fiber), to remember which signal it was, and to stop waiting on a second.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => onSignal(signal))

// The runtime listens to SIGINT and SIGTERM only. A closed terminal
// (SIGHUP) and Ctrl-Break on Windows (SIGBREAK; Ctrl-C arrives there as
// SIGINT) would otherwise end the process without running finalizers, and
// leave a commit lock behind: they take the SIGTERM path instead.
const forwarded: ReadonlyArray<Signal> = process.platform === "win32" ? ["SIGHUP", "SIGBREAK"] : ["SIGHUP"]
for (const signal of forwarded) {
  process.on(signal, () => {
    if (brokenPipe) return
    const first = received === undefined
    onSignal(signal)
    if (!first) return
    forwarding = true
    try {
      process.emit("SIGTERM")
    } finally {
      forwarding = false
    }
  })
}

const noSpawning = ChildProcessSpawner.make(() =>
  Effect.fail(
    PlatformError.badArgument({
      module: "ChildProcess",
      method: "spawn",
      description: "rarebit-store runs no other programs"
    })
  )
)

/**
 * Node's terminal, made when a command first uses it (`--wizard`): making it
 * opens `process.stdin`, which costs most when stdin is `/dev/null` (a cron
 * job, a script's `< /dev/null`) and no command reads it.
 */
const terminalOnFirstUse = Layer.effect(
  Terminal.Terminal,
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const terminal = yield* Effect.cached(NodeTerminal.make().pipe(Scope.provide(scope)))
    return Terminal.make({
      columns: Effect.flatMap(terminal, (made) => made.columns),
      rows: Effect.flatMap(terminal, (made) => made.rows),
      size: Effect.flatMap(terminal, (made) => made.size),
      readInput: Effect.flatMap(terminal, (made) => made.readInput),
      readLine: Effect.flatMap(terminal, (made) => made.readLine),
      display: (text) => Effect.flatMap(terminal, (made) => made.display(text))
    })
  })
)

/**
 * What the command line runs on: `@effect/platform-node`'s services, with the
 * direct file system, and this platform's lock owner probe (`unlock`).
 */
const services = Layer.mergeAll(
  DirectFileSystem.layer,
  ProcessOwner.layer,
  NodePath.layer,
  NodeStdio.layer,
  terminalOnFirstUse,
  Layer.succeed(ChildProcessSpawner.ChildProcessSpawner, noSpawning)
)

const program = runCli(args).pipe(
  Effect.flatMap((code) =>
    Effect.sync(() => {
      // Set rather than exit, so stdout is flushed before the process ends.
      process.exitCode = code
    })
  ),
  Effect.provide(services)
)

NodeRuntime.runMain(program, {
  disableErrorReporting: true,
  teardown: (exit, onExit) => {
    if (brokenPipe) return onExit(BROKEN_PIPE_EXIT)
    if (received !== undefined && Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)) {
      const code = SIGNAL_EXIT[received]
      const message = `interrupted (${received})`
      process.stderr.write(
        `${jsonRequested(args) ? errorJson("Interrupted", message, null, code) : `rarebit-store: ${message}`}\n`
      )
      return onExit(code)
    }
    return Runtime.defaultTeardown(exit, onExit)
  }
})
