/**
 * What reading Sessions the cache has not seen leaves behind in the old
 * generation, in a process of its own polling them through the Promise API
 * (`dist/promise/index.js`), as a dashboard's first sweep does.
 *
 * What must hold: a read that misses keeps its Session's evidence and its
 * entries, and nothing else outlives it. A generator function made per call
 * (`(…) => Effect.gen(function*() { … })`) broke that: each call made a new
 * function with a prototype and a hidden class of its own, and the hidden
 * class, in the old generation from the start, kept the function and the
 * call's arguments (the file, its stat with its dates and bigints) alive
 * through every young collection, so they were promoted and stayed until a
 * full collection: ~1,900 bytes a read against ~250 with the functions made
 * once (`Effect.fnUntraced`). Over the benchmark's 1,000 Sessions that was
 * ~2 MiB of peak RSS; over 10,000, ~17 MB of garbage left in the old
 * generation by one sweep (peak RSS 145 → 133–136 MiB).
 *
 * Measured as the old generation's growth over the sweep that a full
 * collection then frees, with young collections as frequent as they can be
 * (1 MiB semi-spaces), so that most reads span one.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { mkdir, mkdtemp, rm, utimes, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { turnsText } from "../session/SessionLines.js"
import { runPromiseChild } from "../support/PromiseChild.js"

const SESSIONS = 300
const MAX_GARBAGE_BYTES_PER_READ = 800

let scratch = ""

/** The child: reads each Session once, then reports what a full collection freed and kept, per read. */
const CHILD = `
import v8 from "node:v8"
const [api, sessionRoot, rarebitRoot, ...files] = process.argv.slice(1)
const { readRarebitCurrent } = await import(api)
const oldUsed = () => v8.getHeapSpaceStatistics().find((space) => space.space_name === "old_space").space_used_size
const read = (sessionFile) => readRarebitCurrent({ sessionFile, sessionRoot, rarebitRoot })
const first = await read(files[0])
globalThis.gc()
const before = oldUsed()
for (const file of files.slice(1)) await read(file)
const grown = oldUsed()
globalThis.gc()
const kept = oldUsed()
const reads = files.length - 1
process.stdout.write(JSON.stringify({
  availability: first.artifactState?.nativeRef?.availability,
  garbagePerRead: (grown - kept) / reads,
  keptPerRead: (kept - before) / reads
}))
`

interface Promotion {
  readonly availability: string | undefined
  /** Bytes a read left in the old generation that a full collection freed. */
  readonly garbagePerRead: number
  /** Bytes a read added to what the old generation keeps. */
  readonly keptPerRead: number
}

const sessionRoot = () => join(scratch, "sessions")
const sessionFiles = () =>
  Array.from({ length: SESSIONS }, (_, index) => join(sessionRoot(), "--project--", `session-${index}.jsonl`))

const pollOnce = (): Promise<Promotion> =>
  runPromiseChild<Promotion>({
    script: CHILD,
    nodeFlags: ["--expose-gc", "--min-semi-space-size=1", "--max-semi-space-size=1"],
    args: [sessionRoot(), join(scratch, "rarebit"), ...sessionFiles()],
    codeCache: "off"
  })

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), "rarebit-miss-promotion-"))
  await mkdir(join(sessionRoot(), "--project--"), { recursive: true })
  await mkdir(join(scratch, "rarebit"))
  // At rest: last written long ago, as the Sessions a dashboard polls mostly are.
  const longAgo = new Date("2026-01-01T00:00:00.000Z")
  for (const [index, file] of sessionFiles().entries()) {
    await writeFile(file, turnsText(20, `session-${index}`))
    await utimes(file, longAgo, longAgo)
  }
})

afterAll(async () => {
  if (scratch !== "") await rm(scratch, { recursive: true, force: true })
})

describe("reading Sessions the cache has not seen", () => {
  it("promotes little beyond what the cache keeps", async () => {
    const promotion = await pollOnce()
    assert.strictEqual(promotion.availability, "available")
    // What the cache keeps is accounted elsewhere (SessionCache's idle bound); it must at least be there.
    assert.isAbove(promotion.keptPerRead, 0)
    assert.isBelow(promotion.garbagePerRead, MAX_GARBAGE_BYTES_PER_READ)
  }, 60_000)
})
