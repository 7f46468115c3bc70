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
import { readFileSync } from "node:fs"
import { clipText } from "../protocol/internal/Text.js"
import { type CliFailure, ExitCode, toCliFailure } from "./CliFailure.js"
import { currentCommand } from "./Current.js"
import { demoCommand } from "./Demo.js"
import { rootCommand } from "./GlobalOptions.js"
import { historyCommand } from "./History.js"
import { jobsCommand } from "./Jobs.js"
import { jsonText } from "./JsonText.js"
import { sessionsCommand } from "./Sessions.js"
import { unlockCommand } from "./Unlock.js"
import { verifyCommand } from "./Verify.js"

/**
 * The package's version from its `package.json`, read from next to this
 * module (`dist/cli/` and `src/cli/` are both two levels below it, in the
 * repository and in an installed package); `"unknown"` if it cannot be read.
 */
const packageVersion = (): string => {
  try {
    const manifest: unknown = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"))
    const version = (manifest as { readonly version?: unknown } | null)?.version
    return typeof version === "string" && version !== "" ? version : "unknown"
  } catch {
    return "unknown"
  }
}

/**
 * The CLI's version, as `--version` prints it: the package's own.
 *
 * @category constants
 * @since 0.1.0
 */
export const VERSION: string = packageVersion()

/**
 * The whole command tree.
 *
 * @category commands
 * @since 0.1.0
 */
export const cli = rootCommand.pipe(
  Command.withSubcommands([
    currentCommand,
    historyCommand,
    sessionsCommand,
    jobsCommand,
    verifyCommand,
    unlockCommand,
    demoCommand
  ])
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

/**
 * What `--json` prints on stderr for a failure: one line,
 * `{"error":{"tag","message","hint","exitCode"}}`.
 *
 * @category models
 * @since 0.1.0
 */
export interface ErrorDocument {
  readonly error: {
    readonly tag: string
    readonly message: string
    readonly hint: string | null
    readonly exitCode: number
  }
}

/**
 * The `--json` error line for a failure, with message and hint on one
 * bounded line each.
 *
 * @category formatting
 * @since 0.1.0
 */
export const errorJson = (tag: string, message: string, hint: string | null, exitCode: number): string =>
  jsonText(
    {
      error: {
        tag,
        message: oneBoundedLine(message),
        hint: hint === null ? null : oneBoundedLine(hint),
        exitCode
      }
    } satisfies ErrorDocument
  )!

/** Whether `--json` was asked for (before a `--` that ends the flags). */
export const jsonRequested = (args: ReadonlyArray<string>): boolean => {
  const end = args.indexOf("--")
  return (end < 0 ? args : args.slice(0, end)).includes("--json")
}

// The parser's own presentation prints the whole help page before the
// error; a user who mistyped a flag needs the error and where help is.
const presenter = (json: boolean): CliOutput.Presenter => ({
  present: (event) => {
    if (event._tag !== "InvalidInvocation") return CliOutput.defaultPresenter.present(event)
    const hint = `run '${[...event.commandPath, "--help"].join(" ")}' for usage`
    if (json) {
      const message = event.errors.map((error) => oneLine(error.message)).join("; ")
      return Console.error(errorJson("InvalidInvocation", message, hint, ExitCode.InvalidInput))
    }
    return Console.error(
      [...event.errors.map((error) => `rarebit-store: ${oneLine(error.message)}`), `hint: ${hint}`].join("\n")
    )
  }
})

const report = (json: boolean) => (error: unknown): Effect.Effect<number> => {
  // Help (requested or implicit) and parse errors were presented already.
  if (CliError.isCliError(error)) return Effect.succeed(ExitCode.InvalidInput)
  const failure: CliFailure = toCliFailure(error)
  if (failure.reported) return Effect.succeed(failure.exitCode)
  const text = json
    ? errorJson(failure.tag, failure.message, failure.hint, failure.exitCode)
    : [
      `rarebit-store: ${oneBoundedLine(failure.message)}`,
      ...(failure.hint === null ? [] : [`hint: ${oneBoundedLine(failure.hint)}`])
    ].join("\n")
  return Effect.as(Console.error(text), failure.exitCode)
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
export const runCli = (args: ReadonlyArray<string>) => {
  const json = jsonRequested(args)
  return Command.runWith(cli, { version: VERSION })(args).pipe(
    Effect.as<number>(ExitCode.Ok),
    Effect.catch(report(json)),
    Effect.catchCause((cause) =>
      Cause.hasInterruptsOnly(cause)
        ? Effect.failCause(cause)
        : Effect.andThen(
          debugEnabled() ? Console.error(Cause.pretty(cause)) : Effect.void,
          report(json)(Cause.squash(cause))
        )
    ),
    Effect.provide(CliOutput.layerPresenter(presenter(json)))
  )
}
