/**
 * No write or mode change lands outside the rarebit root (issue 12, item 5):
 * every directory the store creates or writes into under the root must be a
 * real directory owned by the user the store runs as. A symlink or someone
 * else's directory planted at `jobs-v4`, `materializations-v4`, a mirrored
 * folder or `external/` is refused with `UnsafeDirectory`, and nothing
 * outside the root is created, written or chmodded.
 *
 * Before, `makePrivateDirectory` stat'ed through the symlink, then
 * `mkdir -p` and `chmod 0700` by path: the directory outside the root was
 * made 0700 and claims and sidecars were written into it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem, Layer, Option, Path } from "effect"
import { mkdir, mkdtemp, readdir, rm, stat, symlink } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as DirectFileSystem from "../../src/platform/DirectFileSystem.js"
import * as Ours from "../../src/promise/index.js"
import { auditStore } from "../../src/store/audit/SidecarAudit.js"
import { MemoryFileSystem } from "../../src/testing/MemoryFileSystem.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { jobId, summaryReceipt } from "../support/Receipts.js"
import { Store as Reference } from "../support/Reference.js"
import { claimOf, type Kit, reserveAcquired, setup } from "./StoreKit.js"

const JOB = jobId(1)

/** Every path under `directory` with its type, mode and content: what must not change. */
const treeOf = (fs: FileSystem.FileSystem, path: Path.Path, directory: string) =>
  Effect.gen(function*() {
    const tree: Record<string, string> = {}
    const visit = (current: string): Effect.Effect<void> =>
      Effect.gen(function*() {
        const info = yield* Effect.orDie(fs.lstat(current))
        const content = info.type === "File" ? yield* Effect.orDie(fs.readFileString(current)) : ""
        tree[path.relative(directory, current) || "."] = `${info.type} ${(info.mode & 0o7777).toString(8)} ${content}`
        if (info.type !== "Directory") return
        for (const name of (yield* Effect.orDie(fs.readDirectory(current))).sort()) {
          yield* visit(path.join(current, name))
        }
      })
    yield* visit(directory)
    return tree
  })

/** An outside directory with a file in it, 0755: where a planted symlink points. */
const makeOutside = (kit: Kit) =>
  Effect.gen(function*() {
    const outside = kit.path.join(kit.root, "outside")
    yield* kit.fs.makeDirectory(outside, { recursive: true })
    yield* kit.fs.chmod(outside, 0o755)
    yield* kit.fs.writeFileString(kit.path.join(outside, "keep.txt"), "keep")
    return outside
  })

fileSystemSuite("Private directories", (it) => {
  for (const planted of ["jobs-v4", "materializations-v4", "materializations-v4/project"] as const) {
    it.effect(`a symlink at ${planted} is refused by reserve, settle and release; nothing outside changes`, ({ root }) =>
      Effect.gen(function*() {
        const kit = yield* setup(root)
        const outside = yield* makeOutside(kit)
        // A reservation taken before the swap, to settle and release after it.
        const earlier = yield* reserveAcquired(kit, jobId(9))
        const before = yield* treeOf(kit.fs, kit.path, outside)
        const at = kit.path.join(kit.rarebitRoot, planted)
        yield* kit.fs.rename(at, `${at}.moved`)
        yield* kit.fs.symlink(outside, at)
        const reserved = yield* Effect.flip(kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile }))
        assert.deepStrictEqual([reserved._tag, (reserved as { path?: string }).path], ["UnsafeDirectory", at])
        assert.strictEqual((reserved as { reason?: string }).reason, "a symlink")
        assert.match(reserved.message, /refusing to use it$/)
        const settled = yield* Effect.flip(kit.store.settle(earlier, summaryReceipt(kit.branch, "s")))
        assert.strictEqual(settled._tag, "UnsafeDirectory")
        const released = yield* Effect.flip(kit.store.release(earlier))
        assert.strictEqual(released._tag, "UnsafeDirectory")
        assert.deepStrictEqual(yield* treeOf(kit.fs, kit.path, outside), before, "nothing outside the root changed")
        const report = yield* auditStore({ rarebitRoot: kit.rarebitRoot })
        const expected = planted === "materializations-v4/project" ? "sidecar_not_regular" : "directory_unsafe"
        assert.deepStrictEqual(
          report.findings.filter((item) => item.path === at).map((item) => [item.kind, item.detail]),
          [[
            expected,
            expected === "directory_unsafe"
              ? "is a symlink; the store refuses to use it"
              : "is a symlink, not a regular file; the store never reads it"
          ]]
        )
      }))
  }

  it.effect("a symlink at external/ is refused for an external Session", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root, { config: { allowExternalSession: true } })
      const outside = yield* makeOutside(kit)
      const elsewhere = kit.path.join(root, "elsewhere", "trace.jsonl")
      yield* kit.fs.makeDirectory(kit.path.dirname(elsewhere), { recursive: true })
      yield* kit.fs.writeFileString(elsewhere, yield* kit.fs.readFileString(kit.sessionFile))
      yield* kit.fs.makeDirectory(kit.path.join(kit.rarebitRoot, "materializations-v4"), {
        recursive: true,
        mode: 0o700
      })
      yield* kit.fs.symlink(outside, kit.path.join(kit.rarebitRoot, "materializations-v4", "external"))
      const before = yield* treeOf(kit.fs, kit.path, outside)
      const error = yield* Effect.flip(kit.store.reserve({ jobId: JOB, sessionFile: elsewhere }))
      assert.deepStrictEqual(
        [error._tag, (error as { path?: string }).path],
        ["UnsafeDirectory", kit.path.join(kit.rarebitRoot, "materializations-v4", "external")]
      )
      assert.deepStrictEqual(yield* treeOf(kit.fs, kit.path, outside), before)
    }))

  it.effect("a file or a FIFO where a directory belongs is refused, saying what it is", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      yield* kit.fs.makeDirectory(kit.rarebitRoot, { recursive: true })
      yield* kit.fs.writeFileString(kit.path.join(kit.rarebitRoot, "jobs-v4"), "not a directory")
      const error = yield* Effect.flip(kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile }))
      assert.deepStrictEqual(
        [error._tag, (error as { reason?: string }).reason],
        ["UnsafeDirectory", "a regular file, not a directory"]
      )
    }))

  it.effect("an existing directory with another mode is made 0700; a symlinked root chosen by the user is fine", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const real = `${root}/real-root`
      yield* fs.makeDirectory(`${real}/jobs-v4`, { recursive: true })
      yield* fs.chmod(`${real}/jobs-v4`, 0o755)
      yield* fs.symlink(real, `${root}/rarebit`)
      const kit = yield* setup(root)
      yield* reserveAcquired(kit, JOB)
      for (const directory of ["jobs-v4", "materializations-v4", "materializations-v4/project"]) {
        const info = yield* fs.lstat(`${real}/${directory}`)
        assert.deepStrictEqual([info.type, info.mode & 0o777], ["Directory", 0o700], directory)
      }
      assert.strictEqual((yield* claimOf(kit, JOB)).state, "active")
    }))
})

describe("Private directories owned by someone else (memory model, uid 1000)", () => {
  const world = Layer.merge(MemoryFileSystem.layerWith({ uid: 1000, gid: 1000 }), Path.layer)

  it.effect("another user's directory at jobs-v4 or a mirrored folder is refused; a shared root of theirs is fine", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      // A world-writable, sticky root owned by root, like /tmp.
      yield* fs.makeDirectory("/shared/rarebit", { recursive: true })
      yield* fs.chmod("/shared/rarebit", 0o1777)
      yield* fs.chown("/shared/rarebit", 0, 0)
      const kit = yield* setup("/shared", {})
      yield* reserveAcquired(kit, jobId(9))
      assert.deepStrictEqual(
        Option.getOrThrow((yield* fs.lstat(kit.jobsDir)).uid),
        1000,
        "the store's own directories are ours"
      )
      for (const planted of [kit.jobsDir, kit.path.dirname(kit.sidecar)]) {
        yield* fs.chown(planted, 2000, 2000)
        const error = yield* Effect.flip(kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile }))
        assert.deepStrictEqual(
          [error._tag, (error as { path?: string }).path, (error as { reason?: string }).reason],
          ["UnsafeDirectory", planted, "owned by uid 2000, not by uid 1000"]
        )
        yield* fs.chown(planted, 1000, 1000)
      }
      yield* reserveAcquired(kit, JOB)
    }).pipe(Effect.provide(world)))
})

describe("Private directories through the Promise API", () => {
  it("a symlinked jobs-v4 rejects with a plain Error naming it, and the directory it points at keeps its mode", async () => {
    const root = await mkdtemp(join(tmpdir(), "rarebit-private-"))
    try {
      const sessionRoot = join(root, "sessions")
      const rarebitRoot = join(root, "rarebit")
      const sessionFile = join(sessionRoot, "project", "trace.jsonl")
      await mkdir(join(sessionRoot, "project"), { recursive: true })
      await mkdir(rarebitRoot)
      const outside = join(root, "outside")
      await mkdir(outside, { mode: 0o755 })
      await symlink(outside, join(rarebitRoot, "jobs-v4"))
      const error = await Ours.reserveRarebitJob({ jobId: JOB, sessionFile, sessionRoot, rarebitRoot }).then(
        () => undefined,
        (failure: unknown) => failure
      )
      assert.instanceOf(error, Error)
      assert.strictEqual((error as Error).constructor, Error)
      assert.include((error as Error).message, `${join(rarebitRoot, "jobs-v4")} is a symlink`)
      assert.strictEqual((await stat(outside)).mode & 0o777, 0o755)
      assert.deepStrictEqual(await readdir(outside), [])
    } finally {
      await rm(root, { recursive: true, force: true })
    }
  })
})

describe("Private directories the file system refuses (disk)", () => {
  /** What a reserve rejects with, and whether it made anything below the rarebit root's materializations-v4. */
  const attempt = async (api: typeof Ours | typeof Reference, sessionFile: (root: string) => string) => {
    const root = await mkdtemp(join(tmpdir(), "rarebit-private-"))
    try {
      const sessionRoot = join(root, "sessions")
      const rarebitRoot = join(root, "rarebit")
      const error = await api.reserveRarebitJob({
        jobId: JOB,
        sessionFile: sessionFile(sessionRoot),
        sessionRoot,
        rarebitRoot
      })
        .then(() => undefined, (failure: Error & { code?: unknown }) => failure)
      const made = await readdir(join(rarebitRoot, "materializations-v4"), { recursive: true }).catch(() => [])
      const described: [string, unknown, string] | undefined = error === undefined
        ? undefined
        : [error.constructor.name, error.code, error.message.replaceAll(root, "<root>")]
      return { error: described, made }
    } finally {
      await rm(root, { recursive: true, force: true })
    }
  }

  it("a sidecar directory whose path is too long is refused before anything is made, with the reference's error", async () => {
    // 25 components of 200 bytes: longer than PATH_MAX, though each name is short enough.
    const tooLong = (sessionRoot: string) => join(sessionRoot, `${"d".repeat(200)}/`.repeat(25), "x.jsonl")
    const ours = await attempt(Ours, tooLong)
    const reference = await attempt(Reference, tooLong)
    assert.deepStrictEqual(ours, reference)
    assert.deepStrictEqual(ours.error?.slice(0, 2), ["Error", "ENAMETOOLONG"])
    assert.match(
      ours.error?.[2] ?? "",
      /^ENAMETOOLONG: name too long, mkdir '<root>\/rarebit\/materializations-v4\/d{200}\//
    )
    assert.deepStrictEqual(ours.made, [])
  })

  it("a name too long below a missing directory is refused where the reference's mkdir -p refuses it, after making its parents", async () => {
    const nameTooLong = (sessionRoot: string) => join(sessionRoot, "project", "n".repeat(300), "x.jsonl")
    const ours = await attempt(Ours, nameTooLong)
    assert.deepStrictEqual(ours, await attempt(Reference, nameTooLong))
    assert.strictEqual(
      ours.error?.[2],
      `ENAMETOOLONG: name too long, mkdir '<root>/rarebit/materializations-v4/project/${"n".repeat(300)}'`
    )
    assert.deepStrictEqual(ours.made, ["project"])
  })
})

// Only a privileged test can give a directory on disk another owner.
describe.runIf(process.getuid?.() === 0)("Private directories owned by someone else (disk, as root)", () => {
  it.effect("a directory owned by nobody at jobs-v4 is refused", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* fs.makeTempDirectoryScoped()
      const kit = yield* setup(root)
      yield* reserveAcquired(kit, jobId(9))
      yield* fs.chown(kit.jobsDir, 65534, 65534)
      const error = yield* Effect.flip(kit.store.reserve({ jobId: JOB, sessionFile: kit.sessionFile }))
      assert.deepStrictEqual([error._tag, (error as { reason?: string }).reason], [
        "UnsafeDirectory",
        "owned by uid 65534, not by uid 0"
      ])
    }).pipe(Effect.provide(Layer.merge(DirectFileSystem.layer, Path.layer))))
})
