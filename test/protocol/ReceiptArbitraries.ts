/**
 * fast-check arbitraries for schema-v4 receipts: valid records of every
 * variant (boundary values included), and mutations that break them, or
 * sometimes do not, in the ways a hand-written validator tends to get wrong.
 */
import fc from "fast-check"
import { SYNTHESIS_USAGE_KEYS } from "../../src/protocol/ReceiptParts.js"

type Json = Record<string, unknown>

// ---------------------------------------------------------------------------
// leaves
// ---------------------------------------------------------------------------

const hexDigit = fc.constantFrom(..."0123456789abcdef")
export const sha256Hex = fc.string({ unit: hexDigit, minLength: 64, maxLength: 64 })

export const nonEmptyString = fc.oneof(
  fc.string({ minLength: 1, maxLength: 12 }),
  fc.string({ unit: "grapheme", minLength: 1, maxLength: 6 }),
  fc.constantFrom(" ", "\n", "\u00a0", "x")
)

const anyString = fc.oneof(fc.string({ maxLength: 12 }), fc.constant(""))

/** Strings that `Date.parse` accepts, in several formats. */
export const parsableTimestamp = fc.oneof(
  fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
  fc.date({ noInvalidDate: true, min: new Date(0), max: new Date(4e12) }).map((d) => d.toUTCString()),
  fc.constantFrom("2026-01-01", "2026-01-01T00:00:00+02:00", "Jan 1 2026", "2026", "0", "1/2/2026")
)

/** Integers ≥ 0 by `Number.isInteger`, including `-0` and values beyond the safe range. */
export const nonNegativeInteger = fc.oneof(
  { weight: 6, arbitrary: fc.nat({ max: 10_000 }) },
  { weight: 1, arbitrary: fc.constantFrom(0, -0, 2 ** 53, 2 ** 53 + 2, 1e21, Number.MAX_VALUE) }
)

export const positiveInteger = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 1, max: 1_000_000 }) },
  { weight: 1, arbitrary: fc.constantFrom(1, 2 ** 53, 1e300) }
)

const nullableNonNegativeNumber = fc.oneof(
  fc.constant(null),
  fc.double({ min: 0, max: 1e12, noNaN: true }),
  fc.constantFrom(0, -0, 0.5, Number.MAX_VALUE)
)

const nullableString = fc.option(anyString, { nil: null })

// ---------------------------------------------------------------------------
// shared sub-records
// ---------------------------------------------------------------------------

export const branch = fc.record({
  leafId: fc.option(nonEmptyString, { nil: null }),
  entryCount: nonNegativeInteger,
  pathHash: sha256Hex
})

export const model = fc.option(fc.record({ provider: nonEmptyString, id: nonEmptyString }), { nil: null })

export const modelProvenance = fc.record(
  { source: nonEmptyString, status: nonEmptyString, settingsKey: nonEmptyString },
  { requiredKeys: ["source", "status"] }
)

export const receiptError = fc.record({ name: nonEmptyString, message: anyString })

export const synthesis = fc.record({
  schemaVersion: fc.constant(1),
  kind: fc.constant("rarebit_model_synthesis"),
  outcome: nonEmptyString,
  requestedModel: model,
  timing: fc.record({
    startedAt: nullableString,
    completedAt: nullableString,
    durationMs: nullableNonNegativeNumber,
    provenance: fc.constant("local_monotonic_clock")
  }),
  provider: fc.record({
    responseProvider: nullableString,
    responseProviderSource: nullableString,
    responseModel: nullableString,
    responseModelSource: nullableString,
    responseId: nullableString,
    responseIdSource: nullableString,
    requestId: nullableString,
    requestIdSource: nullableString
  }),
  usage: fc.record({
    availability: fc.constantFrom("unavailable", "partial", "reported"),
    ...Object.fromEntries(SYNTHESIS_USAGE_KEYS.map((key) => [key, nullableNonNegativeNumber])),
    provenance: fc.record(Object.fromEntries(SYNTHESIS_USAGE_KEYS.map((key) => [key, nullableString])))
  })
})

// ---------------------------------------------------------------------------
// summary receipts
// ---------------------------------------------------------------------------

export const summaryStatuses = ["ok", "ineligible", "inhibited", "unavailable_overflow", "failure"] as const
export const boundaries = ["owner_request", "agent_settled", "session_start", "manual"] as const
export const summaryVersions = ["hc-rarebit-summary-v4", "hc-rarebit-summary-v5", "hc-rarebit-summary-v6"] as const
export const sessionStatuses = ["user_requested", "finished", "needs_attention"] as const
export const statusReasons = [
  "owner_request_recorded",
  "all_requests_accomplished",
  "decision",
  "input",
  "approval",
  "blocker",
  "unfinished",
  "uncertain",
  "conflicting_evidence"
] as const

const selection = (ownerRequest: boolean) =>
  nonNegativeInteger.chain((occurrenceCount) =>
    fc.record({
      manifestHash: sha256Hex,
      selectorVersion: nonEmptyString,
      occurrenceCount: fc.constant(occurrenceCount),
      uniquePayloadCount: fc.oneof(
        fc.integer({ min: 0, max: Math.min(occurrenceCount, Number.MAX_SAFE_INTEGER) }),
        fc.constant(occurrenceCount)
      ),
      latestUserSourceEntryId: ownerRequest ? nonEmptyString : fc.option(nonEmptyString, { nil: null })
    })
  )

const inputCoveragePolicy = fc.record({
  strategy: fc.constantFrom("complete_or_explicit_overflow", "newest_suffix_with_explicit_omission"),
  maxPromptChars: positiveInteger
})

export const inputCoverage = fc
  .record({
    includedMessageCount: fc.nat({ max: 500 }),
    omittedMessageCount: fc.oneof(fc.constant(0), fc.nat({ max: 500 })),
    omittedTextChars: fc.oneof(fc.constant(0), fc.nat({ max: 100_000 })),
    promptChars: nonNegativeInteger
  })
  .map((c) => ({
    totalMessageCount: c.includedMessageCount + c.omittedMessageCount,
    includedMessageCount: c.includedMessageCount,
    omittedMessageCount: c.omittedMessageCount,
    omittedTextChars: c.omittedTextChars,
    promptChars: c.promptChars,
    complete: c.omittedMessageCount === 0 && c.omittedTextChars === 0
  }))

const automaticSummaryPolicy = fc.record({
  contractVersion: fc.constant("rarebit-automatic-summary-policy/1"),
  decision: fc.constant("inhibit"),
  queryStatus: fc.constant("inhibited"),
  queryId: nonEmptyString,
  provider: nonEmptyString,
  reason: nonEmptyString,
  observedAt: nonEmptyString,
  validUntil: nonEmptyString,
  queriedAt: nonEmptyString,
  provenance: fc.record({ identity: nonEmptyString, generation: nonEmptyString, association: nonEmptyString })
})

const overflow = fc.record({
  promptChars: nonNegativeInteger,
  maxPromptChars: positiveInteger,
  strategy: fc.constantFrom("none", "fixed_contract_exceeds_limit")
})

const nonBlankSummary = fc
  .tuple(fc.constantFrom("", " ", "\n", "\u00a0"), nonEmptyString.filter((s) => s.trim().length > 0))
  .map(([pad, text]) => `${pad}${text}${pad}`)

/** A legal assessment pair; outside owner requests also the array form the reference accepts. */
const assessment = (ownerRequest: boolean) =>
  ownerRequest
    ? fc.constant({ sessionStatus: "user_requested" as unknown, statusReason: "owner_request_recorded" })
    : fc.oneof(
      {
        weight: 8,
        arbitrary: fc.constant({ sessionStatus: "finished" as unknown, statusReason: "all_requests_accomplished" })
      },
      {
        weight: 8,
        arbitrary: fc.constantFrom(...statusReasons.slice(2)).map((statusReason) => ({
          sessionStatus: "needs_attention" as unknown,
          statusReason
        }))
      },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          { sessionStatus: ["finished"], statusReason: "all_requests_accomplished" },
          { sessionStatus: [["needs_attention"]], statusReason: "input" },
          { sessionStatus: ["user_requested"], statusReason: "owner_request_recorded" }
        )
      }
    )

/** A valid Summary receipt of the given status (any status when omitted). */
export const validSummaryReceipt = (status?: (typeof summaryStatuses)[number]): fc.Arbitrary<Json> =>
  fc.record({
    status: status === undefined ? fc.constantFrom(...summaryStatuses) : fc.constant(status),
    lifecycleBoundary: fc.constantFrom(...boundaries),
    implementationVersion: fc.constantFrom(...summaryVersions),
    withCoverage: fc.boolean()
  }).chain(({ implementationVersion, lifecycleBoundary, status, withCoverage }) => {
    const ownerRequest = lifecycleBoundary === "owner_request"
    const common = {
      schemaVersion: fc.constant(4),
      type: fc.constant("rarebit_summary"),
      status: fc.constant(status),
      jobId: sha256Hex,
      sessionId: nonEmptyString,
      branch,
      observedAt: parsableTimestamp,
      selection: selection(ownerRequest),
      lifecycleBoundary: fc.constant(lifecycleBoundary),
      implementationVersion: fc.constant(implementationVersion),
      synthesisMode: fc.constantFrom("forced", "automatic"),
      inputCoveragePolicy,
      promptVersion: nonEmptyString,
      model,
      modelProvenance
    }
    switch (status) {
      case "ok": {
        const coverage = withCoverage || implementationVersion !== "hc-rarebit-summary-v4"
        return fc.record({
          ...common,
          ...(coverage ? { inputCoverage } : {}),
          summary: nonBlankSummary,
          assessment: assessment(ownerRequest),
          synthesis
        }).map(({ assessment: pair, ...rest }) => ({ ...rest, ...pair }) as Json)
      }
      case "ineligible":
        return fc.record(common)
      case "inhibited":
        return fc.record({ ...common, automaticSummaryPolicy })
      case "unavailable_overflow":
        return fc.record({ ...common, overflow })
      case "failure":
        return fc.record({ ...common, retryable: fc.boolean(), error: receiptError })
    }
  })

// ---------------------------------------------------------------------------
// title receipts
// ---------------------------------------------------------------------------

export const titleStatuses = [
  "proposal",
  "applied",
  "skipped_session_changed",
  "skipped_title_changed",
  "skipped_existing_title",
  "failure"
] as const

/** A valid Title receipt of the given status (any status when omitted). */
export const validTitleReceipt = (status?: (typeof titleStatuses)[number]): fc.Arbitrary<Json> =>
  (status === undefined ? fc.constantFrom(...titleStatuses) : fc.constant(status)).chain(
    (status): fc.Arbitrary<Json> => {
      const common = {
        schemaVersion: fc.constant(4),
        type: fc.constant("rarebit_title"),
        status: fc.constant(status),
        jobId: sha256Hex,
        implementationVersion: fc.constant("hc-rarebit-title-v4"),
        sessionId: nonEmptyString,
        branch,
        selectionManifestHash: sha256Hex,
        titleEvidence: fc.record({
          provenance: nonEmptyString,
          sourceEntryId: fc.option(nonEmptyString, { nil: null })
        }),
        promptVersion: nonEmptyString,
        model,
        modelProvenance,
        applicationMode: fc.constantFrom("apply", "proposal"),
        priorTitle: nullableString,
        observedAt: parsableTimestamp
      }
      if (status === "failure") {
        return fc.record({ ...common, title: fc.constant(null), retryable: fc.boolean(), error: receiptError })
      }
      const titled = status === "proposal" || status === "applied"
      return fc.record({ ...common, title: titled ? nonEmptyString : fc.constant(null), synthesis })
    }
  )

// ---------------------------------------------------------------------------
// mutations
// ---------------------------------------------------------------------------

type Path = ReadonlyArray<string | number>

/** Every path to a value inside `value` (objects and arrays), root excluded. */
export const pathsOf = (value: unknown, prefix: Path = []): Array<Path> => {
  if (typeof value !== "object" || value === null) return []
  const keys: Array<string | number> = Array.isArray(value) ? value.map((_, i) => i) : Object.keys(value)
  return keys.flatMap((key) => {
    const path = [...prefix, key]
    return [path, ...pathsOf((value as Record<string | number, unknown>)[key], path)]
  })
}

/** Object paths (the root included) where a key could be added or removed. */
const objectPathsOf = (value: unknown): Array<Path> =>
  [[] as Path, ...pathsOf(value)].filter((path) => {
    const node = getAt(value, path)
    return typeof node === "object" && node !== null && !Array.isArray(node)
  })

const getAt = (value: unknown, path: Path): unknown =>
  path.reduce<unknown>((node, key) => (node as Record<string | number, unknown>)[key], value)

/** A copy of `value` with `f` applied to the node at `path`; untouched parts are shared. */
const updateAt = (value: unknown, path: Path, f: (node: unknown) => unknown): unknown => {
  if (path.length === 0) return f(value)
  const [head, ...rest] = path
  if (Array.isArray(value)) {
    const copy = [...value]
    copy[head as number] = updateAt(value[head as number], rest, f)
    return copy
  }
  const copy: Record<string, unknown> = {}
  for (const key of Object.keys(value as object)) {
    Object.defineProperty(copy, key, {
      value: key === head ? updateAt((value as Json)[key], rest, f) : (value as Json)[key],
      enumerable: true,
      writable: true,
      configurable: true
    })
  }
  return copy
}

const withoutKey = (node: unknown, key: string): unknown => {
  const copy: Record<string, unknown> = {}
  for (const k of Object.keys(node as object)) {
    if (k !== key) {
      Object.defineProperty(copy, k, { value: (node as Json)[k], enumerable: true, writable: true, configurable: true })
    }
  }
  return copy
}

const withKey = (node: unknown, key: string, value: unknown): unknown => {
  const copy: Record<string, unknown> = {}
  for (const k of Object.keys(node as object)) {
    Object.defineProperty(copy, k, { value: (node as Json)[k], enumerable: true, writable: true, configurable: true })
  }
  // defineProperty so that "__proto__" becomes an own key, as JSON.parse makes it.
  Object.defineProperty(copy, key, { value, enumerable: true, writable: true, configurable: true })
  return copy
}

/** Values that probe the edges of every leaf rule. */
export const nastyValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(
    -1,
    0,
    -0,
    1,
    1.5,
    4,
    NaN,
    Infinity,
    -Infinity,
    1e21,
    2 ** 53,
    Number.MAX_VALUE,
    -1e-7,
    "",
    " ",
    "\n\t",
    "x",
    "0",
    "2026-01-01",
    "2026-13-45",
    "not a date",
    "Jan 1 2026",
    null,
    undefined,
    true,
    false,
    [],
    {},
    "A".repeat(64),
    "a".repeat(63),
    "a".repeat(64),
    "rarebit_summary",
    "rarebit_title",
    "hc-rarebit-summary-v4",
    "hc-rarebit-summary-v5",
    "hc-rarebit-title-v4",
    "constructor",
    "toString",
    "__proto__"
  ),
  fc.constantFrom<unknown>(...summaryStatuses, ...titleStatuses, ...boundaries, ...sessionStatuses, ...statusReasons),
  fc.jsonValue({ maxDepth: 2 })
)

const extraKey = fc.oneof(
  fc.constantFrom("__proto__", "constructor", "toString", "inputCoverage", "synthesis", "overflow", "error", "extra"),
  fc.string({ maxLength: 6 })
)

type Mutation = (record: unknown) => fc.Arbitrary<unknown>

const dropKey: Mutation = (record) => {
  const paths = pathsOf(record).filter((path) => {
    const parent = getAt(record, path.slice(0, -1))
    return !Array.isArray(parent)
  })
  return fc.constantFrom(...paths).map((path) =>
    updateAt(record, path.slice(0, -1), (node) => withoutKey(node, path[path.length - 1] as string))
  )
}

const addKey: Mutation = (record) =>
  fc.tuple(fc.constantFrom(...objectPathsOf(record)), extraKey, nastyValue).map(([path, key, value]) =>
    updateAt(record, path, (node) => Object.hasOwn(node as object, key) ? node : withKey(node, key, value))
  )

const replaceValue: Mutation = (record) =>
  fc.tuple(fc.constantFrom(...pathsOf(record)), nastyValue).map(([path, value]) => updateAt(record, path, () => value))

const numericEdge = fc.constantFrom<unknown>(
  -1,
  -0,
  0,
  1,
  1.5,
  NaN,
  Infinity,
  -Infinity,
  1e21,
  2 ** 53,
  Number.MAX_VALUE,
  -5e-324,
  "1",
  null
)
const stringEdge = fc.constantFrom<unknown>(
  "",
  "",
  "",
  " ",
  "x",
  "\u00a0",
  "2026-02-30T00:00:00Z",
  "garbage",
  "A".repeat(64),
  null,
  0
)

/** Replaces a number (or a null, often a nullable number) with a numeric edge value. */
const numericValue: Mutation = (record) => {
  const paths = pathsOf(record).filter((path) => {
    const node = getAt(record, path)
    return typeof node === "number" || node === null
  })
  return paths.length === 0
    ? fc.constant(record)
    : fc.tuple(fc.constantFrom(...paths), numericEdge).map(([path, value]) => updateAt(record, path, () => value))
}

/** Replaces a string with an edge string (empty, blank, unparsable date, upper-case hex, ...). */
const stringValue: Mutation = (record) => {
  const paths = pathsOf(record).filter((path) => typeof getAt(record, path) === "string")
  return paths.length === 0
    ? fc.constant(record)
    : fc.tuple(fc.constantFrom(...paths), stringEdge).map(([path, value]) => updateAt(record, path, () => value))
}

/** Wraps a value in an array, or an object in an array: "arrays are not plain objects". */
const wrapInArray: Mutation = (record) =>
  fc.constantFrom(...pathsOf(record)).map((path) => updateAt(record, path, (node) => [node]))

const setField = (record: unknown, path: Path, value: unknown): unknown =>
  pathsOf(record).some((p) => p.join("\u0000") === path.join("\u0000"))
    ? updateAt(record, path, () => value)
    : record

/** Rule-level mutations: status pairs, coverage arithmetic, selection counts, versions. */
const semantic: Mutation = (record) => {
  const r = record as Json
  const coverage = r.inputCoverage as Json | undefined
  const selectionOf = r.selection as Json | undefined
  return fc.oneof(
    fc.constantFrom(...summaryStatuses, ...titleStatuses).map((status) => setField(record, ["status"], status)),
    fc.constantFrom(...boundaries).map((boundary) => setField(record, ["lifecycleBoundary"], boundary)),
    fc.constantFrom(...summaryVersions).map((version) => setField(record, ["implementationVersion"], version)),
    fc.tuple(
      fc.constantFrom<unknown>(...sessionStatuses, ["finished"], ["user_requested"], "constructor"),
      fc.constantFrom(...statusReasons)
    )
      .map(([status, reason]) => setField(setField(record, ["sessionStatus"], status), ["statusReason"], reason)),
    fc.constantFrom(-1, 1).map((delta) =>
      coverage
        ? setField(record, ["inputCoverage", "totalMessageCount"], (coverage.totalMessageCount as number) + delta)
        : record
    ),
    fc.constant(coverage ? setField(record, ["inputCoverage", "complete"], !coverage.complete) : record),
    fc.constant(
      selectionOf
        ? setField(record, ["selection", "uniquePayloadCount"], (selectionOf.occurrenceCount as number) + 1)
        : record
    ),
    fc.constant(selectionOf ? setField(record, ["selection", "latestUserSourceEntryId"], null) : record),
    fc.constantFrom("", " ", "\n\t ", "\u00a0", "\u2028", "\ufeff").map((blank) =>
      setField(record, ["summary"], blank)
    ),
    fc.constantFrom<unknown>(null, "", "t").map((title) => setField(record, ["title"], title)),
    fc.constant(
      coverage === undefined && r.status === "ok"
        ? setField(record, ["implementationVersion"], "hc-rarebit-summary-v6")
        : record
    ),
    fc.constant(coverage ? updateAt(record, [], (node) => withoutKey(node, "inputCoverage")) : record)
  )
}

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 3, arbitrary: fc.constant(dropKey) },
  { weight: 3, arbitrary: fc.constant(addKey) },
  { weight: 5, arbitrary: fc.constant(replaceValue) },
  { weight: 4, arbitrary: fc.constant(numericValue) },
  { weight: 4, arbitrary: fc.constant(stringValue) },
  { weight: 1, arbitrary: fc.constant(wrapInArray) },
  { weight: 5, arbitrary: fc.constant(semantic) }
)

/** A record with one or two mutations applied (or none, to keep valid cases in the mix). */
export const mutated = (valid: fc.Arbitrary<Json>): fc.Arbitrary<unknown> =>
  fc.tuple(valid, fc.integer({ min: 0, max: 2 })).chain(([record, count]) => {
    let arb: fc.Arbitrary<unknown> = fc.constant(record)
    for (let i = 0; i < count; i++) {
      arb = arb.chain((current) =>
        typeof current === "object" && current !== null
          ? mutation.chain((m) => m(current))
          : fc.constant(current)
      )
    }
    return arb
  })

// ---------------------------------------------------------------------------
// exhaustive single edits
// ---------------------------------------------------------------------------

const edgeValues: ReadonlyArray<unknown> = [
  -1,
  0,
  -0,
  1,
  1.5,
  4,
  NaN,
  Infinity,
  -Infinity,
  1e21,
  2 ** 53,
  Number.MAX_VALUE,
  -5e-324,
  "",
  " ",
  "\u00a0",
  "x",
  "0",
  "2026-01-01",
  "2026-02-30T25:00:00Z",
  "A".repeat(64),
  "a".repeat(64),
  null,
  undefined,
  true,
  false,
  [],
  {},
  ...summaryStatuses,
  ...titleStatuses,
  ...boundaries,
  ...summaryVersions,
  ...sessionStatuses,
  ...statusReasons,
  "constructor",
  "__proto__"
]

const extraKeys: ReadonlyArray<string> = [
  "__proto__",
  "extra",
  "inputCoverage",
  "summary",
  "sessionStatus",
  "statusReason",
  "synthesis",
  "automaticSummaryPolicy",
  "overflow",
  "retryable",
  "error",
  "title",
  "settingsKey"
]

/**
 * Every record one edit away from `record`: each value replaced by each edge
 * value or wrapped in an array, each key removed, each extra key added.
 */
export function* singleEdits(record: unknown): Generator<unknown> {
  for (const path of pathsOf(record)) {
    for (const value of edgeValues) yield updateAt(record, path, () => value)
    yield updateAt(record, path, (node) => [node])
    const parent = getAt(record, path.slice(0, -1))
    if (!Array.isArray(parent)) {
      yield updateAt(record, path.slice(0, -1), (node) => withoutKey(node, path[path.length - 1] as string))
    }
  }
  for (const path of objectPathsOf(record)) {
    for (const key of extraKeys) {
      const node = getAt(record, path)
      if (!Object.hasOwn(node as object, key)) yield updateAt(record, path, (n) => withKey(n, key, "x"))
    }
  }
}
