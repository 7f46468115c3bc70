/**
 * The peak resident set of this process, in MiB.
 *
 * On Linux this is `VmHWM` from `/proc/self/status`: the high-water mark of
 * the process's own address space since it was exec'd. `getrusage`'s
 * `maxRSS` (`process.resourceUsage().maxRSS`) is not: the kernel carries it
 * over `execve`, so a child spawned by a process holding 600 MiB reports
 * ~600 MiB before it has done anything, and every growth measured from it
 * comes out too small (or zero). Elsewhere `maxRSS` is all there is.
 *
 * @since 0.1.0
 */
import { readFileSync } from "node:fs"

export const peakRssMiB = (): number => {
  try {
    const match = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync("/proc/self/status", "utf8"))
    if (match !== null) return Number(match[1]) / 1024
  } catch {
    // Not Linux: fall through.
  }
  return process.resourceUsage().maxRSS / 1024
}
