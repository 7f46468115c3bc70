/**
 * The two implementations under comparison, behind one shape: our plain
 * Promise API and the reference package's store functions (imported by file
 * path, since the package exports no `./store` subpath).
 *
 * "Ours" is the Promise API as a user's `import("rarebit-store/promise")`
 * gets it: resolved by the package's own name through its `exports`, that is
 * the built `dist/promise/index.js` (the launcher of the bundle
 * `scripts/bundle.mjs` writes), not the benchmark's own compilation of
 * `src/` under `dist-bench/`. The two differ in what matters here: the
 * bundle is one file with the Effect code it uses, the modules are ~350
 * files, whose loading alone costs a process some 40 MiB more resident
 * memory. `npm run bench` builds `dist/` first.
 *
 * @since 0.1.0
 */
import { existsSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import type * as PromiseModule from "../src/promise/index.js"

/** The store functions both implementations export. */
export interface StoreApi {
  readonly rarebitMaterializationPath: (sessionFile: unknown, options?: Record<string, unknown>) => string
  readonly readRarebitCurrent: (options: Record<string, unknown>) => Promise<any>
  readonly readRarebitHistory: (options: Record<string, unknown>) => Promise<any>
  readonly reserveRarebitJob: (options: Record<string, unknown>) => Promise<any>
  readonly settleRarebitJob: (reservation: unknown, record: unknown) => Promise<any>
  readonly releaseRarebitJob: (reservation: unknown) => Promise<void>
}

export type Side = "ours" | "reference"

/** The package root: the nearest directory above this file with a package.json. */
export const projectRoot = (): string => {
  let directory = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(directory, "package.json"))) {
    const parent = dirname(directory)
    if (parent === directory) throw new Error("package.json not found above the benchmark")
    directory = parent
  }
  return directory
}

const importFile = (path: string): Promise<any> => import(pathToFileURL(path).href)

type PromiseApi = typeof PromiseModule

/**
 * The specifier a user imports. Held in a variable so that type-checking the
 * benchmark does not need a built `dist/` (the types come from `src/`).
 */
const PROMISE_ENTRY: string = "rarebit-store/promise"

/** Our whole Promise API as users get it: the package's built entry, resolved by name. */
export const loadOurPromiseApi = async (): Promise<PromiseApi> => (await import(PROMISE_ENTRY)) as PromiseApi

/**
 * Our Promise API from the benchmark's own compilation of `src/` (tsc's
 * modules, importing `effect` like the package's Effect entry does). Only for
 * row 6, which sets it against the Effect API on the same compiled store
 * code, so that what differs is the API layer alone.
 */
export const loadOurPromiseModules = async (): Promise<PromiseApi> => import("../src/promise/index.js")

/** Loads one implementation's store API (ours: the built package entry, see above). */
export const loadStore = async (side: Side): Promise<StoreApi> =>
  side === "ours"
    ? (await loadOurPromiseApi()) as unknown as StoreApi
    : await importFile(join(projectRoot(), "node_modules/@hypercarrier/rarebit/src/rarebit-store.mjs"))

/** The reference's Session reader, for computing native observations once. */
export const loadReferenceSession = (): Promise<{
  readonly readRarebitSession: (reference: string, options: { sessionRoot: string }) => Promise<any>
}> => importFile(join(projectRoot(), "node_modules/@hypercarrier/rarebit/src/rarebit-session.mjs"))
