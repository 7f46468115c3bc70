/**
 * What the `sessions` rows are measured against: the minimal script an
 * operator would write without the overview, walking the Session root and
 * calling the reference's `readRarebitCurrent` for each Session in turn.
 *
 * Usage: SessionsFloor.js <reference store module> <sessionRoot> <rarebitRoot>;
 * prints `{ sessions, states }` (counts by `availability/syncState`).
 *
 * @since 0.1.0
 */
import { readdirSync } from "node:fs"
import { join } from "node:path"
import { pathToFileURL } from "node:url"

const [storeModule, sessionRoot, rarebitRoot] = process.argv.slice(2) as [string, string, string]
const { readRarebitCurrent } = (await import(pathToFileURL(storeModule).href)) as {
  readonly readRarebitCurrent: (
    options: Record<string, string>
  ) => Promise<{ availability: string; artifactState: { syncState: string } }>
}

const walk = (directory: string, found: Array<string>): Array<string> => {
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name)
    if (entry.isDirectory()) walk(path, found)
    else if (entry.isFile() && entry.name.endsWith(".jsonl")) found.push(path)
  }
  return found
}

const states: Record<string, number> = {}
let sessions = 0
for (const sessionFile of walk(sessionRoot, [])) {
  const current = await readRarebitCurrent({ sessionFile, sessionRoot, rarebitRoot })
  const key = `${current.availability}/${current.artifactState.syncState}`
  states[key] = (states[key] ?? 0) + 1
  sessions++
}
process.stdout.write(`${JSON.stringify({ sessions, states })}\n`)
