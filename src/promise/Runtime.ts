/**
 * The one runtime behind the Promise API, built on first use over the live
 * Node layer, and the translation of Effect outcomes into settled Promises
 * (or thrown errors, for the synchronous functions).
 *
 * @since 0.1.0
 */
import { Cause, type Effect, Exit, ManagedRuntime, Pull, Scope, Stream } from "effect"
import type { FileSystem } from "effect/FileSystem"
import type { Path } from "effect/Path"
import * as NodeStore from "../platform/NodeStore.js"
import { RarebitStore } from "../store/RarebitStore.js"
import { cacheBudgetFromEnvironment } from "./CacheBudgetEnvironment.js"
import { toPlainError } from "./PlainErrors.js"

type Services = RarebitStore | FileSystem | Path

let runtime: ManagedRuntime.ManagedRuntime<Services, never> | undefined

// The environment is read when the store is first used: a budget it refuses
// fails that call, and every later one until the runtime can be built.
const services =
  () => (runtime ??= ManagedRuntime.make(NodeStore.layer({ cacheBudget: cacheBudgetFromEnvironment(process.env) })))

const failureOf = (cause: Cause.Cause<unknown>): unknown => {
  const failure = cause.reasons.find(Cause.isFailReason)
  if (failure !== undefined) return toPlainError(failure.error)
  const defect = cause.reasons.find(Cause.isDieReason)
  return defect !== undefined ? defect.defect : Cause.squash(cause)
}

/**
 * How long calls may follow one another without the caller's event loop
 * turning. A call whose I/O is all synchronous (the direct file system's)
 * settles in a microtask, so a caller awaiting one call after another, as a
 * dashboard polling its Sessions does, would otherwise hold the loop until
 * it stops: no timer, socket or V8 task in between (a sweep over 1,000 idle
 * Sessions held it for its whole 160 ms). The reference's calls wait on the
 * thread pool, so its callers' loops turn at every call.
 */
export const EVENT_LOOP_SLICE_MS = 2

/** When the loop last turned, as far as this module has seen (`performance.now()`). */
let turnedAt = Number.NEGATIVE_INFINITY
/** Whether a callback waits to note the next turn. */
let watching = false

const noteTurn = () => {
  watching = false
  turnedAt = performance.now()
}

const afterTurn = () =>
  new Promise<void>((resolve) =>
    setImmediate(() => {
      turnedAt = performance.now()
      resolve()
    })
  )

/**
 * `undefined` while the loop turned less than `EVENT_LOOP_SLICE_MS` ago (a
 * callback then notes the next turn, unreferenced, so it never keeps a
 * process alive); otherwise a promise that settles once it has turned.
 * `setImmediate` callbacks run in the order they were set, so calls made
 * one after another still start in that order.
 */
const turnIfDue = (): Promise<void> | undefined => {
  if (performance.now() - turnedAt >= EVENT_LOOP_SLICE_MS) return afterTurn()
  if (!watching) {
    watching = true
    setImmediate(noteTurn).unref()
  }
  return undefined
}

/** Runs an effect and settles with its value or the reference's error. @internal */
export const runPromise = async <A, E>(program: Effect.Effect<A, E, Services>): Promise<A> => {
  const turn = turnIfDue()
  if (turn !== undefined) await turn
  const exit = await services().runPromiseExit(program)
  if (Exit.isSuccess(exit)) return exit.value
  throw failureOf(exit.cause)
}

/** Runs a synchronous effect and returns its value or throws the reference's error. @internal */
export const runSync = <A, E>(program: Effect.Effect<A, E, Services>): A => {
  const exit = services().runSyncExit(program)
  if (Exit.isSuccess(exit)) return exit.value
  throw failureOf(exit.cause)
}

/** Runs one store operation. @internal */
export const runStore = <A, E>(program: (store: RarebitStore["Service"]) => Effect.Effect<A, E>): Promise<A> =>
  runPromise(RarebitStore.use(program))

/** Runs one synchronous store operation. @internal */
export const runStoreSync = <A, E>(program: (store: RarebitStore["Service"]) => Effect.Effect<A, E>): A =>
  runSync(RarebitStore.use(program))

/** An `AbortError` as Node's own APIs throw it when their signal aborts. */
const abortError = (signal: AbortSignal): Error =>
  Object.assign(new Error("The operation was aborted", { cause: signal.reason }), {
    name: "AbortError",
    code: "ABORT_ERR"
  })

/**
 * A stream as an async iterator, pulled one chunk at a time on the runtime.
 *
 * Nothing runs until the first `next()`. `return()` (a `break` out of
 * `for await`) ends it and closes everything the stream opened; so does
 * `signal`, after which `next()` rejects with an `AbortError`, as Node's
 * own iterators (`fs.promises.watch`, `events.on`) do. A failure of the
 * stream rejects `next()` with the reference's error for it, and ends the
 * iteration.
 *
 * @internal
 */
export const iterate = <A, E>(
  stream: Stream.Stream<A, E, Services>,
  signal: AbortSignal | undefined
): AsyncIterableIterator<A> => {
  const runtime = services()
  const scope = Scope.makeUnsafe()
  // Interrupts a pull in flight when the iteration ends from outside it.
  const stop = new AbortController()
  const buffer: Array<A> = []
  let pull: Effect.Effect<ReadonlyArray<A>, E | Cause.Done, never> | undefined
  let ended = false
  let closed: Promise<void> | undefined
  const close = () => {
    ended = true
    stop.abort()
    signal?.removeEventListener("abort", onAbort)
    return (closed ??= runtime.runPromise(Scope.close(scope, Exit.void)).then(() => undefined, () => undefined))
  }
  const onAbort = () => void close()
  signal?.addEventListener("abort", onAbort, { once: true })

  const step = async (): Promise<IteratorResult<A, undefined>> => {
    if (signal?.aborted) {
      await close()
      throw abortError(signal)
    }
    if (buffer.length > 0) return { done: false, value: buffer.shift()! }
    if (ended) return { done: true, value: undefined }
    pull ??= await runtime.runPromise(Scope.provide(Stream.toPull(stream), scope))
    const exit = await runtime.runPromiseExit(pull, { signal: stop.signal })
    if (Exit.isSuccess(exit)) {
      buffer.push(...exit.value)
      if (buffer.length > 0) return { done: false, value: buffer.shift()! }
      return step()
    }
    if (signal?.aborted) {
      await close()
      throw abortError(signal)
    }
    const stoppedFromOutside = ended
    await close()
    if (stoppedFromOutside || Pull.isDoneCause(exit.cause)) return { done: true, value: undefined }
    throw failureOf(exit.cause)
  }

  // Calls are answered in order, one pull at a time.
  let queue: Promise<unknown> = Promise.resolve()
  const iterator: AsyncIterableIterator<A> = {
    next: () => {
      const result = queue.then(step)
      queue = result.catch(() => undefined)
      return result
    },
    return: async () => {
      await close()
      return { done: true, value: undefined }
    },
    [Symbol.asyncIterator]() {
      return iterator
    }
  }
  return iterator
}
