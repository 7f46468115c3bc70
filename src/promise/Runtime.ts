/**
 * The one runtime behind the Promise API, built on first use over the live
 * Node layer, and the translation of Effect outcomes into settled Promises
 * (or thrown errors, for the synchronous functions).
 *
 * @since 0.1.0
 */
import { Cause, Effect, Exit, ManagedRuntime } from "effect"
import type { FileSystem } from "effect/FileSystem"
import type { Path } from "effect/Path"
import * as NodeStore from "../platform/NodeStore.js"
import { RarebitStore } from "../store/RarebitStore.js"
import { toPlainError } from "./PlainErrors.js"

type Services = RarebitStore | FileSystem | Path

let runtime: ManagedRuntime.ManagedRuntime<Services, never> | undefined

const services = () =>
  (runtime ??= ManagedRuntime.make(NodeStore.layer()))

const failureOf = (cause: Cause.Cause<unknown>): unknown => {
  const failure = cause.reasons.find(Cause.isFailReason)
  if (failure !== undefined) return toPlainError(failure.error)
  const defect = cause.reasons.find(Cause.isDieReason)
  return defect !== undefined ? defect.defect : Cause.squash(cause)
}

/** Runs an effect and settles with its value or the reference's error. @internal */
export const runPromise = async <A, E>(program: Effect.Effect<A, E, Services>): Promise<A> => {
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
