/**
 * The sidecar path rule under win32 semantics, run on any platform through
 * `path.win32`: where the reference's rule (the seed's `mirroredPath`,
 * restated over a given `node:path` flavour) is defined, our sidecar is its
 * sidecar; other drives, UNC shares and the `\\?\` / `\\.\` namespaces are
 * outside the root; `/` and `\` give the same answer.
 */
import * as NodePath from "@effect/platform-node/NodePath"
import { assert, describe, it } from "@effect/vitest"
import { Effect, FileSystem, Path, Result } from "effect"
import { SecureRandom } from "effect/crypto/SecureRandom"
import fc from "fast-check"
import { createHash } from "node:crypto"
import * as NodePathModule from "node:path"
import { materializationPath } from "../../src/store/MirroredPath.js"
import { make } from "../../src/store/RarebitStore.js"
import { makeStoreConfig } from "../../src/store/StoreConfig.js"
import { makeMemoryFileSystem } from "../../src/testing/MemoryFileSystem.js"
import { fuzzRuns } from "../support/FuzzRuns.js"
import { Store as Ref } from "../support/Reference.js"
import { tokensSeededFromRandom } from "../support/Tokens.js"

type Flavour = typeof NodePathModule.posix

/**
 * The reference's rule with its `node:path` calls taken from `flavour`:
 * `undefined` where it returns a path that is not under the store (the
 * `relative` it joins is absolute).
 */
const referenceRule = (
  flavour: Flavour,
  sessionFile: string,
  location: { sessionRoot: string; rarebitRoot: string; allowExternalSession: boolean }
): Result.Result<string, "outside"> | undefined => {
  const outputRoot = flavour.resolve(flavour.join(location.rarebitRoot, "materializations-v4"))
  const source = flavour.resolve(sessionFile)
  const relative = flavour.relative(flavour.resolve(location.sessionRoot), source)
  const outside = !relative || relative === ".." || relative.startsWith(`..${flavour.sep}`) ||
    relative.includes(`${flavour.sep}..${flavour.sep}`)
  if (!outside && flavour.isAbsolute(relative)) return undefined
  if (outside && !location.allowExternalSession) return Result.fail("outside")
  if (outside) {
    const hash = createHash("sha256").update(source).digest("hex")
    return Result.succeed(flavour.join(outputRoot, "external", `${hash}.jsonl`))
  }
  return Result.succeed(flavour.join(outputRoot, relative))
}

const sessionRoot = "C:\\Users\\Me\\.pi\\agent\\sessions"
const rarebitRoot = "C:\\Users\\Me\\.pi\\agent\\rarebit"

const segment = fc.oneof(
  fc.constantFrom(".", "..", "a", "A", "b.jsonl", "..x", "x..", "a b", "é", "sessions", "SESSIONS", "agent"),
  fc.stringMatching(/^[a-zA-Z0-9._-]{1,6}$/)
)
const separator = fc.constantFrom("\\", "/")
const tail = fc.tuple(fc.array(segment, { maxLength: 5 }), separator).map(([parts, sep]) => parts.join(sep))
/** Absolute win32 spellings: under the root or not, other drives, shares and namespaces. */
const win32Session = fc.oneof(
  tail.map((rest) => `${sessionRoot}\\${rest}`),
  tail.map((rest) => `c:/users/me/.pi/agent/sessions/${rest}`),
  fc.tuple(fc.constantFrom("C:", "c:", "D:", "z:"), separator, tail).map(([drive, sep, rest]) =>
    `${drive}${sep}${rest}`
  ),
  fc.tuple(separator, tail).map(([sep, rest]) => `${sep}${sep}server${sep}share${sep}${rest}`),
  fc.tuple(fc.constantFrom("?", "."), separator, tail).map(([kind, sep, rest]) =>
    `${sep}${sep}${kind}${sep}C:${sep}Users${sep}Me${sep}.pi${sep}agent${sep}sessions${sep}${rest}`
  )
)

/** Another drive, a UNC share or a namespaced path: never under a drive-letter root. */
const foreignSession = fc.oneof(
  fc.tuple(fc.constantFrom("D:", "d:", "Z:"), separator, tail).map(([drive, sep, rest]) => `${drive}${sep}${rest}`),
  fc.tuple(separator, fc.constantFrom("server\\share", "server/share", "?\\UNC\\server\\share"), tail).map((
    [sep, share, rest]
  ) => `${sep}${sep}${share}${sep}${rest}`),
  fc.tuple(fc.constantFrom("?", "."), separator, tail).map(([kind, sep, rest]) =>
    `${sep}${sep}${kind}${sep}C:${sep}Users${sep}Me${sep}.pi${sep}agent${sep}sessions${sep}${rest}`
  )
)

const run = (body: (path: Path.Path) => void) =>
  Effect.gen(function*() {
    body(yield* Path.Path)
  }).pipe(Effect.provide(NodePath.layerWin32))

describe("materializationPath under win32 semantics", () => {
  it("the restated rule is the reference's under POSIX semantics", () => {
    const posixSession = fc.tuple(fc.array(segment, { maxLength: 5 }), fc.boolean()).map(([parts, inside]) =>
      `${inside ? "/srv/sessions" : "/srv"}/${parts.join("/")}`
    )
    fc.assert(
      fc.property(posixSession, fc.boolean(), (sessionFile, allowExternalSession) => {
        const location = { sessionRoot: "/srv/sessions", rarebitRoot: "/srv/rarebit", allowExternalSession }
        const restated = referenceRule(NodePathModule.posix, sessionFile, location)
        let theirs: Result.Result<string, "outside">
        try {
          theirs = Result.succeed(Ref.rarebitMaterializationPath(sessionFile, location))
        } catch {
          theirs = Result.fail("outside")
        }
        assert.deepStrictEqual(restated, theirs, sessionFile)
      }),
      { numRuns: fuzzRuns(500) }
    )
  })

  it.effect("where the reference's rule is defined, ours gives its sidecar; elsewhere the Session is outside", () =>
    run((path) =>
      fc.assert(
        fc.property(win32Session, fc.boolean(), (sessionFile, allowExternalSession) => {
          const location = { sessionRoot, rarebitRoot, allowExternalSession }
          const ours = materializationPath(path, sessionFile, location)
          const theirs = referenceRule(NodePathModule.win32, sessionFile, location)
          const namespaced = /^[\\/]{2}[?.][\\/]/.test(sessionFile)
          if (theirs === undefined || namespaced) {
            if (allowExternalSession) {
              assert.isTrue(Result.isSuccess(ours), sessionFile)
              if (Result.isSuccess(ours)) assert.include(ours.success, "\\materializations-v4\\external\\")
            } else {
              assert.isTrue(Result.isFailure(ours) && ours.failure._tag === "SessionOutsideRoot", sessionFile)
            }
            return
          }
          if (Result.isSuccess(theirs)) {
            assert.deepStrictEqual(ours, Result.succeed(theirs.success), sessionFile)
          } else {
            assert.isTrue(Result.isFailure(ours) && ours.failure._tag === "SessionOutsideRoot", sessionFile)
          }
        }),
        { numRuns: fuzzRuns(2000) }
      )
    ))

  it.effect("another drive, a UNC share and the \\\\?\\ and \\\\.\\ namespaces are outside the root", () =>
    run((path) =>
      fc.assert(
        fc.property(foreignSession, (sessionFile) => {
          const refused = materializationPath(path, sessionFile, {
            sessionRoot,
            rarebitRoot,
            allowExternalSession: false
          })
          assert.isTrue(Result.isFailure(refused) && refused.failure._tag === "SessionOutsideRoot", sessionFile)
          const external = materializationPath(path, sessionFile, {
            sessionRoot,
            rarebitRoot,
            allowExternalSession: true
          })
          assert.isTrue(Result.isSuccess(external), sessionFile)
          if (Result.isSuccess(external)) {
            assert.strictEqual(path.dirname(external.success), `${rarebitRoot}\\materializations-v4\\external`)
          }
        }),
        { numRuns: fuzzRuns(1000) }
      )
    ))

  it.effect("either separator, in the Session and in the roots, gives the same answer", () =>
    run((path) =>
      fc.assert(
        fc.property(win32Session, fc.boolean(), (sessionFile, allowExternalSession) => {
          const location = { sessionRoot, rarebitRoot, allowExternalSession }
          const slashed = {
            sessionRoot: sessionRoot.replaceAll("\\", "/"),
            rarebitRoot: rarebitRoot.replaceAll("\\", "/"),
            allowExternalSession
          }
          const expected = materializationPath(path, sessionFile.replaceAll("/", "\\"), location)
          for (
            const [spelling, roots] of [
              [sessionFile.replaceAll("\\", "/"), location],
              [sessionFile, slashed],
              [sessionFile.replaceAll("\\", "/"), slashed]
            ] as const
          ) {
            const ours = materializationPath(path, spelling, roots)
            assert.strictEqual(ours._tag, expected._tag, spelling)
            if (Result.isSuccess(ours) && Result.isSuccess(expected)) assert.strictEqual(ours.success, expected.success)
          }
        }),
        { numRuns: fuzzRuns(1000) }
      )
    ))

  it.effect("a few spellings, by hand", () =>
    run((path) => {
      const at = (sessionFile: string, allowExternalSession = false) =>
        materializationPath(path, sessionFile, { sessionRoot, rarebitRoot, allowExternalSession })
      const mirrored = `${rarebitRoot}\\materializations-v4\\--C--work--\\s.jsonl`
      assert.deepStrictEqual(at(`${sessionRoot}\\--C--work--\\s.jsonl`), Result.succeed(mirrored))
      assert.deepStrictEqual(at("C:/Users/Me/.pi/agent/sessions/--C--work--/s.jsonl"), Result.succeed(mirrored))
      // win32's `relative` compares case-insensitively, as NTFS names do.
      assert.deepStrictEqual(at("c:\\users\\me\\.pi\\agent\\sessions\\--C--work--\\s.jsonl"), Result.succeed(mirrored))
      for (
        const foreign of [
          "D:\\Users\\Me\\.pi\\agent\\sessions\\s.jsonl",
          "\\\\server\\share\\sessions\\s.jsonl",
          "//server/share/sessions/s.jsonl",
          `\\\\?\\${sessionRoot}\\s.jsonl`,
          `\\\\.\\${sessionRoot}\\s.jsonl`,
          `//?/${sessionRoot}/s.jsonl`
        ]
      ) {
        const refused = at(foreign)
        assert.isTrue(Result.isFailure(refused) && refused.failure._tag === "SessionOutsideRoot", foreign)
      }
    }))

  it.effect("the store, given a win32 Path, answers by the same rule", () =>
    Effect.gen(function*() {
      const path = yield* Path.Path
      const store = yield* make(makeStoreConfig({ sessionRoot, rarebitRoot })).pipe(
        Effect.provideService(FileSystem.FileSystem, makeMemoryFileSystem()),
        Effect.provideService(Path.Path, path),
        Effect.provideService(SecureRandom, yield* tokensSeededFromRandom)
      )
      const mirrored = `${rarebitRoot}\\materializations-v4\\--C--work--\\s.jsonl`
      assert.strictEqual(yield* store.materializationPath(`${sessionRoot}\\--C--work--\\s.jsonl`), mirrored)
      assert.strictEqual(
        yield* store.materializationPath("C:/Users/Me/.pi/agent/sessions/--C--work--/s.jsonl"),
        mirrored
      )
      for (const foreign of ["D:\\sessions\\s.jsonl", "\\\\server\\share\\s.jsonl", `\\\\?\\${sessionRoot}\\s.jsonl`]) {
        const error = yield* Effect.flip(store.materializationPath(foreign))
        assert.strictEqual(error._tag, "SessionOutsideRoot", foreign)
        const current = yield* Effect.flip(
          store.readCurrent({ sessionFile: foreign, native: { availability: "missing" } })
        )
        assert.strictEqual(current._tag, "SessionOutsideRoot", foreign)
      }
    }).pipe(Effect.provide(NodePath.layerWin32)))
})
