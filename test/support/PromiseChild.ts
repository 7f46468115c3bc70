/**
 * A Node process of its own running a test's script against the built
 * Promise API, as the bundle tests measure it: what a process that imports
 * `rarebit-store/promise` loads, keeps and promotes, apart from the test
 * runner's own heap and modules.
 */
import { execFile } from "node:child_process"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { REPO } from "../cli/CliHarness.js"

/** The built Promise API: the launcher of its bundle. */
export const PROMISE_API = join(REPO, "dist", "promise", "index.js")

/**
 * Runs `script` (an ES module, as text) in a new Node process with
 * `nodeFlags`, its arguments the Promise API's URL and then `args`, and
 * returns the JSON it prints. `codeCache` is `RAREBIT_STORE_CODE_CACHE`:
 * a directory, or `off`; `env`, more variables for the child. Rejects with
 * the child's stderr if it fails.
 */
export const runPromiseChild = <A>(options: {
  readonly script: string
  readonly nodeFlags: ReadonlyArray<string>
  readonly args: ReadonlyArray<string>
  readonly codeCache: string
  readonly env?: Readonly<Record<string, string>> | undefined
}): Promise<A> =>
  new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      [
        ...options.nodeFlags,
        "--input-type=module",
        "--eval",
        options.script,
        pathToFileURL(PROMISE_API).href,
        ...options.args
      ],
      { cwd: REPO, env: { ...process.env, ...options.env, RAREBIT_STORE_CODE_CACHE: options.codeCache } },
      (error, stdout, stderr) => (error === null ? resolve(JSON.parse(stdout)) : reject(new Error(stderr)))
    )
  )
