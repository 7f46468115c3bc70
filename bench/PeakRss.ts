/**
 * Preloaded (`node --import`) into a process the benchmark times from
 * outside: when the process exits, its peak resident set size (`PeakMemory`)
 * and CPU time are written as JSON to the file named by
 * `BENCH_RESOURCE_FILE`. Node
 * offers no way to read a child's rusage, and polling `/proc` misses the
 * last moments before exit.
 *
 * @since 0.1.0
 */
import { writeFileSync } from "node:fs"
import { peakRssMiB } from "./PeakMemory.js"

const target = process.env.BENCH_RESOURCE_FILE
if (target !== undefined) {
  process.on("exit", () => {
    const usage = process.resourceUsage()
    writeFileSync(
      target,
      JSON.stringify({
        peakRssMiB: peakRssMiB(),
        cpuMs: (usage.userCPUTime + usage.systemCPUTime) / 1000
      })
    )
  })
}
