/**
 * A watch on the real disk sees what other processes write: a settle by
 * our built Promise API (`dist/promise/index.js`) and one by the reference
 * store, each run in a child process of its own, and a torn tail a child
 * leaves by being killed mid-append is read but not emitted.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { writeFile } from "node:fs/promises"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { type Kit, setup } from "../store/StoreKit.js"
import { drive, summaryOf, watchReads } from "../store/WatchKit.js"
import { fileSystemSuite, nodeWorld } from "../support/FileSystemSuite.js"
import { jobId, summaryReceipt } from "../support/Receipts.js"
import { referenceStorePath } from "../support/Reference.js"

const builtPromiseApi = new URL("../../dist/promise/index.js", import.meta.url)

const SETTLER = `
import { readFile } from "node:fs/promises"
const config = JSON.parse(await readFile(process.argv[2], "utf8"))
const store = await import(config.moduleUrl)
const location = { sessionFile: config.sessionFile, sessionRoot: config.sessionRoot, rarebitRoot: config.rarebitRoot }
const reservation = await store.reserveRarebitJob({ ...location, jobId: config.jobId })
if (!reservation.acquired) throw new Error("not acquired")
await store.settleRarebitJob(reservation, config.receipt)
`

/** Settles job `n` with a Summary receipt numbered `n`, in a child process running `moduleUrl`. */
const settleInChild = (kit: Kit, moduleUrl: string, n: number) =>
  Effect.promise(async () => {
    const script = join(kit.root, "settler.mjs")
    const config = join(kit.root, `settler-${n}.json`)
    await writeFile(script, SETTLER)
    await writeFile(
      config,
      JSON.stringify({
        moduleUrl,
        jobId: jobId(n),
        receipt: summaryReceipt(kit.branch, kit.sessionId, { summary: `summary ${n}` }),
        sessionFile: kit.sessionFile,
        sessionRoot: kit.sessionRoot,
        rarebitRoot: kit.rarebitRoot
      })
    )
    const child = spawn(process.execPath, [script, config], { stdio: ["ignore", "ignore", "pipe"] })
    let stderr = ""
    child.stderr.setEncoding("utf8").on("data", (chunk) => (stderr += chunk))
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve))
    if (code !== 0) throw new Error(`the settler exited with ${code}: ${stderr}`)
  })

fileSystemSuite("RarebitStore.watch and other processes", (it) => {
  it.effect(
    "a settle by our store in another process, then one by the reference's, is each emitted",
    ({ root }) =>
      Effect.gen(function*() {
        const kit = yield* setup(root)
        const watch = yield* drive(watchReads(kit))
        assert.strictEqual((yield* watch.next).current.availability, "missing")

        yield* settleInChild(kit, builtPromiseApi.href, 1)
        const ours = yield* watch.nextEmitted
        assert.strictEqual(summaryOf(ours), "summary 1")

        yield* settleInChild(kit, pathToFileURL(referenceStorePath).href, 2)
        const theirs = yield* watch.nextEmitted
        assert.strictEqual(summaryOf(theirs), "summary 2")
        assert.strictEqual(theirs.epoch, ours.epoch)
        assert.strictEqual(theirs.sequence, ours.sequence + 1)
        assert.deepStrictEqual(theirs.current, yield* kit.store.readCurrent({ sessionFile: kit.sessionFile }))
      }),
    30_000
  )

  it.effect(
    "a tail another process tore by dying mid-append is read, not emitted",
    ({ root }) =>
      Effect.gen(function*() {
        const kit = yield* setup(root)
        yield* settleInChild(kit, builtPromiseApi.href, 1)
        const watch = yield* drive(watchReads(kit))
        const start = (yield* watch.next).emitted!
        // A process that writes half a receipt line and is killed before the rest.
        yield* Effect.promise(async () => {
          const half = JSON.stringify(summaryReceipt(kit.branch, kit.sessionId, { summary: "never finished" })).slice(
            0,
            300
          )
          const child = spawn(process.execPath, [
            "-e",
            `require("node:fs").appendFileSync(${JSON.stringify(kit.sidecar)}, ${
              JSON.stringify(half)
            }); process.kill(process.pid, "SIGKILL")`
          ])
          await new Promise((resolve) => child.on("close", resolve))
        })
        let torn = yield* watch.next
        while (!torn.current.diagnostics.tornTail) torn = yield* watch.next
        assert.isUndefined(torn.emitted)
        yield* settleInChild(kit, pathToFileURL(referenceStorePath).href, 2)
        const next = yield* watch.nextEmitted
        assert.strictEqual(summaryOf(next), "summary 2")
        assert.strictEqual(next.sequence, start.sequence + 1)
      }),
    30_000
  )
}, [nodeWorld])
