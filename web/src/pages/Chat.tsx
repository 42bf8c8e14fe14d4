import { useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState, type FormEvent, type KeyboardEvent, type WheelEvent } from "react"
import { SessionId } from "../../../src/platform/Ids.js"
import { call, itemsOf } from "../api.js"
import { Link, navigate, useLocation } from "../router.js"
import { formatCredits, useMe } from "../session.js"
import { followSession, sendToSession } from "../stream.js"
import { type Approval, fold, queueMessage, type Turn, unqueueMessage, UserSide } from "../chat/fold.js"
import { makeOutbox } from "../chat/outbox.js"
import { type Attachment, ATTACHMENTS_PER_MESSAGE, readAttachment, splitAttachments, withAttachments } from "../chat/attachments.js"
import { ModelBanner } from "../ModelBanner.js"
import { MemoryPanel } from "../chat/MemoryPanel.js"
import { Approvals, type BranchControls, type FeedbackControls, MessageText, TurnView, useDetailsSetting } from "../chat/TurnView.js"
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
  // The conversation's tree (issue 44): which turns are on the current branch, and each turn's versions.
  const [tree, setTree] = useState<TreeState | null>(null)
  /** The user's messages of the turns on the current branch, by turn number (the history's full text). */
  const [userByTurn, setUserByTurn] = useState<ReadonlyMap<number, string>>(new Map())
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
  /** This person's thumbs on the answers, by turn number. */
  const [ratings, setRatings] = useState<Record<number, "up" | "down" | null>>({})
  /**
   * Turns this page is waiting to see end: those it sent, and one already running when it opened. Only their ends
   * read the wallet and the list again; the log replayed on opening ends every past turn, which read the wallet once
   * per past turn (issue 48: 19 of 37 requests).
   */
  const awaited = useRef(0)
  const input = useRef<HTMLTextAreaElement>(null)
  /** Files chosen for the next message, and those of messages sent but not yet accepted (by the message's text). */
  const [attachments, setAttachments] = useState<ReadonlyArray<Attachment>>([])
  const [attachError, setAttachError] = useState<string | null>(null)
  const pendingFiles = useRef(new Map<string, ReadonlyArray<Attachment>>())
  const picker = useRef<HTMLInputElement>(null)
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
        // The message's files go to the conversation first: the turn may read them (read_file) as soon as it starts.
        for (const file of pendingFiles.current.get(text) ?? []) {
          await call((c) => c.sessions.attach({ path: { id: SessionId.unchecked.make(id) }, payload: file }))
        }
        pendingFiles.current.delete(text)
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

  /** Which read of the tree is the newest asked for: an older one answering after it is not shown. */
  const branchReads = useRef(0)
  /** Reads the tree and the current branch's messages again (after a turn ended, or a switch). */
  const refreshBranch = async (id: string) => {
    const read = ++branchReads.current
    const [session, shape] = await Promise.all([
      call((c) => c.sessions.get({ path: { id: SessionId.unchecked.make(id) } })),
      call((c) => c.sessions.tree({ path: { id: SessionId.unchecked.make(id) } }))
    ])
    // Reads after two turns' ends can answer out of order: the later turn stays shown when the earlier read lands.
    if (read === branchReads.current) {
      setUserByTurn(userMessagesOf(session.messages))
      setTree(shape as TreeState)
    }
    return { session, shape: shape as TreeState }
  }

  useEffect(() => {
    if (sessionId === null) return
    let follow: { close: () => void } | undefined
    let cancelled = false
    setTurns([])
    setTree(null)
    setRatings({})
    call((c) => c.sessions.feedback({ path: { id: SessionId.unchecked.make(sessionId) }, urlParams: {} })).then(
      (list) => { if (!cancelled) setRatings(Object.fromEntries(list.data.map((f) => [f.turn, f.rating]))) },
      () => undefined
    )
    refreshBranch(sessionId).then(({ session, shape }) => {
      if (cancelled) return
      const history = new Map(userMessagesOf(session.messages))
      // Turns of the tree off the current branch: the log replays them too, each with its own message.
      const offBranch = new Map(shape.turns.filter((t) => !history.has(t.turn)).map((t) => [t.turn, t.message_preview] as const))
      // Messages sent before this page knew the session (its first) are already queued under its id.
      const side = new UserSide(sessionId, history)
      users.current = side
      if (session.status !== "idle") awaited.current = Math.max(awaited.current, 1)
      follow = followSession(sessionId, 0, (event) => {
        const number = typeof event.session_turn === "number" ? event.session_turn : undefined
        // The log's own word (`input`) first: what this tab queued is only a guess, which a reload mid-turn, a
        // message sent from another tab, or a race with the session's creation can make wrong.
        const guessed = event.type !== "run.created"
          ? null
          : number !== undefined && offBranch.has(number)
          ? offBranch.get(number)!
          : side.next(number)
        const user = event.type === "run.created" && typeof event.input === "string" ? event.input : guessed
        setTurns((old) => fold(old, event, user))
        if ((event.type === "run.completed" || event.type === "run.failed") && awaited.current > 0) {
          awaited.current--
          void me.refresh()
          // The sidebar shows each conversation's last message: read the list again after each turn.
          setListVersion((n) => n + 1)
          // The turn that ended is on the tree now, and the session's leaf may have moved.
          void refreshBranch(sessionId).catch(() => undefined)
        }
      }, setConnection)
    }, (e: Error) => setError(e.message))
    return () => {
      cancelled = true
      follow?.close()
    }
  }, [sessionId])

  const running = turns.at(-1)?.status === "running"

  /** The turns the page shows: those on the current branch, and those not on the tree yet (running, or just sent). */
  const shown = useMemo(() => {
    if (tree === null) return turns.filter((t) => t.number === undefined)
    const onTree = new Set(tree.turns.map((t) => t.turn))
    const path = pathSet(tree)
    return turns
      .filter((t) => t.number === undefined || !onTree.has(t.number) || path.has(t.number))
      .map((t) => t.number !== undefined && userByTurn.has(t.number) ? { ...t, user: userByTurn.get(t.number)! } : t)
  }, [turns, tree, userByTurn])

  /** Sends a turn of the tree (a regenerated answer, an edited message): its message is shown as the user's. */
  const branchOut = async (text: string, body: Record<string, unknown>) => {
    if (sessionId === null) return
    setError(null)
    awaited.current++
    queueMessage(users.current, sessionId, text)
    try {
      await sendToSession(sessionId, body)
    } catch (failure) {
      unqueueMessage(users.current, sessionId, text)
      awaited.current = Math.max(0, awaited.current - 1)
      setError((failure as Error).message)
    }
  }

  const switchTo = async (turn: number) => {
    if (sessionId === null || tree === null) return
    try {
      const leaf = newestLeafUnder(tree, turn)
      await call((c) => c.sessions.update({ path: { id: SessionId.unchecked.make(sessionId) }, payload: { leaf } }))
      await refreshBranch(sessionId)
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  const controlsOf = (turn: Turn): BranchControls | undefined => {
    const node = turn.number === undefined ? undefined : tree?.turns.find((t) => t.turn === turn.number)
    if (node === undefined || tree === null || embedded) return undefined
    const siblings = tree.turns.filter((t) => t.parent_turn === node.parent_turn).map((t) => t.turn).sort((a, b) => a - b)
    const at = siblings.indexOf(node.turn)
    return {
      onRegenerate: () => void branchOut(turn.user ?? node.message_preview, { type: "regenerate", turn: node.turn }),
      onEdit: (text) => void branchOut(text, { type: "message", message: text, parent_turn: node.parent_turn }),
      versions: siblings.length > 1
        ? {
          n: at + 1,
          m: siblings.length,
          onPrevious: () => void switchTo(siblings[at - 1]!),
          onNext: () => void switchTo(siblings[at + 1]!)
        }
        : undefined
    }
  }

  /** Thumbs on a finished answer of this conversation (not in the studio's test chat: a creator's own tries). */
  const feedbackOf = (turn: Turn): FeedbackControls | undefined => {
    const number = turn.number
    if (number === undefined || sessionId === null || embedded || turn.status === "running") return undefined
    const path = { id: SessionId.unchecked.make(sessionId), turn: number }
    return {
      rating: ratings[number] ?? null,
      onRate: async (rating, reason, share) => {
        const payload = { rating, ...(reason?.trim() ? { reason: reason.trim() } : {}), ...(share ? { share } : {}) }
        await call((c) => c.sessions.rate({ path, payload }))
        setRatings((r) => ({ ...r, [number]: rating }))
      },
      onClear: async () => {
        await call((c) => c.sessions.unrate({ path }))
        setRatings((r) => ({ ...r, [number]: null }))
      }
    }
  }

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
    const text = withAttachments(message.trim(), attachments)
    if (!text) return
    if (attachments.length > 0) pendingFiles.current.set(text, attachments)
    setAttachments([])
    setAttachError(null)
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
      await call((c) => c.sessions.interrupt({ path: { id: SessionId.unchecked.make(sessionId) } }))
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
      // The last message comes back to be sent again (Edit on a message makes a new version of it instead).
      const last = [...turns].reverse().find((t) => t.user !== null)?.user ?? failed.at(-1)?.text
      if (last) {
        e.preventDefault()
        setMessage(splitAttachments(last).text)
      }
    }
  }

  const live = useMemo(() => shown.at(-1)?.text ?? "", [shown])
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
        {/* In the header, closed to one line beside the title: the conversation keeps its height. */}
        {!embedded && <MemoryPanel identifier={identifier} version={listVersion} />}
        <p className="muted">
          <Link to={`/marketplace/${identifier}`}>About this expert</Link> · Balance {formatCredits(me.balance)}
          {connection === "reconnecting" && <span role="status"> · Reconnecting…</span>}
        </p>
      </header>
      <ModelBanner />
      <div className="scroller" ref={scroller.ref} onScroll={scroller.onScroll} onWheel={scroller.onWheel} onKeyDown={scroller.onKeyDown} data-testid="conversation" tabIndex={0} role="region" aria-label="Conversation">
        <ol className="turns" aria-live="off">
          {opening && <li className="turn"><div className="bubble assistant">{opening}</div></li>}
          {!opening && shown.length === 0 && failed.length === 0 && (
            <li className="turn empty-state muted" data-testid="empty-chat">
              Ask {title} anything: write your message below and press Enter.
            </li>
          )}
          {shown.map((turn, i) => (
            <TurnView
              key={turn.number ?? `n${i}`}
              turn={turn}
              unlocked={unlocked}
              unlocking={unlocking}
              details={details}
              onUnlock={() => void unlock(turn.user)}
              branch={controlsOf(turn)}
              feedback={feedbackOf(turn)}
            />
          ))}
          {failed.map((item, i) => (
            <li key={`failed-${i}`} className="turn">
              <div className="bubble user failed"><span className="visually-hidden">You: </span><MessageText text={item.text} /></div>
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
        {attachments.length > 0 && (
          <ul className="attachments" aria-label="Files attached to this message">
            {attachments.map((file) => (
              <li key={file.name} className="attachment-chip">
                <span aria-hidden="true">📎</span> {file.name}{" "}
                <button type="button" className="link" onClick={() => setAttachments((all) => all.filter((f) => f.name !== file.name))}>
                  Remove<span className="visually-hidden"> {file.name}</span>
                </button>
              </li>
            ))}
          </ul>
        )}
        {attachError && <p role="alert" className="error small">{attachError}</p>}
        <input
          ref={picker}
          type="file"
          multiple
          hidden
          data-testid="attach-input"
          accept=".txt,.md,.markdown,.csv,.tsv,.json,.jsonl,.yaml,.yml,.xml,.html,.css,.js,.ts,.tsx,.jsx,.py,.rb,.go,.rs,.java,.c,.h,.cpp,.sql,.sh,.log,.ini,.toml,text/*"
          onChange={(e) => {
            const chosen = [...(e.target.files ?? [])]
            e.target.value = ""
            void (async () => {
              const read = await Promise.all(chosen.map(readAttachment))
              const problems = read.filter((r): r is string => typeof r === "string")
              const files = read.filter((r): r is Attachment => typeof r !== "string")
              setAttachments((all) => {
                // The same name chosen again replaces the earlier one, as it does in the conversation's files.
                const next = [...all.filter((f) => !files.some((n) => n.name === f.name)), ...files]
                if (next.length > ATTACHMENTS_PER_MESSAGE) problems.push(`At most ${ATTACHMENTS_PER_MESSAGE} files a message: the first ${ATTACHMENTS_PER_MESSAGE} are kept.`)
                return next.slice(0, ATTACHMENTS_PER_MESSAGE)
              })
              setAttachError(problems.length > 0 ? problems.join(" ") : null)
            })()
          }}
        />
        <div className="row">
          <button type="submit" disabled={!message.trim() && attachments.length === 0}>Send</button>
          <button type="button" className="secondary" onClick={() => picker.current?.click()}>Attach a file</button>
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

/** The tree as `GET /v1/sessions/:id/tree` answers it. */
interface TreeState {
  readonly leaf: number | null
  readonly turns: ReadonlyArray<{ readonly turn: number; readonly parent_turn: number | null; readonly message_preview: string; readonly children: ReadonlyArray<number> }>
}

/** The turns from the root to the leaf. */
const pathSet = (tree: TreeState) => {
  const parents = new Map(tree.turns.map((t) => [t.turn, t.parent_turn] as const))
  const path = new Set<number>()
  for (let at = tree.leaf; at !== null && !path.has(at) && parents.has(at); at = parents.get(at) ?? null) path.add(at)
  return path
}

/** Where switching to `turn` lands: the newest leaf under it (its newest child, that one's newest child, ...). */
const newestLeafUnder = (tree: TreeState, turn: number) => {
  const children = new Map(tree.turns.map((t) => [t.turn, t.children] as const))
  let at = turn
  for (let next = children.get(at) ?? []; next.length > 0; next = children.get(at) ?? []) at = Math.max(...next)
  return at
}

const userMessagesOf = (messages: ReadonlyArray<unknown>) => {
  const users = new Map<number, string>()
  for (const m of messages as ReadonlyArray<{ turn: number; role: string; content: unknown }>) {
    if (m.role === "user" && !users.has(m.turn)) users.set(m.turn, textOf(m.content))
  }
  return users
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
 *
 * Followed by state and by size. A change of `deps` (the turns) scrolls in the same commit, before the page paints.
 * They are not all that moves the end: the tree read after a turn ends adds Edit and Regenerate, the model banner
 * and the header's status shrink the box; those came after the last scroll and left the end below the fold (the
 * browser suite's "the newest answer is in view" failed under load when they landed before its check). So a
 * ResizeObserver on the box and its list follows any change of size too, a frame later. Only a scroll up lets go:
 * a scroll event sees the distance to the end when it is dispatched, a frame after the scroll, when the content may
 * have grown again without anyone scrolling.
 */
const useStickToBottom = (deps: ReadonlyArray<unknown>) => {
  const box = useRef<HTMLDivElement | null>(null)
  const stuck = useRef(true)
  const lastTop = useRef(0)
  const [atBottom, setAtBottom] = useState(true)
  const toBottom = () => {
    const el = box.current
    if (el) el.scrollTop = el.scrollHeight
  }
  useLayoutEffect(() => {
    if (stuck.current) toBottom()
  }, deps)
  const observer = useRef<ResizeObserver | null>(null)
  const ref = useCallback((el: HTMLDivElement | null) => {
    observer.current?.disconnect()
    observer.current = null
    box.current = el
    if (el === null) return
    observer.current = new ResizeObserver(() => {
      if (stuck.current) toBottom()
    })
    observer.current.observe(el)
    for (const child of el.children) observer.current.observe(child)
  }, [])
  const onScroll = () => {
    const el = box.current
    if (!el) return
    if (el.scrollHeight - el.scrollTop - el.clientHeight < 48) {
      stuck.current = true
      setAtBottom(true)
    } else if (el.scrollTop < lastTop.current) {
      stuck.current = false
      setAtBottom(false)
    }
    lastTop.current = el.scrollTop
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
