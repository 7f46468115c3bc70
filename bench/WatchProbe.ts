/**
 * The reading side of the watch benchmark, in a process of its own: either
 * our `watchRarebitCurrent` (`watch`) or a `readRarebitCurrent` loop that
 * sleeps `intervalMs` between reads (`poll`). Each time it sees a new head
 * it prints `{"offset", "at"}`, `at` being `process.hrtime` in nanoseconds
 * (the system's monotonic clock, the same in every process). On stdin,
 * `idle <ms>` measures the process's CPU time over that many milliseconds
 * of nothing happening and prints `{"idleCpuUs"}`; `quit` ends it.
 *
 * Usage: WatchProbe.js <watch|poll> <sessionRoot> <rarebitRoot> <sessionFile> [intervalMs]
 *
 * @since 0.1.0
 */
import { createInterface } from "node:readline"
import { setTimeout as sleep } from "node:timers/promises"
import { loadOurPromiseApi } from "./Implementations.js"

const { readRarebitCurrent, watchRarebitCurrent } = await loadOurPromiseApi()

const [mode, sessionRoot, rarebitRoot, sessionFile, interval] = process.argv.slice(2)
const location = { sessionRoot, rarebitRoot, sessionFile }
const stop = new AbortController()
const print = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`)

let last: number | undefined | null = undefined
const seen = (current: { readonly head: { readonly receiptOffset: number } | null }) => {
  const offset = current.head?.receiptOffset ?? null
  if (last === undefined) print({ ready: true, offset })
  else if (offset !== last) print({ offset, at: String(process.hrtime.bigint()) })
  last = offset
}

const reading = (async () => {
  try {
    if (mode === "watch") {
      for await (const current of watchRarebitCurrent(location, { signal: stop.signal })) seen(current)
    } else {
      const intervalMs = Number(interval)
      while (!stop.signal.aborted) {
        seen(await readRarebitCurrent(location))
        await sleep(intervalMs, undefined, { signal: stop.signal })
      }
    }
  } catch (error) {
    if ((error as Error).name !== "AbortError") throw error
  }
})()

const lines = createInterface({ input: process.stdin })
for await (const line of lines) {
  const [command, argument] = line.split(" ")
  if (command === "idle") {
    const before = process.cpuUsage()
    await sleep(Number(argument))
    const used = process.cpuUsage(before)
    print({ idleCpuUs: used.user + used.system })
  } else if (command === "quit") {
    break
  }
}
lines.close()
stop.abort()
await reading
