/**
 * Every store operation shows up in the caller's trace: one span per call,
 * named after the operation, a child of the caller's span, ended with the
 * call's outcome. `readCurrent` records its span without making it the
 * parent of the work inside, so it is checked like the others.
 */
import { assert } from "@effect/vitest"
import { Effect, Exit, Option, Tracer } from "effect"
import { fileSystemSuite } from "../support/FileSystemSuite.js"
import { jobId, summaryReceipt } from "../support/Receipts.js"
import { reserveAcquired, setup } from "./StoreKit.js"

interface Recorded {
  readonly name: string
  readonly parent: string | undefined
  readonly outcome: string | undefined
}

/** A tracer that keeps every span it made, for the test to read once they ended. */
const recordingTracer = () => {
  const spans: Array<Tracer.NativeSpan> = []
  const tracer = Tracer.make({
    span: (options) => {
      const span = new Tracer.NativeSpan(options)
      spans.push(span)
      return span
    }
  })
  const recorded = (): ReadonlyArray<Recorded> =>
    spans.map((span) => ({
      name: span.name,
      parent: Option.match(span.parent, { onNone: () => undefined, onSome: (parent) => (parent as Tracer.Span).name }),
      outcome: span.status._tag === "Ended" ? (Exit.isSuccess(span.status.exit) ? "success" : "failure") : undefined
    }))
  return { tracer, recorded }
}

fileSystemSuite("store tracing", (it) => {
  it.effect("each operation records one ended span under the caller's span", ({ root }) =>
    Effect.gen(function*() {
      const kit = yield* setup(root)
      const { recorded, tracer } = recordingTracer()
      yield* Effect.gen(function*() {
        const reservation = yield* reserveAcquired(kit)
        yield* kit.store.settle(reservation, summaryReceipt(kit.branch, kit.sessionId))
        yield* kit.store.readCurrent({ sessionFile: kit.sessionFile })
        yield* kit.store.readCurrent({ sessionFile: kit.sessionFile })
        yield* kit.store.readHistory({ sessionFile: kit.sessionFile })
        yield* Effect.flip(kit.store.readHistory({ sessionFile: kit.sessionFile, limit: 0 }))
        yield* kit.store.materializationPath(kit.sessionFile)
        yield* kit.store.release(yield* reserveAcquired(kit, jobId(2)))
      }).pipe(Effect.withSpan("caller"), Effect.withTracer(tracer))
      const operations = recorded().filter(({ name }) => name.startsWith("RarebitStore."))
      assert.deepStrictEqual(operations, [
        { name: "RarebitStore.reserve", parent: "caller", outcome: "success" },
        { name: "RarebitStore.settle", parent: "caller", outcome: "success" },
        { name: "RarebitStore.readCurrent", parent: "caller", outcome: "success" },
        { name: "RarebitStore.readCurrent", parent: "caller", outcome: "success" },
        { name: "RarebitStore.readHistory", parent: "caller", outcome: "success" },
        { name: "RarebitStore.readHistory", parent: "caller", outcome: "failure" },
        { name: "RarebitStore.materializationPath", parent: "caller", outcome: "success" },
        { name: "RarebitStore.reserve", parent: "caller", outcome: "success" },
        { name: "RarebitStore.release", parent: "caller", outcome: "success" }
      ])
    }))
})
