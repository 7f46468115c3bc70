/**
 * A differential property over hostile inputs to every Promise function:
 * NUL bytes in Session paths and roots, empty, blank and non-string values
 * for every option, names longer than a file name can be, paths through a
 * regular file, directories where files should be, directories that deny
 * access, relative roots. For each case our package and the reference run
 * on fresh, identical worlds, and must agree on the outcome (the error's
 * class, `code` and whole message, or the value) and on the files left
 * behind, except for the deliberate differences listed in
 * docs/compatibility.md, which are pinned below.
 *
 * The calls run in a child process (`HostileInputs.driver.mjs`) with its own
 * working directory and HOME, and without root privileges when the tests run
 * as root, so that mode-000 directories deny access there as they do for
 * users.
 */
import { assert, beforeAll, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { spawnSync } from "node:child_process"
import { join } from "node:path"
import { REPO } from "../cli/CliHarness.js"
import { fuzzRuns } from "../support/FuzzRuns.js"

const DRIVER = join(REPO, "test", "promise", "HostileInputs.driver.mjs")
const NOBODY = 65534
const asRoot = process.getuid?.() === 0

interface Case {
  readonly fn: string
  readonly slot: string
  readonly value: string
}

interface Outcome {
  readonly ok: boolean
  readonly errorClass?: string
  readonly code?: string | null
  readonly message?: string
  readonly value?: unknown
  readonly files: Record<string, string>
}

interface Result {
  readonly case: Case
  readonly ours: Outcome
  readonly reference: Outcome
}

const drive = (args: ReadonlyArray<string>, input?: string) => {
  const run = spawnSync(process.execPath, [DRIVER, REPO, ...args], {
    cwd: REPO,
    encoding: "utf8",
    input,
    maxBuffer: 1 << 30,
    // Permission checks do not apply to root; run as an ordinary user then.
    ...(asRoot ? { uid: NOBODY, gid: NOBODY } : {})
  })
  assert.strictEqual(run.status, 0, run.stderr)
  return run.stdout
}

const runCases = (cases: ReadonlyArray<Case>): Array<Result> => {
  const results: Array<Result> = drive([], JSON.stringify(cases)).trim().split("\n").filter((line) => line !== "")
    .map((line) => JSON.parse(line))
  assert.deepStrictEqual(results.map((result) => result.case), [...cases], "one result per case, in order")
  return results
}

let space: { readonly values: ReadonlyArray<string>; readonly calls: Record<string, ReadonlyArray<string>> }

beforeAll(async () => {
  space = JSON.parse(drive(["--list"]))
}, 120_000)

const NON_STRING_TRUTHY = new Set([
  "number",
  "negative",
  "infinity",
  "object",
  "array",
  "pathInArray",
  "true",
  "function",
  "bigint",
  "date"
])

/**
 * The deliberate differences (docs/compatibility.md):
 * for a case, what each side does instead of agreeing.
 */
const deliberate = (c: Case): { readonly ours: Partial<Outcome>; readonly reference: Partial<Outcome> } | undefined => {
  if (c.fn !== "release" || c.slot !== "materializationPath") return undefined
  // A hand-made reservation whose sidecar path is not a string: the reference
  // turns it into a lock file name relative to the working directory.
  if (NON_STRING_TRUTHY.has(c.value)) {
    return { ours: { ok: false, errorClass: "TypeError", code: "ERR_INVALID_ARG_TYPE" }, reference: { ok: true } }
  }
  // A sidecar path that exists but cannot be read (no permission, or not a
  // file): ours will not give the job back without knowing whether this
  // lease's receipt is already in it.
  const unreadable: Record<string, string> = {
    unreadableSession: "EACCES",
    deniedRoot: "EACCES",
    deniedSessionRoot: "EACCES",
    directory: "EISDIR",
    readonlyRoot: "EISDIR",
    readonlyJobsRoot: "EISDIR",
    readonlySidecarsRoot: "EISDIR"
  }
  if (unreadable[c.value] !== undefined) {
    return { ours: { ok: false, errorClass: "Error", code: unreadable[c.value] }, reference: { ok: true } }
  }
  return undefined
}

const pick = (outcome: Outcome, keys: ReadonlyArray<string>) =>
  Object.fromEntries(keys.map((key) => [key, (outcome as unknown as Record<string, unknown>)[key]]))

/** The cases whose outcomes differ other than as documented, with both outcomes. */
const disagreements = (results: ReadonlyArray<Result>): Array<Result> =>
  results.filter((result) => {
    const expected = deliberate(result.case)
    if (expected === undefined) return JSON.stringify(result.ours) !== JSON.stringify(result.reference)
    return JSON.stringify(pick(result.ours, Object.keys(expected.ours))) !== JSON.stringify(expected.ours) ||
      JSON.stringify(pick(result.reference, Object.keys(expected.reference))) !== JSON.stringify(expected.reference)
  })

const report = (results: ReadonlyArray<Result>) =>
  results.map((r) =>
    `${JSON.stringify(r.case)}\n  ours      ${JSON.stringify(r.ours)}\n  reference ${JSON.stringify(r.reference)}`
  )
    .join("\n")

describe("hostile inputs to the Promise API", { concurrent: false }, () => {
  it("the issue's cases: NUL bytes, long names, denied directories and the pinned differences", () => {
    const cases: Array<Case> = [
      // A NUL byte reaches plain callers as Node's TypeError (ERR_INVALID_ARG_VALUE), not a PlatformError.
      { fn: "resolveSession", slot: "reference", value: "nulInName" },
      { fn: "readSession", slot: "reference", value: "nulInDirectory" },
      { fn: "reserve", slot: "sessionFile", value: "nulInName" },
      { fn: "reserve", slot: "rarebitRoot", value: "nulRoot" },
      { fn: "reserveThenSettle", slot: "sessionFile", value: "nulInName" },
      { fn: "reserveThenRelease", slot: "sessionFile", value: "nulInName" },
      // Names too long for the lock's temp file but not for the lock, and too long for either.
      { fn: "reserveThenRelease", slot: "sessionFile", value: "name200" },
      { fn: "reserveThenSettle", slot: "sessionFile", value: "name240" },
      { fn: "reserveThenRelease", slot: "sessionFile", value: "name300" },
      { fn: "reserve", slot: "sessionFile", value: "pathTooLong" },
      // The private-directory walk refuses what the reference's recursive mkdir refuses, naming
      // the path and the mkdir it names: a root that denies access, a name or a path too long,
      // a root through a file.
      { fn: "reserve", slot: "rarebitRoot", value: "deniedRoot" },
      { fn: "reserve", slot: "rarebitRoot", value: "rootNameTooLong" },
      { fn: "reserveThenSettle", slot: "rarebitRoot", value: "name300" },
      { fn: "reserveThenRelease", slot: "rarebitRoot", value: "throughFile" },
      // A hand-made reservation: a sidecar outside the root is made there as the reference makes
      // it; a root, a claim path or a sidecar path that is not a string fails where the
      // reference's does; a directory as the claim fails reading it.
      { fn: "settle", slot: "materializationPath", value: "outside" },
      { fn: "settle", slot: "materializationPath", value: "deniedSession" },
      { fn: "settle", slot: "rarebitRoot", value: "number" },
      { fn: "settle", slot: "claimPath", value: "directory" },
      { fn: "release", slot: "claimPath", value: "number" },
      { fn: "release", slot: "claimPath", value: "readonlyJobsRoot" },
      { fn: "release", slot: "materializationPath", value: "symbol" },
      // Refusals of the file system name the lock file the reference opens, not our temp file.
      { fn: "release", slot: "materializationPath", value: "throughFile" },
      { fn: "current", slot: "sessionFile", value: "deniedSession" },
      { fn: "readSession", slot: "sessionRoot", value: "deniedSessionRoot" },
      { fn: "resolveSession", slot: "sessionRoot", value: "number" },
      { fn: "settle", slot: "claimPath", value: "number" },
      { fn: "settle", slot: "sessionRoot", value: "undefined" },
      { fn: "readSession", slot: "reference", value: "throwingToString" },
      // The deliberate differences.
      { fn: "release", slot: "materializationPath", value: "number" },
      { fn: "release", slot: "materializationPath", value: "unreadableSession" }
    ]
    const results = runCases(cases)
    assert.strictEqual(results.length, cases.length)
    const differing = disagreements(results)
    assert.deepStrictEqual(differing, [], report(differing))
    // The example, as a plain caller sees it.
    const nul = results[0].ours
    assert.deepStrictEqual([nul.errorClass, nul.code], ["TypeError", "ERR_INVALID_ARG_VALUE"])
    assert.match(nul.message!, /without null bytes\. Received '<root>\/sessions\/p\/a\\x00b\.jsonl'$/)
    const throughFile = results.find((r) => r.case.fn === "release" && r.case.value === "throughFile")!.ours
    assert.deepStrictEqual([throughFile.errorClass, throughFile.code], ["Error", "ENOTDIR"])
    assert.strictEqual(
      throughFile.message,
      "ENOTDIR: not a directory, open '<root>/sessions/p/file/x.jsonl.commit-lock'"
    )
  }, 120_000)

  it("every function, every argument, any hostile value: the same outcome and files as the reference", () => {
    const caseArbitrary = fc.constantFrom(...Object.keys(space.calls)).chain((fn) =>
      fc.record({
        fn: fc.constant(fn),
        slot: fc.constantFrom(...space.calls[fn]),
        value: fc.constantFrom(...space.values)
      })
    )
    const batch = 50
    fc.assert(
      fc.property(fc.array(caseArbitrary, { minLength: batch, maxLength: batch }), (cases) => {
        const differing = disagreements(runCases(cases))
        assert.deepStrictEqual(differing, [], report(differing))
      }),
      { numRuns: Math.max(1, Math.ceil(fuzzRuns(300) / batch)), endOnFailure: true }
    )
  }, 600_000)
})
