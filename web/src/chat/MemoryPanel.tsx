import { useEffect, useState } from "react"
import { FactId } from "../../../src/runtime/Domain.js"
import { call } from "../api.js"

interface Block {
  readonly label: string
  readonly description: string
  readonly value: string
  readonly limit: number
  readonly version: number
  readonly read_only: boolean
}

interface Fact {
  readonly id: string
  readonly text: string
  readonly valid_from: string
  readonly superseded_at: string | null
}

/**
 * "What this expert remembers" (issue 47, docs/memory.md): the signed-in user's own memory with this expert, to
 * read, edit and delete. Loaded when opened, and again after each turn (`version`), so a fact the expert just saved
 * shows up.
 */
export const MemoryPanel = ({ identifier, version }: { identifier: string; version: number }) => {
  const [open, setOpen] = useState(false)
  const [blocks, setBlocks] = useState<ReadonlyArray<Block>>([])
  const [facts, setFacts] = useState<ReadonlyArray<Fact>>([])
  const [enabled, setEnabled] = useState(false)
  const [drafts, setDrafts] = useState<Record<string, string>>({})
  const [error, setError] = useState<string | null>(null)
  const [status, setStatus] = useState("")

  const load = () =>
    call((c) => c.memory.get({ urlParams: { agent: identifier } })).then(
      (memory) => {
        setEnabled(memory.enabled)
        setBlocks(memory.blocks)
        setFacts(memory.facts)
        setDrafts(Object.fromEntries(memory.blocks.map((block) => [block.label, block.value])))
        setError(null)
      },
      (e: Error) => setError(e.message)
    )

  useEffect(() => {
    if (open) void load()
  }, [open, identifier, version])

  const save = (label: string) =>
    call((c) => c.memory.updateBlock({ path: { label }, urlParams: { agent: identifier }, payload: { value: drafts[label] ?? "" } })).then(
      () => load().then(() => setStatus(`Saved ${label}.`)),
      (e: Error) => setError(e.message)
    )
  const forget = (id: string) =>
    call((c) => c.memory.deleteFact({ path: { id: FactId.unchecked.make(id) }, urlParams: { agent: identifier } })).then(
      () => load().then(() => setStatus("Fact deleted.")),
      (e: Error) => setError(e.message)
    )
  const forgetAll = () => {
    if (!window.confirm("Delete everything this expert remembers about you?")) return
    void call((c) => c.memory.delete({ urlParams: { agent: identifier } })).then(
      () => load().then(() => setStatus("Everything deleted.")),
      (e: Error) => setError(e.message)
    )
  }

  const current = facts.filter((fact) => fact.superseded_at === null)
  const earlier = facts.filter((fact) => fact.superseded_at !== null)
  return (
    <details className="memory-panel" open={open} onToggle={(event) => setOpen((event.target as HTMLDetailsElement).open)} data-testid="memory-panel">
      <summary>What this expert remembers</summary>
      {error !== null && <p role="alert" className="error">{error}</p>}
      <p role="status" className="muted">{status}</p>
      {!enabled && blocks.length === 0 && facts.length === 0 && <p className="muted">This expert keeps no memory of you.</p>}
      {blocks.map((block) => {
        const draft = drafts[block.label] ?? ""
        const id = `memory-block-${block.label}`
        return (
          <form key={block.label} className="memory-block" onSubmit={(event) => { event.preventDefault(); void save(block.label) }}>
            <label htmlFor={id}>{block.label}{block.description.length > 0 ? ` — ${block.description}` : ""}</label>
            <textarea id={id} value={draft} rows={3} onChange={(event) => setDrafts({ ...drafts, [block.label]: event.target.value })} />
            <p className="muted">{draft.length} / {block.limit} characters{block.read_only ? " · the expert cannot change it" : ""}</p>
            <button type="submit" disabled={draft === block.value || draft.length > block.limit}>Save {block.label}</button>
          </form>
        )
      })}
      {current.length > 0 && <h4>Facts</h4>}
      <ul className="memory-facts">
        {current.map((fact) => (
          <li key={fact.id}>
            <span>{fact.text}</span>{" "}
            <button type="button" className="secondary" aria-label={`Delete the fact: ${fact.text}`} onClick={() => void forget(fact.id)}>Delete</button>
          </li>
        ))}
      </ul>
      {earlier.length > 0 && (
        <>
          <h4>No longer true</h4>
          <ul className="memory-facts muted">
            {earlier.map((fact) => (
              <li key={fact.id}>
                <s>{fact.text}</s>{" "}
                <button type="button" className="secondary" aria-label={`Delete the fact: ${fact.text}`} onClick={() => void forget(fact.id)}>Delete</button>
              </li>
            ))}
          </ul>
        </>
      )}
      {(facts.length > 0 || blocks.some((block) => block.version > 0)) && (
        <button type="button" className="danger" onClick={forgetAll}>Delete everything</button>
      )}
    </details>
  )
}
