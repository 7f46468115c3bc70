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
 * Settles once the event loop has turned: every call waits for one turn
 * before it runs (`setImmediate`, ~4 µs; callbacks run in the order they
 * were set, so calls still start in the order they were made).
 *
 * A call whose I/O is all synchronous (the direct file system's) would
 * otherwise settle in a microtask, so a caller awaiting one call after
 * another, as a dashboard polling its Sessions does, held its loop until
 * it stopped: a sweep over 1,000 idle Sessions ran 160 ms with no timer,
 * socket or V8 task in between. The reference's calls wait on the thread
 * pool, so its callers' loops turn at every call. A turn only after 2 ms
 * without one was tried first: V8's collections then fell in the middle of
 * reads (a mark-compact promoting a read's objects at once), and 8 of 16
 * processes polling 1,000 Sessions with no cached state grew a 32 MiB young
 * generation; with a turn before every call, none of 16 did (see
 * BENCHMARKS.md).
 */
const afterTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

/** Runs an effect and settles with its value or the reference's error. @internal */
export const runPromise = async <A, E>(program: Effect.Effect<A, E, Services>): Promise<A> => {
  await afterTurn()
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
