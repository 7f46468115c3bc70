/**
 * The `rarebit-store` command tree and the one function that runs it to an
 * exit code.
 *
 * Every failure becomes a one-line message on stderr, a hint, and an exit
 * code (see `CliFailure.ts`); nothing escapes as a stack trace, except under
 * `RAREBIT_STORE_DEBUG=1` for unexpected failures. Invalid invocations
 * print the parser's complaint and where to find help, not the whole help
 * page. `main.ts` runs this over Node's services; tests run it in-process.
 *
 * @since 0.1.0
 */
import { Cause, Console, Effect } from "effect"
import { CliError, CliOutput, Command } from "effect/cli"
import { clipText } from "../protocol/internal/Text.js"
import { type CliFailure, ExitCode, toCliFailure } from "./CliFailure.js"
import { currentCommand } from "./Current.js"
import { demoCommand } from "./Demo.js"
import { rootCommand } from "./GlobalOptions.js"
import { historyCommand } from "./History.js"
import { jobsCommand } from "./Jobs.js"
import { unlockCommand } from "./Unlock.js"
import { verifyCommand } from "./Verify.js"

/**
 * The CLI's version, as `--version` prints it.
 *
 * @category constants
 * @since 0.1.0
 */
export const VERSION = "0.1.0"

/**
 * The whole command tree.
 *
 * @category commands
 * @since 0.1.0
 */
export const cli = rootCommand.pipe(
  Command.withSubcommands([currentCommand, historyCommand, jobsCommand, verifyCommand, unlockCommand, demoCommand])
)

/**
 * The most characters of an error message the CLI prints: messages may quote
 * paths and keys from the store, which a damaged file can make huge.
 *
 * @category constants
 * @since 0.1.0
 */
export const MAX_MESSAGE_CHARS = 500

const oneLine = (text: string) =>
  clipText(text, 4 * MAX_MESSAGE_CHARS)
    .replace(/\s*Did you mean this\?\s*([\s\S]*)$/, (_, suggestions: string) =>
      ` (did you mean ${suggestions.trim().split(/\s+/).join(", ")}?)`)
    .replace(/\s*\n\s*/g, " ")
    .trim()

const oneBoundedLine = (text: string) => clipText(oneLine(text), MAX_MESSAGE_CHARS)

// The parser's own presentation prints the whole help page before the
// error; a user who mistyped a flag needs the error and where help is.
const presenter: CliOutput.Presenter = {
  present: (event) =>
    event._tag === "InvalidInvocation"
      ? Console.error(
        [
          ...event.errors.map((error) => `rarebit-store: ${oneLine(error.message)}`),
          `hint: run '${[...event.commandPath, "--help"].join(" ")}' for usage`
        ].join("\n")
      )
      : CliOutput.defaultPresenter.present(event)
}

const report = (error: unknown): Effect.Effect<number> => {
  // Help (requested or implicit) and parse errors were presented already.
  if (CliError.isCliError(error)) return Effect.succeed(ExitCode.InvalidInput)
  const failure: CliFailure = toCliFailure(error)
  const lines = failure.reported
    ? []
    : [
      `rarebit-store: ${oneBoundedLine(failure.message)}`,
      ...(failure.hint === null ? [] : [`hint: ${oneBoundedLine(failure.hint)}`])
    ]
  return Effect.as(lines.length > 0 ? Console.error(lines.join("\n")) : Effect.void, failure.exitCode)
}

const debugEnabled = () => {
  const debug = process.env.RAREBIT_STORE_DEBUG
  return debug !== undefined && debug !== "" && debug !== "0"
}

/**
 * Runs the CLI on `args` (without the program name) and succeeds with the
 * exit code. Only interruption escapes.
 *
 * @category running
 * @since 0.1.0
 */
export const runCli = (args: ReadonlyArray<string>) =>
  Command.runWith(cli, { version: VERSION })(args).pipe(
    Effect.as<number>(ExitCode.Ok),
    Effect.catch(report),
    Effect.catchCause((cause) =>
      Cause.hasInterruptsOnly(cause)
        ? Effect.failCause(cause)
        : Effect.andThen(
          debugEnabled() ? Console.error(Cause.pretty(cause)) : Effect.void,
          report(Cause.squash(cause))
        )
    ),
    Effect.provide(CliOutput.layerPresenter(presenter))
  )
