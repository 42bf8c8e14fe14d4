import { useEffect, useState, type FormEvent } from "react"
import type { VectorStoreId } from "../../../src/knowledge/Domain.js"
import { call, itemsOf } from "../api.js"

/**
 * The studio's knowledge bases (docs/knowledge.md): create one, upload documents into it (the two-step upload, then
 * `POST /v1/vector_stores/:id/files`), watch each document's ingestion, and try a query to see the ranked passages
 * an expert's `file_search` would get. Attach a knowledge base to an expert with its id (`knowledge_bases`).
 * Self-contained: it talks to the API only through the derived client.
 */

export interface Store {
  id: VectorStoreId
  name: string
  file_counts: { in_progress: number; completed: number; failed: number; total: number }
  usage_bytes: number
}
export interface StoreFile {
  id: string
  status: "in_progress" | "completed" | "failed" | "cancelled"
  last_error: { code: string; message: string } | null
  progress: { chunks_done: number; chunks_total: number | null }
}
export interface Passage { file_id: string; filename: string; score: number; start_char: number; end_char: number; heading: string; content: ReadonlyArray<{ text: string }> }

export const upload = async (file: File) => {
  const contentType = file.type || (/\.md$/i.test(file.name) ? "text/markdown" : /\.pdf$/i.test(file.name) ? "application/pdf" : "application/octet-stream")
  const ticket = await call((c) => c.files.uploadUrl({ payload: { filename: file.name, content_type: contentType, size: file.size } }))
  const put = await fetch(ticket.upload_url, { method: "PUT", headers: ticket.headers, body: file })
  if (!put.ok) throw new Error(`The upload failed (${put.status}).`)
  return call((c) => c.files.register({ payload: { upload_id: ticket.upload_id } }))
}

/**
 * A knowledge base's documents as the Knowledge page and the studio's section both show them: listed, polled while one
 * is being read, added by upload (each added file is also handed to `uploaded`), and searched.
 */
export const useStoreDocuments = (store: Store, onChange: () => void) => {
  const [files, setFiles] = useState<ReadonlyArray<StoreFile>>([])
  const [error, setError] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)

  const load = () =>
    call((c) => c.knowledge.listFiles({ path: { id: store.id }, urlParams: { limit: 100 } })).then(
      (r) => setFiles(itemsOf<StoreFile>(r)),
      (e: Error) => setError(e.message)
    )
  // While a document is being ingested, its status is polled.
  useEffect(() => {
    if (!files.some((f) => f.status === "in_progress")) return
    const timer = setTimeout(() => void load().then(onChange), 1000)
    return () => clearTimeout(timer)
  }, [files])

  const add = async (list: FileList | null, uploaded: (record: { id: string; filename: string }) => void = () => {}) => {
    if (list === null || list.length === 0) return
    setBusy(true)
    setError(null)
    try {
      for (const file of Array.from(list)) {
        const record = await upload(file)
        uploaded(record)
        await call((c) => c.knowledge.addFile({ path: { id: store.id }, payload: { file_id: record.id } }))
      }
      await load()
      onChange()
    } catch (failure) {
      setError((failure as Error).message)
    } finally {
      setBusy(false)
    }
  }

  /** The ranked passages for `query`, or null when the search failed (then `error` says why). */
  const search = async (query: string): Promise<ReadonlyArray<Passage> | null> => {
    setError(null)
    try {
      const page = await call((c) => c.knowledge.search({ path: { id: store.id }, payload: { query } }))
      return page.data as unknown as ReadonlyArray<Passage>
    } catch (failure) {
      setError((failure as Error).message)
      return null
    }
  }

  return { files, error, setError, busy, load, add, search } as const
}

const StoreDetail = ({ store, onChange }: { store: Store; onChange: () => void }) => {
  const { files, error, busy, load, add, search } = useStoreDocuments(store, onChange)
  const [query, setQuery] = useState("")
  const [passages, setPassages] = useState<ReadonlyArray<Passage> | null>(null)
  useEffect(() => void load(), [store.id])

  const find = async (e: FormEvent) => {
    e.preventDefault()
    const found = await search(query)
    if (found !== null) setPassages(found)
  }

  return (
    <div className="card stack">
      <h2>{store.name || store.id}</h2>
      <p>Id <code>{store.id}</code>: list it in an expert's <code>knowledge_bases</code> to give the expert a <code>file_search</code> tool.</p>
      <label>
        Add documents (text, Markdown, HTML, PDF, CSV, JSON)
        <input type="file" multiple disabled={busy} onChange={(e) => void add(e.target.files)} />
      </label>
      {error && <p role="alert" className="error">{error}</p>}
      {files.length === 0 ? <p>No documents yet.</p> : (
        <div className="table-wrap">
          <table>
            <thead><tr><th scope="col">Document</th><th scope="col">Status</th><th scope="col">Progress</th></tr></thead>
            <tbody>
              {files.map((f) => (
                <tr key={f.id}>
                  <td><code>{f.id}</code></td>
                  <td>{f.status}{f.last_error && `: ${f.last_error.message}`}</td>
                  <td>{f.progress.chunks_done}{f.progress.chunks_total !== null && ` / ${f.progress.chunks_total}`} chunks</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <form onSubmit={find} className="toolbar" aria-label="Try a query">
        <label>
          Try a query
          <input value={query} maxLength={4000} onChange={(e) => setQuery(e.target.value)} placeholder="How long is the warranty?" />
        </label>
        <button type="submit" disabled={query.trim().length === 0}>Search</button>
      </form>
      {passages !== null && passages.length === 0 && <p role="status">Nothing found.</p>}
      {passages !== null && passages.length > 0 && (
        <ol className="stack" aria-label="Ranked passages">
          {passages.map((p, i) => (
            <li key={`${p.file_id}-${p.start_char}-${i}`}>
              <p><strong>{p.filename}</strong>{p.heading && ` — ${p.heading}`} (score {p.score.toFixed(3)}, characters {p.start_char}–{p.end_char})</p>
              <blockquote>{p.content[0]?.text}</blockquote>
            </li>
          ))}
        </ol>
      )}
    </div>
  )
}

export const KnowledgePage = () => {
  const [stores, setStores] = useState<ReadonlyArray<Store> | null>(null)
  const [selected, setSelected] = useState<string | null>(null)
  const [name, setName] = useState("")
  const [error, setError] = useState<string | null>(null)

  const load = () =>
    call((c) => c.knowledge.list({ urlParams: { limit: 100 } })).then((r) => setStores(itemsOf<Store>(r)), (e: Error) => setError(e.message))
  useEffect(() => void load(), [])

  const create = async (e: FormEvent) => {
    e.preventDefault()
    setError(null)
    try {
      const store = await call((c) => c.knowledge.create({ payload: { name } }))
      setName("")
      setSelected(store.id)
      await load()
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  const current = stores?.find((s) => s.id === selected)
  return (
    <section className="stack">
      <h1>Knowledge</h1>
      <p>Documents your experts answer from, with citations.</p>
      <form onSubmit={create} className="toolbar" aria-label="Create a knowledge base">
        <label>
          Name
          <input value={name} maxLength={256} onChange={(e) => setName(e.target.value)} placeholder="Product manual" required />
        </label>
        <button type="submit">Create knowledge base</button>
      </form>
      {error && <p role="alert" className="error">{error}</p>}
      {stores !== null && stores.length === 0 && <p>No knowledge bases yet.</p>}
      {stores !== null && stores.length > 0 && (
        <ul className="stack" aria-label="Knowledge bases">
          {stores.map((s) => (
            <li key={s.id}>
              <button type="button" className={s.id === selected ? "" : "secondary"} aria-pressed={s.id === selected} onClick={() => setSelected(s.id)}>
                {s.name || s.id}
              </button>{" "}
              {s.file_counts.completed} of {s.file_counts.total} documents ready{s.file_counts.failed > 0 && `, ${s.file_counts.failed} failed`}
            </li>
          ))}
        </ul>
      )}
      {current && <StoreDetail store={current} onChange={() => void load()} />}
    </section>
  )
}
