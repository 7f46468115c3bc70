/**
 * Held files on their own, on the memory model and on the disk, counting
 * the descriptors each world really has open. One `HeldFile`: the file is
 * reused only while the path's stat shows its identity, a replaced file is
 * let go, a file swapped in between the stat and the open is read as what
 * it is and not kept, uses in flight share one descriptor that is never
 * closed under them, an interruption anywhere leaves at most the held file,
 * and the holder's scope closes everything. A `HeldFiles` set: the least
 * recently got entry is dropped beyond capacity, a dropped entry's file is
 * let go after its cache's `onDrop`, and the set's scope drops them all.
 * Sets sharing a budget: the least recently got entries of any of them are
 * dropped when their bytes pass it (by frequency once it thrashes), and
 * their held files never outnumber its `maxOpenFiles`.
 */
import { assert } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, FileSystem, Option, Scope } from "effect"
import * as HeldFiles from "../../src/io/HeldFiles.js"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { openCount } from "../support/OpenFiles.js"
import { makeStallingFileSystem } from "../support/StallingFileSystem.js"

const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes)

/** The whole file, through the handle a use was given. */
const contents = (use: HeldFiles.HeldUse) =>
  Effect.map(
    use.file.readAlloc(Number(use.info.size) + 64, { position: 0n }),
    Option.match({ onNone: () => "", onSome: text })
  )

/** Another file written beside `path` and renamed over it: a new inode at the same path. */
const replace = (fs: FileSystem.FileSystem, path: string, content: string) =>
  Effect.andThen(fs.writeFileString(`${path}.next`, content), fs.rename(`${path}.next`, path))

fileSystemSuite("HeldFile", (it) => {
  it.effect("holds the file between uses while its path names it, and reads what was appended", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = `${root}/held`
      yield* fs.writeFileString(path, "one\n")
      const held = yield* HeldFiles.makeFile(fs, path, { followSymlinks: false })
      assert.isFalse(held.holding(), "nothing is opened before the first use")
      const first = yield* held.use(
        yield* fs.lstat(path),
        (use) => Effect.map(contents(use), (read) => ({ read, use }))
      )
      assert.deepStrictEqual([first.read, first.use.opened], ["one\n", true])
      yield* fs.writeFileString(path, "two\n", { flag: "a" })
      const second = yield* held.use(
        yield* fs.lstat(path),
        (use) => Effect.map(contents(use), (read) => ({ read, use }))
      )
      assert.deepStrictEqual([second.read, second.use.opened], ["one\ntwo\n", false])
      assert.strictEqual(second.use.file, first.use.file, "the same handle")
      assert.isTrue(held.holding())
      assert.strictEqual(openCount(fs, path), 1)
    }))

  it.effect("a file replaced at its path is opened anew, and the old one closed", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = `${root}/held`
      yield* fs.writeFileString(path, "old\n")
      const held = yield* HeldFiles.makeFile(fs, path, { followSymlinks: false })
      yield* held.use(yield* fs.lstat(path), contents)
      yield* replace(fs, path, "new\n")
      const read = yield* held.use(yield* fs.lstat(path), (use) =>
        Effect.map(contents(use), (read) => [read, use.opened]))
      assert.deepStrictEqual(read, ["new\n", true])
      assert.strictEqual(openCount(fs, path), 1, "only the new file is open")
      // Let go (as a cache does when the path is removed): nothing stays open for it.
      yield* fs.remove(path)
      yield* held.letGo
      assert.strictEqual(openCount(fs, path), 0)
    }))

  it.effect("a file swapped in between the stat and the open is read as what it is and not kept", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = `${root}/held`
      for (const before of ["nothing held", "the old file held"] as const) {
        yield* fs.writeFileString(path, "old\n")
        const held = yield* HeldFiles.makeFile(fs, path, { followSymlinks: false })
        if (before === "the old file held") yield* held.use(yield* fs.lstat(path), contents)
        yield* replace(fs, path, "checked\n")
        const checked = yield* fs.lstat(path)
        yield* replace(fs, path, "swapped in, longer\n")
        const raced = yield* held.use(
          checked,
          (use) =>
            Effect.map(
              contents(use),
              (read) => ({ read, opened: use.opened, size: Number(use.info.size), info: use.info })
            )
        )
        // Described by its own fstat: the size of what was read, not of the file the stat saw.
        assert.deepStrictEqual([raced.read, raced.opened, raced.size], ["swapped in, longer\n", true, 19], before)
        assert.notStrictEqual(Option.getOrUndefined(raced.info.ino), Option.getOrUndefined(checked.ino), before)
        assert.isFalse(held.holding(), before)
        assert.strictEqual(openCount(fs, path), 0, `${before}: neither file stays open`)
        // The next use, with a stat that shows the file, holds it.
        assert.isTrue(yield* held.use(yield* fs.lstat(path), (use) => Effect.succeed(use.opened)), before)
        assert.strictEqual(openCount(fs, path), 1, before)
        yield* held.letGo
      }
    }))

  it.effect("a stat without an inode never reuses a file nor keeps one", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = `${root}/held`
      yield* fs.writeFileString(path, "one\n")
      const held = yield* HeldFiles.makeFile(fs, path, { followSymlinks: false })
      const anonymous = { ...(yield* fs.lstat(path)), ino: Option.none() }
      for (let round = 0; round < 2; round++) {
        assert.isTrue(yield* held.use(anonymous, (use) => Effect.succeed(use.opened)), `round ${round}`)
        assert.isFalse(held.holding())
        assert.strictEqual(openCount(fs, path), 0)
      }
    }))

  it.effect("uses in flight share one descriptor; a file let go closes when its last use ends", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = `${root}/held`
      yield* fs.writeFileString(path, "shared\n")
      const held = yield* HeldFiles.makeFile(fs, path, { followSymlinks: false })
      const info = yield* fs.lstat(path)
      const gates = [yield* Deferred.make<void>(), yield* Deferred.make<void>()]
      const inside = [yield* Deferred.make<FileSystem.File>(), yield* Deferred.make<FileSystem.File>()]
      const uses = yield* Effect.forEach(
        [0, 1],
        (index) =>
          Effect.forkChild(held.use(info, (use) =>
            Effect.andThen(
              Deferred.succeed(inside[index], use.file),
              Effect.andThen(Deferred.await(gates[index]), contents(use))
            )))
      )
      const files = yield* Effect.forEach(inside, Deferred.await)
      assert.strictEqual(files[0], files[1], "one handle for both")
      assert.strictEqual(openCount(fs, path), 1)
      yield* held.letGo
      assert.isFalse(held.holding())
      assert.strictEqual(openCount(fs, path), 1, "let go, but still in use")
      yield* Deferred.succeed(gates[0], undefined)
      assert.strictEqual(yield* Fiber.join(uses[0]), "shared\n")
      assert.strictEqual(openCount(fs, path), 1, "the other use still reads it")
      yield* Deferred.succeed(gates[1], undefined)
      assert.strictEqual(yield* Fiber.join(uses[1]), "shared\n")
      assert.strictEqual(openCount(fs, path), 0)
    }))

  it.effect("its scope's end closes the held file once the use in flight ends; later uses keep nothing", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = `${root}/held`
      yield* fs.writeFileString(path, "one\n")
      const scope = yield* Scope.make()
      const held = yield* HeldFiles.makeFile(fs, path, { followSymlinks: false }).pipe(Scope.provide(scope))
      const gate = yield* Deferred.make<void>()
      const entered = yield* Deferred.make<void>()
      const inFlight = yield* Effect.forkChild(
        held.use(
          yield* fs.lstat(path),
          (use) =>
            Effect.andThen(Deferred.succeed(entered, undefined), Effect.andThen(Deferred.await(gate), contents(use)))
        )
      )
      yield* Deferred.await(entered)
      yield* Scope.close(scope, Exit.void)
      assert.isFalse(held.holding())
      assert.strictEqual(openCount(fs, path), 1, "not closed under the use")
      yield* Deferred.succeed(gate, undefined)
      assert.strictEqual(yield* Fiber.join(inFlight), "one\n")
      assert.strictEqual(openCount(fs, path), 0)
      assert.strictEqual(yield* held.use(yield* fs.lstat(path), contents), "one\n")
      assert.isFalse(held.holding())
      assert.strictEqual(openCount(fs, path), 0)
    }))

  it.effect("refuses what is not a regular file, follows a symlink only when asked, and holds nothing refused", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(`${root}/target`, "target\n")
      yield* fs.symlink(`${root}/target`, `${root}/link`)
      yield* fs.makeDirectory(`${root}/dir`)
      const refused = yield* HeldFiles.makeFile(fs, `${root}/link`, { followSymlinks: false })
      const symlink = yield* Effect.flip(refused.use(yield* fs.lstat(`${root}/link`), contents))
      assert.deepStrictEqual([symlink._tag, (symlink as { type?: string }).type], ["FileNotRegular", "SymbolicLink"])
      const directory = yield* HeldFiles.makeFile(fs, `${root}/dir`, { followSymlinks: true })
      const dir = yield* Effect.flip(directory.use(yield* fs.stat(`${root}/dir`), contents))
      assert.deepStrictEqual([dir._tag, (dir as { type?: string }).type], ["FileNotRegular", "Directory"])
      assert.isFalse(refused.holding() || directory.holding())
      const followed = yield* HeldFiles.makeFile(fs, `${root}/link`, { followSymlinks: true })
      assert.strictEqual(yield* followed.use(yield* fs.stat(`${root}/link`), contents), "target\n")
      assert.isTrue(followed.holding(), "held by the target's identity, which stat shows")
      assert.strictEqual(
        yield* followed.use(yield* fs.stat(`${root}/link`), (use) => Effect.succeed(use.opened)),
        false
      )
    }))

  it.effect("a use interrupted at any file-system call leaves at most the held file open, and the next use is right", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = `${root}/held`
      const reached = { held: 0, replaced: 0 }
      for (let run = 0; run < 12; run++) {
        const cut = 1 + (run >> 1)
        const variant = run % 2 === 0 ? "held" : "replaced"
        yield* fs.writeFileString(path, `run ${run}\n`)
        yield* Effect.scoped(Effect.gen(function*() {
          // Once armed, the use's `cut`-th file-system call never returns; then the use is interrupted.
          const stalling = yield* makeStallingFileSystem(fs, cut)
          const held = yield* HeldFiles.makeFile(stalling.fs, path, { followSymlinks: false })
          yield* held.use(yield* fs.lstat(path), contents)
          if (variant === "replaced") yield* replace(fs, path, `run ${run}, replaced\n`)
          const info = yield* fs.lstat(path)
          stalling.arm()
          const use = yield* Effect.forkChild(held.use(info, contents))
          yield* Effect.raceFirst(
            Effect.andThen(Deferred.await(stalling.reached), Effect.sync(() => reached[variant]++)),
            Fiber.await(use)
          )
          yield* Fiber.interrupt(use)
          stalling.disarm()
          assert.isAtMost(openCount(fs, path), 1, `${variant}, cut ${cut}`)
          assert.strictEqual(
            yield* held.use(yield* fs.lstat(path), contents),
            yield* fs.readFileString(path),
            `after cut ${cut}`
          )
          assert.strictEqual(openCount(fs, path), 1, `after cut ${cut}`)
        }))
        assert.strictEqual(openCount(fs, path), 0, `run ${run}: the scope's end`)
      }
      // A use of the held file makes one call here (the read); one that opens anew makes more (open, fstat, read).
      assert.strictEqual(reached.held, 1)
      assert.isAtLeast(reached.replaced, 3)
    }))
})

fileSystemSuite("HeldFiles", (it) => {
  /** Three files `a`, `b`, `c` under `root`, and a use of one through the set that reads it. */
  const setup = (root: string) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      for (const name of ["a", "b", "c"]) yield* fs.writeFileString(`${root}/${name}`, `${name}\n`)
      const dropped: Array<string> = []
      const read = (set: HeldFiles.HeldFiles<number>, name: string) =>
        Effect.gen(function*() {
          const entry = yield* set.get(`${root}/${name}`)
          if (entry === undefined) return undefined
          entry.state++
          return yield* entry.file.use(yield* fs.lstat(entry.path), contents)
        })
      return { fs, dropped, read }
    })

  it.effect("keeps at most `capacity` entries, dropping the least recently got, and lets its file go after onDrop", ({ root }) =>
    Effect.gen(function*() {
      const { dropped, fs, read } = yield* setup(root)
      const set = yield* HeldFiles.make<number>(fs, {
        capacity: 2,
        followSymlinks: false,
        initial: () => 0,
        // The file is still open while the cache forgets its state.
        onDrop: (entry) =>
          Effect.sync(() =>
            dropped.push(`${entry.path.slice(root.length + 1)}:${entry.state}:${openCount(fs, entry.path)}`)
          )
      })
      assert.strictEqual(yield* read(set, "a"), "a\n")
      yield* read(set, "b")
      yield* read(set, "a")
      const b = (yield* set.get(`${root}/b`))!
      yield* read(set, "a")
      // b was got after a, then a again: b is the least recently got when c's entry is made.
      yield* read(set, "c")
      assert.deepStrictEqual(dropped, ["b:1:1"])
      assert.isFalse(b.live)
      assert.deepStrictEqual([...set.entries()].map((entry) => [entry.path.slice(root.length + 1), entry.state]), [[
        "a",
        3
      ], ["c", 1]])
      assert.deepStrictEqual([openCount(fs, `${root}/a`), openCount(fs, `${root}/b`), openCount(fs, `${root}/c`)], [
        1,
        0,
        1
      ])
      // A dropped entry's file still works for a use that holds the entry, and keeps nothing.
      assert.strictEqual(yield* b.file.use(yield* fs.lstat(b.path), contents), "b\n")
      assert.isFalse(b.file.holding())
      assert.strictEqual(openCount(fs, `${root}/b`), 0)
      // Got again: a new entry, with the initial state.
      assert.strictEqual((yield* set.get(`${root}/b`))!.state, 0)
    }))

  it.effect("a shared budget drops the least recently got entries of every set sharing it, never the one being charged", ({ root }) =>
    Effect.gen(function*() {
      const { dropped, fs, read } = yield* setup(root)
      // Room for the three entries' overheads and 1000 bytes of state.
      const overhead = yield* Effect.gen(function*() {
        const probe = yield* HeldFiles.make<number>(fs, { followSymlinks: false, initial: () => 0 })
        yield* probe.get(`${root}/a`)
        return probe.bytes()
      })
      const budget = HeldFiles.makeBudget({ maxBytes: 3 * overhead + 1000, maxOpenFiles: 8 })
      const onDrop = (entry: HeldFiles.HeldEntry<number>) =>
        Effect.sync(() => dropped.push(`${entry.path.slice(root.length + 1)}:${openCount(fs, entry.path)}`))
      const first = yield* HeldFiles.make<number>(fs, { budget, followSymlinks: false, initial: () => 0, onDrop })
      const second = yield* HeldFiles.make<number>(fs, { budget, followSymlinks: false, initial: () => 0, onDrop })
      yield* read(first, "a")
      yield* read(second, "b")
      yield* read(first, "c")
      const [a, b, c] = [
        (yield* first.get(`${root}/a`))!,
        (yield* second.get(`${root}/b`))!,
        (yield* first.get(`${root}/c`))!
      ]
      first.setBytes(a, 400)
      second.setBytes(b, 400)
      yield* first.fit(a)
      assert.deepStrictEqual(dropped, [], "800 bytes of state fit")
      assert.strictEqual(budget.bytes(), first.bytes() + second.bytes())
      assert.strictEqual(budget.bytes(), 3 * overhead + 800)
      // 1200 bytes: a, got least recently of the three, goes (after its file, which it still held, was let go by onDrop's end).
      first.setBytes(c, 400)
      yield* first.fit(c)
      assert.deepStrictEqual(dropped, ["a:1"])
      assert.isFalse(a.live)
      assert.deepStrictEqual([a.live, b.live, c.live], [false, true, true])
      assert.strictEqual(openCount(fs, `${root}/a`), 0)
      assert.strictEqual(budget.bytes(), 2 * overhead + 800)
      assert.strictEqual(first.bytes(), overhead + 400)
      // The entry being charged is kept even when it alone is over the budget; every other one goes.
      second.setBytes(b, 5000)
      yield* second.fit(b)
      assert.deepStrictEqual(dropped, ["a:1", "c:1"])
      assert.deepStrictEqual([...first.entries()], [])
      assert.deepStrictEqual([...second.entries()].map((entry) => entry.path), [`${root}/b`])
      // A dropped entry's bytes are no longer counted, even when its cache sets them late.
      first.setBytes(c, 100_000)
      assert.strictEqual(budget.bytes(), overhead + 5000)
    }))

  it.effect("a budget that thrashes admits by frequency: a round-robin over more paths than fit reuses what it keeps, and a path read more often still gets in", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const paths = Array.from({ length: 10 }, (_, index) => `${root}/p${index}`)
      const overhead = yield* Effect.gen(function*() {
        const probe = yield* HeldFiles.make<number>(fs, { followSymlinks: false, initial: () => 0 })
        yield* probe.get(paths[0])
        return probe.bytes()
      })
      // Room for four entries with 1000 bytes of state each, not five.
      const budget = HeldFiles.makeBudget({ maxBytes: 4 * (overhead + 1000) + 500, maxOpenFiles: 8 })
      const set = yield* HeldFiles.make<number>(fs, { budget, followSymlinks: false, initial: () => 0 })
      /** Reads `path` as a cache does: a hit when its state is kept, else it keeps state and fits the budget. */
      const read = (path: string) =>
        Effect.gen(function*() {
          const entry = (yield* set.get(path))!
          if (entry.state === 1) return true
          entry.state = 1
          set.setBytes(entry, 1000)
          yield* set.fit(entry)
          return false
        })
      const sweep = (over: ReadonlyArray<string>) =>
        Effect.map(Effect.forEach(over, read), (hits) => hits.filter(Boolean).length)
      // Least recently used first: each entry is dropped before its turn comes round again.
      const early: Array<number> = []
      for (let round = 0; round < 5; round++) early.push(yield* sweep(paths))
      assert.deepStrictEqual(early, [0, 0, 0, 0, 0])
      assert.isFalse(budget.admitsByFrequency())
      // 6 drops a sweep of entries never got again: past 64, the budget thrashes and admits by frequency.
      for (let round = 0; round < 8; round++) yield* sweep(paths)
      assert.isTrue(budget.admitsByFrequency())
      const late: Array<number> = []
      for (let round = 0; round < 5; round++) late.push(yield* sweep(paths))
      assert.deepStrictEqual(late, [4, 4, 4, 4, 4], "the four entries kept are reused on every round")
      assert.isAtMost(budget.bytes(), budget.maxBytes)
      // A new working set read more often than the old one still gets in once its paths were read more often.
      const fresh = [`${root}/q0`, `${root}/q1`]
      let hits = 0
      for (let round = 0; round < 40; round++) hits = yield* sweep(fresh)
      assert.strictEqual(hits, 2)
      assert.isAtMost(budget.bytes(), budget.maxBytes)
    }))

  it.effect("files held over the sets sharing a budget stay within maxOpenFiles; the entries whose files are let go stay", ({ root }) =>
    Effect.gen(function*() {
      const { fs, read } = yield* setup(root)
      const budget = HeldFiles.makeBudget({ maxBytes: Number.POSITIVE_INFINITY, maxOpenFiles: 2 })
      const first = yield* HeldFiles.make<number>(fs, { budget, followSymlinks: false, initial: () => 0 })
      const second = yield* HeldFiles.make<number>(fs, { budget, followSymlinks: false, initial: () => 0 })
      const open = () => ["a", "b", "c"].map((name) => openCount(fs, `${root}/${name}`))
      yield* read(first, "a")
      yield* read(second, "b")
      assert.deepStrictEqual(open(), [1, 1, 0])
      assert.strictEqual(budget.openFiles(), 2)
      // a is got again, so b is the least recently got holder when c opens.
      yield* read(first, "a")
      assert.strictEqual(yield* read(first, "c"), "c\n")
      assert.deepStrictEqual(open(), [1, 0, 1])
      assert.strictEqual(budget.openFiles(), 2)
      const b = (yield* second.get(`${root}/b`))!
      assert.isTrue(b.live, "the entry stays")
      assert.isFalse(b.file.holding())
      assert.strictEqual(b.state, 1)
      // Its next use opens it again, and lets go of the least recently got other file (a).
      assert.strictEqual(yield* read(second, "b"), "b\n")
      assert.deepStrictEqual(open(), [0, 1, 1])
      // A file let go by its own holder (replaced, removed) is not counted any more.
      const c = (yield* first.get(`${root}/c`))!
      yield* c.file.letGo
      assert.strictEqual(budget.openFiles(), 1)
      yield* read(first, "a")
      assert.deepStrictEqual(open(), [1, 1, 0])
    }))

  it.effect("a budget of no open files holds none: every use opens the file and closes it when it ends", ({ root }) =>
    Effect.gen(function*() {
      const { fs, read } = yield* setup(root)
      const budget = HeldFiles.makeBudget({ maxBytes: Number.POSITIVE_INFINITY, maxOpenFiles: 0 })
      const set = yield* HeldFiles.make<number>(fs, { budget, followSymlinks: false, initial: () => 0 })
      const open = () => ["a", "b"].map((name) => openCount(fs, `${root}/${name}`))
      for (let round = 0; round < 3; round++) {
        assert.strictEqual(yield* read(set, "a"), "a\n")
        assert.strictEqual(yield* read(set, "b"), "b\n")
        assert.deepStrictEqual(open(), [0, 0], `round ${round}`)
        assert.strictEqual(budget.openFiles(), 0)
      }
      // The entries and their states stay: only the files are not kept.
      const a = (yield* set.get(`${root}/a`))!
      assert.isTrue(a.live)
      assert.isFalse(a.file.holding())
      assert.strictEqual(a.state, 3)
    }))

  it.effect("a round-robin over more paths than files held stops churning them; a working set that fits is held again", ({ root }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const paths = Array.from({ length: 40 }, (_, index) => `${root}/p${index}`)
      for (const path of paths) yield* fs.writeFileString(path, "x\n")
      const budget = HeldFiles.makeBudget({ maxBytes: Number.POSITIVE_INFINITY, maxOpenFiles: 4 })
      const set = yield* HeldFiles.make<number>(fs, { budget, followSymlinks: false, initial: () => 0 })
      const read = (path: string) =>
        Effect.gen(function*() {
          const entry = (yield* set.get(path))!
          return yield* entry.file.use(yield* fs.lstat(path), (use) => Effect.succeed(use.opened))
        })
      const holding = () => [...set.entries()].filter((entry) => entry.file.holding()).map((entry) => entry.path).sort()
      // Every file held is pushed out before its turn comes round: after 64 of those, newcomers are not held.
      for (let round = 0; round < 3; round++) for (const path of paths) yield* read(path)
      const held = holding()
      for (let round = 0; round < 2; round++) {
        for (const path of paths) {
          yield* read(path)
          assert.deepStrictEqual(holding(), held, `round ${round}, ${path}: the same files stay held`)
        }
      }
      assert.isAtMost(budget.openFiles(), 4)
      assert.strictEqual(paths.filter((path) => openCount(fs, path) > 0).length, budget.openFiles())
      // Two paths read in turn: each is got again within the last 4 gets, so their files are held and reused.
      const [a, b] = [paths[1], paths[2]]
      for (let turn = 0; turn < 3; turn++) {
        yield* read(a)
        yield* read(b)
      }
      assert.deepStrictEqual([yield* read(a), yield* read(b)], [false, false], "used without opening")
      assert.includeMembers(holding(), [a, b])
      assert.isAtMost(budget.openFiles(), 4)
    }))

  it.effect("invalidate drops one entry; the set's scope end drops them all, and get answers undefined from then on", ({ root }) =>
    Effect.gen(function*() {
      const { dropped, fs, read } = yield* setup(root)
      const scope = yield* Scope.make()
      const set = yield* HeldFiles.make<number>(fs, {
        capacity: 8,
        followSymlinks: false,
        initial: () => 0,
        onDrop: (entry) => Effect.sync(() => dropped.push(entry.path.slice(root.length + 1)))
      }).pipe(Scope.provide(scope))
      for (const name of ["a", "b", "c"]) yield* read(set, name)
      yield* set.invalidate(`${root}/b`)
      yield* set.invalidate(`${root}/missing`)
      assert.deepStrictEqual(dropped, ["b"])
      assert.deepStrictEqual([openCount(fs, `${root}/a`), openCount(fs, `${root}/b`), openCount(fs, `${root}/c`)], [
        1,
        0,
        1
      ])
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(dropped, ["b", "a", "c"])
      assert.deepStrictEqual([openCount(fs, `${root}/a`), openCount(fs, `${root}/c`)], [0, 0])
      assert.deepStrictEqual([...set.entries()], [])
      assert.isUndefined(yield* set.get(`${root}/a`))
    }))
})
