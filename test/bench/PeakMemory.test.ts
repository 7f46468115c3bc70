import { execFileSync } from "node:child_process"
import { pathToFileURL } from "node:url"
import { describe, expect, it } from "vitest"
import type { HeapGenerations } from "../../bench/PeakMemory.js"

const module = pathToFileURL(new URL("../../bench/PeakMemory.ts", import.meta.url).pathname).href

describe.runIf(process.platform === "linux")("bench peakRssMiB", () => {
  it("a child's peak does not include what its parent held when spawning it", () => {
    const held = Buffer.alloc(400 * 1024 * 1024, 1)
    const child = execFileSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import { peakRssMiB } from ${JSON.stringify(module)}; process.stdout.write(String(peakRssMiB()))`
      ],
      { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }
    )
    expect(held.byteLength).toBe(400 * 1024 * 1024)
    // A bare Node process peaks at 30-60 MiB; the parent held over 400.
    expect(Number(child)).toBeGreaterThan(10)
    expect(Number(child)).toBeLessThan(200)
  })
})

describe("bench heapGenerationsMiB", () => {
  it("puts what a process keeps in the old generation, and parts the whole heap between the two", () => {
    // A child with collections on demand: keep ~9 MiB of small objects, then
    // collect fully, which moves every survivor out of the young generation.
    const script = `
      import { getHeapStatistics } from "node:v8"
      import { heapGenerationsMiB } from ${JSON.stringify(module)}
      gc(); gc()
      const before = heapGenerationsMiB()
      // A linked list, not an array: no large object, so only the new space can grow.
      let kept = null
      for (let index = 0; index < 400_000; index++) kept = { index, next: kept, label: undefined }
      const allocating = heapGenerationsMiB()
      gc(); gc()
      const after = heapGenerationsMiB()
      const total = getHeapStatistics().total_physical_size / 1024 / 1024
      process.stdout.write(JSON.stringify({ before, allocating, after, total, kept: kept.index + 1 }))
    `
    const output = execFileSync(process.execPath, ["--expose-gc", "--input-type=module", "-e", script], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"]
    })
    const { after, allocating, before, kept, total } = JSON.parse(output) as {
      readonly before: HeapGenerations
      readonly allocating: HeapGenerations
      readonly after: HeapGenerations
      readonly total: number
      readonly kept: number
    }
    expect(kept).toBe(400_000)
    // Allocating, before any full collection: the young generation has grown past its starting size.
    expect(allocating.youngMiB).toBeGreaterThan(before.youngMiB)
    // 400,000 objects of three fields, ~24 bytes each: about 9 MiB kept.
    expect(after.oldMiB - before.oldMiB).toBeGreaterThan(6)
    expect(after.youngMiB).toBeLessThan(after.oldMiB)
    expect(after.youngMiB + after.oldMiB).toBeCloseTo(total, 0)
  })
})
