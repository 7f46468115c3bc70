/**
 * A newcomer's project in a temporary directory: a `package.json` that asks
 * for rarebit-store (from a packed tarball or a git URL), its Effect peers
 * and the tools a TypeScript user has, installed by npm offline from the
 * local cache.
 *
 * Offline works because the project starts from a copy of this repository's
 * lockfile: npm keeps every locked package that satisfies the project's
 * ranges (their tarballs are in the cache after `npm ci`), prunes the rest,
 * and needs no registry metadata. Versions come from our own
 * devDependencies, so the project gets exactly what we test with.
 */
import { execFile } from "node:child_process"
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
    execFile(command, args, { cwd, env, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) =>
      resolve({ stdout, stderr, code: error === null ? 0 : typeof error.code === "number" ? error.code : 1 }))
  )

/** `run`, failing with everything the command printed when it does not exit 0. */
export const runOk = async (command: string, args: ReadonlyArray<string>, cwd: string): Promise<Ran> => {
  const ran = await run(command, args, cwd)
  if (ran.code !== 0) {
    throw new Error(`${command} ${args.join(" ")} exited ${ran.code}\n--- stdout\n${ran.stdout}\n--- stderr\n${ran.stderr}`)
  }
  return ran
}

const ourPackage = async () => JSON.parse(await readFile(join(REPO, "package.json"), "utf8"))

/**
 * Creates and installs the project: `rarebit-store` from `spec`, the Effect
 * peers, and typescript, vitest, @effect/vitest and @types/node as dev tools.
 */
export const installFreshProject = async (directory: string, spec: string): Promise<Ran> => {
  const ours = await ourPackage()
  const version = (name: string): string => ours.devDependencies[name]
  await mkdir(directory, { recursive: true })
  await writeFile(
    join(directory, "package.json"),
    JSON.stringify(
      {
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
      },
      null,
      2
    )
  )
  await cp(join(REPO, "package-lock.json"), join(directory, "package-lock.json"))
  return runOk("npm", ["install", "--offline", "--no-audit", "--no-fund"], directory)
}

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
