import { execFileSync } from "node:child_process"
import { pathToFileURL } from "node:url"
import { describe, expect, it } from "vitest"

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
