/**
 * Chunking by structure (docs/knowledge.md). A chunk is a contiguous range of the extracted text, so its citation
 * (`start_char`, `end_char`) points at exactly the passage it holds. The text is cut into units (sentences, or lines
 * of lists, tables and records, never longer than the budget); units are packed into chunks up to
 * `maxTokens`, a heading always starts a new chunk (unless the chunk so far is only headings), and the next chunk
 * of the same section starts up to `overlapTokens` back, on a unit boundary.
 */

export interface ChunkOptions {
  readonly maxTokens: number
  readonly overlapTokens: number
}

export interface TextChunk {
  readonly seq: number
  /** The section's headings, outermost first (`Manual > Warranty`). */
  readonly heading: string
  readonly start: number
  readonly end: number
  readonly text: string
  readonly tokens: number
}

/** A token is about four characters of English; the same estimate prices the builtin model. */
export const tokensOf = (text: string) => Math.ceil(text.length / 4)

interface Unit {
  readonly start: number
  readonly end: number
  /** The unit is a heading line: it starts a section. */
  readonly heading: boolean
  /** The headings in force at this unit. */
  readonly path: string
}

const HEADING = /^(#{1,6})[ \t]+(.+?)[ \t#]*$/

/** Sentence ends: `. `, `! `, `? ` and their CJK forms; a unit never splits a word. */
const SENTENCE_END = /[.!?。！？][)"'\]]*\s+/g

const units = (text: string, maxChars: number): Array<Unit> => {
  const out: Array<Unit> = []
  const headings: Array<string> = []
  const push = (start: number, end: number, heading: boolean) => {
    // Trim the range to its visible text: a chunk never starts or ends on blank space.
    while (start < end && /\s/.test(text[start]!)) start++
    while (end > start && /\s/.test(text[end - 1]!)) end--
    if (end > start) out.push({ start, end, heading, path: headings.filter((h) => h !== undefined && h.length > 0).join(" > ") })
  }
  const pushLong = (start: number, end: number) => {
    // A piece over the budget is cut at sentence ends, then at the last space before the budget.
    let from = start
    SENTENCE_END.lastIndex = 0
    const slice = text.slice(start, end)
    const cuts: Array<number> = []
    for (const match of slice.matchAll(SENTENCE_END)) cuts.push(start + match.index! + match[0].length)
    cuts.push(end)
    for (const cut of cuts) {
      let to = cut
      while (to - from > maxChars) {
        let at = text.lastIndexOf(" ", from + maxChars)
        if (at <= from) at = from + maxChars
        push(from, at, false)
        from = at
      }
      if (to > from) {
        push(from, to, false)
        from = to
      }
    }
  }
  let lineStart = 0
  while (lineStart <= text.length) {
    let lineEnd = text.indexOf("\n", lineStart)
    if (lineEnd === -1) lineEnd = text.length
    const line = text.slice(lineStart, lineEnd)
    const heading = HEADING.exec(line)
    if (heading !== null) {
      const level = heading[1]!.length
      headings.length = level - 1
      headings[level - 1] = heading[2]!.trim()
      push(lineStart, lineEnd, true)
    } else if (line.trim().length > 0) {
      // A line is cut into its sentences; a short line (a list item, a row, a record) is a unit of its own.
      pushLong(lineStart, lineEnd)
    }
    lineStart = lineEnd + 1
  }
  return out
}

/** The chunks of `text`, in order. */
export const chunkText = (text: string, options: ChunkOptions): Array<TextChunk> => {
  const maxChars = Math.max(16, options.maxTokens * 4)
  const overlapChars = Math.max(0, options.overlapTokens * 4)
  const all = units(text, maxChars)
  const chunks: Array<TextChunk> = []
  let first = 0
  while (first < all.length) {
    let last = first
    // Headings that open a chunk stay with the text below them.
    while (last + 1 < all.length && all[last + 1]!.end - all[first]!.start <= maxChars &&
      (!all[last + 1]!.heading || all.slice(first, last + 1).every((unit) => unit.heading))) last++
    const start = all[first]!.start
    const end = all[last]!.end
    const slice = text.slice(start, end)
    const path = all[last]!.path
    chunks.push({ seq: chunks.length, heading: path, start, end, text: slice, tokens: tokensOf(slice) })
    if (last + 1 >= all.length) break
    // The next chunk starts `overlap` back when it continues the same section, always after this one's start.
    let next = last + 1
    if (!all[next]!.heading) {
      while (next - 1 > first && !all[next - 1]!.heading && end - all[next - 1]!.start <= overlapChars) next--
    }
    first = next
  }
  return chunks
}
