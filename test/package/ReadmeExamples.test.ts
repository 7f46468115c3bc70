/**
 * The README's first program is the files under `examples/`, word for word:
 * every example file appears in exactly one fenced block labelled with its
 * path (```ts examples/main.ts), and every such block is a file. The
 * packed-package test runs those files, so what a newcomer copies from the
 * README is what was tested. Relative links in the README must lead to
 * files of the repository, and the Layout's module map must name every
 * module under `src/` and nothing else.
 */
import { assert, describe, it } from "@effect/vitest"
import { existsSync } from "node:fs"
import { readdir, readFile } from "node:fs/promises"
import { join, relative } from "node:path"
import { REPO } from "./FreshProject.js"

const FENCED = /^```[\w-]+ (examples\/\S+)\n([\s\S]*?)^```$/gm

const filesUnder = async (directory: string): Promise<Array<string>> => {
  const found: Array<string> = []
  for (const entry of await readdir(directory, { withFileTypes: true })) {
    const child = join(directory, entry.name)
    if (entry.isDirectory()) found.push(...await filesUnder(child))
    else found.push(relative(REPO, child))
  }
  return found.sort()
}

describe("README", () => {
  it("shows every example file exactly as it is, and nothing else as one", async () => {
    const readme = await readFile(join(REPO, "README.md"), "utf8")
    const blocks = [...readme.matchAll(FENCED)].map(([, path, body]) => ({ path: path!, body: body! }))
    const examples = await filesUnder(join(REPO, "examples"))
    assert.isAtLeast(examples.length, 5)
    for (const example of examples) {
      const shown = blocks.filter((block) => block.path === example)
      assert.lengthOf(shown, 1, `README blocks labelled ${example}`)
      assert.strictEqual(shown[0]!.body, await readFile(join(REPO, example), "utf8"), `README block of ${example}`)
    }
    assert.deepStrictEqual(blocks.map((block) => block.path).filter((path) => !examples.includes(path)), [])
  })

  it("maps every module under src/ in its Layout, folder by folder, and no module that is not there", async () => {
    const readme = await readFile(join(REPO, "README.md"), "utf8")
    const layout = readme.slice(
      readme.indexOf("\n## Layout\n"),
      readme.indexOf("\n## ", readme.indexOf("\n## Layout\n") + 1)
    )
    const mapped: Array<string> = []
    for (const [, block] of layout.matchAll(/^```\n([\s\S]*?)^```$/gm)) {
      // A block maps modules once it names its folder: a line `src/<folder>/`, then `<Module>.ts  what it holds`.
      let folder: string | undefined
      for (const line of block!.split("\n")) {
        const heading = /^(src\/(?:[\w-]+\/)*)$/.exec(line)
        if (heading) folder = heading[1]
        const module = /^([\w-]+\.ts) +\S/.exec(line)
        if (module && folder !== undefined) mapped.push(`${folder}${module[1]}`)
      }
    }
    const modules = (await filesUnder(join(REPO, "src"))).filter((path) => path.endsWith(".ts"))
    assert.isAtLeast(modules.length, 90)
    assert.deepStrictEqual(mapped.toSorted(), modules)
  })

  it("links only to files of the repository, by relative path", async () => {
    const readme = await readFile(join(REPO, "README.md"), "utf8")
    const targets = [...readme.matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)].map(([, target]) => target!)
      .filter((target) => !/^[a-z]+:/.test(target))
    assert.isNotEmpty(targets)
    for (const target of targets) assert.isTrue(existsSync(join(REPO, target)), `README links to ${target}`)
  })
})
