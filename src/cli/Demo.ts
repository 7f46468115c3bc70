/**
 * `rarebit-store demo`: a guided tour of the protocol on the live Node
 * store, in a fresh temporary directory, needing nothing installed.
 *
 * It writes a small synthetic Pi Session, then runs two workers
 * concurrently on the same summary job: A reserves with a 300 ms lease and
 * stalls past it; B reserves after the lease ran out (a takeover) and
 * settles; A's late settle is fenced (`LeaseFenced`) and writes nothing. A
 * title receipt for a second job follows. Finally the current read, the
 * history page and a full `verify` of the temporary store are printed. The
 * directory is removed at the end, also on failure, unless `--keep`.
 *
 * @since 0.1.0
 */
import { Clock, Console, Deferred, Effect } from "effect"
import { Command, Flag } from "effect/cli"
import { FileSystem } from "effect/FileSystem"
import { Path } from "effect/Path"
import * as ProcessOwner from "../platform/ProcessOwner.js"
import { RarebitStore } from "../store/RarebitStore.js"
import { auditStore } from "../store/SidecarAudit.js"
import { toCliFailure } from "./CliFailure.js"
import { formatCurrent } from "./Current.js"
import { sampleJobIds, sampleSession, summaryReceipt, titleReceipt } from "./DemoSession.js"
import { globals, storeLayer } from "./GlobalOptions.js"
import { formatHistoryRecord } from "./History.js"
import { printJson, short, style } from "./Output.js"
import { formatAudit } from "./Verify.js"

const LEASE_MS = 300
const STALL_MS = 600

/**
 * One printed step of the demo.
 *
 * @category models
 * @since 0.1.0
 */
export interface DemoStep {
  readonly atMs: number
  readonly actor: "A" | "B" | "-"
  readonly event: string
}

/**
 * The `demo` command.
 *
 * @category commands
 * @since 0.1.0
 */
export const demoCommand = Command.make(
  "demo",
  {
    keep: Flag.Boolean("keep").pipe(
      Flag.withDescription("Keep the temporary directory and print its path"),
      Flag.withDefault(false)
    )
  },
  Effect.fn("cli.demo")(function*({ keep }) {
    const options = yield* globals
    const fs = yield* FileSystem
    const path = yield* Path
    const s = yield* style
    const json = options.json
    const say = (line: string) => (json ? Effect.void : Console.log(line))

    const directory = yield* fs.makeTempDirectory({ prefix: "rarebit-demo-" }).pipe(Effect.mapError(toCliFailure))
    const cleanup = keep
      ? say(s.dim(`Kept ${directory}`))
      : Effect.ignore(fs.remove(directory, { recursive: true }))

    const tour = Effect.gen(function*() {
      const sessionRoot = path.join(directory, "sessions")
      const rarebitRoot = path.join(directory, "rarebit")
      const session = sampleSession()
      const sessionFile = path.join(sessionRoot, "demo", `2026-01-01T10-00-00-000Z_${session.id}.jsonl`)
      yield* fs.makeDirectory(path.dirname(sessionFile), { recursive: true })
      yield* fs.writeFileString(sessionFile, session.content)
      const jobs = sampleJobIds(session)

      yield* say(s.bold("rarebit-store demo: two workers, one job, one fenced settle"))
      yield* say(`  ${s.dim("temp dir")}     ${directory}${keep ? "" : s.dim(" (removed at the end; --keep keeps it)")}`)
      yield* say(`  ${s.dim("session")}      ${path.relative(directory, sessionFile)} (${session.entries.length} entries)`)
      yield* say(`  ${s.dim("summary job")}  ${short(jobs.summary, 16)}   ${s.dim("title job")} ${short(jobs.title, 16)}`)
      yield* say("")

      const steps: Array<DemoStep> = []
      const start = yield* Clock.currentTimeMillis
      const actorStyle = (actor: DemoStep["actor"]) => (actor === "A" ? s.yellow : actor === "B" ? s.cyan : s.dim)
      const step = (actor: DemoStep["actor"], event: string) =>
        Effect.gen(function*() {
          const atMs = (yield* Clock.currentTimeMillis) - start
          steps.push({ atMs, actor, event })
          yield* say(`  ${s.dim(`+${atMs}ms`.padEnd(8))} ${actorStyle(actor)(actor)}  ${event}`)
        })

      return yield* Effect.gen(function*() {
        const store = yield* RarebitStore
        const aReserved = yield* Deferred.make<void>()
        const bSettled = yield* Deferred.make<void>()

        const workerA = Effect.gen(function*() {
          const reservation = yield* store.reserve({ jobId: jobs.summary, sessionFile, leaseMs: LEASE_MS }).pipe(
            Effect.ensuring(Deferred.succeed(aReserved, undefined))
          )
          if (reservation._tag !== "Acquired") return yield* step("A", `could not reserve (${reservation._tag})`)
          yield* step("A", `reserved the summary job with a ${LEASE_MS} ms lease, then stalls while deriving`)
          // Stall past the lease, and until B has settled, so the order of
          // events is the same however slow the machine is.
          yield* Effect.all([Effect.sleep(STALL_MS), Deferred.await(bSettled)], { concurrency: "unbounded" })
          const observedAt = new Date(yield* Clock.currentTimeMillis).toISOString()
          const late = summaryReceipt(session, { summary: "A stale summary from worker A.", observedAt })
          const outcome = yield* Effect.result(store.settle(reservation, late))
          if (outcome._tag === "Failure" && outcome.failure._tag === "LeaseFenced") {
            yield* step("A", `woke up and tried to settle: ${s.red("FENCED")} (LeaseFenced: ${outcome.failure.message})`)
          } else {
            yield* step("A", `settle was not fenced (${outcome._tag}); this should not happen`)
          }
        })

        const workerB = Effect.gen(function*() {
          // B comes along once A holds the job, after A's lease has run out.
          yield* Deferred.await(aReserved)
          yield* Effect.sleep(LEASE_MS + 150)
          const reservation = yield* store.reserve({ jobId: jobs.summary, sessionFile })
          if (reservation._tag !== "Acquired") {
            yield* Deferred.succeed(bSettled, undefined)
            return yield* step("B", `could not reserve (${reservation._tag})`)
          }
          yield* step("B", "reserved the same job: A's lease had run out, so B took the claim over")
          const observedAt = new Date(yield* Clock.currentTimeMillis).toISOString()
          const settled = yield* store.settle(
            reservation,
            summaryReceipt(session, {
              summary: "A three-step repotting checklist, plus one line on choosing a pot with drainage.",
              observedAt
            })
          ).pipe(Effect.ensuring(Deferred.succeed(bSettled, undefined)))
          const current = yield* store.readCurrent({ sessionFile })
          yield* step(
            "B",
            `settled its summary receipt (${settled.status}); the head now points at byte ${current.head?.receiptOffset}`
          )
        })

        yield* Effect.all([workerA, workerB], { concurrency: "unbounded" })

        const titleOutcome = yield* store.withJob(
          { jobId: jobs.title, sessionFile },
          () =>
            Effect.map(Clock.currentTimeMillis, (now) =>
              titleReceipt(session, { title: "Herb repotting checklist", observedAt: new Date(now).toISOString() }))
        )
        yield* step(
          "-",
          titleOutcome._tag === "Settled" && titleOutcome.receipt.type === "rarebit_title"
            ? `settled a title receipt for a second job ("${titleOutcome.receipt.title}"); ` +
              "the summary head is repeated after it"
            : `title job was ${titleOutcome._tag}`
        )

        const current = yield* store.readCurrent({ sessionFile })
        const history = yield* store.readHistory({ sessionFile })
        const audit = yield* auditStore({ rarebitRoot }).pipe(Effect.provide(ProcessOwner.layer))

        if (json) {
          return yield* printJson({ directory: keep ? directory : null, sessionFile, steps, current, history, audit })
        }
        yield* say("")
        yield* say(s.bold("current"))
        for (const line of formatCurrent(s, sessionFile, current)) yield* say(`  ${line}`)
        yield* say("")
        yield* say(s.bold(`history (${history.records.length} receipts; heads are not listed)`))
        for (const entry of history.records) yield* say(`  ${formatHistoryRecord(s, entry)}`)
        yield* say("")
        yield* say(s.bold("verify"))
        for (const line of formatAudit(s, audit)) yield* say(`  ${line}`)
      }).pipe(Effect.provide(storeLayer({ rarebitRoot, sessionRoot, allowExternalSession: false })))
    })

    yield* tour.pipe(Effect.ensuring(cleanup), Effect.mapError(toCliFailure))
  })
).pipe(
  Command.withDescription(
    "Run two concurrent workers through reserve and settle on a sample Pi Session in a temporary directory: " +
      "one stalls past its lease and is fenced. Then print current, history and verify"
  ),
  Command.withExamples([
    { command: "rarebit-store demo", description: "the guided tour (what `npm start` runs)" },
    { command: "rarebit-store demo --keep", description: "keep the temporary store to try the other commands on it" }
  ])
)
