/**
 * The two implementations under comparison, behind one shape: our plain
 * Promise API and the reference package's store functions (imported by file
 * path, since the package exports no `./store` subpath).
 *
 * @since 0.1.0
 */
import { existsSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

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

/** Loads one implementation's store API. */
export const loadStore = async (side: Side): Promise<StoreApi> =>
  side === "ours"
    ? (await import("../src/promise/index.js")) as unknown as StoreApi
    : await importFile(join(projectRoot(), "node_modules/@hypercarrier/rarebit/src/rarebit-store.mjs"))

/** The reference's Session reader, for computing native observations once. */
export const loadReferenceSession = (): Promise<{
  readonly readRarebitSession: (reference: string, options: { sessionRoot: string }) => Promise<any>
}> => importFile(join(projectRoot(), "node_modules/@hypercarrier/rarebit/src/rarebit-session.mjs"))
