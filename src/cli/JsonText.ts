/**
 * JSON text for the CLI's `--json` output, written without recursion.
 *
 * `JSON.stringify` recurses and throws `RangeError` on a value nested a few
 * thousand levels deep, which data read from disk may be (a valid receipt's
 * `sessionStatus` may be an array nested that deep). This writer gives the
 * same text as `JSON.stringify(value, null, indent)` for JSON data and for the
 * plain objects the CLI prints (`undefined` members dropped, `undefined` in
 * arrays written `null`, non-finite numbers written `null`, `toJSON`
 * honoured), at any depth; only containers nested more than 64 levels deep
 * are written compact inside indented output, so its size stays linear.
 *
 * @since 0.1.0
 */

const INDENT_DEPTH = 64
const MAX_KEY_TEXTS = 256

type Frame = {
  readonly container: object
  readonly array: boolean
  readonly keys: ReadonlyArray<string> | null
  index: number
  wrote: boolean
  readonly depth: number
}

const leafText = (value: unknown): string | undefined => {
  switch (typeof value) {
    case "string":
    case "boolean":
    case "number":
      return JSON.stringify(value)
    case "bigint":
      // Let JSON.stringify throw its own TypeError.
      return JSON.stringify(value)
    default:
      return value === null ? "null" : undefined
  }
}

const resolved = (key: string, value: unknown): unknown =>
  typeof value === "object" && value !== null && typeof (value as { toJSON?: unknown }).toJSON === "function"
    ? (value as { toJSON: (key: string) => unknown }).toJSON.call(value, key)
    : value

/**
 * `JSON.stringify(value, null, indent)` without recursion.
 *
 * **Gotchas**
 *
 * A cycle throws a `TypeError`, as `JSON.stringify` does. Replacer functions
 * are not supported. Top-level `undefined` gives `undefined`.
 *
 * @category encoding
 * @since 0.1.0
 */
export const jsonText = (value: unknown, indent: number = 0): string | undefined => {
  const top = resolved("", value)
  if (typeof top !== "object" || top === null) return leafText(top)
  return [...containerText(top, indent, Infinity)].join("")
}

/**
 * The text of a container in pieces of about `pieceChars` characters (the
 * last piece written is held back: closing an empty container appends to it).
 */
function* containerText(top: object, indent: number, pieceChars: number): Generator<string> {
  const gap = " ".repeat(Math.max(0, Math.min(10, indent)))
  let out: Array<string> = []
  let outChars = 0
  const write = (piece: string) => {
    out.push(piece)
    outChars += piece.length
  }
  const open = new Set<object>()
  const stack: Array<Frame> = []
  // Indenting every level would make the text quadratic in the depth, so
  // containers nested deeper than INDENT_DEPTH are written compact.
  const pretty = (frame: Frame) => gap !== "" && frame.depth < INDENT_DEPTH
  // Made once per depth and key: a large report writes the same few
  // separators and keys hundreds of thousands of times.
  const newlines: Array<string> = []
  const commaNewlines: Array<string> = []
  const newline = (depth: number) => (newlines[depth] ??= `\n${gap.repeat(depth)}`)
  const commaNewline = (depth: number) => (commaNewlines[depth] ??= `,${newline(depth)}`)
  const keyTexts = new Map<string, string>()
  const keyText = (key: string, spaced: boolean) => {
    if (!spaced) return `${JSON.stringify(key)}:`
    let text = keyTexts.get(key)
    if (text === undefined) {
      text = `${JSON.stringify(key)}: `
      // Keys of data read from disk can be anything: only the first few are kept.
      if (keyTexts.size < MAX_KEY_TEXTS) keyTexts.set(key, text)
    }
    return text
  }
  const enter = (container: object, depth: number) => {
    if (open.has(container)) throw new TypeError("Converting circular structure to JSON")
    open.add(container)
    const array = Array.isArray(container)
    write(array ? "[" : "{")
    stack.push({ container, array, keys: array ? null : Object.keys(container), index: 0, wrote: false, depth })
  }
  enter(top, 0)
  while (stack.length > 0) {
    if (outChars >= pieceChars && out.length > 1) {
      const last = out.pop()!
      yield out.join("")
      out = [last]
      outChars = last.length
    }
    const frame = stack[stack.length - 1]
    const length = frame.array ? (frame.container as { readonly length: number }).length : frame.keys!.length
    if (frame.index >= length) {
      stack.pop()
      open.delete(frame.container)
      const close = frame.array ? "]" : "}"
      // Nothing was written since the opening bracket: `[]`, `{}` on one line.
      if (frame.wrote) write(pretty(frame) ? `${newline(frame.depth)}${close}` : close)
      else out[out.length - 1] += close
      continue
    }
    const index = frame.index++
    const key = frame.array ? String(index) : frame.keys![index]
    const member = resolved(
      key,
      frame.array ? (frame.container as Array<unknown>)[index] : (frame.container as Record<string, unknown>)[key]
    )
    const isContainer = typeof member === "object" && member !== null
    const text = isContainer ? undefined : leafText(member)
    if (!isContainer && text === undefined && !frame.array) continue
    write(
      pretty(frame)
        ? (frame.wrote ? commaNewline(frame.depth + 1) : newline(frame.depth + 1))
        : (frame.wrote ? "," : "")
    )
    frame.wrote = true
    if (!frame.array) write(keyText(key, pretty(frame)))
    if (isContainer) enter(member, frame.depth + 1)
    else write(text ?? "null")
  }
  yield out.join("")
}

/**
 * `jsonText(value, indent)` (or `"null"`) as groups of whole lines, each
 * about `groupChars` characters or one longer line, without the newline
 * between them: written one after another, each followed by a newline, they
 * are the text and a newline. A large document is printed this way without
 * ever holding all of its text.
 *
 * @category formatting
 * @since 0.1.0
 */
export function* jsonLineGroups(value: unknown, indent: number = 0, groupChars: number = 64 * 1024): Generator<string> {
  const top = resolved("", value)
  if (typeof top !== "object" || top === null) {
    yield leafText(top) ?? "null"
    return
  }
  let pending = ""
  for (const piece of containerText(top, indent, groupChars)) {
    pending += piece
    const lastNewline = pending.lastIndexOf("\n")
    if (pending.length >= groupChars && lastNewline >= 0) {
      yield pending.slice(0, lastNewline)
      pending = pending.slice(lastNewline + 1)
    }
  }
  yield pending
}
