/**
 * Shared helpers of the interoperability tests: both Promise APIs behind one
 * shape, whole-history reads, the read comparisons run after every step, and
 * snapshots of what a root holds on disk.
 */
import { assert } from "@effect/vitest"
import { createHash } from "node:crypto"
import { lstat, readdir, readFile } from "node:fs/promises"
import { join, relative } from "node:path"
import * as Ours from "../../src/promise/index.js"
import { type Outcome, outcomeOf, referenceNative, type Roots, Store as Ref } from "../support/Reference.js"

/** The store functions both implementations export. */
export interface StoreApi {
  readonly name: "ours" | "reference"
  readonly readRarebitCurrent: (input?: any) => Promise<any>
  readonly readRarebitHistory: (input?: any) => Promise<any>
  readonly reserveRarebitJob: (input?: any) => Promise<any>
  readonly settleRarebitJob: (reservation: any, record: any) => Promise<any>
  readonly releaseRarebitJob: (reservation: any) => Promise<void>
  readonly rarebitMaterializationPath: (sessionFile: any, options?: any) => string
}

export const ours: StoreApi = { name: "ours", ...Ours }
export const reference: StoreApi = { name: "reference", ...Ref }

/** Every page of a sidecar's history from `fromOffset`, each page as the API returned it. */
export const historyPages = async (
  api: StoreApi,
  input: Record<string, unknown>,
  fromOffset: number,
  limit: number
): Promise<Array<Outcome>> => {
  const pages: Array<Outcome> = []
  let offset: number | null = fromOffset
  // A page always advances (or ends), so this bound only guards against a bug looping forever.
  for (let guard = 0; offset !== null && guard < 10_000; guard++) {
    const at: number = offset
    const page = await outcomeOf(() => api.readRarebitHistory({ ...input, fromOffset: at, limit }))
    pages.push(page)
    offset = page.ok ? (page.value as { nextOffset: number | null }).nextOffset : null
  }
  return pages
}

/** The ways `readRarebitCurrent` is called after every step. */
export const currentVariants = async (roots: Roots): Promise<Array<Record<string, unknown>>> => {
  const native = await referenceNative(roots.sessionFile, roots.sessionRoot)
  return [
    {},
    { native },
    { native: { availability: "missing" } },
    { native: { availability: "unreadable" }, expectation: "agent_settled", deadlineExpired: true },
    { expectation: "owner_request" },
    { expectation: "agent_settled", deadlineExpired: false },
    { native, expectation: "owner_request", deadlineExpired: true },
    { expectation: "snapshot", deadlineExpired: true }
  ]
}

/**
 * Asserts that both APIs read the same directory identically: every current
 * variant, and the whole history from 0 and from `fromOffsets`, page by page
 * with `limit`.
 */
export const assertSameReads = async (
  roots: Roots,
  options: { readonly fromOffsets?: ReadonlyArray<number>; readonly limit?: number; readonly step?: string } = {}
): Promise<void> => {
  const base = { sessionFile: roots.sessionFile, ...roots.location }
  const label = options.step ? ` after ${options.step}` : ""
  for (const variant of await currentVariants(roots)) {
    const mine = await outcomeOf(() => ours.readRarebitCurrent({ ...base, ...variant }))
    const theirs = await outcomeOf(() => reference.readRarebitCurrent({ ...base, ...variant }))
    assert.deepStrictEqual(mine, theirs, `readRarebitCurrent(${JSON.stringify(variant)})${label}`)
    assert.strictEqual(JSON.stringify(mine), JSON.stringify(theirs), `key order of readRarebitCurrent${label}`)
  }
  const limit = options.limit ?? 100
  for (const fromOffset of [0, ...(options.fromOffsets ?? [])]) {
    const mine = await historyPages(ours, base, fromOffset, limit)
    const theirs = await historyPages(reference, base, fromOffset, limit)
    assert.deepStrictEqual(mine, theirs, `readRarebitHistory from ${fromOffset}, limit ${limit}${label}`)
    assert.strictEqual(JSON.stringify(mine), JSON.stringify(theirs), `key order of readRarebitHistory${label}`)
  }
}

/** Replaces every occurrence of `root` in strings, so results from two roots compare. */
export const withoutRoot = (value: unknown, root: string): unknown => {
  if (typeof value === "string") return value.split(root).join("<root>")
  if (Array.isArray(value)) return value.map((item) => withoutRoot(item, root))
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, withoutRoot(item, root)]))
  }
  return value
}

export const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex")

// ---------------------------------------------------------------------------
// Snapshots of a root
// ---------------------------------------------------------------------------

export interface Snapshot {
  /** Relative path → mode and, for files, the comparable content. */
  readonly entries: Record<string, { readonly mode: string; readonly content?: string }>
}

/** Claims compare without their random token and our extra `sidecarOffset`. */
export const comparableClaim = (text: string): string => {
  assert.isTrue(text.endsWith("\n") && text.indexOf("\n") === text.length - 1, `one claim line: ${text}`)
  const claim = JSON.parse(text)
  if (typeof claim !== "object" || claim === null || Array.isArray(claim)) return text
  if (typeof claim.leaseToken === "string" && /^[a-f0-9]{48}$/.test(claim.leaseToken)) claim.leaseToken = "<token>"
  delete claim.sidecarOffset
  return JSON.stringify(claim)
}

export const snapshot = async (roots: Roots): Promise<Snapshot> => {
  const entries: Record<string, { mode: string; content?: string }> = {}
  const walk = async (dir: string): Promise<void> => {
    for (const item of await readdir(dir, { withFileTypes: true })) {
      const full = join(dir, item.name)
      const key = relative(roots.rarebitRoot, full)
      const mode = ((await lstat(full)).mode & 0o777).toString(8)
      if (item.isDirectory()) {
        entries[`${key}/`] = { mode }
        await walk(full)
      } else {
        const bytes = await readFile(full)
        entries[key] = {
          mode,
          content: key.startsWith("jobs-v4/") ? comparableClaim(bytes.toString("utf8")) : bytes.toString("base64")
        }
      }
    }
  }
  await walk(roots.rarebitRoot).catch((error) => {
    if (error?.code !== "ENOENT") throw error
  })
  return { entries }
}

/** A call's outcome with paths, tokens and hook functions made comparable. */
export const comparable = (outcome: Outcome, roots: Roots): unknown => {
  const masked = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(masked)
    if (typeof value === "object" && value !== null) {
      return Object.fromEntries(
        Object.entries(value).map(([key, item]) => [
          key,
          key === "leaseToken" && typeof item === "string"
            ? "<token>"
            : key === "hooks" && item !== null
            ? "<hooks>"
            : masked(item)
        ])
      )
    }
    return value
  }
  return withoutRoot(masked(outcome), roots.root)
}
