/**
 * The documentation shows only code that was checked, and links only to what
 * is there. The README's first program is the files under `examples/`, word
 * for word: every example file appears in exactly one fenced block of the
 * docs labelled with its path (```ts examples/main.ts), and every such block
 * is a file; the packed-package test runs those files, so what a newcomer
 * copies is what was tested. Every other ```ts block is type-checked against
 * the package as built (`dist/`'s declarations, imported by the package's own
 * name). Relative links, and the `#anchors` they name in Markdown files, must
 * resolve; and the module map of docs/architecture.md must name every module
 * under `src/` and nothing else.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { existsSync } from "node:fs"
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises"
import { dirname, join, relative } from "node:path"
import { promisify } from "node:util"
import { REPO } from "./FreshProject.js"

const FENCE = /^```([\w-]*)(?: (\S+))?\n([\s\S]*?)^```$/gm
// Fence languages a doc may use; a code block in another language would escape every check below.
const LANGUAGES = new Set(["ts", "json", "jsonl", "sh", "text", "mermaid", ""])

const filesUnder = async (directory: string): Promise<Array<string>> => {
  const found: Array<string> = []
  for (const entry of await readdir(directory, { withFileTypes: true })) {
    const child = join(directory, entry.name)
    if (entry.isDirectory()) found.push(...await filesUnder(child))
    else found.push(relative(REPO, child))
  }
  return found.sort()
}

const docFiles = async (): Promise<Array<string>> => [
  "README.md",
  "BENCHMARKS.md",
  "CONTRIBUTING.md",
  "CHANGELOG.md",
  ...(await filesUnder(join(REPO, "docs"))).filter((path) => path.endsWith(".md"))
]

interface Block {
  readonly doc: string
  readonly language: string
  readonly label: string | undefined
  readonly body: string
}

const blocksOf = (doc: string, text: string): Array<Block> =>
  [...text.matchAll(FENCE)].map(([, language, label, body]) => ({ doc, language: language!, label, body: body! }))

const readDocs = async () => {
  const docs = new Map<string, string>()
  for (const doc of await docFiles()) docs.set(doc, await readFile(join(REPO, doc), "utf8"))
  return docs
}

// GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered.
const anchorsOf = (text: string): Set<string> => {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  for (const [, heading] of text.replace(FENCE, "").matchAll(/^#{1,6} +(.+?) *$/gm)) {
    const slug = heading!.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-")
    const count = seen.get(slug) ?? 0
    seen.set(slug, count + 1)
    anchors.add(count === 0 ? slug : `${slug}-${count}`)
  }
  return anchors
}

describe("docs", () => {
  it("show every example file exactly as it is, once, and nothing else as one", async () => {
    const docs = await readDocs()
    const blocks = [...docs].flatMap(([doc, text]) => blocksOf(doc, text))
      .filter((block) => block.label?.startsWith("examples/"))
    const examples = await filesUnder(join(REPO, "examples"))
    assert.isAtLeast(examples.length, 5)
    for (const example of examples) {
      const shown = blocks.filter((block) => block.label === example)
      assert.lengthOf(shown, 1, `doc blocks labelled ${example}`)
      assert.strictEqual(shown[0]!.body, await readFile(join(REPO, example), "utf8"), `doc block of ${example}`)
    }
    assert.deepStrictEqual(blocks.map((block) => block.label).filter((path) => !examples.includes(path!)), [])
    // The README's first program stays whole in the README.
    for (const example of ["examples/SummaryWorker.ts", "examples/main.ts", "examples/tsconfig.json"]) {
      assert.isTrue(blocks.some((block) => block.label === example && block.doc === "README.md"), example)
    }
  })

  it("type-check every other TypeScript block against the package as built", async () => {
    const docs = await readDocs()
    const blocks = [...docs].flatMap(([doc, text]) => blocksOf(doc, text))
    // An indented fence (in a list) would escape the block pattern, and with it every check.
    for (const [doc, text] of docs) assert.notMatch(text, /^[ \t]+```/m, `${doc}: an indented code fence`)
    for (const block of blocks) {
      assert.isTrue(LANGUAGES.has(block.language), `${block.doc}: a \`\`\`${block.language} block`)
      assert.isTrue(block.label === undefined || block.label.startsWith("examples/"), `${block.doc}: ${block.label}`)
    }
    const snippets = blocks.filter((block) => block.language === "ts" && block.label === undefined)
    assert.isAtLeast(snippets.length, 5)
    // Inside the repository, so `rarebit-store` resolves to this package's own exports (dist/*.d.ts).
    const directory = await mkdtemp(join(REPO, ".doc-snippets-"))
    try {
      const names = snippets.map((block, index) => `${block.doc.replace(/\W/g, "_")}_${index}.ts`)
      await Promise.all(snippets.map((block, index) => writeFile(join(directory, names[index]!), block.body)))
      await writeFile(
        join(directory, "tsconfig.json"),
        JSON.stringify({
          extends: "../tsconfig.base.json",
          compilerOptions: { noEmit: true, noUnusedLocals: false, declaration: false, declarationMap: false },
          include: ["*.ts"]
        })
      )
      const tsc = join(REPO, "node_modules", ".bin", "tsc")
      const result = await promisify(execFile)(tsc, ["-p", directory]).then(
        () => "",
        (error: { stdout?: string; message: string }) => error.stdout || error.message
      )
      // Name the doc each failing block came from, and which of its ts blocks it is.
      const report = names.reduce((text, name, index) => {
        const { doc } = snippets[index]!
        const ordinal = snippets.slice(0, index).filter((block) => block.doc === doc).length + 1
        return text.replaceAll(name, `${doc}, unlabelled ts block ${ordinal}`)
      }, result)
      assert.strictEqual(report, "", "type errors in the docs' ts blocks")
    } finally {
      await rm(directory, { recursive: true, force: true })
    }
  }, 60_000)

  it("map every module under src/ in docs/architecture.md, folder by folder, and no module that is not there", async () => {
    const architecture = await readFile(join(REPO, "docs", "architecture.md"), "utf8")
    const start = architecture.indexOf("\n## Module map\n")
    assert.isAtLeast(start, 0, "docs/architecture.md has a \"## Module map\" section")
    const end = architecture.indexOf("\n## ", start + 1)
    const map = architecture.slice(start, end === -1 ? undefined : end)
    const mapped: Array<string> = []
    for (const [, block] of map.matchAll(/^```(?:text)?\n([\s\S]*?)^```$/gm)) {
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

  it("link only to files of the repository, by relative path, and to headings that exist", async () => {
    const docs = await readDocs()
    let links = 0
    for (const [doc, text] of docs) {
      // Links in code blocks and HTML comments are not rendered as links.
      const prose = text.replace(FENCE, "").replace(/<!--[\s\S]*?-->/g, "")
      for (const [, target, anchor] of prose.matchAll(/\]\(([^)#\s]*)(?:#([^)\s]*))?\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue
        links++
        const path = target === "" ? doc : join(dirname(doc), target!)
        assert.isTrue(existsSync(join(REPO, path)), `${doc} links to ${target}`)
        if (anchor !== undefined && path.endsWith(".md")) {
          const linked = docs.get(path) ?? await readFile(join(REPO, path), "utf8")
          assert.isTrue(anchorsOf(linked).has(anchor), `${doc} links to ${target}#${anchor}`)
        }
      }
    }
    assert.isAtLeast(links, 20)
  })
})
