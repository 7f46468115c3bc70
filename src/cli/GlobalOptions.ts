/**
 * The root command, its global options, and what every subcommand derives
 * from them: the store layer and the resolved Session.
 *
 * Global options may come before or after the subcommand
 * (`rarebit-store --json current …` or `rarebit-store current … --json`).
 * Defaults are the store's: `~/.pi/agent/rarebit` and `~/.pi/agent/sessions`.
 * A Session is named by path or exact id and resolved the way the library
 * resolves it (`resolveSessionFile`); its sidecar path follows the store's
 * path rule, so a Session outside `--session-root` is refused unless
 * `--allow-external-session` is given.
 *
 * @since 0.1.0
 */
import { Effect, Layer, Option, Result } from "effect"
import { Command, Flag } from "effect/cli"
import { FileSystem } from "effect/FileSystem"
import { Path } from "effect/Path"
import * as NodeStore from "../platform/NodeStore.js"
import { resolveSessionFile } from "../session/SessionReader.js"
import { commitLockPath, materializationPath } from "../store/MirroredPath.js"
import { RarebitStore } from "../store/RarebitStore.js"
import { DEFAULT_RAREBIT_ROOT, DEFAULT_RAREBIT_SESSION_ROOT } from "../store/StoreConfig.js"
import { cliFailure, ExitCode, toCliFailure } from "./CliFailure.js"

/**
 * The root command with the shared flags; subcommands read them with
 * `yield* rootCommand`.
 *
 * @category commands
 * @since 0.1.0
 */
export const rootCommand = Command.make("rarebit-store").pipe(
  Command.withSharedFlags({
    root: Flag.String("root").pipe(
      Flag.withDescription(`Rarebit root holding materializations-v4/ and jobs-v4/ (default ~/.pi/agent/rarebit)`),
      Flag.withMetavar("dir"),
      Flag.optional
    ),
    sessionRoot: Flag.String("session-root").pipe(
      Flag.withDescription(`Root of the Pi Sessions (default ~/.pi/agent/sessions)`),
      Flag.withMetavar("dir"),
      Flag.optional
    ),
    allowExternalSession: Flag.Boolean("allow-external-session").pipe(
      Flag.withDescription("Accept a Session file outside --session-root (its sidecar is keyed by a hash of its path)"),
      Flag.withDefault(false)
    ),
    json: Flag.Boolean("json").pipe(
      Flag.withDescription(
        "Machine-readable output: one JSON document on stdout per command; a failure is one line " +
          "{\"error\":{\"tag\",\"message\",\"hint\",\"exitCode\"}} on stderr"
      ),
      Flag.withDefault(false)
    )
  }),
  Command.withDescription(
    "Inspect, audit, verify and repair Rarebit sidecars: the append-only receipt files next to Pi Sessions"
  )
)

/**
 * The global options with defaults applied and paths resolved.
 *
 * @category models
 * @since 0.1.0
 */
export interface Globals {
  readonly rarebitRoot: string
  readonly sessionRoot: string
  readonly allowExternalSession: boolean
  readonly json: boolean
}

/**
 * Reads the global options inside a subcommand handler.
 *
 * @category accessors
 * @since 0.1.0
 */
export const globals = Effect.gen(function*() {
  const flags = yield* rootCommand
  const path = yield* Path
  return {
    rarebitRoot: path.resolve(Option.getOrElse(flags.root, () => DEFAULT_RAREBIT_ROOT)),
    sessionRoot: path.resolve(Option.getOrElse(flags.sessionRoot, () => DEFAULT_RAREBIT_SESSION_ROOT)),
    allowExternalSession: flags.allowExternalSession,
    json: flags.json
  } satisfies Globals
})

/**
 * The store for these options over the CLI's own `FileSystem` and `Path`,
 * with crypto-backed tokens and the `/proc` lock-owner probe.
 *
 * **Details**
 *
 * The file system is whatever the CLI runs on: Node's (every call on libuv's
 * pool, so a stalled file never stops Ctrl-C from being handled) in the
 * executable, an in-memory one in tests.
 *
 * @category layers
 * @since 0.1.0
 */
export const storeLayer = (options: Pick<Globals, "rarebitRoot" | "sessionRoot" | "allowExternalSession">) =>
  RarebitStore.layer({
    rarebitRoot: options.rarebitRoot,
    sessionRoot: options.sessionRoot,
    allowExternalSession: options.allowExternalSession
  }).pipe(Layer.provideMerge(NodeStore.tokenAndOwnerLayer))

/**
 * Fails unless the Rarebit root is a directory, so that no command reports
 * an empty answer ("no damage", "0 claims", "no sidecar yet") for a store
 * that is not there: exit 3 when nothing is at that path, 2 when it is not
 * a directory. An existing root with nothing in it is an empty store.
 *
 * @category resolution
 * @since 0.1.0
 */
export const requireStore = (options: Pick<Globals, "rarebitRoot">) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem
    const root = options.rarebitRoot
    const info = yield* fs.stat(root).pipe(
      Effect.map(Option.some),
      Effect.catchReason("PlatformError", "NotFound", () => Effect.succeed(Option.none())),
      Effect.mapError(toCliFailure)
    )
    if (Option.isNone(info)) {
      return yield* cliFailure(
        "StoreNotFound",
        ExitCode.NotFound,
        `no Rarebit store at ${root}`,
        "pass --root <dir> (default ~/.pi/agent/rarebit); 'rarebit-store demo --keep' makes one to explore"
      )
    }
    if (info.value.type !== "Directory") {
      return yield* cliFailure(
        "StoreNotFound",
        ExitCode.InvalidInput,
        `the Rarebit root ${root} is not a directory`,
        "pass --root <dir>, the directory that holds materializations-v4/ and jobs-v4/"
      )
    }
  })

/**
 * The `--session` flag, required.
 *
 * @category flags
 * @since 0.1.0
 */
export const sessionFlag = Flag.String("session").pipe(
  Flag.withAlias("s"),
  Flag.withMetavar("path|id"),
  Flag.withDescription("The Pi Session: a file path, or an exact Session id looked up under --session-root")
)

/**
 * A resolved Session: its file, sidecar and commit lock paths.
 *
 * @category models
 * @since 0.1.0
 */
export interface ResolvedSession {
  readonly sessionFile: string
  readonly sidecar: string
  readonly lockPath: string
}

/**
 * Resolves `--session` to a file, then to its sidecar; failures become
 * `CliFailure`s with the right exit code.
 *
 * @category resolution
 * @since 0.1.0
 */
export const resolveSession = (reference: string, options: Globals) =>
  Effect.gen(function*() {
    const path = yield* Path
    const sessionFile = yield* resolveSessionFile(reference, { sessionRoot: options.sessionRoot })
    const sidecar = yield* Result.match(materializationPath(path, sessionFile, options), {
      onFailure: Effect.fail,
      onSuccess: Effect.succeed
    })
    return { sessionFile, sidecar, lockPath: commitLockPath(sidecar) } satisfies ResolvedSession
  }).pipe(Effect.mapError(toCliFailure))
