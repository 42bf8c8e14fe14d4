import { useEffect, useLayoutEffect, useMemo, useRef, useState, type FormEvent, type KeyboardEvent, type WheelEvent } from "react"
import { SessionId } from "../../../src/sessions/Domain.js"
import { call, itemsOf } from "../api.js"
import { Link, navigate, useLocation } from "../router.js"
import { formatCredits, useMe } from "../session.js"
import { followSession, sendToSession } from "../stream.js"
import { type Approval, fold, queueMessage, type Turn, unqueueMessage, UserSide } from "../chat/fold.js"
import { makeOutbox } from "../chat/outbox.js"
import { ModelBanner } from "../ModelBanner.js"
import { Approvals, TurnView, useDetailsSetting } from "../chat/TurnView.js"
import { readablePreview, type SessionItem, Sidebar, useExpertNames } from "../chat/Sidebar.js"

/**
 * A conversation with an expert. `embedded` (the studio's test chat beside the editor): no sidebar, and the
 * conversation lives in the component, not in the address, and starts fresh.
 */
export const ChatPage = ({ identifier, embedded = false }: { identifier: string; embedded?: boolean }) => {
  const me = useMe()
  const location = useLocation()
  const search = embedded ? NEW_CHAT : location.search
  const [sessionId, setSessionId] = useState<string | null>(search.get("session"))
  const [title, setTitle] = useState(identifier)
  const [opening, setOpening] = useState("")
  const [turns, setTurns] = useState<Array<Turn>>([])
  const [message, setMessage] = useState("")
  const [error, setError] = useState<string | null>(null)
  const [failed, setFailed] = useState<Array<{ text: string; error: string }>>([])
  const [connection, setConnection] = useState<"live" | "reconnecting" | null>(null)
  const [unlocked, setUnlocked] = useState(false)
  const [unlocking, setUnlocking] = useState(false)
  const [details, setDetails] = useDetailsSetting()
  const [listVersion, setListVersion] = useState(0)
  // The conversations' drawer on the phone (on a wider screen the sidebar is always there).
  const [drawer, setDrawer] = useState(false)
  const users = useRef<UserSide | null>(null)
  /**
   * Turns this page is waiting to see end: those it sent, and one already running when it opened. Only their ends
   * read the wallet and the list again; the log replayed on opening ends every past turn, which read the wallet once
   * per past turn (issue 48: 19 of 37 requests).
   */
  const awaited = useRef(0)
  const input = useRef<HTMLTextAreaElement>(null)
  const scroller = useStickToBottom([turns, failed, error])

  // One per expert: messages typed in a row go out in that order, and a new conversation is created once.
  const outbox = useMemo(() =>
    makeOutbox({
      create: async (text) => {
        const session = await call((c) => c.sessions.create({ payload: { agent: identifier, title: text.slice(0, 80) } }))
        setSessionId(session.id)
        if (!embedded) navigate(`/chat/${identifier}?session=${session.id}`, true)
        setListVersion((n) => n + 1)
        return session.id
      },
      send: async (id, text) => {
        // Queued before the request: the turn's first events may arrive before its answer does.
        queueMessage(users.current, id, text)
        try {
          await sendToSession(id, { type: "message", message: text })
        } catch (failure) {
          unqueueMessage(users.current, id, text)
          throw failure
        }
      }
    }), [identifier, embedded])

  useEffect(() => {
    call((c) => c.market.agent({ path: { identifier } })).then(
      (a) => { setTitle(a.name); setOpening(a.opening_message) },
      () => call((c) => c.agents.get({ path: { identifier } })).then(
        (a) => { setTitle(a.name); setOpening(a.opening_message) },
        (e: Error) => setError(e.message)
      )
    )
    call((c) => c.purchases.status({ path: { agent: identifier } })).then((s) => setUnlocked(s.unlocked), () => undefined)
  }, [identifier])

  // The sidebar and "New chat" change the address: follow it (a session of its own, or a new conversation).
  useEffect(() => {
    const wanted = search.get("session")
    setDrawer(false)
    if (wanted === sessionId || (wanted === null && !search.has("new"))) return
    setSessionId(wanted)
    setFailed([])
    setError(null)
    if (wanted === null) {
      setTurns([])
      users.current = null
      outbox.reset()
      input.current?.focus()
    }
  }, [search])

  // Without ?session= (and not a new chat), continue the newest conversation with this expert, if any.
  useEffect(() => {
    if (sessionId !== null || search.has("new")) return
    call((c) => c.sessions.list({ urlParams: { limit: 100 } })).then((list) => {
      const found = itemsOf<{ id: string; agent: string }>(list).find((s) => s.agent === identifier)
      if (found) {
        setSessionId(found.id)
        if (!embedded) navigate(`/chat/${identifier}?session=${found.id}`, true)
      }
    }, () => undefined)
  }, [identifier, sessionId])

  useEffect(() => {
    if (sessionId === null) return
    let follow: { close: () => void } | undefined
    let cancelled = false
    setTurns([])
    call((c) => c.sessions.get({ path: { id: SessionId.make(sessionId) } })).then((session) => {
      if (cancelled) return
      const history = new Map<number, string>()
      for (const m of session.messages as ReadonlyArray<{ turn: number; role: string; content: unknown }>) {
        if (m.role === "user" && !history.has(m.turn)) history.set(m.turn, textOf(m.content))
      }
      // Messages sent before this page knew the session (its first) are already queued under its id.
      const side = new UserSide(sessionId, history)
      users.current = side
      if (session.status !== "idle") awaited.current = Math.max(awaited.current, 1)
      follow = followSession(sessionId, 0, (event) => {
        const user = event.type === "run.created" ? side.next() : null
        setTurns((old) => fold(old, event, user))
        if ((event.type === "run.completed" || event.type === "run.failed") && awaited.current > 0) {
          awaited.current--
          void me.refresh()
          // The sidebar shows each conversation's last message: read the list again after each turn.
          setListVersion((n) => n + 1)
        }
      }, setConnection)
    }, (e: Error) => setError(e.message))
    return () => {
      cancelled = true
      follow?.close()
    }
  }, [sessionId])

  const running = turns.at(-1)?.status === "running"

  const deliver = async (text: string) => {
    setError(null)
    awaited.current++
    const failure = await outbox.deliver(sessionId, text)
    if (failure) {
      awaited.current = Math.max(0, awaited.current - 1)
      setFailed((f) => [...f, { text, error: failure.message }])
    }
  }

  const send = async (e?: FormEvent) => {
    e?.preventDefault()
    const text = message.trim()
    if (!text) return
    setMessage("")
    scroller.stick()
    await deliver(text)
  }

  const retry = async (index: number) => {
    const item = failed[index]
    if (!item) return
    setFailed((f) => f.filter((_, i) => i !== index))
    await deliver(item.text)
  }

  const answer = async (approval: Approval, decision: "approve" | "deny") => {
    if (sessionId === null) return
    try {
      await sendToSession(sessionId, { type: "approval", approval_id: approval.approval_id, decision })
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  const interrupt = async () => {
    if (sessionId === null) return
    try {
      await call((c) => c.sessions.interrupt({ path: { id: SessionId.make(sessionId) } }))
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  /** Unlocks the expert, then sends again the message the used-up trial held back. */
  const unlock = async (blocked: string | null) => {
    setUnlocking(true)
    setError(null)
    try {
      await call((c) => c.purchases.purchase({ payload: { agent: identifier } }))
      setUnlocked(true)
      me.refresh()
      if (blocked) await deliver(blocked)
    } catch (failure) {
      setError((failure as Error).message)
    } finally {
      setUnlocking(false)
    }
  }

  /** Enter sends, Shift+Enter is a new line, Escape stops the answer, ↑ in an empty box brings back the last message. */
  const onKey = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault()
      void send()
    } else if (e.key === "Escape" && running) {
      e.preventDefault()
      void interrupt()
    } else if (e.key === "ArrowUp" && message === "") {
      // No editing of sent messages yet (the conversation-trees API): the last one comes back to be sent again.
      const last = [...turns].reverse().find((t) => t.user !== null)?.user ?? failed.at(-1)?.text
      if (last) {
        e.preventDefault()
        setMessage(last)
      }
    }
  }

  const live = useMemo(() => turns.at(-1)?.text ?? "", [turns])
  return (
    <div className={embedded ? "chat-embedded" : "chat-layout"}>
    {!embedded && <Sidebar identifier={identifier} current={sessionId} version={listVersion} open={drawer} onClose={() => setDrawer(false)} />}
    <section className="chat">
      <header className="chat-head">
        {embedded ? <h3>{title}</h3> : <h1>{title}</h1>}
        {!embedded && (
          <button type="button" className="drawer-toggle secondary" aria-expanded={drawer} onClick={() => setDrawer((open) => !open)}>
            Conversations
          </button>
        )}
        <p className="muted">
          <Link to={`/marketplace/${identifier}`}>About this expert</Link> · Balance {formatCredits(me.balance)}
          {connection === "reconnecting" && <span role="status"> · Reconnecting…</span>}
        </p>
      </header>
      <ModelBanner />
      <div className="scroller" ref={scroller.ref} onScroll={scroller.onScroll} onWheel={scroller.onWheel} onKeyDown={scroller.onKeyDown} data-testid="conversation" tabIndex={0} role="region" aria-label="Conversation">
        <ol className="turns" aria-live="off">
          {opening && <li className="turn"><div className="bubble assistant">{opening}</div></li>}
          {!opening && turns.length === 0 && failed.length === 0 && (
            <li className="turn empty-state muted" data-testid="empty-chat">
              Ask {title} anything: write your message below and press Enter.
            </li>
          )}
          {turns.map((turn, i) => (
            <TurnView key={i} turn={turn} unlocked={unlocked} unlocking={unlocking} details={details} onUnlock={() => void unlock(turn.user)} />
          ))}
          {failed.map((item, i) => (
            <li key={`failed-${i}`} className="turn">
              <div className="bubble user failed"><span className="visually-hidden">You: </span>{item.text}</div>
              <p className="error" role="alert">
                Not sent: {item.error} <button type="button" className="secondary" onClick={() => void retry(i)}>Retry</button>
              </p>
            </li>
          ))}
        </ol>
      </div>
      {!scroller.atBottom && (
        <button type="button" className="jump secondary" onClick={scroller.jump}>Jump to latest ↓</button>
      )}
      <p className="visually-hidden" aria-live="polite">{running ? "" : live}</p>
      {error && <p role="alert" className="error">{error}</p>}
      <Approvals turns={turns} onAnswer={answer} />
      <form onSubmit={send} className="composer" aria-label="Send a message">
        <label className="visually-hidden" htmlFor="message">Message</label>
        <textarea
          id="message"
          ref={input}
          rows={2}
          value={message}
          placeholder="Write a message (Enter sends, Shift+Enter for a new line)"
          onChange={(e) => setMessage(e.target.value)}
          onKeyDown={onKey}
        />
        <div className="row">
          <button type="submit" disabled={!message.trim()}>Send</button>
          {running && <button type="button" className="danger" onClick={() => void interrupt()}>Stop</button>}
          <label className="check small setting">
            <input type="checkbox" checked={details} onChange={(e) => setDetails(e.target.checked)} />
            Always show thinking and credits
          </label>
        </div>
      </form>
    </section>
    </div>
  )
}

const textOf = (content: unknown): string => {
  if (typeof content === "string") return content
  if (Array.isArray(content)) {
    return content.map((part) => typeof part === "object" && part !== null && "text" in part ? String((part as { text: unknown }).text) : "").join("")
  }
  return JSON.stringify(content)
}

/**
 * Keeps the newest turn in view while it streams, unless the person scrolled up to read: then a "Jump to latest"
 * button brings them back (and keeps following from there).
 */
const useStickToBottom = (deps: ReadonlyArray<unknown>) => {
  const ref = useRef<HTMLDivElement>(null)
  const stuck = useRef(true)
  const [atBottom, setAtBottom] = useState(true)
  const toBottom = () => {
    const el = ref.current
    if (el) el.scrollTop = el.scrollHeight
  }
  useLayoutEffect(() => {
    if (stuck.current) toBottom()
  }, deps)
  const onScroll = () => {
    const el = ref.current
    if (!el) return
    const near = el.scrollHeight - el.scrollTop - el.clientHeight < 48
    stuck.current = near
    setAtBottom(near)
  }
  const stick = () => {
    stuck.current = true
    setAtBottom(true)
  }
  // A wheel or key that scrolls up lets go at once: waiting for the scroll event would lose to the next streamed
  // piece, which scrolls back to the bottom first.
  const letGo = () => {
    stuck.current = false
    setAtBottom(false)
  }
  const onWheel = (e: WheelEvent<HTMLDivElement>) => {
    if (e.deltaY < 0) letGo()
  }
  const onKeyDown = (e: KeyboardEvent<HTMLDivElement>) => {
    if (e.key === "PageUp" || e.key === "ArrowUp" || e.key === "Home") letGo()
  }
  const jump = () => {
    stick()
    toBottom()
  }
  return { ref, onScroll, onWheel, onKeyDown, atBottom, stick, jump }
}

const NEW_CHAT = new URLSearchParams("new=1")

export const ChatListPage = () => {
  const [sessions, setSessions] = useState<ReadonlyArray<SessionItem> | null>(null)
  const [error, setError] = useState<string | null>(null)
  const known = useExpertNames(sessions)
  useEffect(() => {
    call((c) => c.sessions.list({ urlParams: { limit: 100 } })).then((l) => setSessions(itemsOf<SessionItem>(l)), (e: Error) => setError(e.message))
  }, [])
  return (
    <section className="stack">
      <h1>My conversations</h1>
      {error && <p role="alert" className="error">{error}</p>}
      {sessions !== null && sessions.length === 0 && <p>No conversations yet. Find an expert in the <Link to="/marketplace">marketplace</Link>.</p>}
      <ul className="list">
        {sessions?.map((s) => (
          <li key={s.id} className="card">
            <Link to={`/chat/${s.agent}?session=${s.id}`}>{known[s.agent] ?? s.agent}: {s.title || "Untitled conversation"}</Link>
            {s.last_message && <p className="conversation-last" data-testid="last-message">{readablePreview(s.last_message)}</p>}
            <p className="muted small">{new Date(s.updated_at).toLocaleString()}</p>
          </li>
        ))}
      </ul>
    </section>
  )
}
