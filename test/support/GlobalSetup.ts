/**
 * What vitest does once per run, before any test file.
 *
 * Checks (never builds) that `dist/` is the build of the current `src/`.
 * The tests that spawn a process (the CLI executable, the Promise API under
 * another Node, the reference's tests, the stress runner, the packed
 * package) run `dist/`; a stale build would let them pass on code that is no
 * longer there. So the run fails at once, naming the first stale file, and
 * says to run `npm run build` (which `npm test` does first).
 */
import { existsSync, readdirSync, statSync } from "node:fs"
import { join, relative } from "node:path"

const REPO = new URL("../../", import.meta.url).pathname.replace(/\/$/, "")

const filesUnder = (directory: string): Array<string> =>
  readdirSync(directory, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name))

/**
 * Why `dist/` is not the build of `src/`, or `undefined` when it is: every
 * source has its emitted module, none older than the source or the build
 * configuration, and every emitted module still has its source.
 */
export const staleBuild = (repo: string = REPO): string | undefined => {
  const src = join(repo, "src")
  const dist = join(repo, "dist")
  if (!existsSync(dist)) return "dist/ does not exist"
  const configured = Math.max(
    ...["tsconfig.build.json", "tsconfig.base.json"].map((file) => statSync(join(repo, file)).mtimeMs)
  )
  for (const source of filesUnder(src).filter((file) => file.endsWith(".ts") && !file.endsWith(".d.ts"))) {
    const emitted = join(dist, relative(src, source)).replace(/\.ts$/, ".js")
    const built = statSync(emitted, { throwIfNoEntry: false })?.mtimeMs
    if (built === undefined) return `${relative(repo, emitted)} is missing`
    if (built < statSync(source).mtimeMs) return `${relative(repo, source)} changed after ${relative(repo, emitted)} was built`
    if (built < configured) return `the build configuration changed after ${relative(repo, emitted)} was built`
  }
  for (const emitted of filesUnder(dist).filter((file) => file.endsWith(".js"))) {
    const source = join(src, relative(dist, emitted)).replace(/\.js$/, ".ts")
    if (!existsSync(source)) return `${relative(repo, emitted)} has no source any more`
  }
  return undefined
}

export default function setup(): void {
  const stale = staleBuild()
  if (stale !== undefined) {
    const error = new Error(
      `dist/ is not the build of src/ (${stale}). Tests that spawn the built package would run stale code: ` +
        "run `npm run build` first (`npm test` does)."
    )
    // The message is the whole story; a stack into this file is noise.
    error.stack = error.message
    throw error
  }
}
