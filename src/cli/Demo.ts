/**
 * `rarebit-store demo`: a guided tour of the protocol on the live Node
 * store, in a fresh temporary directory, needing nothing installed.
 *
 * It writes a small synthetic Pi Session, then runs two workers
 * concurrently on the same summary job: A reserves with a 300 ms lease and
 * stalls past it; B reserves after the lease ran out (a takeover) and
 * settles; A's late settle is fenced (`LeaseFenced`) and writes nothing. A
 * title receipt for a second job follows. Along the way it shows what the
 * protocol wrote: the job claim before and after the settle, and the raw
 * receipt and head lines of the sidecar. Finally the current read, the
 * history page, the job claims and a full `verify` of the temporary store
 * are printed. The directory is removed at the end, also on failure, unless
 * `--keep`, which prints the exact commands (with `--root` and
 * `--session-root`) to explore what it kept.
 *
 * @since 0.1.0
 */
import { Clock, Console, Deferred, Effect } from "effect"
import { Command, Flag } from "effect/cli"
import { FileSystem } from "effect/FileSystem"
import { Path } from "effect/Path"
import type { PlatformError } from "effect/PlatformError"
import * as ProcessOwner from "../platform/ProcessOwner.js"
import { type AuditReport, auditStore } from "../store/audit/SidecarAudit.js"
import { RarebitStore } from "../store/RarebitStore.js"
import { toCliFailure } from "./CliFailure.js"
import { formatCurrent } from "./Current.js"
import { sampleJobIds, type SampleSession, sampleSession, summaryReceipt, titleReceipt } from "./DemoSession.js"
import { globals, storeLayer } from "./GlobalOptions.js"
import { formatHistoryRecord } from "./History.js"
import { formatJobs } from "./Jobs.js"
import { printJson, short, type Style, style } from "./Output.js"
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
 * What the protocol wrote, as the demo shows it: the claim file of the
 * summary job while B holds it and once it is settled, and the sidecar's
 * lines (receipts and heads) at the end. Lease tokens are shortened.
 *
 * @category models
 * @since 0.1.0
 */
export interface DemoFiles {
  readonly claimPath: string
  readonly claimWhileHeld: string
  readonly claimSettled: string
  readonly sidecar: string
  readonly sidecarLines: ReadonlyArray<string>
}

const LEASE_TOKEN = /("leaseToken":")([0-9a-f]{8})[0-9a-f]+"/

/** A claim line with its lease token cut to 8 digits, which is enough to tell two apart. */
const shortenToken = (line: string) => line.replace(LEASE_TOKEN, "$1$2…\"")

/** A raw line cut to `max` characters, saying how long it was. */
const rawLine = (line: string, max: number) =>
  line.length <= max ? line : `${line.slice(0, max - 1)}… (${line.length} characters)`

/**
 * The commands that explore a kept demo store, with the exact flags.
 *
 * @category formatting
 * @since 0.1.0
 */
export const exploreCommands = (
  rarebitRoot: string,
  sessionRoot: string,
  sessionFile: string
): ReadonlyArray<string> => {
  const quote = (text: string) => (/^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replace(/'/g, "'\\''")}'`)
  const roots = `--root ${quote(rarebitRoot)} --session-root ${quote(sessionRoot)}`
  return [
    `rarebit-store current ${roots} --session ${quote(sessionFile)}`,
    `rarebit-store history ${roots} --session ${quote(sessionFile)}`,
    `rarebit-store jobs ${roots}`,
    `rarebit-store verify ${roots}`
  ]
}

/** What the tour's steps share: where it runs, how it prints, and the summary job's claim. */
interface Tour {
  readonly s: Style
  readonly path: Path
  readonly say: (line: string) => Effect.Effect<void>
  readonly step: (actor: DemoStep["actor"], event: string) => Effect.Effect<void>
  readonly showFile: (label: string, lines: ReadonlyArray<string>) => Effect.Effect<void>
  readonly directory: string
  readonly session: SampleSession
  readonly sessionFile: string
  readonly jobs: { readonly summary: string; readonly title: string }
  readonly claimPath: string
  readonly readClaimLine: Effect.Effect<string, PlatformError>
}

/**
 * Workers A and B on the summary job: A stalls past its lease, B takes the
 * job over and settles, A's late settle is fenced. Returns the claim as B
 * held it and once settled.
 */
const twoWorkers = Effect.fnUntraced(function*(tour: Tour) {
  const { jobs, s, session, sessionFile, step } = tour
  const store = yield* RarebitStore
  const aReserved = yield* Deferred.make<void>()
  const bSettled = yield* Deferred.make<void>()
  let claimWhileHeld = ""
  let claimSettled = ""

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
      yield* step(
        "A",
        `woke up and tried to settle: ${s.red("FENCED")} (LeaseFenced: ${outcome.failure.message})`
      )
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
    claimWhileHeld = yield* tour.readClaimLine
    yield* tour.showFile(
      `${tour.path.relative(tour.directory, tour.claimPath)} (active: B's lease token, when, how long):`,
      [claimWhileHeld]
    )
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
    claimSettled = yield* tour.readClaimLine
    yield* tour.showFile("the claim now (settled: a pointer to the receipt's bytes):", [claimSettled])
  })

  yield* Effect.all([workerA, workerB], { concurrency: "unbounded" })
  return { claimWhileHeld, claimSettled }
})

/** What the tour ends with, for the human-readable output. */
interface Finale {
  readonly sidecar: string
  readonly sidecarLines: ReadonlyArray<string>
  readonly current: Parameters<typeof formatCurrent>[2]
  readonly history: { readonly records: ReadonlyArray<Parameters<typeof formatHistoryRecord>[1]> }
  readonly audit: AuditReport
  readonly explore: ReadonlyArray<string> | null
}

/** Prints the sidecar's lines, the current read, the history, the jobs, the audit and, with `--keep`, what to run next. */
const printFinale = Effect.fnUntraced(function*({ directory, path, s, say, sessionFile }: Tour, finale: Finale) {
  yield* say("")
  yield* say(s.bold(`the sidecar: ${path.relative(directory, finale.sidecar)} (append-only, one JSON record per line)`))
  for (const line of finale.sidecarLines) {
    // Heads are short and are the point; receipts are shown cut.
    const type = String((JSON.parse(line) as { readonly type?: unknown }).type)
    yield* say(`  ${s.cyan(type.padEnd(16))} ${rawLine(line, type === "rarebit_head" ? 400 : 140)}`)
  }
  yield* say("")
  yield* say(s.bold("current"))
  for (const line of formatCurrent(s, sessionFile, finale.current)) yield* say(`  ${line}`)
  yield* say("")
  yield* say(s.bold(`history (${finale.history.records.length} receipts; heads are not listed)`))
  for (const entry of finale.history.records) yield* say(`  ${formatHistoryRecord(s, entry)}`)
  yield* say("")
  yield* say(s.bold("jobs"))
  for (const line of formatJobs(s, path, finale.audit, yield* Clock.currentTimeMillis)) yield* say(`  ${line}`)
  yield* say("")
  yield* say(s.bold("verify"))
  for (const line of formatAudit(s, path, finale.audit)) yield* say(`  ${line}`)
  if (finale.explore !== null) {
    yield* say("")
    yield* say(s.bold("explore what was kept"))
    for (const command of finale.explore) yield* say(`  ${command}`)
  }
})

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

    const run = Effect.gen(function*() {
      const sessionRoot = path.join(directory, "sessions")
      const rarebitRoot = path.join(directory, "rarebit")
      const session = sampleSession()
      const sessionFile = path.join(sessionRoot, "demo", `2026-01-01T10-00-00-000Z_${session.id}.jsonl`)
      yield* fs.makeDirectory(path.dirname(sessionFile), { recursive: true })
      yield* fs.writeFileString(sessionFile, session.content)
      const jobs = sampleJobIds(session)

      yield* say(s.bold("rarebit-store demo: two workers, one job, one fenced settle"))
      yield* say(
        `  ${s.dim("temp dir")}     ${directory}${keep ? "" : s.dim(" (removed at the end; --keep keeps it)")}`
      )
      yield* say(
        `  ${s.dim("session")}      ${path.relative(directory, sessionFile)} (${session.entries.length} entries)`
      )
      yield* say(
        `  ${s.dim("summary job")}  ${short(jobs.summary, 16)}   ${s.dim("title job")} ${short(jobs.title, 16)}`
      )
      yield* say("")

      const steps: Array<DemoStep> = []
      const claimPath = path.join(rarebitRoot, "jobs-v4", `${jobs.summary}.json`)
      const start = yield* Clock.currentTimeMillis
      const actorStyle = (actor: DemoStep["actor"]) => (actor === "A" ? s.yellow : actor === "B" ? s.cyan : s.dim)
      const tour: Tour = {
        s,
        say,
        path,
        directory,
        session,
        sessionFile,
        jobs,
        claimPath,
        readClaimLine: fs.readFileString(claimPath).pipe(Effect.map((text) => shortenToken(text.trimEnd()))),
        step: (actor, event) =>
          Effect.gen(function*() {
            const atMs = (yield* Clock.currentTimeMillis) - start
            steps.push({ atMs, actor, event })
            yield* say(`  ${s.dim(`+${atMs}ms`.padEnd(8))} ${actorStyle(actor)(actor)}  ${event}`)
          }),
        showFile: (label, lines) =>
          Effect.gen(function*() {
            yield* say(`  ${s.dim("".padEnd(8))}    ${s.dim(label)}`)
            for (const line of lines) yield* say(`  ${s.dim("".padEnd(8))}      ${rawLine(line, 400)}`)
          })
      }

      return yield* Effect.gen(function*() {
        const store = yield* RarebitStore
        const { claimSettled, claimWhileHeld } = yield* twoWorkers(tour)

        const titleOutcome = yield* store.withJob(
          { jobId: jobs.title, sessionFile },
          () =>
            Effect.map(
              Clock.currentTimeMillis,
              (now) =>
                titleReceipt(session, { title: "Herb repotting checklist", observedAt: new Date(now).toISOString() })
            )
        )
        yield* tour.step(
          "-",
          titleOutcome._tag === "Settled" && titleOutcome.receipt.type === "rarebit_title"
            ? `settled a title receipt for a second job ("${titleOutcome.receipt.title}"); ` +
              "the summary head is repeated after it"
            : `title job was ${titleOutcome._tag}`
        )

        const current = yield* store.readCurrent({ sessionFile })
        const history = yield* store.readHistory({ sessionFile })
        const audit = yield* auditStore({ rarebitRoot }).pipe(Effect.provide(ProcessOwner.layer))
        const sidecar = yield* store.materializationPath(sessionFile)
        const sidecarLines = (yield* fs.readFileString(sidecar)).split("\n").filter((line) => line !== "")
        const files: DemoFiles = { claimPath, claimWhileHeld, claimSettled, sidecar, sidecarLines }
        const explore = keep ? exploreCommands(rarebitRoot, sessionRoot, sessionFile) : null

        if (json) {
          return yield* printJson({
            directory: keep ? directory : null,
            sessionFile,
            steps,
            files,
            current,
            history,
            jobs: audit.claims,
            audit,
            explore
          })
        }
        yield* printFinale(tour, { sidecar, sidecarLines, current, history, audit, explore })
      }).pipe(Effect.provide(storeLayer({ rarebitRoot, sessionRoot, allowExternalSession: false })))
    })

    yield* run.pipe(Effect.ensuring(cleanup), Effect.mapError(toCliFailure))
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
