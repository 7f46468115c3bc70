/**
 * A file system that counts what is read through the files it opens, per
 * path, and how many files are open at once, the same way in both worlds.
 * Files opened either way (`open`, or the store's non-blocking open) count,
 * and so does a synchronous small-file read (`SmallRegularRead`), as one
 * read of the bytes it returned, its file open only while it runs.
 *
 * With `shuffle`, every read of an open file first yields to the other
 * fibers a varying number of times (from a fixed seed), so that reads made
 * at once finish in another order than they began. With `oneAtATime`, an
 * open waits until no other file is open: the reads are sequential. Either
 * hides the synchronous small-file read, which cannot yield or wait, so
 * every file is opened and read through `Effect`s.
 */
import { Effect, type FileSystem, Semaphore } from "effect"
import { NonBlockingOpenTypeId, type SmallRegularRead, SmallRegularReadTypeId } from "../../src/io/NonBlockingOpen.js"

export interface ReadsOf {
  /** Reads of files opened at the path. */
  readonly reads: number
  /** Bytes those reads returned. */
  readonly bytes: number
}

export const makeCountingFileSystem = (
  inner: FileSystem.FileSystem,
  options: { readonly shuffle?: boolean; readonly oneAtATime?: boolean } = {}
) => {
  const onlyOne = Semaphore.makeUnsafe(1)
  const reads = new Map<string, { reads: number; bytes: number }>()
  let open = 0
  let mostOpen = 0
  let seed = 12345
  const yields = () => {
    // A small linear congruential generator: the same order in every run.
    seed = (seed * 1103515245 + 12345) % 2147483648
    return seed % 7
  }
  const delayed = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
    if (options.shuffle !== true) return effect
    let chain: Effect.Effect<void> = Effect.void
    for (let turn = yields(); turn > 0; turn--) chain = Effect.andThen(chain, Effect.yieldNow)
    return Effect.andThen(chain, effect)
  }
  const countedFile = (path: string, file: FileSystem.File): FileSystem.File =>
    new Proxy(file, {
      get: (object, key) => {
        const value = Reflect.get(object, key, object)
        if (key !== "readAlloc" && key !== "read") return typeof value === "function" ? value.bind(object) : value
        return (...args: Array<unknown>) =>
          delayed(Effect.map(value.apply(object, args), (result: unknown) => {
            const seen = reads.get(path) ?? { reads: 0, bytes: 0 }
            seen.reads++
            // `readAlloc` returns an optional chunk, `read` the count of bytes it filled.
            seen.bytes += typeof result === "bigint"
              ? Number(result)
              : (result as { readonly _tag: string; readonly value?: Uint8Array })._tag === "Some"
              ? (result as { readonly value: Uint8Array }).value.length
              : 0
            reads.set(path, seen)
            return result
          }))
      }
    })
  const opened = (path: string, opening: Effect.Effect<FileSystem.File, unknown, unknown>) =>
    Effect.flatMap(
      options.oneAtATime === true ? Effect.andThen(onlyOne.takeScoped(1), opening) : opening,
      (file) =>
        Effect.as(
          Effect.acquireRelease(
            Effect.sync(() => {
              open++
              mostOpen = Math.max(mostOpen, open)
            }),
            () =>
              Effect.sync(() => {
                open--
              })
          ),
          countedFile(path, file)
        )
    )
  const countedSmallRead = (read: SmallRegularRead): SmallRegularRead => (path, options) => {
    open++
    mostOpen = Math.max(mostOpen, open)
    try {
      const result = read(path, options)
      if (result !== undefined) {
        const seen = reads.get(path) ?? { reads: 0, bytes: 0 }
        seen.reads++
        seen.bytes += result.bytes.length + (result.head?.length ?? 0)
        reads.set(path, seen)
      }
      return result
    } finally {
      open--
    }
  }
  const fs = new Proxy(inner, {
    get: (object, key) => {
      const value = Reflect.get(object, key, object)
      if (key === SmallRegularReadTypeId) {
        return value === undefined || options.shuffle === true || options.oneAtATime === true
          ? undefined
          : countedSmallRead(value)
      }
      if (key !== "open" && key !== NonBlockingOpenTypeId) return value
      return (path: string, ...rest: Array<unknown>) => opened(path, value.apply(object, [path, ...rest]))
    }
  }) as FileSystem.FileSystem
  return {
    fs,
    readsOf: (path: string): ReadsOf => reads.get(path) ?? { reads: 0, bytes: 0 },
    /** The most files open at once so far. */
    mostOpen: () => mostOpen,
    /** Files open now. */
    openNow: () => open
  }
}
