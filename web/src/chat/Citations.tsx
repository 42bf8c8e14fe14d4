import { useState } from "react"
import type { Turn } from "./fold.js"

/**
 * The answer's citations as footnotes (docs/knowledge.md): the `file_search` tool's results carry a marker per
 * passage (`【1†manual.md】`) with the passage's file, chunk and character range; the markers the answer writes
 * become numbered references, and each footnote opens the passage it cites. Markers of passages this turn did not
 * find stay as the model wrote them.
 */

export interface Citation {
  readonly marker: string
  readonly file_id: string
  readonly filename: string
  readonly chunk_index?: number
  readonly start_char: number
  readonly end_char: number
  readonly text: string
  readonly score?: number
}

const MARKER = /【\d+†[^】]*】/g

const isCitation = (value: unknown): value is Citation => {
  if (typeof value !== "object" || value === null) return false
  const c = value as Record<string, unknown>
  return typeof c.marker === "string" && typeof c.file_id === "string" && typeof c.filename === "string" &&
    typeof c.start_char === "number" && typeof c.end_char === "number" && typeof c.text === "string"
}

/** The passages the turn's `file_search` calls returned, by marker. */
const passagesOf = (turn: Turn): Map<string, Citation> => {
  const found = new Map<string, Citation>()
  for (const tool of turn.tools) {
    if (tool.name !== "file_search") continue
    let result = tool.result
    if (typeof result === "string") {
      try {
        result = JSON.parse(result)
      } catch {
        continue
      }
    }
    const results = (result as { results?: unknown } | undefined)?.results
    if (!Array.isArray(results)) continue
    for (const item of results) if (isCitation(item)) found.set(item.marker, item)
  }
  return found
}

/** The answer's text with each cited marker as `[n]`, and the footnotes in the order the answer cites them. */
export const footnotes = (turn: Turn): { text: string; notes: ReadonlyArray<Citation> } => {
  const passages = passagesOf(turn)
  if (passages.size === 0) return { text: turn.text, notes: [] }
  const notes: Array<Citation> = []
  const numbers = new Map<string, number>()
  const text = turn.text.replace(MARKER, (marker) => {
    const passage = passages.get(marker)
    if (passage === undefined) return marker
    let n = numbers.get(marker)
    if (n === undefined) {
      notes.push(passage)
      n = notes.length
      numbers.set(marker, n)
    }
    return `[${n}]`
  })
  return { text, notes }
}

/** One footnote: the file and its place; opened, the passage itself. */
const Footnote = ({ n, note }: { n: number; note: Citation }) => {
  const [open, setOpen] = useState(false)
  const id = `passage-${note.file_id}-${note.start_char}-${n}`
  return (
    <li>
      <button type="button" className="link" aria-expanded={open} aria-controls={id} onClick={() => setOpen((o) => !o)}>
        [{n}] {note.filename}, characters {note.start_char}–{note.end_char}
      </button>
      {open && (
        <blockquote id={id} className="passage" data-testid="passage">
          <p className="muted small">
            {note.filename}{note.chunk_index !== undefined && ` · passage ${note.chunk_index + 1}`} · characters {note.start_char}–{note.end_char}
          </p>
          <p className="passage-text">{note.text}</p>
        </blockquote>
      )}
    </li>
  )
}

export const Footnotes = ({ notes }: { notes: ReadonlyArray<Citation> }) =>
  notes.length === 0 ? null : (
    <section className="footnotes" aria-label="Sources">
      <h4 className="small muted">Sources</h4>
      <ol data-testid="footnotes">
        {notes.map((note, i) => <Footnote key={note.marker} n={i + 1} note={note} />)}
      </ol>
    </section>
  )
