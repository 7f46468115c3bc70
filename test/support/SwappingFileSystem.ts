/**
 * A file system that, once armed, runs a swap (typically a rename over the
 * path about to be opened) just before its next open: the way to put a new
 * file at a path between a cache's `stat` of it and its open. Both ways of
 * opening count, `open` and the store's non-blocking open.
 */
import { Effect, type FileSystem } from "effect"
import { NonBlockingOpenTypeId } from "../../src/io/NonBlockingOpen.js"

export const makeSwappingFileSystem = <E, R>(inner: FileSystem.FileSystem, swap: Effect.Effect<void, E, R>) => {
  let armed = false
  const fs = new Proxy(inner, {
    get: (target, key) => {
      const value = Reflect.get(target, key, target)
      if (key !== "open" && key !== NonBlockingOpenTypeId) return value
      return (...args: Array<unknown>) =>
        Effect.andThen(
          armed ? Effect.andThen(Effect.sync(() => armed = false), swap) : Effect.void,
          value.apply(target, args)
        )
    }
  })
  return {
    fs,
    arm: () => {
      armed = true
    },
    /** Whether the armed swap is still to run. */
    armed: () => armed
  }
}
