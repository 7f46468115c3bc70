/**
 * The overview against the reference on the real disk: for a store written
 * by both implementations, `listRarebitSessions` lists every Session once,
 * each with the availability and sync state the reference's own
 * `readRarebitCurrent` reports for it (current by either writer, never
 * derived, nested, a damaged sidecar, a Session damaged after its receipt,
 * one in flight), and `rarebit-store sessions --json` says the same.
 */
import { afterEach, assert, beforeEach, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdir, readdir, rm, writeFile } from "node:fs/promises"
import { dirname, join } from "node:path"
import { listRarebitSessions } from "../../src/promise/index.js"
import { cli, rootFlags, settleWith } from "../cli/CliHarness.js"
import {
  entry,
  jobId,
  makeRoots,
  type Roots,
  Store,
  summaryReceipt,
  titleReceipt,
  writeSession
} from "../support/Reference.js"

const branch = [entry("u1", "user", "a question"), entry("a1", "assistant", "an answer")]

const walk = async (directory: string): Promise<Array<string>> => {
  const found: Array<string> = []
  for (const dirent of await readdir(directory, { withFileTypes: true })) {
    const child = join(directory, dirent.name)
    if (dirent.isDirectory()) found.push(...(await walk(child)))
    else if (dirent.name.endsWith(".jsonl")) found.push(child)
  }
  return found
}

describe("listRarebitSessions against the reference's readRarebitCurrent", () => {
  let roots: Roots
  const files: Record<string, string> = {}
  beforeEach(async () => {
    roots = await makeRoots("rarebit-sessions-interop-")
    const at = (...parts: Array<string>) => join(roots.sessionRoot, ...parts)
    Object.assign(files, {
      ours: at("project", "ours.jsonl"),
      reference: at("project", "reference.jsonl"),
      never: at("never.jsonl"),
      nested: at("a", "b", "c", "nested.jsonl"),
      damaged: at("project", "damaged.jsonl"),
      sourceGone: at("project", "source-gone.jsonl"),
      inFlight: at("other", "in-flight.jsonl"),
      orphan: at("project", "orphan.jsonl")
    })
    for (const [name, file] of Object.entries(files)) {
      await mkdir(dirname(file), { recursive: true })
      await writeSession(file, name, branch)
    }
    await settleWith("ours", roots, files.ours!, 1, summaryReceipt(branch, "ours", { summary: "ours\nmore" }))
    await settleWith(
      "reference",
      roots,
      files.reference!,
      2,
      summaryReceipt(branch, "reference", { summary: "theirs" })
    )
    await settleWith(
      "reference",
      roots,
      files.reference!,
      3,
      titleReceipt(branch, "reference", { title: "Their title" })
    )
    await settleWith("ours", roots, files.nested!, 4, summaryReceipt(branch, "nested"))
    await settleWith("reference", roots, files.sourceGone!, 5, summaryReceipt(branch, "sourceGone"))
    await writeFile(files.sourceGone!, "not a Session\n")
    await settleWith("ours", roots, files.orphan!, 6, summaryReceipt(branch, "orphan"))
    await rm(files.orphan!)
    const damagedSidecar = Store.rarebitMaterializationPath(files.damaged!, roots.location)
    await mkdir(dirname(damagedSidecar), { recursive: true })
    await writeFile(damagedSidecar, "{\"type\":\"rarebit_head\",\"protocolVersion\":1}\n{torn")
    const reservation = await Store.reserveRarebitJob({
      jobId: jobId(7),
      sessionFile: files.inFlight!,
      ...roots.location
    })
    assert.isTrue(reservation.acquired)
  })
  afterEach(async () => {
    await roots?.cleanup()
  })

  it("every Session once, with the reference's availability and syncState", async () => {
    const listed = await listRarebitSessions(roots.location)
    const onDisk = await walk(roots.sessionRoot)
    assert.deepStrictEqual(listed.map((e) => e.sessionFile).sort(), [...onDisk].sort())
    const states = new Set<string>()
    for (const listedEntry of listed) {
      const theirs = await Store.readRarebitCurrent({ sessionFile: listedEntry.sessionFile, ...roots.location })
      assert.deepStrictEqual(
        [listedEntry.availability, listedEntry.syncState],
        [theirs.availability, theirs.artifactState.syncState],
        listedEntry.sessionFile
      )
      states.add(`${listedEntry.availability}/${listedEntry.syncState}`)
    }
    assert.isAtLeast(states.size, 4, [...states].join(", "))
    const byFile = new Map(listed.map((e) => [e.sessionFile, e]))
    assert.strictEqual(byFile.get(files.ours!)!.summary, "ours")
    assert.deepStrictEqual(
      [byFile.get(files.reference!)!.summary, byFile.get(files.reference!)!.title],
      ["theirs", "Their title"]
    )
    assert.isNotNull(byFile.get(files.reference!)!.settledAt, "the reference's settled claim dates it too")
  }, 30_000)

  it.live("sessions --json: the same entries, the orphan sidecar and the live claim", () =>
    Effect.gen(function*() {
      const run = yield* cli(["sessions", "--json", ...rootFlags(roots)])
      assert.strictEqual(run.code, 0, run.stderr)
      const document = JSON.parse(run.stdout)
      const listed = yield* Effect.promise(() => listRarebitSessions(roots.location))
      assert.deepStrictEqual(document.sessions, listed)
      assert.deepStrictEqual(document.orphanSidecars, [
        Store.rarebitMaterializationPath(files.orphan!, roots.location)
      ])
      assert.strictEqual(document.activeClaims, 1)
      assert.deepStrictEqual([document.sessionRoot, document.rarebitRoot], [roots.sessionRoot, roots.rarebitRoot])
    }), 30_000)

  it("the following form: every Session, then a settle by the reference; the signal ends it", async () => {
    const controller = new AbortController()
    const followed = listRarebitSessions({ ...roots.location, follow: true, signal: controller.signal })
    const initial = new Set<string>()
    for (let i = 0; i < 7; i++) initial.add((await followed.next()).value!.sessionFile)
    assert.strictEqual(initial.size, 7)
    await settleWith("reference", roots, files.never!, 8, summaryReceipt(branch, "never", { summary: "followed" }))
    let next = (await followed.next()).value!
    while (next.summary !== "followed") next = (await followed.next()).value!
    assert.deepStrictEqual([next.sessionFile, next.availability], [files.never, "available"])
    controller.abort()
    const ended = await followed.next().then(() => null, (error: Error) => error.name)
    assert.strictEqual(ended, "AbortError")
  }, 30_000)
})
