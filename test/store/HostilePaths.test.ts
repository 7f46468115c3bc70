/**
 * The Effect API answers hostile paths with its own tagged errors: a NUL
 * byte in a Session path or a root, a name longer than a file name can be, a
 * path through a regular file, a directory where a Session or sidecar
 * should be. Every failure is one of the operation's declared errors (a
 * `StoreIo` carrying the platform error where the file system refused),
 * never a raw `PlatformError` and never a defect.
 */
import { assert } from "@effect/vitest"
import { Cause, Effect, Exit, Path, Stream } from "effect"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { jobId, summaryReceipt } from "../support/Receipts.js"
import { LEASE_MS, setup } from "./StoreKit.js"

const DECLARED = {
  materializationPath: ["SessionFileRequired", "SessionOutsideRoot"],
  readCurrent: ["SessionFileRequired", "SessionOutsideRoot", "ProjectionInputInvalid"],
  readHistory: ["SessionFileRequired", "SessionOutsideRoot", "HistoryBoundsInvalid"],
  history: ["SessionFileRequired", "SessionOutsideRoot", "HistoryBoundsInvalid", "HistoryUnreadable"],
  reserve: [
    "SessionFileRequired",
    "SessionOutsideRoot",
    "InvalidJobId",
    "InvalidLease",
    "HeadInvalid",
    "NotRegularFile",
    "LockHeld",
    "StoreIo"
  ],
  settle: [
    "SessionFileRequired",
    "SessionOutsideRoot",
    "ReservationNotAcquired",
    "ReceiptTypeUnsupported",
    "ReceiptInvalid",
    "ReceiptTooLarge",
    "HeadTooLarge",
    "LeaseFenced",
    "LockHeld",
    "NotRegularFile",
    "SettleHookFailed",
    "StoreIo"
  ],
  release: ["LockHeld", "StoreIo"]
} as const

type Operation = keyof typeof DECLARED

/** What an exit says: success, or the failure's tag; a defect or a raw platform error fails the test. */
const verdict = <A, E>(operation: Operation, label: string, exit: Exit.Exit<A, E>): string => {
  if (Exit.isSuccess(exit)) return "ok"
  assert.isFalse(Cause.hasDies(exit.cause), `${label}: ${operation} died: ${Cause.pretty(exit.cause)}`)
  const failure = exit.cause.reasons.find(Cause.isFailReason)
  assert.isDefined(failure, `${label}: ${operation}: ${Cause.pretty(exit.cause)}`)
  const tag = (failure!.error as { readonly _tag?: unknown })._tag
  assert.notStrictEqual(tag, "PlatformError", `${label}: ${operation} leaked a raw PlatformError`)
  assert.include(
    DECLARED[operation] as ReadonlyArray<unknown>,
    tag,
    `${label}: ${operation} failed with ${String(tag)}`
  )
  return String(tag)
}

fileSystemSuite("hostile paths through the Effect API", (it) => {
  it.effect("every operation fails with a declared tagged error or succeeds, never a PlatformError", ({ root }) =>
    Effect.gen(function*() {
      const path = yield* Path.Path
      const kit = yield* setup(root)
      yield* kit.fs.makeDirectory(path.join(kit.sessionRoot, "project", "dir.jsonl"), { recursive: true })
      yield* kit.fs.writeFileString(path.join(kit.sessionRoot, "project", "file"), "not a directory")
      // Short enough for a lock file name, too long for `<lock>.<token>.tmp`.
      const longSession = path.join(kit.sessionRoot, "project", `${"n".repeat(200)}.jsonl`)
      yield* kit.fs.writeFileString(longSession, yield* kit.fs.readFileString(kit.sessionFile))
      const sessions: Record<string, string> = {
        "NUL in the name": path.join(kit.sessionRoot, "project", "a\0b.jsonl"),
        "NUL in a directory": path.join(kit.sessionRoot, "pro\0ject", "trace.jsonl"),
        "a 300-byte name": path.join(kit.sessionRoot, "project", `${"n".repeat(300)}.jsonl`),
        "a 200-byte name": longSession,
        "through a file": path.join(kit.sessionRoot, "project", "file", "x.jsonl"),
        "a directory": path.join(kit.sessionRoot, "project", "dir.jsonl"),
        "empty": "",
        "blank": "   "
      }
      const roots: Record<string, { readonly rarebitRoot?: string; readonly sessionRoot?: string }> = {
        "NUL in the Rarebit root": { rarebitRoot: path.join(root, "rare\0bit") },
        "NUL in the Session root": { sessionRoot: path.join(root, "sess\0ions") },
        "a Rarebit root through a file": { rarebitRoot: path.join(kit.sessionRoot, "project", "file", "rarebit") }
      }
      const cases = [
        ...Object.entries(sessions).map(([label, sessionFile]) => ({ label, sessionFile, location: {} })),
        ...Object.entries(roots).map(([label, location]) => ({ label, sessionFile: kit.sessionFile, location }))
      ]
      const store = kit.store
      const seen: Array<string> = []
      const verdicts: Record<string, Array<string>> = {}
      for (const { label, location, sessionFile } of cases) {
        const input = { sessionFile, ...location }
        seen.push(
          verdict("materializationPath", label, yield* Effect.exit(store.materializationPath(sessionFile, location)))
        )
        seen.push(verdict("readCurrent", label, yield* Effect.exit(store.readCurrent(input))))
        seen.push(verdict("readHistory", label, yield* Effect.exit(store.readHistory(input))))
        seen.push(verdict("history", label, yield* Effect.exit(Stream.runDrain(store.history(input)))))
        const reserved = yield* Effect.exit(store.reserve({ ...input, jobId: jobId(1), leaseMs: LEASE_MS }))
        seen.push(verdict("reserve", label, reserved))
        if (Exit.isSuccess(reserved) && reserved.value._tag === "Acquired") {
          const receipt = summaryReceipt(kit.branch, kit.sessionId)
          const settled = verdict("settle", label, yield* Effect.exit(store.settle(reserved.value, receipt)))
          const released = verdict("release", label, yield* Effect.exit(store.release(reserved.value)))
          seen.push(settled, released)
          verdicts[label] = [settled, released]
        }
        // Each case starts without a claim of its own.
        yield* kit.fs.remove(kit.claimPath(jobId(1))).pipe(Effect.ignore)
      }
      // The platform's refusals did reach callers, as StoreIo.
      assert.include(seen, "StoreIo")
      // A Session name the reference can lock, this store can lock too.
      assert.deepStrictEqual(verdicts["a 200-byte name"], ["ok", "ok"])
    }))
})
