import { useEffect, useRef, useState, type KeyboardEvent } from "react"
import { FileId } from "../../../src/files/Domain.js"
import { call, itemsOf } from "../api.js"
import { type Passage, type Store, useStoreDocuments } from "./Knowledge.js"

/**
 * The studio's Knowledge section (docs/knowledge.md): which of the creator's knowledge bases the expert answers
 * from (`knowledge_bases`, saved with the draft), and, for one of them at a time, its documents (upload, ingestion
 * status and progress, polled while one is in progress) and a test query with its ranked passages, as the expert's
 * `file_search` would get them. It sits inside the editor's form, so it has no form of its own: its buttons are
 * plain buttons and Enter in its fields does their action, never "Save draft".
 */

const onEnter = (action: () => void) => (e: KeyboardEvent<HTMLInputElement>) => {
  if (e.key !== "Enter") return
  e.preventDefault()
  action()
}

const STATUS_WORDS: Record<string, string> = { in_progress: "reading", completed: "ready", failed: "failed", cancelled: "cancelled" }

const Documents = ({ store, onChange }: { store: Store; onChange: () => void }) => {
  const { files, error, setError, busy, load, add: addFiles, search: searchStore } = useStoreDocuments(store, onChange)
  const [names, setNames] = useState<Record<string, string>>({})
  const [query, setQuery] = useState("")
  const [passages, setPassages] = useState<ReadonlyArray<Passage> | null>(null)
  const picker = useRef<HTMLInputElement>(null)

  useEffect(() => {
    setPassages(null)
    void load()
  }, [store.id])
  // Documents added elsewhere (the API, the Knowledge page) are named by their file records.
  useEffect(() => {
    for (const f of files) {
      if (names[f.id] !== undefined) continue
      call((c) => c.files.get({ path: { id: FileId.make(f.id) } })).then(
        (record) => setNames((n) => ({ ...n, [f.id]: record.filename })),
        () => setNames((n) => ({ ...n, [f.id]: f.id }))
      )
    }
  }, [files])

  const add = async (list: FileList | null) => {
    await addFiles(list, (record) => setNames((n) => ({ ...n, [record.id]: record.filename })))
    if (picker.current) picker.current.value = ""
  }

  const search = async () => {
    if (query.trim().length === 0) return
    const found = await searchStore(query)
    if (found !== null) setPassages(found)
  }

  const remove = async (fileId: string) => {
    setError(null)
    try {
      await call((c) => c.knowledge.deleteFile({ path: { id: store.id, file_id: FileId.make(fileId) } }))
      await load()
      onChange()
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  const label = store.name || store.id
  return (
    <section className="stack knowledge-detail" aria-label={`Documents of ${label}`}>
      <h3>{label}</h3>
      <label>
        Upload documents to {label} (text, Markdown, HTML, PDF, CSV, JSON)
        <input ref={picker} type="file" multiple disabled={busy} onChange={(e) => void add(e.target.files)} />
      </label>
      {busy && <p role="status">Uploading…</p>}
      {error && <p role="alert" className="error">{error}</p>}
      {files.length === 0 ? <p className="muted">No documents yet.</p> : (
        <div className="table-wrap">
          <table>
            <caption className="visually-hidden">Documents and their ingestion</caption>
            <thead><tr><th scope="col">Document</th><th scope="col">Status</th><th scope="col">Passages</th><th scope="col"><span className="visually-hidden">Actions</span></th></tr></thead>
            <tbody>
              {files.map((f) => (
                <tr key={f.id} data-testid="knowledge-file">
                  <th scope="row">{names[f.id] ?? f.id}</th>
                  <td data-testid="knowledge-file-status" data-status={f.status}>
                    {STATUS_WORDS[f.status] ?? f.status}{f.last_error && `: ${f.last_error.message}`}
                  </td>
                  <td>{f.progress.chunks_done}{f.progress.chunks_total !== null && ` of ${f.progress.chunks_total}`}</td>
                  <td>
                    <button type="button" className="link danger-text" onClick={() => void remove(f.id)}>
                      Remove {names[f.id] ?? f.id}
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <div className="toolbar" role="search" aria-label={`Test a query on ${label}`}>
        <label>
          Test a query
          <input value={query} maxLength={4000} onChange={(e) => setQuery(e.target.value)} onKeyDown={onEnter(() => void search())} placeholder="How long is the warranty?" />
        </label>
        <button type="button" disabled={query.trim().length === 0} onClick={() => void search()}>Search</button>
      </div>
      {passages !== null && passages.length === 0 && <p role="status">Nothing found.</p>}
      {passages !== null && passages.length > 0 && (
        <ol className="stack passages" aria-label="Ranked passages">
          {passages.map((p, i) => (
            <li key={`${p.file_id}-${p.start_char}-${i}`} data-testid="ranked-passage">
              <p>
                <strong>{p.filename}</strong>{p.heading && ` — ${p.heading}`}{" "}
                <span className="muted small">(score {p.score.toFixed(3)}, characters {p.start_char}–{p.end_char})</span>
              </p>
              <blockquote className="passage"><p className="passage-text">{p.content[0]?.text}</p></blockquote>
            </li>
          ))}
        </ol>
      )}
    </section>
  )
}

export const StudioKnowledge = ({ attached, onAttach }: {
  attached: ReadonlyArray<string>
  onAttach: (ids: ReadonlyArray<string>) => void
}) => {
  const [stores, setStores] = useState<ReadonlyArray<Store> | null>(null)
  const [selected, setSelected] = useState<string | null>(null)
  const [name, setName] = useState("")
  const [error, setError] = useState<string | null>(null)

  const load = () =>
    call((c) => c.knowledge.list({ urlParams: { limit: 100 } })).then((r) => setStores(itemsOf<Store>(r)), (e: Error) => setError(e.message))
  useEffect(() => void load(), [])
  // The first attached knowledge base is open to begin with.
  useEffect(() => {
    if (selected === null && attached.length > 0) setSelected(attached[0]!)
  }, [attached])

  const create = async () => {
    if (name.trim().length === 0) return
    setError(null)
    try {
      const store = await call((c) => c.knowledge.create({ payload: { name: name.trim() } }))
      setName("")
      setSelected(store.id)
      onAttach([...attached, store.id])
      await load()
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  const toggle = (id: string, on: boolean) =>
    onAttach(on ? [...attached.filter((x) => x !== id), id] : attached.filter((x) => x !== id))

  const current = stores?.find((s) => s.id === selected)
  return (
    <fieldset className="card stack" id="section-knowledge">
      <legend>Knowledge</legend>
      <p className="muted small">
        Documents the expert answers from, citing the passages it uses. An attached knowledge base gives it a{" "}
        <code>file_search</code> tool (its permission is in Tools when you list it there); save the draft to apply.
      </p>
      {error && <p role="alert" className="error">{error}</p>}
      {stores !== null && stores.length === 0 && <p>You have no knowledge bases yet: create one below.</p>}
      {stores !== null && stores.length > 0 && (
        <ul className="list" aria-label="Your knowledge bases">
          {stores.map((s) => {
            const label = s.name || s.id
            return (
              <li key={s.id} className="row">
                <label className="check">
                  <input type="checkbox" checked={attached.includes(s.id)} onChange={(e) => toggle(s.id, e.target.checked)} />
                  Answer from {label}
                </label>
                <span className="muted small" data-testid="knowledge-counts">
                  {s.file_counts.completed} of {s.file_counts.total} documents ready
                  {s.file_counts.in_progress > 0 && `, ${s.file_counts.in_progress} reading`}
                  {s.file_counts.failed > 0 && `, ${s.file_counts.failed} failed`}
                </span>
                <button type="button" className="secondary" aria-pressed={s.id === selected} onClick={() => setSelected(s.id)}>
                  Documents of {label}
                </button>
              </li>
            )
          })}
        </ul>
      )}
      <div className="toolbar">
        <label>
          New knowledge base
          <input value={name} maxLength={256} onChange={(e) => setName(e.target.value)} onKeyDown={onEnter(() => void create())} placeholder="Product manual" />
        </label>
        <button type="button" className="secondary" disabled={name.trim().length === 0} onClick={() => void create()}>Create knowledge base</button>
      </div>
      {attached.some((id) => stores !== null && !stores.some((s) => s.id === id)) && (
        <p className="muted small">Also attached: {attached.filter((id) => !stores?.some((s) => s.id === id)).join(", ")} (not found among yours).</p>
      )}
      {current && <Documents store={current} onChange={() => void load()} />}
    </fieldset>
  )
}
