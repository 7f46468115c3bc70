/**
 * What vitest does once per run, before the first test file and after the
 * last.
 *
 * Before: checks (never builds) that `dist/` is the build of the current
 * `src/`. The tests that spawn a process (the CLI executable, the Promise
 * API under another Node, the reference's tests, the stress runner, the
 * packed package) run `dist/`; a stale build would let them pass on code
 * that is no longer there. So the run fails at once, naming the first
 * stale file, and says to run `npm run build` (which `npm test` does first).
 *
 * After: lists what the tests recorded with `report` (see `TestReport.ts`)
 * during this run, below vitest's own summary: short reports in full, long
 * ones by their number of lines.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { join, relative } from "node:path"
import { REPORT_DIRECTORY } from "./TestReport.js"

const REPO = new URL("../../", import.meta.url).pathname.replace(/\/$/, "")

/** Reports of at most this many lines are printed in full at the end of the run. */
const INLINE_REPORT_LINES = 4

const filesUnder = (directory: string): Array<string> =>
  readdirSync(directory, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name))

/**
 * Why `dist/` is not the build of `src/`, or `undefined` when it is: every
 * source has its emitted module, none older than the source or the build
 * configuration, and every module emitted at the top of `dist/` or in one of
 * `src/`'s folders still has its source.
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
    if (built < statSync(source).mtimeMs) {
      return `${relative(repo, source)} changed after ${relative(repo, emitted)} was built`
    }
    if (built < configured) return `the build configuration changed after ${relative(repo, emitted)} was built`
  }
  // Only where src/ emits: another build may put its own folder in dist/.
  const emitsTo = (file: string) => {
    const [first, ...rest] = relative(dist, file).split("/")
    return rest.length === 0 || existsSync(join(src, first))
  }
  for (const emitted of filesUnder(dist).filter((file) => file.endsWith(".js") && emitsTo(file))) {
    const source = join(src, relative(dist, emitted)).replace(/\.js$/, ".ts")
    if (!existsSync(source)) return `${relative(repo, emitted)} has no source any more`
  }
  return undefined
}

/**
 * How far before a run's start a report may seem to have been written: a
 * file's times come from the kernel's coarse clock, which can lag
 * `Date.now()` by a scheduler tick or more (a report written 1 ms after
 * the start was once stamped before it).
 */
export const REPORT_TIME_SLACK_MS = 1_000

/**
 * The reports written since `since`, as the lines to print: each file's
 * name, then its lines if it has few, or how many it has.
 */
export const reportsSince = (since: number, directory: string = join(REPO, REPORT_DIRECTORY)): Array<string> => {
  if (!existsSync(directory)) return []
  const reports = readdirSync(directory)
    .filter((name) => name.endsWith(".txt") && statSync(join(directory, name)).mtimeMs >= since)
    .sort()
    .map((name) => ({ name, lines: readFileSync(join(directory, name), "utf8").trimEnd().split("\n") }))
  const width = Math.max(0, ...reports.map((report) => report.name.length)) + 2
  return reports.flatMap(({ name, lines }) => {
    const shown = lines.length <= INLINE_REPORT_LINES ? lines : [`${lines.length} lines`]
    return shown.map((line, index) => `${(index === 0 ? name : "").padEnd(width)}${line}`)
  })
}

export default function setup(): () => void {
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
  // Reports written from now on belong to this run.
  const startedAt = Date.now() - REPORT_TIME_SLACK_MS
  return () => {
    const lines = reportsSince(startedAt)
    if (lines.length > 0) {
      process.stdout.write(
        `\n Reports written by this run, in ${REPORT_DIRECTORY}/:\n${lines.map((line) => `   ${line}`).join("\n")}\n`
      )
    }
  }
}
