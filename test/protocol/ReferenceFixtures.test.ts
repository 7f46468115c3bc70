import { assert, describe, it } from "@effect/vitest"
import * as RefState from "@hypercarrier/rarebit/artifact-state"
import { readdirSync, readFileSync } from "node:fs"
import { validateSummaryReceipt } from "../../src/protocol/SummaryReceipt.js"
import { validateTitleReceipt } from "../../src/protocol/TitleReceipt.js"

const packageRoot = new URL("../../node_modules/@hypercarrier/rarebit/", import.meta.url)

const verdict = (validate: (record: unknown) => { readonly valid: boolean }, record: unknown): boolean => {
  try {
    return validate(record).valid
  } catch {
    return false
  }
}

/** Every value inside the reference's fixture files and JSON Schema, the files themselves included. */
const fixtureValues = (): Array<readonly [string, unknown]> => {
  const documents: Array<readonly [string, unknown]> = []
  const fixtures = new URL("test/fixtures/", packageRoot)
  for (const name of readdirSync(fixtures)) {
    const text = readFileSync(new URL(name, fixtures), "utf8")
    if (name.endsWith(".jsonl")) {
      text.split("\n").forEach((line, index) => {
        try {
          documents.push([`${name}:${index + 1}`, JSON.parse(line)])
        } catch {
          // A torn fixture line is not a record.
        }
      })
    } else {
      documents.push([name, JSON.parse(text)])
    }
  }
  documents.push([
    "rarebit.schema.json",
    JSON.parse(readFileSync(new URL("schemas/rarebit.schema.json", packageRoot), "utf8"))
  ])
  const values: Array<readonly [string, unknown]> = []
  const walk = (where: string, value: unknown): void => {
    values.push([where, value])
    if (typeof value === "object" && value !== null) {
      for (const [key, child] of Object.entries(value)) walk(`${where}/${key}`, child)
    }
  }
  for (const [name, document] of documents) walk(name, document)
  return values
}

describe("reference fixtures", () => {
  it("every value in the reference's fixtures gets the reference's verdict", () => {
    const values = fixtureValues()
    assert.isAbove(values.length, 100)
    for (const [where, value] of values) {
      assert.strictEqual(
        validateSummaryReceipt(value).valid,
        verdict(RefState.validateRarebitArtifactReceipt, value),
        `summary verdict at ${where}`
      )
      assert.strictEqual(
        validateTitleReceipt(value).valid,
        verdict(RefState.validateRarebitTitleReceipt, value),
        `title verdict at ${where}`
      )
    }
  })
})
