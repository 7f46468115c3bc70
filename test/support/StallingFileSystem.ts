/**
 * A file system whose `cut`-th call, once armed, never returns: the way to
 * interrupt an operation at each of its file-system calls in turn. Every
 * call of the file system and of the files it opens counts, `stat` getters
 * included.
 */
import { Deferred, Effect, type FileSystem } from "effect"
import { NonBlockingOpenTypeId } from "../../src/io/NonBlockingOpen.js"

export const makeStallingFileSystem = (inner: FileSystem.FileSystem, cut: number) =>
  Effect.gen(function*() {
    let armed = false
    let calls = 0
    /** Completes when the stalled call is reached. */
    const reached = yield* Deferred.make<void>()
    const stall = <A>(call: () => A): A | Effect.Effect<never> =>
      // Interruptible even inside an uninterruptible acquire, like a slow system call that can be abandoned.
      armed && ++calls === cut
        ? Effect.andThen(Deferred.succeed(reached, undefined), Effect.interruptible(Effect.never))
        : call()
    const counted = <T extends object>(target: T): T =>
      new Proxy(target, {
        get: (object, key) => {
          const value = Reflect.get(object, key, object)
          if (Effect.isEffect(value)) return stall(() => value)
          if (typeof value !== "function") return value
          return (...args: Array<unknown>) =>
            stall(() => {
              const result = value.apply(object, args)
              // Files opened either way (`open`, or the store's non-blocking open) count their calls too.
              return key === "open" || key === NonBlockingOpenTypeId
                ? Effect.map(result, (file: FileSystem.File) => counted(file))
                : result
            })
        }
      })
    return {
      fs: counted(inner),
      reached,
      arm: () => {
        armed = true
      },
      disarm: () => {
        armed = false
      }
    }
  })
