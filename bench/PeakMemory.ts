/**
 * What a benchmark process measures of its own memory: its peak resident
 * set, and the V8 heap by generation.
 *
 * @since 0.1.0
 */
import { readFileSync } from "node:fs"
import { getHeapSpaceStatistics } from "node:v8"

const MiB = 1024 * 1024

/**
 * The peak resident set of this process, in MiB.
 *
 * On Linux this is `VmHWM` from `/proc/self/status`: the high-water mark of
 * the process's own address space since it was exec'd. `getrusage`'s
 * `maxRSS` (`process.resourceUsage().maxRSS`) is not: the kernel carries it
 * over `execve`, so a child spawned by a process holding 600 MiB reports
 * ~600 MiB before it has done anything, and every growth measured from it
 * comes out too small (or zero). Elsewhere `maxRSS` is all there is.
 */

export const peakRssMiB = (): number => {
  try {
    const match = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync("/proc/self/status", "utf8"))
    if (match !== null) return Number(match[1]) / 1024
  } catch {
    // Not Linux: fall through.
  }
  return process.resourceUsage().maxRSS / 1024
}

/** The V8 heap's physical size, in MiB, by generation. */
export interface HeapGenerations {
  readonly youngMiB: number
  readonly oldMiB: number
}

/**
 * The V8 heap's physical size by generation, in MiB: `young` is the new
 * space and its large objects, `old` every other space (old, code, trusted,
 * large objects, …). In a polling process the young generation grows by
 * V8's own rule, doubling as objects survive it, and the old generation
 * holds what the store keeps and what it promoted: the two parts of a peak
 * that the heap contributes, told apart.
 */
export const heapGenerationsMiB = (): HeapGenerations => {
  let young = 0
  let old = 0
  for (const space of getHeapSpaceStatistics()) {
    if (space.space_name === "new_space" || space.space_name === "new_large_object_space") {
      young += space.physical_space_size
    } else {
      old += space.physical_space_size
    }
  }
  return { youngMiB: young / MiB, oldMiB: old / MiB }
}
