/**
 * Live current state on the plain Promise API: prints the Session's state
 * now, then again each time it changes, until a summary is current (or a
 * minute has passed):
 *
 *   node watch.js <Pi Session file> [sessionRoot] [rarebitRoot]
 *
 * Run `node promise.js` (or any worker) on the same Session meanwhile, and
 * the summary it settles is printed as soon as its head is written.
 */
import { DEFAULT_PI_SESSION_ROOT, DEFAULT_RAREBIT_ROOT, watchRarebitCurrent } from "rarebit-store/promise"

const [sessionFile, sessionRoot = DEFAULT_PI_SESSION_ROOT, rarebitRoot = DEFAULT_RAREBIT_ROOT] = process.argv.slice(2)
if (sessionFile === undefined) throw new Error("usage: node watch.js <Pi Session file> [sessionRoot] [rarebitRoot]")

try {
  // The signal ends the wait: a pending step then throws an AbortError, as fs.promises.watch does.
  for await (
    const current of watchRarebitCurrent({ sessionFile, sessionRoot, rarebitRoot }, {
      signal: AbortSignal.timeout(60_000)
    })
  ) {
    const summary = current.availability === "available" && current.receipt.status === "ok"
      ? current.receipt.summary
      : null
    // The reason tells apart states that read alike: no sidecar yet, or one just created and not yet written.
    const reason = current.diagnostics.reason === undefined ? "" : ` (${current.diagnostics.reason})`
    console.log(`current: ${current.availability}${reason}, ${current.artifactState.syncState}: ${summary}`)
    if (summary !== null) break // leaving the loop closes every file-system watch it opened
  }
} catch (error) {
  if ((error as Error).name !== "AbortError") throw error
  console.log("no summary within a minute")
}
