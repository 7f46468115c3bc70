/**
 * An attacker process swaps the sidecar for a symlink to a file outside the
 * rarebit root, over and over, while this process reserves and settles jobs
 * on that sidecar (issue 12, item 5). Settles may fail (the sidecar is not a
 * regular file at that instant) or succeed, but nothing outside the root may
 * change: no file's content or mode, and no file appears or disappears.
 *
 * Before the sidecar's mode was set through its open handle, the settle
 * chmodded the path after the append, so a symlink swapped in between had
 * its target made 0600 (within a few dozen settles here).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { type ChildProcess, spawn } from "node:child_process"
import { chmod, lstat, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Ours from "../../src/promise/index.js"
import { jobId, sessionText, summaryReceipt } from "../support/Receipts.js"

const SETTLES = 80

/** Swaps `sidecar` for a symlink to `target` and back, as fast as it can, until killed. */
const ATTACKER = `
const fs = require("node:fs")
const [sidecar, target] = process.argv.slice(1)
const moved = sidecar + ".attacker"
const pause = new Int32Array(new SharedArrayBuffer(4))
let swaps = 0
for (;;) {
  try { fs.renameSync(sidecar, moved) } catch {}
  try { fs.symlinkSync(target, sidecar); swaps++ } catch {}
  Atomics.wait(pause, 0, 0, Math.random() < 0.5 ? 0 : 1)
  try { if (fs.lstatSync(sidecar).isSymbolicLink()) fs.unlinkSync(sidecar) } catch {}
  try { fs.renameSync(moved, sidecar) } catch {}
  Atomics.wait(pause, 0, 0, Math.random() < 0.5 ? 0 : 1)
  if (swaps % 100 === 0) process.stdout.write(swaps + "\\n")
}
`

/** Every entry under `directory`: type, permission bits and, for files, content. */
const treeOf = async (directory: string): Promise<Record<string, string>> => {
  const tree: Record<string, string> = {}
  const visit = async (current: string, name: string) => {
    const info = await lstat(current)
    const content = info.isFile() ? await readFile(current, "utf8") : ""
    tree[name] = `${info.isDirectory() ? "d" : info.isFile() ? "f" : "?"} ${
      (info.mode & 0o7777).toString(8)
    } ${content}`
    if (info.isDirectory()) {
      for (const child of (await readdir(current)).sort()) await visit(join(current, child), `${name}/${child}`)
    }
  }
  await visit(directory, ".")
  return tree
}

let root: string
let attacker: ChildProcess | undefined

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "rarebit-swap-"))
})

afterAll(async () => {
  attacker?.kill("SIGKILL")
  await rm(root, { recursive: true, force: true })
})

describe("a symlink swapped in for the sidecar during settles", () => {
  it("never changes a file outside the rarebit root", async () => {
    const sessionRoot = join(root, "sessions")
    const rarebitRoot = join(root, "rarebit")
    const sessionFile = join(sessionRoot, "project", "trace.jsonl")
    await mkdir(join(sessionRoot, "project"), { recursive: true })
    const { branch, text } = sessionText("swap")
    await writeFile(sessionFile, text)
    const outside = join(root, "outside")
    await mkdir(outside, { mode: 0o755 })
    await chmod(outside, 0o755)
    const target = join(outside, "precious.txt")
    await writeFile(target, "precious\n")
    await chmod(target, 0o644)
    const before = await treeOf(outside)

    const location = { sessionRoot, rarebitRoot }
    // One settle first, so the sidecar exists for the attacker to swap.
    const first = await Ours.reserveRarebitJob({ jobId: jobId(1), sessionFile, ...location })
    assert.isTrue(first.acquired)
    if (first.acquired) await Ours.settleRarebitJob(first, summaryReceipt(branch, "swap"))
    const sidecar = Ours.rarebitMaterializationPath(sessionFile, location)

    attacker = spawn(process.execPath, ["-e", ATTACKER, sidecar, target], { stdio: ["ignore", "pipe", "inherit"] })
    let swaps = 0
    attacker.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      swaps = Math.max(swaps, ...chunk.trim().split("\n").map(Number))
    })
    const outcomes: Record<string, number> = {}
    for (let n = 2; n < 2 + SETTLES; n++) {
      const outcome = await Ours.reserveRarebitJob({ jobId: jobId(n), sessionFile, ...location }).then(
        (reservation) =>
          reservation.acquired ? Ours.settleRarebitJob(reservation, summaryReceipt(branch, "swap")) : undefined
      ).then(
        () => "settled",
        (error: Error) => error.message.split(":")[0]
      )
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1
    }
    attacker.kill("SIGKILL")
    await new Promise((resolve) => attacker!.once("close", resolve))

    assert.isAbove(swaps, 0, "the attacker swapped")
    assert.isAbove(outcomes.settled ?? 0, 0, `some settles went through: ${JSON.stringify(outcomes)}`)
    assert.isAbove(SETTLES - (outcomes.settled ?? 0), 0, `some settles met the symlink: ${JSON.stringify(outcomes)}`)
    assert.deepStrictEqual(await treeOf(outside), before, "nothing outside the root changed")
  }, 120_000)
})
