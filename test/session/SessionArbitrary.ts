/**
 * fast-check arbitraries for Pi Session JSONL texts and Rarebit inputs.
 *
 * A generated Session is either "clean" (valid structure, whitespace noise
 * only) or "messy" (bad headers, entries without ids, duplicate ids, missing
 * parents, cycles, truncated and garbage lines), so a differential run sees
 * both deep-equal results and matching failures. Texts come from a small pool
 * (payload deduplication happens often) plus multibyte and lone-surrogate
 * strings.
 */
import fc from "fast-check"

export const textArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom("done", "ok", "Next step.") },
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      "",
      "done",
      "ok",
      "Next step.",
      "Run the tests.",
      "😀 emoji 🎉",
      "日本語のテキスト",
      "中文内容",
      "e\u0301 combining a\u0308",
      "👩‍👩‍👧 family",
      "line one\nline two",
      "  ",
      "tab\tend",
      "\u2028sep\u2029",
      "quote \" backslash \\"
    )
  },
  { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength: 24 }) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 8 }) }
)

/** Mostly one of `usual`, sometimes one of `odd` (constantFrom ignores repeated values). */
const mostly = (usual: ReadonlyArray<unknown>, odd: ReadonlyArray<unknown>): fc.Arbitrary<unknown> =>
  fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...usual) }, { weight: 1, arbitrary: fc.constantFrom(...odd) })

const blockArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: textArb.map((text) => ({ type: "text", text })) },
  {
    weight: 2,
    arbitrary: fc.record({
      type: fc.constant("toolCall"),
      id: fc.constantFrom("tc-1", "tc-2"),
      name: fc.constantFrom("read", "bash"),
      arguments: fc.dictionary(fc.string({ maxLength: 3 }), fc.string({ maxLength: 5 }), { maxKeys: 2 })
    })
  },
  { weight: 1, arbitrary: fc.constant({ type: "image", data: "AAAA", mimeType: "image/png" }) },
  { weight: 1, arbitrary: textArb.map((thinking) => ({ type: "thinking", thinking })) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, 5, "text", { type: "text" }, { type: "text", text: 5 }, []) }
)

const contentArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: textArb },
  { weight: 6, arbitrary: fc.array(blockArb, { minLength: 1, maxLength: 4 }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>([], null, undefined, 42, { type: "text", text: "not an array" }) }
)

const messageArb: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 20,
    arbitrary: fc.record({
      role: fc.oneof(
        { weight: 4, arbitrary: fc.constant<unknown>("user") },
        { weight: 5, arbitrary: fc.constant<unknown>("assistant") },
        { weight: 2, arbitrary: fc.constant<unknown>("toolResult") },
        { weight: 1, arbitrary: fc.constantFrom<unknown>("system", undefined) }
      ),
      content: contentArb,
      stopReason: fc.oneof(
        { weight: 8, arbitrary: fc.constantFrom<unknown>("stop", "toolUse") },
        { weight: 2, arbitrary: fc.constantFrom<unknown>("error", "length") },
        { weight: 1, arbitrary: fc.constantFrom<unknown>(undefined, "aborted") }
      ),
      id: mostly([undefined], ["m-1", "m-2", 3]),
      timestamp: fc.constantFrom<unknown>(undefined, 1_767_225_600_000, "2026-01-01T00:00:02.000Z")
    })
  },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, "message", 0, []) }
)

type IdChoice = "fresh" | "duplicate" | "absent" | "empty" | "number"
type ParentChoice = "previous" | "earlier" | "root" | "absent" | "missing" | "later" | "self" | "number"

const idChoiceArb = (messy: boolean): fc.Arbitrary<IdChoice> =>
  messy
    ? fc.oneof(
      { weight: 20, arbitrary: fc.constant<IdChoice>("fresh") },
      { weight: 1, arbitrary: fc.constantFrom<IdChoice>("duplicate", "absent", "empty", "number") }
    )
    : fc.constant<IdChoice>("fresh")

const parentChoiceArb = (messy: boolean): fc.Arbitrary<ParentChoice> =>
  fc.oneof(
    { weight: 12, arbitrary: fc.constant<ParentChoice>("previous") },
    { weight: 4, arbitrary: fc.constant<ParentChoice>("earlier") },
    { weight: 1, arbitrary: fc.constantFrom<ParentChoice>("root", "absent") },
    ...(messy
      ? [{ weight: 2, arbitrary: fc.constantFrom<ParentChoice>("missing", "later", "later", "self", "number") }]
      : [])
  )

type Body = Record<string, unknown> | { readonly raw: unknown }

const bodyArb = (messy: boolean): fc.Arbitrary<Body> =>
  fc.oneof(
    {
      weight: 12,
      arbitrary: fc.record({
        type: fc.constant("message"),
        timestamp: fc.constantFrom<unknown>("2026-01-01T00:00:01.000Z", "2026-01-01T00:00:03.000Z", undefined, 7),
        message: messageArb
      })
    },
    {
      weight: 1,
      arbitrary: fc.record({
        type: fc.constant("compaction"),
        timestamp: fc.constant("2026-01-01T00:00:04.000Z"),
        summary: textArb,
        firstKeptEntryId: fc.constantFrom("e0", "e1"),
        tokensBefore: fc.nat(200_000)
      })
    },
    {
      weight: 1,
      arbitrary: fc.record({
        type: fc.constantFrom("model_change", "thinking_level_change"),
        timestamp: fc.constant("2026-01-01T00:00:05.000Z"),
        provider: fc.constant("example"),
        modelId: fc.constant("model-a")
      })
    },
    {
      weight: 1,
      arbitrary: fc.record({
        type: fc.constantFrom("custom", "custom_message"),
        customType: fc.constant("note"),
        content: textArb,
        data: fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 2 })
      })
    },
    ...(messy
      ? [{ weight: 1, arbitrary: fc.constantFrom<Body>({ raw: null }, { raw: 7 }, { raw: "entry" }, { raw: [1] }) }]
      : [])
  )

interface EntrySpec {
  readonly id: IdChoice
  readonly parent: ParentChoice
  readonly pick: number
  readonly body: Body
}

const entrySpecArb = (messy: boolean): fc.Arbitrary<EntrySpec> =>
  fc.record({ id: idChoiceArb(messy), parent: parentChoiceArb(messy), pick: fc.nat(50), body: bodyArb(messy) })

const headerArb = (messy: boolean): fc.Arbitrary<unknown> => {
  const valid = fc.record({
    type: fc.constant("session"),
    version: mostly([3, 2], [1, undefined]),
    id: fc.constantFrom("sess-a", "sess-b"),
    timestamp: fc.constantFrom<unknown>("2026-01-01T00:00:00.000Z", undefined, 5),
    cwd: fc.constant("/project")
  })
  if (!messy) return valid
  return fc.oneof(
    { weight: 8, arbitrary: valid },
    {
      weight: 1,
      arbitrary: fc.record({
        type: fc.constantFrom("session", "sesion"),
        version: fc.constantFrom<unknown>("2", null, [2], 0, "one"),
        id: fc.constantFrom<unknown>("sess-a", "", 5, null)
      })
    },
    { weight: 1, arbitrary: fc.constantFrom<unknown>(undefined, null, "session", []) }
  )
}

type Noise = {
  readonly op: "blank" | "spaces" | "crlf" | "trail" | "truncate" | "garbage" | "bom"
  readonly at: number
}

const noiseArb = (messy: boolean): fc.Arbitrary<ReadonlyArray<Noise>> =>
  fc.array(
    fc.record({
      op: messy
        ? fc.oneof(
          { weight: 4, arbitrary: fc.constantFrom<Noise["op"]>("blank", "spaces", "crlf", "trail") },
          { weight: 1, arbitrary: fc.constantFrom<Noise["op"]>("truncate", "garbage", "bom") }
        )
        : fc.constantFrom<Noise["op"]>("blank", "spaces", "crlf", "trail"),
      at: fc.nat(1000)
    }),
    { maxLength: messy ? 3 : 2 }
  )

const renderEntries = (specs: ReadonlyArray<EntrySpec>): Array<unknown> => {
  const ids: Array<unknown> = []
  const fresh = (index: number) => `e${index}`
  for (let index = 0; index < specs.length; index++) {
    const spec = specs[index]
    switch (spec.id) {
      case "fresh":
        ids.push(fresh(index))
        break
      case "duplicate":
        ids.push(index === 0 ? fresh(index) : ids[spec.pick % index])
        break
      case "absent":
        ids.push(undefined)
        break
      case "empty":
        ids.push("")
        break
      case "number":
        ids.push(index)
        break
    }
  }
  return specs.map((spec, index) => {
    if ("raw" in spec.body) return spec.body.raw
    const entry: Record<string, unknown> = { type: spec.body.type }
    if (ids[index] !== undefined) entry.id = ids[index]
    switch (spec.parent) {
      case "previous":
        entry.parentId = index === 0 ? null : ids[index - 1] ?? null
        break
      case "earlier":
        entry.parentId = index === 0 ? null : ids[spec.pick % index] ?? null
        break
      case "root":
        entry.parentId = null
        break
      case "absent":
        break
      case "missing":
        entry.parentId = "ghost"
        break
      case "later":
        entry.parentId = fresh(index + 1 + (spec.pick % 3))
        break
      case "self":
        entry.parentId = ids[index] ?? null
        break
      case "number":
        entry.parentId = spec.pick
        break
    }
    return { ...entry, ...spec.body }
  })
}

const applyNoise = (lines: Array<string>, noise: ReadonlyArray<Noise>): Array<string> => {
  const out = lines.slice()
  for (const { at, op } of noise) {
    const index = out.length === 0 ? 0 : at % out.length
    switch (op) {
      case "blank":
        out.splice(index, 0, "")
        break
      case "spaces":
        out.splice(index, 0, " \t ")
        break
      case "crlf":
        if (out.length > 0) out[index] = `${out[index]}\r`
        break
      case "trail":
        if (out.length > 0) out[index] = `${out[index]}  `
        break
      case "truncate":
        if (out.length > 0) out[index] = out[index].slice(0, Math.floor(out[index].length * ((at % 97) / 97)))
        break
      case "garbage":
        out.splice(index, 0, ["{", "not json", "]", "{\"type\":"][at % 4])
        break
      case "bom":
        if (out.length > 0) out[0] = `\uFEFF${out[0]}`
        break
    }
  }
  return out
}

/** A Pi Session JSONL text. */
export const sessionTextArb: fc.Arbitrary<string> = fc.boolean().chain((messy) =>
  fc.record({
    header: headerArb(messy),
    entries: fc.array(entrySpecArb(messy), { maxLength: 14, size: "medium" }),
    noise: noiseArb(messy),
    trailingNewline: fc.boolean()
  }).map(({ entries, header, noise, trailingNewline }) => {
    const records = header === undefined ? renderEntries(entries) : [header, ...renderEntries(entries)]
    const lines = applyNoise(records.map((record) => JSON.stringify(record) ?? "null"), noise)
    return lines.join("\n") + (trailingNewline && lines.length > 0 ? "\n" : "")
  })
)

/** A loose branch: rendered entries mixed with arbitrary JSON values. */
export const branchArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: fc.array(entrySpecArb(true), { maxLength: 10 }).map(renderEntries) },
  {
    weight: 2,
    arbitrary: fc.array(
      fc.oneof(fc.jsonValue({ maxDepth: 3 }), messageArb.map((message) => ({ type: "message", message }))),
      {
        maxLength: 6
      }
    )
  },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) }
)

const oddNumberArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.double(),
  fc.constantFrom<unknown>(-0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, "5", null, undefined)
)

const lengthArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: fc.oneof(fc.nat(200_000), fc.double({ min: 0, max: 200_000, noNaN: true })) },
  { weight: 1, arbitrary: oddNumberArb }
)

const ratioArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: fc.oneof(fc.constantFrom(0, 0.4, 1), fc.double({ min: 0, max: 1, noNaN: true })) },
  { weight: 1, arbitrary: oddNumberArb }
)

/** Summary policies, valid and invalid, including non-objects. */
export const policyArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom<unknown>(undefined, null, {}) },
  {
    weight: 8,
    arbitrary: fc.record(
      {
        policyVersion: mostly(["policy-a", "rarebit-summary-eligibility-v1"], ["", 5, undefined]),
        measurementVersion: mostly(["rarebit-prose-chars-div4-v1"], ["other-v9", undefined, { v: 1 }]),
        minTotalLength: lengthArb,
        minTotalLengthUnit: mostly(["estimated_tokens_chars_div_4_ceil"], ["chars", undefined]),
        maxRarebitRatio: ratioArb,
        extra: fc.jsonValue({ maxDepth: 1 })
      },
      { requiredKeys: [] }
    )
  },
  { weight: 1, arbitrary: fc.constantFrom<unknown>("ab", 5, true, [1, 2]) }
)

/** `rarebitJobIdentity` inputs, valid and invalid. */
export const jobIdentityInputArb: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 20,
    arbitrary: fc.record(
      {
        operation: mostly(["summary", "title"], ["other", 5]),
        mode: fc.constantFrom<unknown>(null, "automatic", "manual"),
        inputPolicy: fc.constantFrom<unknown>(null, "full", { maxPromptChars: 10 }),
        lifecycleBoundary: fc.constantFrom<unknown>(null, "manual", "owner_request", "agent_settled"),
        sessionId: mostly(["sess-a", "sess-b"], ["", 7, null]),
        branch: fc.oneof(fc.constant(undefined), fc.jsonValue({ maxDepth: 2 })),
        selection: fc.oneof(
          { weight: 6, arbitrary: fc.record({ manifestHash: fc.string({ minLength: 1, maxLength: 8 }) }) },
          {
            weight: 1,
            arbitrary: fc.constantFrom<unknown>(undefined, null, {}, { manifestHash: "" }, { manifestHash: 0 })
          }
        ),
        policy: policyArb,
        promptVersion: fc.constantFrom<unknown>(undefined, null, "rarebit-summary-v6", "rarebit-title-v1"),
        model: fc.oneof(
          fc.constant(undefined),
          fc.constant(null),
          fc.record({ provider: fc.constantFrom("p"), id: fc.string({ maxLength: 4 }) })
        )
      },
      { requiredKeys: ["operation", "sessionId", "selection"] }
    )
  },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(undefined, null, 5, "summary", {}) }
)
