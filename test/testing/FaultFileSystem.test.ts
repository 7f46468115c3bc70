import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, FileSystem, Layer } from "effect"
import { handleChmodOf, nonBlockingOpenOf, smallRegularReadOf } from "../../src/io/NonBlockingOpen.js"
import * as DirectFileSystem from "../../src/platform/DirectFileSystem.js"
import {
  FaultFileSystem,
  type FaultFileSystemShape,
  FaultPlan,
  isSimulatedCrash,
  makeFaultFileSystem,
  SimulatedCrash
} from "../../src/testing/FaultFileSystem.js"
import { makeMemoryFileSystem, MemoryFileSystem } from "../../src/testing/MemoryFileSystem.js"
import { assertFailure, fileSystemSuite } from "../support/FileSystemSuite.js"

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text)

/** A small program with every kind of step the store takes. */
const script = (root: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* fs.makeDirectory(`${root}/store`, { recursive: true, mode: 0o700 })
    yield* fs.chmod(`${root}/store`, 0o700)
    yield* Effect.scoped(Effect.gen(function*() {
      const file = yield* fs.open(`${root}/store/log`, { flag: "a", mode: 0o600 })
      yield* file.writeAll(bytes("one\n"))
      yield* file.sync
    }))
    yield* fs.writeFileString(`${root}/store/next.tmp`, "next")
    yield* fs.rename(`${root}/store/next.tmp`, `${root}/store/next`)
    return yield* fs.readFileString(`${root}/store/log`)
  })

const withFs = <A, E>(f: (fs: FileSystem.FileSystem) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    return yield* f(yield* FileSystem.FileSystem)
  })

const faulty = (plan: FaultPlan) => withFs((fs) => Effect.succeed(makeFaultFileSystem(fs, plan)))

const run = <A, E>(fault: FaultFileSystemShape, effect: Effect.Effect<A, E, FileSystem.FileSystem>) =>
  Effect.provideService(effect, FileSystem.FileSystem, fault)

fileSystemSuite("FaultFileSystem", (it) => {
  it.effect("logs every operation with its kind, path and whether it mutates", ({ root }) =>
    Effect.gen(function*() {
      const fault = makeFaultFileSystem(yield* FileSystem.FileSystem, FaultPlan.none)
      assert.strictEqual(yield* run(fault, script(root)), "one\n")
      const log = fault.operations().map((op) => [op.kind, op.method, op.path.slice(root.length), op.mutating])
      assert.deepStrictEqual(log, [
        ["mkdir", "makeDirectory", "/store", true],
        ["chmod", "chmod", "/store", true],
        ["open", "open", "/store/log", true],
        ["write", "File.writeAll", "/store/log", true],
        ["sync", "File.sync", "/store/log", true],
        ["close", "File.close", "/store/log", false],
        ["writeFile", "writeFileString", "/store/next.tmp", true],
        ["rename", "rename", "/store/next.tmp", true],
        ["readFile", "readFileString", "/store/log", false]
      ])
      assert.deepStrictEqual(fault.operations().map((op) => op.index), [0, 1, 2, 3, 4, 5, 6, 7, 8])
      assert.deepStrictEqual(
        fault.operations().map((op) => op.mutatingIndex),
        [0, 1, 2, 3, 4, undefined, 5, 6, undefined]
      )
      assert.isFalse(fault.crashed)
    }))

  it.effect("failAt(n) fails the nth mutating operation like Node would, and it does not happen", ({ root }) =>
    Effect.gen(function*() {
      const fault = makeFaultFileSystem(yield* FileSystem.FileSystem, FaultPlan.failAt(6))
      const error = yield* Effect.flip(run(fault, script(root)))
      assertFailure(error, {
        reason: "Unknown",
        method: "rename",
        syscall: "rename",
        pathOrDescriptor: `${root}/store/next.tmp`,
        code: "EIO"
      })
      const fs = yield* FileSystem.FileSystem
      assert.deepStrictEqual((yield* fs.readDirectory(`${root}/store`)).sort(), ["log", "next.tmp"])
      assert.strictEqual(fault.operations().at(-1)?.fault?._tag, "Fail")
    }))

  it.effect("rules match by kind and path; handle failures carry the descriptor", ({ root }) =>
    Effect.gen(function*() {
      const plans = [
        { error: "ENOSPC", reason: "Unknown" },
        { error: "EACCES", reason: "PermissionDenied" },
        { error: "EIO", reason: "Unknown" }
      ] as const
      for (const { error, reason } of plans) {
        const fault = yield* faulty(
          FaultPlan.make({ kind: "sync", path: "/store/log", action: { _tag: "Fail", error } })
        )
        const failure = yield* Effect.flip(run(fault, script(root)))
        assertFailure(failure, { reason, method: "sync", syscall: "fsync", pathOrDescriptor: "fd", code: error })
      }
    }))

  it.effect("nth counts within a rule's selection; times bounds how often it fires", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const second = makeFaultFileSystem(
        fs,
        FaultPlan.make({ kind: "writeFile", nth: 1, action: { _tag: "Fail", error: "EIO" } })
      )
      const writes = (prefix: string) =>
        Effect.forEach([1, 2, 3], (n) => Effect.result(fs.writeFileString(`${root}/${prefix}${n}`, "x")))
      const first = yield* run(
        second,
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          return yield* Effect.forEach([1, 2, 3], (n) => Effect.result(fs.writeFileString(`${root}/a${n}`, "x")))
        })
      )
      assert.deepStrictEqual(first.map((result) => result._tag), ["Success", "Failure", "Success"])
      const twice = makeFaultFileSystem(
        fs,
        FaultPlan.make({ path: "/b", times: 2, action: { _tag: "Fail", error: "EIO" } })
      )
      const outcomes = yield* run(
        twice,
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          return yield* Effect.forEach([1, 2, 3], (n) => Effect.result(fs.writeFileString(`${root}/b${n}`, "x")))
        })
      )
      assert.deepStrictEqual(outcomes.map((result) => result._tag), ["Failure", "Failure", "Success"])
      assert.deepStrictEqual((yield* writes("c")).map((result) => result._tag), ["Success", "Success", "Success"])
    }))

  it.effect("a torn write leaves a prefix and fails with EIO", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const fault = makeFaultFileSystem(fs, FaultPlan.make({ kind: "write", action: { _tag: "TornWrite", bytes: 2 } }))
      const error = yield* Effect.flip(run(fault, script(root)))
      assertFailure(error, { reason: "Unknown", method: "writeAll", syscall: "write", code: "EIO" })
      assert.strictEqual(yield* fs.readFileString(`${root}/store/log`), "on")
      const whole = makeFaultFileSystem(
        fs,
        FaultPlan.make({ kind: "writeFile", action: { _tag: "TornWrite", bytes: 3 } })
      )
      const failure = yield* Effect.flip(
        run(whole, withFs((inner) => inner.writeFileString(`${root}/whole`, "abcdef")))
      )
      assertFailure(failure, { reason: "Unknown", method: "writeFile", pathOrDescriptor: `${root}/whole`, code: "EIO" })
      assert.strictEqual(yield* fs.readFileString(`${root}/whole`), "abc")
    }))

  it.effect("a crash skips the operation and kills every later one", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const fault = makeFaultFileSystem(fs, FaultPlan.crashAt(5))
      const exit = yield* Effect.exit(run(fault, script(root)))
      assert.isTrue(Exit.isFailure(exit) && isSimulatedCrash(exit.cause))
      assert.isTrue(fault.crashed)
      assert.strictEqual(fault.crashPoint()?.method, "writeFileString")
      assert.strictEqual(fault.operations().at(-1)?.method, "writeFileString")
      assert.isFalse(yield* fs.exists(`${root}/store/next.tmp`))
      const later = yield* Effect.exit(run(fault, withFs((inner) => inner.readDirectory(root))))
      assert.isTrue(Exit.isFailure(later) && isSimulatedCrash(later.cause))
      const defect = Exit.isFailure(later) ? Cause.squash(later.cause) : undefined
      assert.instanceOf(defect, SimulatedCrash)
      assert.strictEqual((defect as SimulatedCrash).operation?.method, "writeFileString")
      assert.strictEqual(fault.operations().length, 7)
    }))
})

describe("FaultFileSystem on memory", () => {
  it.effect("a torn write followed by a crash: the process image has the prefix, the power image does not", () =>
    Effect.gen(function*() {
      const memory = makeMemoryFileSystem()
      const fault = makeFaultFileSystem(
        memory,
        // TornWrite's `then` is a string saying what follows the tear, so the action is no thenable.
        // oxlint-disable-next-line unicorn/no-thenable
        FaultPlan.make({ kind: "write", nth: 1, action: { _tag: "TornWrite", bytes: 3, then: "crash" } })
      )
      const exit = yield* Effect.exit(run(
        fault,
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          yield* Effect.scoped(Effect.gen(function*() {
            const file = yield* fs.open("/log", { flag: "a" })
            yield* file.writeAll(bytes("first\n"))
            yield* file.sync
            yield* file.writeAll(bytes("second\n"))
            yield* file.sync
          }))
        })
      ))
      assert.isTrue(Exit.isFailure(exit) && isSimulatedCrash(exit.cause))
      const contents = (image: typeof memory) => new TextDecoder().decode(image.snapshot("/log")[0]?.data)
      assert.strictEqual(contents(memory.crashImage("process")), "first\nsec")
      assert.strictEqual(contents(memory.crashImage("power")), "first\n")
    }))

  it.effect("crash() stops the world between operations", () =>
    Effect.gen(function*() {
      const fault = makeFaultFileSystem(makeMemoryFileSystem(), FaultPlan.none)
      fault.crash()
      const exit = yield* Effect.exit(fault.writeFileString("/x", "x"))
      assert.isTrue(Exit.isFailure(exit) && isSimulatedCrash(exit.cause))
      assert.deepStrictEqual(fault.operations(), [])
    }))

  it.effect("random plans are deterministic for a seed", () =>
    Effect.gen(function*() {
      const trial = (plan: FaultPlan) =>
        Effect.gen(function*() {
          const fault = makeFaultFileSystem(makeMemoryFileSystem(), plan)
          const outcomes = yield* run(
            fault,
            Effect.gen(function*() {
              const fs = yield* FileSystem.FileSystem
              return yield* Effect.forEach(
                Array.from({ length: 60 }, (_, n) => n),
                (n) => Effect.result(fs.writeFileString(`/f${n}`, "x")).pipe(Effect.map((r) => r._tag))
              )
            })
          )
          return { outcomes, faults: fault.operations().filter((op) => op.fault !== undefined).map((op) => op.index) }
        })
      const options = { probability: 0.3, kinds: ["writeFile"] as const }
      const a = yield* trial(FaultPlan.random({ seed: "alpha", ...options }))
      const again = yield* trial(FaultPlan.random({ seed: "alpha", ...options }))
      const b = yield* trial(FaultPlan.random({ seed: "beta", ...options }))
      assert.deepStrictEqual(a, again)
      assert.notDeepEqual(a.faults, b.faults)
      assert.isAbove(a.faults.length, 5)
      assert.isBelow(a.faults.length, 40)
      assert.deepStrictEqual(a.outcomes.flatMap((tag, n) => tag === "Failure" ? [n] : []), a.faults)
      const never = yield* trial(FaultPlan.random({ seed: 1, probability: 0 }))
      assert.deepStrictEqual(never.faults, [])
      const always = yield* trial(
        FaultPlan.random({ seed: 1, probability: 1, actions: [{ _tag: "Fail", error: "ENOSPC" }] })
      )
      assert.strictEqual(always.faults.length, 60)
    }))

  it.effect("FaultFileSystem.layer wraps the FileSystem it is given", () =>
    Effect.gen(function*() {
      const layer = FaultFileSystem.layer(FaultPlan.make({ kind: "mkdir", action: { _tag: "Fail", error: "EROFS" } }))
        .pipe(
          Layer.provideMerge(MemoryFileSystem.layer)
        )
      const result = yield* Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const fault = yield* FaultFileSystem
        const memory = yield* MemoryFileSystem
        const error = yield* Effect.flip(fs.makeDirectory("/ro"))
        return {
          reason: error.reason._tag,
          kinds: fault.operations().map((op) => op.kind),
          exists: memory.snapshot().length
        }
      }).pipe(Effect.provide(layer))
      assert.deepStrictEqual(result, { reason: "Unknown", kinds: ["mkdir"], exists: 1 })
    }))

  it.effect("the non-blocking open and a handle's chmod are logged and faulted as open and chmod steps", () =>
    Effect.gen(function*() {
      const memory = makeMemoryFileSystem()
      yield* memory.writeFileString("/f", "x")
      const plan = FaultPlan.make(
        { kind: "open", nth: 0, action: { _tag: "Fail", error: "EACCES" } },
        { kind: "chmod", nth: 0, action: { _tag: "Fail", error: "EIO" } }
      )
      const fault = makeFaultFileSystem(memory, plan)
      const open = nonBlockingOpenOf(fault)
      assert.isDefined(open, "forwarded")
      const denied = yield* Effect.flip(Effect.scoped(open!("/f", { flag: "r", noFollow: true })))
      assert.strictEqual(denied.reason._tag, "PermissionDenied")
      const chmodded = yield* Effect.scoped(Effect.gen(function*() {
        const file = yield* open!("/f", { flag: "a+", noFollow: true })
        const chmod = handleChmodOf(file)
        assert.isDefined(chmod, "forwarded on the handle")
        const failed = yield* Effect.flip(chmod!(0o600))
        yield* chmod!(0o640)
        return failed.reason._tag
      }))
      assert.strictEqual(chmodded, "Unknown")
      assert.strictEqual((yield* memory.stat("/f")).mode & 0o777, 0o640)
      assert.deepStrictEqual(
        fault.operations().map((op) => [op.kind, op.method, op.mutating, op.fault?._tag ?? null]),
        [
          ["open", "open", false, "Fail"],
          ["open", "open", true, null],
          ["chmod", "File.chmod", true, "Fail"],
          ["chmod", "File.chmod", true, null],
          ["close", "File.close", false, null]
        ]
      )
    }))

  it.effect("hides the direct file system's synchronous small-file read, which would pass no fault point", () =>
    Effect.gen(function*() {
      const direct = yield* FileSystem.FileSystem
      assert.isDefined(smallRegularReadOf(direct))
      assert.isUndefined(smallRegularReadOf(makeFaultFileSystem(direct, FaultPlan.none)))
    }).pipe(Effect.provide(DirectFileSystem.layer)))
})
