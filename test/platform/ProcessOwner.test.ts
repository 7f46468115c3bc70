import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { existsSync, readFileSync, readlinkSync } from "node:fs"
import { hostname } from "node:os"
import {
  DARWIN_START_TIME_AFTER_MS,
  type DarwinSystem,
  makeDarwinOwnerProbe,
  makeProcessOwnerProbe,
  makeUnprovingOwnerProbe,
  ownerProbeFor,
  type ProcessSystem,
  readOwnerEvidence,
  startSecondsOfLstart
} from "../../src/platform/ProcessOwner.js"
import { encodeLockLine, MAX_LOCK_LINE_BYTES } from "../../src/protocol/CommitLockFile.js"
import type { OwnerEvidence } from "../../src/store/lock/LockOwner.js"

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

// Reads this machine's /proc: the made-up systems below run everywhere.
describe.runIf(process.platform === "linux")("ProcessOwner", () => {
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

const BOOT = "5C3B9B1E-7A2D-4B8E-9F10-2A3B4C5D6E7F"
const LINUX_BOOT = "0f4a2b6c-1d2e-4f30-8a9b-0c1d2e3f4a5b"

/**
 * A made-up Mac: this process is pid 501, started at 18:00:00 on 7 December
 * 2026; pid 502 runs since 18:00:05; pid 503 exists but belongs to another
 * user (EPERM); every other pid is gone. `calls` records each command run.
 */
const fakeMac = (overrides: Partial<DarwinSystem> = {}) => {
  const calls: Array<string> = []
  const started: Record<number, string> = {
    501: "Mon Dec  7 18:00:00 2026",
    502: "Mon Dec  7 18:00:05 2026",
    503: "Mon Dec  7 17:00:00 2026"
  }
  const system: DarwinSystem = {
    pid: 501,
    hostname: () => "mac-a",
    bootSessionId: () => (calls.push("sysctl"), BOOT),
    processExists: (pid) => pid in started,
    startTimeText: (pid) => (calls.push(`ps ${pid}`), started[pid]),
    ...overrides
  }
  return { system, calls }
}

const SELF_STARTED = String(Date.UTC(2026, 11, 7, 18, 0, 0) / 1000)
const OLD = DARWIN_START_TIME_AFTER_MS
const judgeWith = (probe: ReturnType<typeof makeDarwinOwnerProbe>) => (owner: OwnerEvidence, lockAgeMs?: number) =>
  Effect.runSync(probe.isProvablyDead(owner, lockAgeMs))

describe("ProcessOwner on a made-up Mac", () => {
  it("reads a ps start line as seconds since the epoch, and nothing else", () => {
    assert.strictEqual(startSecondsOfLstart("Mon Dec  7 18:00:00 2026"), SELF_STARTED)
    assert.strictEqual(startSecondsOfLstart("Thu Jan  1 00:00:01 1970"), "1")
    for (const text of [undefined, "", "Mon Dec 7 18:00 2026", "Mon Foo  7 18:00:00 2026", "7 Dec 18:00:00 2026"]) {
      assert.isUndefined(startSecondsOfLstart(text), String(text))
    }
  })

  it("describes this process by pid, host, platform, boot session and start time, read once on first use", () => {
    const { calls, system } = fakeMac()
    const probe = makeDarwinOwnerProbe(system)
    assert.deepStrictEqual(calls, [], "nothing read until used")
    assert.deepStrictEqual(probe.current, {
      pid: 501,
      hostname: "mac-a",
      platform: "darwin",
      bootId: BOOT,
      startTicks: SELF_STARTED
    })
    assert.deepStrictEqual(calls, ["sysctl", "ps 501"])
    assert.isFalse(judgeWith(probe)(probe.current!, OLD), "never itself")
    assert.deepStrictEqual(calls, ["sysctl", "ps 501"], "the evidence is read once")
  })

  it("calls a gone pid dead, and never an existing one whose lock is young, without running ps", () => {
    const { calls, system } = fakeMac()
    const probe = makeDarwinOwnerProbe(system)
    const self = probe.current!
    const judge = judgeWith(probe)
    calls.length = 0
    assert.isTrue(judge({ ...self, pid: 999, startTicks: "1" }, 1_000), "pid gone (ESRCH)")
    assert.isTrue(judge({ ...self, pid: 999 }), "pid gone, no start time recorded")
    assert.isFalse(judge({ ...self, pid: 502, startTicks: "1" }, OLD - 1), "pid exists, lock young: alive")
    assert.isFalse(judge({ ...self, pid: 503, startTicks: "1" }, 0), "another user's pid (EPERM) exists")
    assert.deepStrictEqual(calls, [], "no ps for a young lock or a gone pid")
  })

  it("calls a reused pid dead once its lock is old: same pid, another start time", () => {
    const { calls, system } = fakeMac()
    const probe = makeDarwinOwnerProbe(system)
    const self = probe.current!
    const judge = judgeWith(probe)
    const runningSince = String(Date.UTC(2026, 11, 7, 18, 0, 5) / 1000)
    assert.isTrue(judge({ ...self, pid: 502, startTicks: "1" }, OLD), "reused")
    assert.isTrue(judge({ ...self, pid: 502, startTicks: "1" }), "reused, age unknown")
    assert.isFalse(judge({ ...self, pid: 502, startTicks: runningSince }, OLD), "the same process")
    const { startTicks: _, ...noStart } = self
    assert.isFalse(judge({ ...noStart, pid: 502 }, OLD), "no start time recorded: proves nothing")
    assert.include(calls, "ps 502")
    const unreadable = makeDarwinOwnerProbe(fakeMac({ startTimeText: () => undefined }).system)
    assert.isFalse(judgeWith(unreadable)({ ...self, pid: 502, startTicks: "1" }, OLD), "ps failed: proves nothing")
  })

  it("never calls dead an owner of another boot or host, of Linux, or of an unknown platform", () => {
    const probe = makeDarwinOwnerProbe(fakeMac().system)
    const judge = judgeWith(probe)
    const gone: OwnerEvidence = { ...probe.current!, pid: 999, startTicks: "1" }
    assert.isTrue(judge(gone, OLD), "the control: dead in our boot")
    assert.isFalse(judge({ ...gone, bootId: "00000000-0000-0000-0000-000000000000" }, OLD), "another boot")
    assert.isFalse(judge({ ...gone, hostname: "mac-b" }, OLD), "another host")
    const { bootId: _, ...withoutBoot } = gone
    assert.isFalse(judge(withoutBoot, OLD), "no boot session recorded")
    const { platform: __, ...untagged } = gone
    assert.isFalse(judge(untagged, OLD), "untagged evidence is Linux's")
    assert.isFalse(
      judge(
        { pid: 999, hostname: "mac-a", bootId: LINUX_BOOT, startTicks: "1", pidNamespace: "pid:[4026531836]" },
        OLD
      ),
      "a Linux container's lock on a shared volume"
    )
    assert.isFalse(judge({ ...gone, platform: "freebsd" }, OLD), "an unknown platform")
  })

  it("a Linux reader never calls Darwin evidence dead, even with its own boot id and no namespace", () => {
    const linux = makeProcessOwnerProbe(fakeSystem())
    const self = linux.current!
    const darwin: OwnerEvidence = { pid: 2, hostname: self.hostname, platform: "darwin", bootId: self.bootId! }
    assert.isTrue(Effect.runSync(linux.isProvablyDead({ ...self, pid: 2 })), "the control: Linux evidence, pid gone")
    assert.isFalse(Effect.runSync(linux.isProvablyDead(darwin)))
    assert.isFalse(Effect.runSync(linux.isProvablyDead({ ...self, pid: 2, platform: "darwin" })))
  })

  it("without a boot session id (sysctl failed) it proves nothing, not even a gone pid", () => {
    const probe = makeDarwinOwnerProbe(fakeMac({ bootSessionId: () => undefined }).system)
    assert.isUndefined(probe.current!.bootId)
    assert.isFalse(judgeWith(probe)({ ...probe.current!, pid: 999 }, OLD))
    const garbled = makeDarwinOwnerProbe(fakeMac({ bootSessionId: () => "not a uuid" }).system)
    assert.isUndefined(garbled.current!.bootId)
  })

  it("on Windows (or any other platform) the evidence names its platform and proves no owner dead", () => {
    const probe = makeUnprovingOwnerProbe("win32", { pid: 7, hostname: () => "pc" })
    assert.deepStrictEqual(probe.current, { pid: 7, hostname: "pc", platform: "win32" })
    assert.isFalse(Effect.runSync(probe.isProvablyDead({ pid: 8, hostname: "pc", platform: "win32" }, OLD)))
    assert.isFalse(Effect.runSync(probe.isProvablyDead({ pid: 8, hostname: "pc" }, OLD)))
    assert.strictEqual(ownerProbeFor("win32").current?.platform, "win32")
  })
})
