import { previewWithoutQuotes } from "./attachments.js"
import { useEffect, useState } from "react"
import { SessionId } from "../../../src/platform/Ids.js"
import { call, itemsOf } from "../api.js"
import { navigate } from "../router.js"

export interface SessionItem { id: string; agent: string; title: string | null; last_message?: string | null; status: string; updated_at: string; created_at?: string }

/**
 * A conversation's last message for the list, with any JSON in it (a tool's result the answer quoted) said in words:
 * `{"value":42}` becomes `value 42`, and anything larger is left out, so the list reads as text (issue 48).
 */
export const readablePreview = (text: string): string => {
  let out = ""
  let i = 0
  while (i < text.length) {
    const c = text[i]!
    if (c === "{" || c === "[") {
      const end = jsonEnd(text, i)
      if (end > i) {
        try {
          out += inWords(JSON.parse(text.slice(i, end + 1)))
          i = end + 1
          continue
        } catch {
          // Not JSON after all: kept as written.
        }
      }
    }
    out += c
    i++
  }
  return out.replace(/\s+/g, " ").trim()
}

/** Where the bracket opened at `start` closes (strings skipped), or -1 (a preview may cut it off). */
const jsonEnd = (text: string, start: number): number => {
  let depth = 0
  let quoted = false
  for (let i = start; i < text.length; i++) {
    const c = text[i]
    if (quoted) {
      if (c === "\\") i++
      else if (c === '"') quoted = false
    } else if (c === '"') quoted = true
    else if (c === "{" || c === "[") depth++
    else if (c === "}" || c === "]") {
      depth--
      if (depth === 0) return i
    }
  }
  return -1
}

const inWords = (value: unknown): string => {
  if (value === null || typeof value !== "object") return String(value)
  const entries = Array.isArray(value) ? value.map((v) => [null, v] as const) : Object.entries(value)
  const simple = entries.filter(([, v]) => v === null || typeof v !== "object")
  if (simple.length === 0 || simple.length > 3 || simple.length !== entries.length) return "…"
  return simple.map(([k, v]) => (k === null ? String(v) : `${k} ${String(v)}`)).join(", ")
}

const names = new Map<string, Promise<string>>()

/** An expert's display name (its published profile, or the owner's draft), asked once per page load. */
export const expertName = (identifier: string): Promise<string> => {
  let found = names.get(identifier)
  if (!found) {
    found = call((c) => c.market.agent({ path: { identifier } })).then(
      (a) => a.name,
      () => call((c) => c.agents.get({ path: { identifier } })).then((a) => a.name, () => identifier)
    )
    names.set(identifier, found)
  }
  return found
}

export const useExpertNames = (sessions: ReadonlyArray<SessionItem> | null) => {
  const [known, setKnown] = useState<Record<string, string>>({})
  useEffect(() => {
    for (const agent of new Set((sessions ?? []).map((s) => s.agent))) {
      void expertName(agent).then((name) => setKnown((k) => k[agent] === name ? k : { ...k, [agent]: name }))
    }
  }, [sessions])
  return known
}

const Item = ({ session, name, current, onChanged, onOpen }: {
  session: SessionItem
  name: string
  current: boolean
  onChanged: () => void
  onOpen?: (() => void) | undefined
}) => {
  const [editing, setEditing] = useState(false)
  const [title, setTitle] = useState(session.title ?? "")
  const [error, setError] = useState<string | null>(null)
  const label = session.title || "Untitled conversation"
  const rename = async () => {
    setError(null)
    try {
      await call((c) => c.sessions.update({ path: { id: SessionId.make(session.id) }, payload: { title } }))
      setEditing(false)
      onChanged()
    } catch (failure) {
      setError((failure as Error).message)
    }
  }
  const remove = async () => {
    if (!window.confirm(`Delete the conversation “${label}” with ${name}? This cannot be undone.`)) return
    try {
      await call((c) => c.sessions.remove({ path: { id: SessionId.make(session.id) } }))
      onChanged()
      if (current) navigate(`/chat/${session.agent}?new=1`, true)
    } catch (failure) {
      setError((failure as Error).message)
    }
  }
  return (
    <li className={`conversation${current ? " current" : ""}`}>
      {editing
        ? (
          <form className="stack" onSubmit={(e) => { e.preventDefault(); void rename() }}>
            <label>New title of “{label}” <input value={title} maxLength={200} autoFocus onChange={(e) => setTitle(e.target.value)} /></label>
            <div className="row">
              <button type="submit">Save title</button>
              <button type="button" className="secondary" onClick={() => setEditing(false)}>Cancel</button>
            </div>
          </form>
        )
        : (
          <>
            <a href={`/chat/${session.agent}?session=${session.id}`} aria-current={current ? "page" : undefined} onClick={(e) => {
              e.preventDefault()
              onOpen?.()
              navigate(`/chat/${session.agent}?session=${session.id}`)
            }}>
              <strong className="expert-name">{name}</strong>
              <span className="conversation-title">{label}</span>
              {session.last_message && <span className="conversation-last" data-testid="last-message">{readablePreview(previewWithoutQuotes(session.last_message))}</span>}
              <span className="muted small">{new Date(session.updated_at).toLocaleString()}</span>
            </a>
            <div className="row actions">
              <button type="button" className="link" onClick={() => setEditing(true)} aria-label={`Rename “${label}”`}>Rename</button>
              <button type="button" className="link danger-text" onClick={() => void remove()} aria-label={`Delete “${label}”`}>Delete</button>
            </div>
          </>
        )}
      {error && <p role="alert" className="error small">{error}</p>}
    </li>
  )
}

/**
 * The person's conversations beside the chat: by expert name, title and the start of the last message, newest first;
 * rename and delete here.
 */
export const Sidebar = ({ identifier, current, version, open = false, onClose }: {
  identifier: string
  current: string | null
  version: number
  /** On the phone the list is a drawer: shown when open, closed by Escape or a choice. */
  open?: boolean
  onClose?: () => void
}) => {
  const [sessions, setSessions] = useState<ReadonlyArray<SessionItem> | null>(null)
  const [reload, setReload] = useState(0)
  const [typed, setTyped] = useState("")
  const [query, setQuery] = useState("")
  const known = useExpertNames(sessions)
  // The search asks once the person stops typing for a moment, not once per key.
  useEffect(() => {
    const timer = setTimeout(() => setQuery(typed.trim()), 250)
    return () => clearTimeout(timer)
  }, [typed])
  useEffect(() => {
    let stale = false
    const urlParams = query === "" ? { limit: 50 } : { limit: 50, q: query.slice(0, 200) }
    call((c) => c.sessions.list({ urlParams })).then(
      (l) => { if (!stale) setSessions(itemsOf<SessionItem>(l)) },
      () => { if (!stale) setSessions([]) }
    )
    return () => { stale = true }
  }, [reload, version, current, query])
  return (
    <nav className={open ? "sidebar open" : "sidebar"} aria-label="Conversations" onKeyDown={(e) => { if (e.key === "Escape") onClose?.() }}>
      <button type="button" onClick={() => navigate(`/chat/${identifier}?new=1`)}>New chat</button>
      <label className="visually-hidden" htmlFor="conversation-search">Search conversations</label>
      <input
        id="conversation-search"
        type="search"
        placeholder="Search conversations"
        value={typed}
        maxLength={200}
        onChange={(e) => setTyped(e.target.value)}
      />
      {sessions !== null && sessions.length === 0 && (
        <p className="muted small" role="status">
          {query === "" ? "No conversations yet: your first message starts one." : `No conversation mentions “${query}”.`}
        </p>
      )}
      <ul className="conversations">
        {sessions?.map((s) => (
          <Item key={s.id} session={s} name={known[s.agent] ?? s.agent} current={s.id === current} onChanged={() => setReload((n) => n + 1)} onOpen={onClose} />
        ))}
      </ul>
    </nav>
  )
}
