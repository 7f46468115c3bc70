/**
 * One process of the polled-heap rows: what polling idle Sessions costs the
 * V8 heap, measured after full collections. These figures were once bounds
 * in the test suite (`HeldMemory`, `PolledMemory`, `PollGarbage`); they
 * measure V8's heuristics, not the store's contract, so the bench reports
 * them instead, for both sides.
 *
 * - kept: the heap a sweep of `count` idle Sessions (read twice, as a
 *   poll's second sweep does) leaves behind, after `warm` other Sessions
 *   were read the same way so that compiled code and one-off state are there;
 * - promoted: the old space's growth over `polls` reads of one idle Session,
 *   after a full collection (the objects of one read should die young).
 *
 * Usage: HeapProbe.js <ours|reference> <optionsJson>, options being
 * `{ listFile, sessionRoot, rarebitRoot, warm, count, polls }`.
 *
 * @since 0.1.0
 */
import { readFileSync } from "node:fs"
import { getHeapSpaceStatistics, setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { loadStore, type Side } from "./Implementations.js"

setFlagsFromString("--expose-gc")
const gc = runInNewContext("gc") as () => void

const [side, optionsJson] = process.argv.slice(2)
const options = JSON.parse(optionsJson) as {
  readonly listFile: string
  readonly sessionRoot: string
  readonly rarebitRoot: string
  readonly warm: number
  readonly count: number
  readonly polls: number
}
const store = await loadStore(side as Side)
const targets = (JSON.parse(readFileSync(options.listFile, "utf8")) as Array<string>)
  .slice(0, options.warm + options.count)
  .map((sessionFile) => ({ sessionFile, sessionRoot: options.sessionRoot, rarebitRoot: options.rarebitRoot }))

const heapUsedAfterGc = () => {
  gc()
  gc()
  return process.memoryUsage().heapUsed
}
const oldSpaceBytes = () => getHeapSpaceStatistics().find((space) => space.space_name === "old_space")!.space_used_size

const sweep = async (list: typeof targets) => {
  for (const target of list) {
    const current = await store.readRarebitCurrent(target)
    if (current.artifactState?.nativeRef?.availability !== "available") {
      throw new Error(`${target.sessionFile}: ${JSON.stringify(current.artifactState)}`)
    }
  }
}

const warm = targets.slice(0, options.warm)
const measured = targets.slice(options.warm)
await sweep(warm)
await sweep(warm)
const before = heapUsedAfterGc()
await sweep(measured)
await sweep(measured)
const keptBytesPerSession = (heapUsedAfterGc() - before) / measured.length

const one = [targets[0]]
for (let index = 0; index < 500; index++) await sweep(one)
gc()
const oldBefore = oldSpaceBytes()
for (let index = 0; index < options.polls; index++) await sweep(one)
const promotedBytesPerPoll = (oldSpaceBytes() - oldBefore) / options.polls

process.stdout.write(`${JSON.stringify({ keptBytesPerSession, promotedBytesPerPoll })}\n`)
