/**
 * One polling process of the many-Session rows: loads an implementation,
 * then reads the current state of every Session in the list, one after
 * another, round and round (`warm` untimed sweeps, then `timed` sweeps), as
 * a UI showing many Sessions would. Prints the mean time per read of each
 * timed sweep, the process's RSS once the implementation is loaded (before
 * any read), its RSS after the sweeps, its peak RSS, and the longest the
 * timed sweeps held the process's event loop (Node's
 * `monitorEventLoopDelay`: a native timer, so measuring adds no JavaScript
 * to either side's loop), and the V8 heap's young and old generations after
 * the sweeps (read once, at the end, so nothing is sampled during them).
 *
 * Usage: PollProbe.js <ours|reference> <optionsJson>, options being
 * `{ listFile, sessionRoot, rarebitRoot, count, warm, timed }`.
 *
 * @since 0.1.0
 */
import { closeSync, openSync, readSync } from "node:fs"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { loadStore, type Side } from "./Implementations.js"
import { heapGenerationsMiB, peakRssMiB } from "./PeakMemory.js"

const [side, optionsJson] = process.argv.slice(2)
const options = JSON.parse(optionsJson) as {
  readonly listFile: string
  readonly sessionRoot: string
  readonly rarebitRoot: string
  readonly count: number
  readonly warm: number
  readonly timed: number
}
const store = await loadStore(side as Side)
const MiB = 1024 * 1024
/**
 * A file's text, read 64 KiB at a time. Read whole, the list of 10,000
 * Sessions (1 MB) would be the largest block of memory the process had
 * freed, and glibc's malloc then raises its mmap threshold to that size and
 * keeps freed memory below it in its arenas: that raised the reference's
 * peak by ~6 MiB and ours by ~3, an effect of the probe, not of the store.
 */
const readInPieces = (file: string): string => {
  const descriptor = openSync(file, "r")
  try {
    const piece = Buffer.allocUnsafeSlow(64 * 1024)
    const decoder = new TextDecoder()
    let text = ""
    for (let position = 0;;) {
      const count = readSync(descriptor, piece, 0, piece.length, position)
      if (count === 0) return text + decoder.decode()
      text += decoder.decode(piece.subarray(0, count), { stream: true })
      position += count
    }
  } finally {
    closeSync(descriptor)
  }
}

const sessions = (JSON.parse(readInPieces(options.listFile)) as Array<string>).slice(0, options.count)
const targets = sessions.map((sessionFile) => ({
  sessionFile,
  sessionRoot: options.sessionRoot,
  rarebitRoot: options.rarebitRoot
}))
const loadedRssMiB = process.memoryUsage.rss() / MiB

const sweep = async (check: boolean) => {
  for (const target of targets) {
    const current = await store.readRarebitCurrent(target)
    if (check && current.artifactState?.nativeRef?.availability !== "available") {
      throw new Error(`${target.sessionFile}: ${JSON.stringify(current.artifactState)}`)
    }
  }
}

for (let index = 0; index < options.warm; index++) await sweep(index === 0)
const msPerRead: Array<number> = []
const loopDelay = monitorEventLoopDelay({ resolution: 1 })
loopDelay.enable()
for (let index = 0; index < options.timed; index++) {
  const start = performance.now()
  await sweep(options.warm === 0 && index === 0)
  msPerRead.push((performance.now() - start) / targets.length)
}
loopDelay.disable()
process.stdout.write(
  `${
    JSON.stringify({
      msPerRead,
      loadedRssMiB,
      rssMiB: process.memoryUsage.rss() / MiB,
      peakRssMiB: peakRssMiB(),
      longestLoopDelayMs: loopDelay.max / 1e6,
      heapAfterSweeps: heapGenerationsMiB()
    })
  }\n`
)
