/**
 * Real-size Sessions on the real disk, ours against the reference, in child
 * processes of their own (one per implementation and phase; the reference
 * peaks at over half a GiB per Session, ours is measured alone):
 * a small Session with a settled receipt is grown into a 1 GiB, a 2 GiB - 1
 * and a 2 GiB sparse file (all NUL bytes past its lines: one huge last line)
 * and into one with a 600 MiB line of text. For each, `readRarebitCurrent`
 * reports the native Session `unreadable` exactly as the reference does,
 * `readRarebitSession` rejects with the reference's error, and a reserve and
 * settle appends the same bytes (the receipt, then the previous head
 * repeated) and leaves the same settled claim. Ours stays within a bounded
 * time and a bounded peak RSS growth over all of it.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { createWriteStream } from "node:fs"
import { open, readFile, truncate, writeFile } from "node:fs/promises"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { entry, jobId, makeRoots, type Roots, sessionText, summaryReceipt } from "../support/Reference.js"
import { report } from "../support/TestReport.js"

const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..")
const MiB = 1024 * 1024
const GiB = 1024 * MiB

/** Peak RSS growth ours may show over every read, reserve and settle of the four Sessions (measured: ~20 MiB). */
const PEAK_GROWTH_BOUND_MIB = 64
/** Time any one operation of ours may take (measured: 0.1–0.2 s, 3 s at most under the full suite's load). */
const OPERATION_BOUND_MS = 20_000

const SCRIPT = `
import { readFile } from "node:fs/promises"
const input = JSON.parse(await readFile(process.argv[2], "utf8"))
const store = await import(input.storeUrl)
const session = await import(input.sessionUrl)
const describeError = (error) => ({
  isRangeError: error instanceof RangeError,
  name: error?.name,
  message: error?.message,
  code: error?.code,
  text: String(error)
})
// Everything loaded and the runtime built before the baseline is taken.
await store.readRarebitCurrent(input.warmup)
const baselineKiB = process.resourceUsage().maxRSS
const results = []
for (const target of input.targets) {
  const location = { sessionFile: target.sessionFile, sessionRoot: target.sessionRoot, rarebitRoot: target.rarebitRoot }
  const timed = async (run) => {
    const started = performance.now()
    const value = await run()
    return { value, ms: performance.now() - started }
  }
  const result = { name: target.name }
  if (input.phase === "small") {
    const reservation = await store.reserveRarebitJob({ ...location, jobId: input.jobId })
    result.settled = await store.settleRarebitJob(reservation, input.receipt)
  } else {
    result.current = await timed(() => store.readRarebitCurrent(location))
    result.session = await timed(() =>
      session.readRarebitSession(target.sessionFile, { sessionRoot: target.sessionRoot }).then(
        () => ({ resolved: true }),
        describeError
      ))
    const reservation = await store.reserveRarebitJob({ ...location, jobId: input.jobId })
    result.acquired = reservation.acquired
    result.settle = await timed(() => store.settleRarebitJob(reservation, input.receipt))
    result.after = await timed(() => store.readRarebitCurrent(location))
  }
  results.push(result)
}
process.stdout.write(JSON.stringify({
  version: process.version,
  results,
  peakGrowthMiB: (process.resourceUsage().maxRSS - baselineKiB) / 1024
}))
`

/** One Session file, read by both implementations, each with a Rarebit root of its own. */
interface Target {
  readonly name: string
  readonly roots: Roots
  readonly rarebitRoots: Record<Implementation, string>
  readonly grow: (file: string) => Promise<void>
}

const implementations = {
  ours: {
    store: join(projectRoot, "dist", "promise", "index.js"),
    session: join(projectRoot, "dist", "promise", "index.js")
  },
  reference: {
    store: join(projectRoot, "node_modules", "@hypercarrier", "rarebit", "src", "rarebit-store.mjs"),
    session: join(projectRoot, "node_modules", "@hypercarrier", "rarebit", "src", "rarebit-session.mjs")
  }
} as const

type Implementation = "ours" | "reference"

const run = async (
  work: string,
  implementation: Implementation,
  phase: "small" | "huge",
  targets: ReadonlyArray<Target>,
  warmup: Roots,
  input: { readonly jobId: string; readonly receipt: unknown }
) => {
  const script = join(work, "huge-child.mjs")
  const inputFile = join(work, `input-${implementation}-${phase}.json`)
  await writeFile(script, SCRIPT)
  await writeFile(
    inputFile,
    JSON.stringify({
      storeUrl: pathToFileURL(implementations[implementation].store).href,
      sessionUrl: pathToFileURL(implementations[implementation].session).href,
      phase,
      warmup: { sessionFile: warmup.sessionFile, ...warmup.location },
      targets: targets.map((target) => ({
        name: target.name,
        sessionFile: target.roots.sessionFile,
        sessionRoot: target.roots.sessionRoot,
        rarebitRoot: target.rarebitRoots[implementation]
      })),
      ...input
    })
  )
  const output = execFileSync(process.execPath, [script, inputFile], { encoding: "utf8", maxBuffer: 64 * MiB })
  return JSON.parse(output) as { version: string; results: Array<any>; peakGrowthMiB: number }
}

/**
 * Reads the part of a file any reader reads (past V8's longest string every
 * read gives up), so neither implementation pays for filling the page
 * cache: a sparse file's holes are zero-filled on the first read.
 */
const warmPageCache = async (file: string) => {
  const handle = await open(file, "r")
  try {
    const buffer = Buffer.alloc(4 * MiB)
    for (let position = 0; position < 640 * MiB; position += buffer.length) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, position)
      if (bytesRead === 0) break
    }
  } finally {
    await handle.close()
  }
}

/** Replaces an implementation's own Rarebit root in a result with a placeholder, so the two compare. */
const normalized = (value: unknown, rarebitRoot: string): unknown =>
  JSON.parse(JSON.stringify(value).split(rarebitRoot).join("<rarebit>"))

const sidecarOf = (rarebitRoot: string) => readFile(join(rarebitRoot, "materializations-v4", "project", "trace.jsonl"))

describe("Huge Sessions, ours against the reference on the real disk", () => {
  const branch = [entry("u1", "user", "summarize the huge Session"), entry("a1", "assistant", "done")]
  const sessionId = "huge-session"
  let work: Roots
  let warmup: Roots
  const targets: Array<Target> = []

  const sparse = (size: number) => (file: string) => truncate(file, size)
  const longLine = (bytes: number) => async (file: string) => {
    const start = "{\"type\":\"message\",\"id\":\"long\",\"message\":{\"role\":\"user\",\"content\":\""
    const end = "\"}}\n"
    const stream = createWriteStream(file, { flags: "a" })
    const piece = Buffer.alloc(MiB, "a")
    stream.write(start)
    let left = bytes - start.length - end.length
    while (left > 0) {
      const chunk = left >= piece.length ? piece : piece.subarray(0, left)
      left -= chunk.length
      if (!stream.write(chunk)) await new Promise<void>((done) => stream.once("drain", () => done()))
    }
    stream.end(end)
    await new Promise<void>((done, fail) => stream.on("finish", () => done()).on("error", fail))
  }

  beforeAll(async () => {
    work = await makeRoots("rarebit-huge-")
    warmup = await makeRoots("rarebit-huge-warmup-")
    await writeFile(warmup.sessionFile, sessionText("warmup", branch))
    const grows: Array<[string, (file: string) => Promise<void>]> = [
      ["sparse 1 GiB", sparse(GiB)],
      ["sparse 2 GiB - 1", sparse(2 * GiB - 1)],
      ["sparse 2 GiB", sparse(2 * GiB)],
      ["a 600 MiB line of text", longLine(600 * MiB)]
    ]
    for (const [index, [name, grow]] of grows.entries()) {
      const roots = await makeRoots(`rarebit-huge-${index}-`)
      await writeFile(roots.sessionFile, sessionText(sessionId, branch))
      targets.push({
        name,
        roots,
        rarebitRoots: { ours: join(roots.root, "rarebit-ours"), reference: join(roots.root, "rarebit-reference") },
        grow
      })
    }
  }, 120_000)

  afterAll(async () => {
    for (const target of targets) await target.roots.cleanup()
    await warmup?.cleanup()
    await work?.cleanup()
  })

  it("read, reserve and settle as the reference does, in bounded time and memory", async () => {
    const receipt = summaryReceipt(branch, sessionId)
    const first = { jobId: jobId(1), receipt }
    // While small and readable: a settled receipt with a new head, so a later settle has a head to repeat.
    const smallOurs = await run(work.root, "ours", "small", targets, warmup, first)
    const smallReference = await run(work.root, "reference", "small", targets, warmup, first)
    for (const target of targets) {
      const ours = await sidecarOf(target.rarebitRoots.ours)
      assert.strictEqual(ours.toString().split("\n").length, 3, `${target.name}: receipt and head`)
      assert.deepStrictEqual(ours, await sidecarOf(target.rarebitRoots.reference), `${target.name}: small sidecar`)
    }
    assert.deepStrictEqual(
      smallOurs.results.map((result, index) => normalized(result, targets[index].rarebitRoots.ours)),
      smallReference.results.map((result, index) => normalized(result, targets[index].rarebitRoots.reference))
    )

    for (const target of targets) {
      await target.grow(target.roots.sessionFile)
      await warmPageCache(target.roots.sessionFile)
    }

    const second = { jobId: jobId(2), receipt }
    const ours = await run(work.root, "ours", "huge", targets, warmup, second)
    const reference = await run(work.root, "reference", "huge", targets, warmup, second)
    for (const [index, target] of targets.entries()) {
      const mine = ours.results[index]
      const theirs = reference.results[index]
      const label = target.name
      assert.strictEqual(mine.current.value.artifactState.nativeRef.availability, "unreadable", `${label}: native`)
      const { ours: ourRoot, reference: theirRoot } = target.rarebitRoots
      assert.deepStrictEqual(
        normalized(mine.current.value, ourRoot),
        normalized(theirs.current.value, theirRoot),
        `${label}: readRarebitCurrent`
      )
      assert.isTrue(mine.session.value.isRangeError, `${label}: readRarebitSession rejects with a RangeError`)
      assert.deepStrictEqual(mine.session.value, theirs.session.value, `${label}: readRarebitSession's error`)
      assert.isTrue(mine.acquired && theirs.acquired, `${label}: acquired`)
      assert.deepStrictEqual(
        normalized(mine.settle.value, ourRoot),
        normalized(theirs.settle.value, theirRoot),
        `${label}: settled record`
      )
      assert.deepStrictEqual(
        normalized(mine.after.value, ourRoot),
        normalized(theirs.after.value, theirRoot),
        `${label}: current after settle`
      )
      const mineSidecar = await sidecarOf(ourRoot)
      const lines = mineSidecar.toString().split("\n")
      // Receipt and new head, then the second receipt with the first head repeated (native unreadable).
      assert.strictEqual(lines.length, 5, label)
      assert.strictEqual(lines[3], lines[1], `${label}: the head is repeated`)
      assert.deepStrictEqual(mineSidecar, await sidecarOf(theirRoot), `${label}: same bytes appended`)
      const claim = async (rarebitRoot: string) => {
        const { leaseToken: _token, ...rest } = JSON.parse(
          await readFile(join(rarebitRoot, "jobs-v4", `${jobId(2)}.json`), "utf8")
        )
        return rest
      }
      assert.deepStrictEqual(await claim(ourRoot), await claim(theirRoot), `${label}: settled claim`)
      for (const operation of ["current", "session", "settle", "after"] as const) {
        assert.isBelow(mine[operation].ms, OPERATION_BOUND_MS, `${label}: ${operation} took ${mine[operation].ms} ms`)
      }
    }
    assert.isBelow(ours.peakGrowthMiB, PEAK_GROWTH_BOUND_MIB, `peak RSS growth ${ours.peakGrowthMiB} MiB`)
    report(
      "huge-sessions",
      `huge Sessions on ${ours.version}: peak RSS growth ours ${ours.peakGrowthMiB.toFixed(1)} MiB, reference ${
        reference.peakGrowthMiB.toFixed(1)
      } MiB; ms per operation (ours / reference): ${
        targets.map((target, index) =>
          `${target.name}: ${
            (["current", "session", "settle", "after"] as const).map((operation) =>
              `${operation} ${ours.results[index][operation].ms.toFixed(0)}/${
                reference.results[index][operation].ms.toFixed(0)
              }`
            ).join(" ")
          }`
        ).join("; ")
      }`
    )
  }, 300_000)
})
