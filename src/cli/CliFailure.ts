/**
 * How the CLI fails: one error class carrying the exit code, a one-line
 * message and a hint, and the translation of every library error into it.
 *
 * Exit codes are part of the CLI's contract with scripts:
 * 0 success, 1 `verify` found damage, 2 invalid input, 3 not found (a
 * Session, or the store itself), 4 store problem (I/O, unreadable data,
 * unexpected failure), 5 refused (`unlock` will not remove a lock whose
 * owner may be alive); 130 and 143 when interrupted (see `main.ts`).
 * A user mistake never prints a stack trace; set `RAREBIT_STORE_DEBUG=1`
 * to see the full cause of an unexpected failure. Every failure has a `tag`
 * (the library error it came from, or the CLI's own condition), which
 * `--json` reports.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * The process exit codes.
 *
 * @category constants
 * @since 0.1.0
 */
export const ExitCode = {
  Ok: 0,
  Damage: 1,
  InvalidInput: 2,
  NotFound: 3,
  StoreProblem: 4,
  Refused: 5
} as const

/**
 * @category models
 * @since 0.1.0
 */
export type ExitCode = typeof ExitCode[keyof typeof ExitCode]

/**
 * A failure the CLI reports as one line (plus a hint) and an exit code.
 *
 * **Details**
 *
 * `tag` names what failed: the library error's tag (`SessionNotFound`,
 * `StoreIo`, …) or the CLI's own condition (`StoreNotFound`, `Refused`,
 * `Damage`, `InvalidInvocation`). `reported` is `true` when the output was
 * already printed (a `verify` that found damage prints its report, then
 * exits 1).
 *
 * @category errors
 * @since 0.1.0
 */
export class CliFailure extends Schema.TaggedError<CliFailure>()("CliFailure", {
  tag: Schema.String,
  exitCode: Schema.Number,
  message: Schema.String,
  hint: Schema.NullOr(Schema.String),
  reported: Schema.Boolean
}) {}

/**
 * Makes a `CliFailure`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const cliFailure = (tag: string, exitCode: ExitCode, message: string, hint: string | null = null): CliFailure =>
  new CliFailure({ tag, exitCode, message, hint, reported: false })

const tagOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && typeof (error as { _tag?: unknown })._tag === "string"
    ? (error as { _tag: string })._tag
    : undefined

const messageOf = (error: unknown): string =>
  error instanceof Error || (typeof error === "object" && error !== null && "message" in error)
    ? String((error as { message: unknown }).message)
    : String(error)

/**
 * Translates any failure of a command into a `CliFailure`.
 *
 * **Details**
 *
 * Session resolution and path-rule errors are the user's input (2) or a
 * missing Session (3); data and I/O errors are store problems (4).
 *
 * @category constructors
 * @since 0.1.0
 */
export const toCliFailure = (error: unknown): CliFailure => {
  if (tagOf(error) === "CliFailure") return error as CliFailure
  const tag = tagOf(error) ?? (error instanceof Error ? error.name : "Unknown")
  const fail = (exitCode: ExitCode, hint: string) => cliFailure(tag, exitCode, messageOf(error), hint)
  switch (tag) {
    case "SessionNotFound":
      return fail(
        ExitCode.NotFound,
        (error as { lookup?: unknown }).lookup === "id"
          ? "pass the Session file's path, or set --session-root to the directory that holds it"
          : "check the path; a bare name without '/' or '.jsonl' is looked up as a Session id"
      )
    case "SessionAmbiguous":
      return fail(ExitCode.InvalidInput, "pass the exact Session file path instead of its id")
    case "SessionInvalid":
      return fail(ExitCode.InvalidInput, "pass a Pi Session file path or an exact Session id")
    case "SessionFileRequired":
      return fail(ExitCode.InvalidInput, "pass --session <path|id>")
    case "SessionOutsideRoot":
      return fail(
        ExitCode.InvalidInput,
        "set --session-root to a directory that contains it, or pass --allow-external-session"
      )
    case "HistoryBoundsInvalid":
      return fail(ExitCode.InvalidInput, "--from must be a byte offset >= 0 and --limit between 1 and 1000")
    case "HistoryUnreadable":
      return fail(ExitCode.StoreProblem, "run 'rarebit-store verify --session <path|id>' to see what is wrong with it")
    case "SessionIo":
    case "StoreIo":
    case "PlatformError":
      return fail(ExitCode.StoreProblem, "check that the file exists and is readable")
    case "LockHeld":
      return fail(
        ExitCode.StoreProblem,
        "if no writer is running, inspect it with 'rarebit-store unlock --session <path|id>'"
      )
    default:
      return fail(
        ExitCode.StoreProblem,
        "this looks like a bug or an I/O failure; set RAREBIT_STORE_DEBUG=1 for details"
      )
  }
}
