/**
 * The architecture as the tree shows it: no module under `src/` imports one
 * that imports it back, type-only imports included (a cycle, even of types,
 * means two concepts that cannot be read or changed apart), and `src/store/`
 * keeps its concepts in folders, with only the service's own modules at its
 * top.
 */
import { assert, describe, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { posix } from "node:path"
import { REPO } from "./FreshProject.js"

const modulesUnder = (folder: string): Array<string> =>
  readdirSync(`${REPO}/${folder}`, { withFileTypes: true }).flatMap((entry) => {
    const path = posix.join(folder, entry.name)
    if (entry.isDirectory()) return modulesUnder(path)
    return path.endsWith(".ts") ? [path] : []
  })

/** Every relative import or re-export of `module` (static, dynamic, `import type` and inline `type`), as a module path. */
const importsOf = (module: string): Array<string> => {
  const text = readFileSync(`${REPO}/${module}`, "utf8")
  const specifiers = [...text.matchAll(/(?:\bfrom|\bimport)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)].map(([, s]) => s!)
  return specifiers.map((specifier) =>
    posix.normalize(posix.join(posix.dirname(module), specifier)).replace(/\.js$/, ".ts")
  )
}

/** The strongly connected components of more than one module (Tarjan), each one cycle or more. */
export const cyclesOf = (graph: ReadonlyMap<string, ReadonlyArray<string>>): Array<Array<string>> => {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const components: Array<Array<string>> = []
  let next = 0
  const visit = (module: string) => {
    index.set(module, next)
    low.set(module, next++)
    stack.push(module)
    onStack.add(module)
    for (const target of graph.get(module) ?? []) {
      if (!index.has(target)) {
        visit(target)
        low.set(module, Math.min(low.get(module)!, low.get(target)!))
      } else if (onStack.has(target)) low.set(module, Math.min(low.get(module)!, index.get(target)!))
    }
    if (low.get(module) !== index.get(module)) return
    const component: Array<string> = []
    let member: string
    do {
      member = stack.pop()!
      onStack.delete(member)
      component.push(member)
    } while (member !== module)
    if (component.length > 1) components.push(component.toSorted())
  }
  for (const module of graph.keys()) if (!index.has(module)) visit(module)
  return components
}

describe("the module graph", () => {
  it("finds a cycle when there is one, type-only or not", () => {
    const graph = new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]], ["d", ["a"]]])
    assert.deepStrictEqual(cyclesOf(graph), [["a", "b", "c"]])
    assert.deepStrictEqual(cyclesOf(new Map([["a", ["b"]], ["b", []]])), [])
  })

  it("has no import cycle under src/, type-only imports included", () => {
    const modules = modulesUnder("src")
    assert.isAtLeast(modules.length, 90)
    const graph = new Map(modules.map((module) => [module, importsOf(module)]))
    for (const [module, targets] of graph) {
      for (const target of targets) {
        assert.isTrue(graph.has(target), `${module} imports ${target}, which is not a module`)
      }
    }
    assert.deepStrictEqual(cyclesOf(graph), [])
  })

  it("keeps src/store/'s concepts in folders, at most 8 modules at its top", () => {
    const top = readdirSync(`${REPO}/src/store`, { withFileTypes: true })
    const modules = top.filter((entry) => entry.isFile()).map((entry) => entry.name)
    const folders = top.filter((entry) => entry.isDirectory()).map((entry) => entry.name).toSorted()
    assert.isAtMost(modules.length, 8, `src/store/ holds ${modules.join(", ")}`)
    assert.deepStrictEqual(folders, ["audit", "lock", "read", "watch", "write"])
  })
})
