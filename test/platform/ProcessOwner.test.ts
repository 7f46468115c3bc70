import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { existsSync, readFileSync, readlinkSync } from "node:fs"
import { hostname } from "node:os"
import { makeProcessOwnerProbe, type ProcessSystem, readOwnerEvidence } from "../../src/platform/ProcessOwner.js"
import { encodeLockLine, MAX_LOCK_LINE_BYTES } from "../../src/protocol/CommitLockFile.js"
import type { OwnerEvidence } from "../../src/store/LockOwner.js"

/** Field 22 of /proc/<pid>/stat, read independently of the code under test. */
const startTicks = (pid: number): string => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]!
}

const probe = makeProcessOwnerProbe()
const dead = (owner: OwnerEvidence) => Effect.runSync(probe.isProvablyDead(owner))
const self = probe.current!

/** The pid of a process that has exited (and was reaped). */
const exitedPid = async (): Promise<number> => {
  const child = spawn("true")
  await new Promise((resolve) => child.once("exit", resolve))
  return child.pid!
}

describe("ProcessOwner", () => {
  it("describes this process: pid, host, boot, start time, PID and time namespace", () => {
    assert.strictEqual(self.pid, process.pid)
    assert.strictEqual(self.hostname, hostname())
    assert.strictEqual(self.bootId, readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim())
    assert.strictEqual(self.startTicks, startTicks(process.pid))
    assert.strictEqual(self.pidNamespace, readlinkSync("/proc/self/ns/pid"))
    assert.match(self.pidNamespace!, /^pid:\[\d+\]$/)
    assert.strictEqual(
      self.timeNamespace,
      existsSync("/proc/self/ns/time") ? readlinkSync("/proc/self/ns/time") : undefined
    )
  })

  it("never calls this process dead, nor an owner on another host or without a boot id", () => {
    assert.isFalse(dead(self))
    assert.isFalse(dead({ ...self, pid: 999_999_999, hostname: `${self.hostname}-elsewhere` }))
    const { bootId: _, ...withoutBoot } = { ...self, pid: 999_999_999 }
    assert.isFalse(dead(withoutBoot))
  })

  it("never calls an owner from another boot dead: it may be another machine of the same name", () => {
    assert.isFalse(dead({ ...self, bootId: "00000000-0000-0000-0000-000000000000" }))
    assert.isFalse(dead({ ...self, pid: 999_999_999, bootId: "00000000-0000-0000-0000-000000000000" }))
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

  it("never calls dead a pid of another PID or time namespace, or of none named, though it is gone here", async () => {
    const gone: OwnerEvidence = { ...self, pid: await exitedPid(), startTicks: "1" }
    assert.isTrue(dead(gone), "the same evidence in our own namespaces is provably dead")
    assert.isFalse(dead({ ...gone, pidNamespace: "pid:[1]" }), "another PID namespace")
    const { pidNamespace: _, ...withoutNamespace } = gone
    assert.isFalse(dead(withoutNamespace), "no PID namespace (an older version of this store)")
    assert.isFalse(dead({ ...gone, timeNamespace: "time:[1]" }), "another time namespace")
    // A reused pid, and this process's own pid, in another PID namespace are other processes.
    assert.isFalse(dead({ ...self, startTicks: "1", pidNamespace: "pid:[1]" }))
  })
})

/** A made-up Linux: this process is pid 3 in PID namespace 4026532182, with `/proc` as given. */
const fakeSystem = (overrides: {
  readonly files?: Record<string, string>
  readonly links?: Record<string, string>
  readonly hostname?: string
} = {}): ProcessSystem => {
  const files: Record<string, string> = {
    "/proc/sys/kernel/random/boot_id": "0f4a2b6c-1d2e-4f30-8a9b-0c1d2e3f4a5b\n",
    "/proc/self/stat": "3 (node) S 1 3 3 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 4242 1000 10",
    "/proc/self/status": "Name:\tnode\nPid:\t3\nNSpid:\t3\n",
    ...overrides.files
  }
  const links: Record<string, string> = {
    "/proc/self/ns/pid": "pid:[4026532182]",
    "/proc/self/ns/time": "time:[4026531834]",
    ...overrides.links
  }
  return {
    pid: 3,
    hostname: () => overrides.hostname ?? "pod-a",
    readText: (path) => files[path],
    readLink: (path) => links[path],
    // Pids 1 and 3 run; anything else is gone.
    processExists: (pid) => pid === 1 || pid === 3
  }
}

describe("ProcessOwner on a made-up /proc", () => {
  it("reads nothing until the probe is first used, and then once", () => {
    const reads: Array<string> = []
    const system = fakeSystem()
    const counted: ProcessSystem = {
      ...system,
      hostname: () => (reads.push("hostname"), system.hostname()),
      readText: (path) => (reads.push(path), system.readText(path)),
      readLink: (path) => (reads.push(path), system.readLink(path))
    }
    const fake = makeProcessOwnerProbe(counted)
    assert.deepStrictEqual(reads, [], "made")
    assert.strictEqual(fake.current?.bootId, "0f4a2b6c-1d2e-4f30-8a9b-0c1d2e3f4a5b")
    const firstUse = reads.length
    assert.include(reads, "/proc/sys/kernel/random/boot_id")
    assert.deepStrictEqual(fake.current, makeProcessOwnerProbe(system).current)
    assert.isTrue(Effect.runSync(fake.isProvablyDead({ ...fake.current!, pid: 2 })), "a gone pid of our namespace")
    assert.strictEqual(reads.length, firstUse, "the evidence is read once")
  })

  it("records the namespaces when /proc is its own, and judges pids only there", () => {
    const fake = makeProcessOwnerProbe(fakeSystem())
    assert.deepStrictEqual(fake.current, {
      pid: 3,
      hostname: "pod-a",
      bootId: "0f4a2b6c-1d2e-4f30-8a9b-0c1d2e3f4a5b",
      startTicks: "4242",
      pidNamespace: "pid:[4026532182]",
      timeNamespace: "time:[4026531834]"
    })
    const judge = (owner: OwnerEvidence) => Effect.runSync(fake.isProvablyDead(owner))
    assert.isTrue(judge({ ...fake.current!, pid: 2 }), "a gone pid of our namespace")
    assert.isFalse(
      judge({ ...fake.current!, pid: 2, pidNamespace: "pid:[4026531836]" }),
      "the same pid of the root namespace"
    )
  })

  it("records no PID namespace, and proves nothing, when /proc belongs to another PID namespace", () => {
    // `unshare --pid --fork` without `--mount-proc`: /proc is the parent's, where we are pid 9493.
    const fake = makeProcessOwnerProbe(fakeSystem({ files: { "/proc/self/status": "Name:\tnode\nNSpid:\t9493\t3\n" } }))
    assert.isUndefined(fake.current!.pidNamespace)
    const judge = (owner: OwnerEvidence) => Effect.runSync(fake.isProvablyDead(owner))
    assert.isFalse(judge({ ...fake.current!, pid: 2 }), "no namespace of our own to compare")
    assert.isFalse(judge({ ...fake.current!, pid: 2, pidNamespace: "pid:[4026532182]" }))
    // Without NSpid (Linux before 4.1) /proc cannot be shown to be ours either.
    const old = readOwnerEvidence(fakeSystem({ files: { "/proc/self/status": "Name:\tnode\nPid:\t3\n" } }))
    assert.isUndefined(old!.pidNamespace)
  })

  it("drops values that do not have their expected shape", () => {
    const evidence = readOwnerEvidence(fakeSystem({
      files: { "/proc/sys/kernel/random/boot_id": "not a boot id\n", "/proc/self/stat": "3 (a) b) S" },
      links: { "/proc/self/ns/pid": "pid:[x]", "/proc/self/ns/time": "mnt:[4026531840]" }
    }))
    assert.deepStrictEqual(evidence, { pid: 3, hostname: "pod-a" })
  })

  it("keeps a lock line within MAX_LOCK_LINE_BYTES: a hostname too long for it means no evidence", () => {
    const longest = readOwnerEvidence(fakeSystem({ hostname: "\u0001".repeat(64) }))!
    const line = encodeLockLine({ token: "f".repeat(48), claimedAt: new Date(8.64e15).toISOString(), owner: longest })
    // A Linux hostname is at most 64 bytes; even escaped to \u0001 each, it fits.
    assert.isAtMost(new TextEncoder().encode(line).length, MAX_LOCK_LINE_BYTES)
    assert.isUndefined(readOwnerEvidence(fakeSystem({ hostname: "h".repeat(MAX_LOCK_LINE_BYTES) })))
  })
})
