/**
 * Figures a test measures besides what it asserts (crash points counted,
 * fuzz outcomes tallied, the stress run's report), kept out of the middle of
 * vitest's output: each goes to `test-reports/<name>.txt` (git-ignored),
 * and the run's global setup prints the reports of the run below vitest's
 * summary (`GlobalSetup.ts`).
 *
 * A report holds what this run wrote to it: the first write of a run
 * replaces the file, later ones append. Give each test file its own names,
 * since test files run in parallel workers.
 */
import { Effect } from "effect"
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"

/** Where the reports go, relative to the repository. */
export const REPORT_DIRECTORY = "test-reports"

const defaultDirectory = join(new URL("../../", import.meta.url).pathname, REPORT_DIRECTORY)

/**
 * A `report` function writing under `directory`. Its first write of a report
 * replaces the file, later ones append: a test file runs in one worker
 * process, and no two test files share a report, so the process's first
 * write of a report is the run's first.
 */
export const makeReport = (directory: string) => {
  const written = new Set<string>()
  return (name: string, text: string): void => {
    mkdirSync(directory, { recursive: true })
    const file = join(directory, `${name}.txt`)
    const lines = text.endsWith("\n") ? text : `${text}\n`
    if (written.has(name)) appendFileSync(file, lines)
    else writeFileSync(file, lines)
    written.add(name)
  }
}

/** Adds `text` (one or more lines) to the report `name` of this run. */
export const report: (name: string, text: string) => void = makeReport(defaultDirectory)

/** `report` as an effect. */
export const reportEffect = (name: string, text: string): Effect.Effect<void> => Effect.sync(() => report(name, text))
