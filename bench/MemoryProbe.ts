/**
 * Peak memory of current reads, measured in a fresh process so nothing else
 * in the benchmark inflates it: once the implementation is loaded, the peak
 * resident set size (`PeakMemory`) is noted; then `repeats` reads of the target
 * run, and the growth of the peak is printed as JSON (MiB). The growth
 * includes what the first read costs (lazy initialisation, JIT), which is
 * the same for every file size.
 *
 * Usage: MemoryProbe.js <ours|reference> <optionsJson>
 * where options are `{ target, nativeFile?, coldSession?, repeats }`,
 * `target` being `readRarebitCurrent` options.
 *
 * @since 0.1.0
 */
import { readFileSync, utimesSync } from "node:fs"
import { loadStore, type Side } from "./Implementations.js"
import { peakRssMiB } from "./PeakMemory.js"

interface ProbeOptions {
  readonly target: Record<string, unknown>
  /** A file holding the native observation to pass in, if any. */
  readonly nativeFile?: string
  /** Touch the Session before each read, so every read is a cold one. */
  readonly coldSession?: boolean
  readonly repeats: number
}

const [side, optionsJson] = process.argv.slice(2)
const options = JSON.parse(optionsJson) as ProbeOptions
const store = await loadStore(side as Side)
const native = options.nativeFile === undefined ? {} : { native: JSON.parse(readFileSync(options.nativeFile, "utf8")) }

const before = peakRssMiB()
let stamp = Date.now() / 1000
for (let index = 0; index < options.repeats; index++) {
  if (options.coldSession) {
    stamp += 1
    utimesSync(options.target.sessionFile as string, stamp, stamp)
  }
  const current = await store.readRarebitCurrent({ ...options.target, ...native })
  if (current.artifactState === undefined) throw new Error("no artifact state")
}
process.stdout.write(`${JSON.stringify({ peakGrowthMiB: peakRssMiB() - before })}\n`)
