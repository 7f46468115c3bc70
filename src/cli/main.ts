#!/usr/bin/env node
/**
 * The `rarebit-store` executable: runs the CLI on the process arguments over
 * Node's services and exits with the code it reports.
 *
 * When stdout is a pipe that closes early (`rarebit-store history --all |
 * head`), the run is interrupted like on Ctrl-C, so finalizers (the demo's
 * temporary directory) still run, and the process exits 141 (128 + SIGPIPE)
 * without an error trace.
 *
 * @since 0.1.0
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Effect, Runtime } from "effect"
import { runCli } from "./Cli.js"

const BROKEN_PIPE_EXIT = 141

let brokenPipe = false
const onStreamError = (error: NodeJS.ErrnoException) => {
  if (error.code !== "EPIPE") throw error
  if (brokenPipe) return
  brokenPipe = true
  // The runtime interrupts the main fiber on SIGINT; reuse that path.
  process.emit("SIGINT")
}
process.stdout.on("error", onStreamError)
process.stderr.on("error", onStreamError)

const program = runCli(process.argv.slice(2)).pipe(
  Effect.flatMap((code) =>
    Effect.sync(() => {
      // Set rather than exit, so stdout is flushed before the process ends.
      process.exitCode = code
    })
  ),
  Effect.provide(NodeServices.layer)
)

NodeRuntime.runMain(program, {
  disableErrorReporting: true,
  teardown: (exit, onExit) => (brokenPipe ? onExit(BROKEN_PIPE_EXIT) : Runtime.defaultTeardown(exit, onExit))
})
