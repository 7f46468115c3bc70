/**
 * A newcomer's project in a temporary directory: a `package.json` that asks
 * for rarebit-store (from a packed tarball or a git URL), its Effect peers
 * and the tools a TypeScript user has, installed by `npm ci` offline from
 * the local cache.
 *
 * Offline needs a lockfile: without one npm asks the registry for full
 * package metadata, which `npm ci` of this repository does not leave in the
 * cache. The project's lockfile is cut from ours: the project's root, the
 * rarebit-store entry, and every package its dependencies reach, at the
 * versions we lock (so it gets exactly what we test with). Their tarballs
 * are in the cache after our own `npm ci`.
 */
import { execFile } from "node:child_process"
import { createHash } from "node:crypto"
import { cp, mkdir, readdir, readFile, writeFile } from "node:fs/promises"
import { join } from "node:path"

export const REPO = new URL("../../", import.meta.url).pathname.replace(/\/$/, "")

export interface Ran {
  readonly stdout: string
  readonly stderr: string
  readonly code: number
}

/**
 * The environment of a child npm or node: ours minus the `npm_*` variables
 * `npm test` sets, which would make a nested npm act on this repository.
 */
export const cleanEnv = (): NodeJS.ProcessEnv =>
  Object.fromEntries(
    Object.entries(process.env).filter(([key]) =>
      !key.startsWith("npm_") || key === "npm_config_cache" || key === "npm_config_userconfig"
    )
  )

/** Runs a command to completion; never rejects, so a test can show what failed. */
export const run = (command: string, args: ReadonlyArray<string>, cwd: string, env = cleanEnv()): Promise<Ran> =>
  new Promise((resolve) =>
    execFile(
      command,
      args,
      { cwd, env, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) =>
        resolve({ stdout, stderr, code: error === null ? 0 : typeof error.code === "number" ? error.code : 1 })
    )
  )

/** `run`, failing with everything the command printed when it does not exit 0. */
export const runOk = async (command: string, args: ReadonlyArray<string>, cwd: string): Promise<Ran> => {
  const ran = await run(command, args, cwd)
  if (ran.code !== 0) {
    throw new Error(
      `${command} ${args.join(" ")} exited ${ran.code}\n--- stdout\n${ran.stdout}\n--- stderr\n${ran.stderr}`
    )
  }
  return ran
}

const ourPackage = async () => JSON.parse(await readFile(join(REPO, "package.json"), "utf8"))

type LockEntry = Record<string, any>

/** Where a package at `from` finds `name`, Node's way: its own node_modules, then each enclosing one. */
const locate = (packages: Record<string, LockEntry>, from: string, name: string): string | undefined => {
  for (let location = from;;) {
    const candidate = location === "" ? `node_modules/${name}` : `${location}/node_modules/${name}`
    if (packages[candidate] !== undefined) return candidate
    if (location === "") return undefined
    const parent = location.lastIndexOf("/node_modules/")
    location = parent < 0 ? "" : location.slice(0, parent)
  }
}

/** The lockfile entries `entry` at `location` needs: dependencies, optional ones, and required peers. */
const requirements = (entry: LockEntry): Array<{ readonly name: string; readonly optional: boolean }> => [
  ...Object.keys(entry.dependencies ?? {}).map((name) => ({ name, optional: false })),
  ...Object.keys(entry.optionalDependencies ?? {}).map((name) => ({ name, optional: true })),
  ...Object.keys(entry.peerDependencies ?? {}).map((name) => ({
    name,
    optional: entry.peerDependenciesMeta?.[name]?.optional === true
  }))
]

/**
 * Creates and installs the project: `rarebit-store` from `spec` (`resolved`
 * is how a lockfile records it, `integrity` the tarball's when there is
 * one), the Effect peers, and typescript, vitest, @effect/vitest and
 * @types/node as dev tools.
 */
export const installFreshProject = async (
  directory: string,
  spec: string,
  locked: { readonly resolved: string; readonly integrity?: string | undefined }
): Promise<Ran> => {
  const ours = await ourPackage()
  const ourLock = JSON.parse(await readFile(join(REPO, "package-lock.json"), "utf8"))
  const version = (name: string): string => ours.devDependencies[name]
  const manifest = {
    name: "rarebit-newcomer",
    private: true,
    type: "module",
    dependencies: {
      "@effect/platform-node": version("@effect/platform-node"),
      effect: version("effect"),
      "rarebit-store": spec
    },
    devDependencies: {
      "@effect/vitest": version("@effect/vitest"),
      "@types/node": version("@types/node"),
      typescript: version("typescript"),
      vitest: version("vitest")
    }
  }
  const self: LockEntry = {
    version: ours.version,
    resolved: locked.resolved,
    ...(locked.integrity === undefined ? {} : { integrity: locked.integrity }),
    license: ours.license,
    bin: ours.bin,
    engines: ours.engines,
    peerDependencies: ours.peerDependencies
  }
  const packages: Record<string, LockEntry> = {
    "": { name: manifest.name, dependencies: manifest.dependencies, devDependencies: manifest.devDependencies },
    "node_modules/rarebit-store": self
  }
  const pending: Array<{ readonly from: string; readonly entry: LockEntry }> = [
    { from: "", entry: { dependencies: { ...manifest.dependencies, ...manifest.devDependencies } } },
    { from: "node_modules/rarebit-store", entry: self }
  ]
  while (pending.length > 0) {
    const { entry, from } = pending.pop()!
    for (const { name, optional } of requirements(entry)) {
      if (name === "rarebit-store") continue
      const location = locate(ourLock.packages, from, name)
      if (location === undefined) {
        if (optional) continue
        throw new Error(`${name}, needed by ${from || "the project"}, is not in our lockfile`)
      }
      if (packages[location] !== undefined) continue
      // Whether a package is dev-only differs here; npm ci installs what the lockfile lists either way.
      const { dev: _dev, devOptional: _devOptional, peer: _peer, ...copied } = ourLock.packages[location]
      packages[location] = copied
      pending.push({ from: location, entry: copied })
    }
  }
  await mkdir(directory, { recursive: true })
  await writeFile(join(directory, "package.json"), JSON.stringify(manifest, null, 2))
  await writeFile(
    join(directory, "package-lock.json"),
    JSON.stringify({ name: manifest.name, lockfileVersion: 3, requires: true, packages }, null, 2)
  )
  return runOk("npm", ["ci", "--offline", "--no-audit", "--no-fund"], directory)
}

/** How a lockfile records a tarball's content: `sha512-` and the base64 digest. */
export const integrityOf = async (tarball: string): Promise<string> =>
  `sha512-${createHash("sha512").update(await readFile(tarball)).digest("base64")}`

/** Copies the repository's `examples/` into the project's root, as a user copies them. */
export const copyExamples = (directory: string) => cp(join(REPO, "examples"), directory, { recursive: true })

/** Every installed copy of `name` under `node_modules`, nested ones included. */
export const installedCopies = async (directory: string, name: string): Promise<Array<string>> => {
  const found: Array<string> = []
  const walk = async (modules: string): Promise<void> => {
    const entries = await readdir(modules, { withFileTypes: true }).catch(() => [])
    for (const entry of entries) {
      if (!entry.isDirectory()) continue
      const child = join(modules, entry.name)
      if (entry.name.startsWith("@")) {
        await walk(child)
        continue
      }
      const manifest = await readFile(join(child, "package.json"), "utf8").then(JSON.parse, () => undefined)
      if (manifest?.name === name) found.push(child)
      await walk(join(child, "node_modules"))
    }
  }
  await walk(join(directory, "node_modules"))
  return found
}
