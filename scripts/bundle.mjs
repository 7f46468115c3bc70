/**
 * The second half of `npm run build`, after `tsc`: bundles the two entries a
 * new process starts from, the `rarebit-store` executable and the Promise
 * API, so that starting one loads two files instead of ~350 modules, and
 * compiles neither again (a V8 code cache, see `src/bundle/BundleLoader.ts`).
 *
 * For each entry (`src/cli/main.ts`, `src/promise/index.ts`), rolldown
 * writes `<entry>.bundle.cjs` next to tsc's output: the entry, this
 * package's modules and the Effect modules they use, tree-shaken and
 * minified (names kept, so stack traces and `fn.name` read as in the
 * sources), as one CommonJS file that loads nothing but Node's built-in
 * modules. tsc's module for the entry (`dist/cli/main.js`,
 * `dist/promise/index.js`) is then replaced by a launcher: the loader's code
 * and one call that runs the bundle and, for the Promise API, re-exports its
 * functions by name. Types stay tsc's (`index.d.ts`).
 *
 * The bundles' source maps point into `src/` (shipped with the package), so
 * `node --enable-source-maps` and debuggers show this package's TypeScript.
 * The Effect code in a bundle is left unmapped: its sources are not in the
 * package, and a map may only name files that are.
 *
 * The other entries (`rarebit-store`, `rarebit-store/testing`) stay tsc's
 * modules importing the caller's `effect`, so a program and the store share
 * one copy of Effect (its `Context` keys and error classes).
 *
 * Usage: node scripts/bundle.mjs (`npm run build` runs it after tsc).
 */
import { decode, encode } from "@jridgewell/sourcemap-codec"
import { createHash } from "node:crypto"
import { rmSync, writeFileSync } from "node:fs"
import { builtinModules } from "node:module"
import { dirname, join, relative, resolve, sep } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { rolldown } from "rolldown"

/** @typedef {import("rolldown").Plugin} Plugin */
/** @typedef {import("rolldown").OutputChunk} OutputChunk */

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..")

/** What to bundle: the source entry, and tsc's module that the launcher replaces. */
const ENTRIES = [
  { source: "src/cli/main.ts", module: "dist/cli/main.js", executable: true },
  { source: "src/promise/index.ts", module: "dist/promise/index.js", executable: false }
]

/** How rolldown reads this package's sources. */
const sourceOptions = {
  platform: /** @type {const} */ ("node"),
  tsconfig: join(root, "tsconfig.build.json"),
  // The sources import each other as `./X.js`, the name tsc gives `X.ts`.
  resolve: { extensionAlias: { ".js": [".ts", ".js"] } },
  // Reading a property is taken to do nothing but read it, so a read whose
  // value is unused goes with it. Without this, what tree-shaking leaves of
  // Effect's unused schemas still reads `globalThis.File` when the bundle
  // loads, and Node then loads its `File` class for a process that never
  // uses one. Nothing in this package or the Effect code it uses reads a
  // property for a getter's side effect.
  treeshake: { propertyReadSideEffects: /** @type {const} */ (false) },
  /**
   * @param {import("rolldown").LogLevel} level
   * @param {import("rolldown").RolldownLog} log
   * @param {import("rolldown").LogOrStringHandler} handle
   */
  onLog(level, log, handle) {
    // Effect's modules carry `/*#__PURE__*/` annotations where rolldown cannot use them; nothing else may warn.
    if (log.code === "INVALID_ANNOTATION") return
    if (level === "warn") throw new Error(log.message)
    handle(level, log)
  }
}

/**
 * Effect's CLI module builds an `Intl.Segmenter` when it loads (7–11 ms here:
 * ICU's grapheme data), to measure text for help pages and tables. In the
 * bundle it is built the first time something is measured. The build fails
 * if the declaration is no longer there as expected.
 *
 * @type {Plugin}
 */
const lazySegmenter = {
  name: "rarebit-store:lazy-segmenter",
  transform(code, id) {
    if (!id.replaceAll("\\", "/").endsWith("/effect/dist/cli/CliOutput.js")) return null
    const eager =
      /const graphemeSegmenter = \/\*#__PURE__\*\/new Intl\.Segmenter\(undefined, \{\s*granularity: "grapheme"\s*\}\);/
    const found = code.match(eager)
    if (found === null) throw new Error(`${id}: the Intl.Segmenter declaration changed; update scripts/bundle.mjs`)
    const lazy = "let graphemeSegmenterInstance; const graphemeSegmenter = { segment: (text) => " +
      "(graphemeSegmenterInstance ??= new Intl.Segmenter(undefined, { granularity: \"grapheme\" })).segment(text) };"
    // As many lines as it replaces, so nothing after it moves (`map: null` says so).
    return { code: code.replace(eager, lazy + "\n".repeat(found[0].split("\n").length - 1)), map: null }
  }
}

const builtins = new Set(builtinModules.flatMap((name) => [name, `node:${name}`]))

/**
 * The bundle's map with only the mappings into `src/` and the names they
 * use, without the sources' text (the package ships them).
 *
 * @param {import("rolldown").SourceMap} map
 * @param {string} mapFile
 */
const mapIntoSources = (map, mapFile) => {
  /** @type {Map<number, number>} */
  const kept = new Map()
  /** @type {Array<string>} */
  const sources = []
  map.sources.forEach((source, index) => {
    if (relative(root, resolve(dirname(mapFile), source)).startsWith(`src${sep}`)) {
      kept.set(index, sources.length)
      sources.push(source)
    }
  })
  /** The names the kept mappings use, in their new order. */
  /** @type {Map<string, number>} */
  const nameIndex = new Map()
  /** @type {Array<Array<import("@jridgewell/sourcemap-codec").SourceMapSegment>>} */
  const lines = []
  for (const segments of decode(map.mappings)) {
    /** @type {Array<import("@jridgewell/sourcemap-codec").SourceMapSegment>} */
    const line = []
    for (const segment of segments) {
      if (segment.length === 1) {
        line.push(segment)
        continue
      }
      const source = kept.get(segment[1])
      if (source === undefined) continue
      /** @type {import("@jridgewell/sourcemap-codec").SourceMapSegment} */
      const moved = [...segment]
      moved[1] = source
      if (moved.length === 5) {
        const name = map.names[moved[4]] ?? ""
        if (!nameIndex.has(name)) nameIndex.set(name, nameIndex.size)
        moved[4] = /** @type {number} */ (nameIndex.get(name))
      }
      line.push(moved)
    }
    lines.push(line)
  }
  return { version: 3, file: map.file, sources, names: [...nameIndex.keys()], mappings: encode(lines) }
}

/**
 * The executable's commands, from tsc's build of its command tree: each has
 * a code cache of its own (see `commandVariant`).
 *
 * @returns {Promise<Array<string>>}
 */
const commandNames = async () => {
  const { cli } = await import(pathToFileURL(join(root, "dist/cli/Cli.js")).href)
  /** @type {Array<unknown>} */
  const names = cli.subcommands.flatMap((/** @type {any} */ group) =>
    group.commands.map((/** @type {any} */ command) => command.name)
  )
  if (names.length === 0 || !names.every((name) => typeof name === "string" && name !== "")) {
    throw new Error(`cannot read the command names from dist/cli/Cli.js: ${JSON.stringify(names)}`)
  }
  return /** @type {Array<string>} */ (names)
}

/**
 * Bundles `source` into one CommonJS file and writes it with its map.
 *
 * @param {string} source
 * @param {string} bundleFile
 * @returns {Promise<{ readonly exports: ReadonlyArray<string>; readonly hash: string }>}
 */
const writeBundle = async (source, bundleFile) => {
  const build = await rolldown({ ...sourceOptions, input: join(root, source), plugins: [lazySegmenter] })
  const { output } = await build.generate({
    format: "cjs",
    strict: true,
    sourcemap: true,
    sourcemapExcludeSources: true,
    keepNames: true,
    // ASCII only (other characters escaped), so the loader can read the file as Latin-1.
    minify: { compress: true, mangle: true, codegen: { removeWhitespace: true, asciiOnly: true } },
    file: bundleFile
  })
  await build.close()
  const chunks = /** @type {Array<OutputChunk>} */ (output.filter((item) => item.type === "chunk"))
  if (chunks.length !== 1) throw new Error(`${source}: expected one chunk, got ${chunks.length}`)
  const chunk = /** @type {OutputChunk} */ (chunks[0])
  const outside = chunk.imports.filter((name) => !builtins.has(name))
  if (outside.length > 0 || chunk.dynamicImports.length > 0) {
    throw new Error(`${source}: a bundle may load Node's built-in modules only, statically; it loads ${outside}`)
  }
  if (chunk.map === null) throw new Error(`${source}: no source map`)
  // The loader wraps the bundle in a function, where a `#!` line would not
  // parse: made a comment, so no position moves.
  const code = chunk.code.startsWith("#!") ? `//${chunk.code.slice(2)}` : chunk.code
  if (!/^\p{ASCII}*$/u.test(code)) throw new Error(`${source}: the bundle is not ASCII only`)
  writeFileSync(bundleFile, code)
  writeFileSync(`${bundleFile}.map`, JSON.stringify(mapIntoSources(chunk.map, `${bundleFile}.map`)))
  return { exports: chunk.exports, hash: createHash("sha256").update(code).digest("hex").slice(0, 16) }
}

/**
 * The launcher: the loader's code (from `src/bundle/BundleLoader.ts`, one
 * module instead of two to load) and the call that runs the bundle.
 *
 * @param {string} text the launcher's own source, importing the loader
 * @param {string} banner its first lines
 */
const launcherCode = async (text, banner) => {
  const id = "\0rarebit-store:launcher"
  const build = await rolldown({
    ...sourceOptions,
    input: id,
    plugins: [{
      name: "rarebit-store:launcher",
      resolveId: (name) => (name === id ? id : null),
      load: (name) => (name === id ? text : null)
    }]
  })
  const { output } = await build.generate({ format: "esm", banner })
  await build.close()
  return output[0].code
}

/** @param {{ readonly source: string; readonly module: string; readonly executable: boolean }} entry */
const bundleEntry = async ({ source, module, executable }) => {
  const bundleName = module.replace(/\.js$/, ".bundle.cjs")
  const { exports, hash } = await writeBundle(source, join(root, bundleName))
  const loader = JSON.stringify(join(root, "src/bundle/BundleLoader.ts"))
  const location = `new URL(${JSON.stringify(`./${bundleName.split("/").at(-1)}`)}, import.meta.url)`
  const banner = [
    ...(executable ? ["#!/usr/bin/env node"] : []),
    `// Built by scripts/bundle.mjs: runs ${source}, bundled in ${bundleName.split("/").at(-1)}, with a V8 code`,
    "// cache. The loader's code below is src/bundle/BundleLoader.ts, which says how it works."
  ].join("\n")
  const text = executable
    ? `import { commandVariant, loadBundle } from ${loader}\n` +
      `const commands = ${JSON.stringify(await commandNames())}\n` +
      `loadBundle(${location}, { build: "${hash}", variant: commandVariant(process.argv.slice(2), commands) })\n`
    : `import { loadBundle } from ${loader}\n` +
      `export const {\n  ${[...exports].sort().join(",\n  ")}\n} = loadBundle(${location}, { build: "${hash}" })\n`
  writeFileSync(join(root, module), await launcherCode(text, banner))
  // tsc's map described the module the launcher replaced.
  rmSync(join(root, `${module}.map`), { force: true })
}

// Silent when it succeeds, like tsc before it.
for (const entry of ENTRIES) await bundleEntry(entry)
