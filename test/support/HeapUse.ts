/**
 * Full collections on demand, for the tests that bound what the store keeps
 * on the heap: `--expose-gc` set at run time, and `gc` taken from a fresh
 * context, where V8 installs it (the test's own global was made before).
 */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"

setFlagsFromString("--expose-gc")

/** Runs a full collection. */
export const collectGarbage = runInNewContext("gc") as () => void

/**
 * The heap in use after two full collections: the second frees what only
 * the first one's finalizers and weak references still held.
 */
export const heapUsedAfterGc = (): number => {
  collectGarbage()
  collectGarbage()
  return process.memoryUsage().heapUsed
}
