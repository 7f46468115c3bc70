import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { hostname } from "node:os"
import { Effect } from "effect"
import { makeProcessOwnerProbe } from "../../src/platform/ProcessOwner.js"
import type { OwnerEvidence } from "../../src/store/LockOwner.js"

/** Field 22 of /proc/<pid>/stat, read independently of the code under test. */
const startTicks = (pid: number): string => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]!
}

const probe = makeProcessOwnerProbe()
const dead = (owner: OwnerEvidence) => Effect.runSync(probe.isProvablyDead(owner))
const self = probe.current!

describe("ProcessOwner", () => {
  it("describes this process: pid, host, boot and start time", () => {
    assert.strictEqual(self.pid, process.pid)
    assert.strictEqual(self.hostname, hostname())
    assert.strictEqual(self.bootId, readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim())
    assert.strictEqual(self.startTicks, startTicks(process.pid))
  })

  it("never calls this process dead, nor an owner on another host or without a boot id", () => {
    assert.isFalse(dead(self))
    assert.isFalse(dead({ ...self, pid: 999_999_999, hostname: `${self.hostname}-elsewhere` }))
    const { bootId: _, ...withoutBoot } = { ...self, pid: 999_999_999 }
    assert.isFalse(dead(withoutBoot))
  })

  it("calls an owner from an earlier boot of this host dead", () => {
    assert.isTrue(dead({ ...self, bootId: "00000000-0000-0000-0000-000000000000" }))
  })

  it("calls a reused pid dead: same pid, another start time", () => {
    assert.isTrue(dead({ ...self, startTicks: String(Number(self.startTicks) + 1) }))
  })

  it("calls a process that has exited dead, and not while it runs", async () => {
    const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 10_000)"], { stdio: "ignore" })
    await new Promise<void>((resolve) => child.once("spawn", () => resolve()))
    const owner: OwnerEvidence = { ...self, pid: child.pid!, startTicks: startTicks(child.pid!) }
    assert.isFalse(dead(owner), "alive")
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
    child.kill("SIGKILL")
    await exited
    assert.isTrue(dead(owner), "after exit")
  })
})
