import { useEffect, useMemo, useRef, useState, type FormEvent, type KeyboardEvent } from "react"
import { call, itemsOf } from "../api.js"
import { Link, navigate, useLocation } from "../router.js"
import { formatCredits, useMe } from "../session.js"
import { followSession, sendToSession, type SessionEvent } from "../stream.js"

interface ToolCall {
  id: string
  name: string
  args: string
  status: string
  result?: unknown
  error?: unknown
  reason?: unknown
}

interface Approval {
  approval_id: string
  tool_call_id: string
  name: string
  arguments: unknown
  expires_at: string
  answered: boolean
}

interface Turn {
  user: string | null
  text: string
  thinking: string
  tools: Array<ToolCall>
  approvals: Array<Approval>
  status: "running" | "completed" | "failed"
  failure?: { code: string; message: string }
  trial?: { price: unknown; trials_used: unknown }
  budget?: { reason: string; spent: unknown; budget: unknown }
  credits?: number
}

/** Folds the session's events, in order, into its turns (docs/events.md). */
const fold = (turns: Array<Turn>, event: SessionEvent, userOf: (index: number) => string | null): Array<Turn> => {
  if (event.type === "run.created") {
    return [...turns, { user: userOf(turns.length), text: "", thinking: "", tools: [], approvals: [], status: "running" }]
  }
  const last = turns.at(-1)
  if (!last) return turns
  const turn: Turn = { ...last, tools: [...last.tools], approvals: [...last.approvals] }
  const tool = (id: unknown) => {
    const index = turn.tools.findIndex((t) => t.id === id)
    if (index < 0) return undefined
    const copy = { ...turn.tools[index]! }
    turn.tools[index] = copy
    return copy
  }
  const settle = (toolCallId: unknown) => {
    turn.approvals = turn.approvals.map((a) => a.tool_call_id === toolCallId ? { ...a, answered: true } : a)
  }
  switch (event.type) {
    case "output.text.delta":
      turn.text += String(event.delta ?? "")
      break
    case "output.thinking.delta":
      turn.thinking += String(event.delta ?? "")
      break
    case "tool_call.created":
      turn.tools.push({
        id: String(event.tool_call_id),
        name: String(event.name),
        args: event.arguments === undefined ? "" : typeof event.arguments === "string" ? event.arguments : JSON.stringify(event.arguments),
        status: "pending"
      })
      break
    case "tool_call.arguments.delta": {
      const t = tool(event.tool_call_id)
      if (t) t.args += String(event.delta ?? "")
      break
    }
    case "tool_call.in_progress":
    case "tool_call.completed":
    case "tool_call.failed": {
      const t = tool(event.tool_call_id)
      if (t) {
        t.status = String(event.status ?? event.type.split(".")[1])
        if (event.error !== undefined) t.error = event.error
      }
      settle(event.tool_call_id)
      break
    }
    case "tool_call.result": {
      const t = tool(event.tool_call_id)
      if (t) t.result = event.output
      break
    }
    case "tool_call.denied": {
      const t = tool(event.tool_call_id)
      if (t) {
        t.status = "denied"
        t.reason = event.reason
      }
      settle(event.tool_call_id)
      break
    }
    case "approval.required":
      turn.approvals.push({
        approval_id: String(event.approval_id),
        tool_call_id: String(event.tool_call_id),
        name: String(event.name),
        arguments: event.arguments,
        expires_at: String(event.expires_at),
        answered: false
      })
      break
    case "usage.trial_exhausted":
      turn.trial = { price: event.price, trials_used: event.trials_used }
      break
    case "usage.budget_exhausted":
      turn.budget = { reason: String(event.reason), spent: event.spent, budget: event.budget }
      break
    case "run.completed":
      turn.status = "completed"
      turn.credits = Number(event.credits_charged ?? 0)
      turn.approvals = turn.approvals.map((a) => ({ ...a, answered: true }))
      break
    case "run.failed":
      turn.status = "failed"
      turn.failure = { code: String(event.code), message: String(event.message ?? "") }
      turn.approvals = turn.approvals.map((a) => ({ ...a, answered: true }))
      break
    default:
      return turns
  }
  return [...turns.slice(0, -1), turn]
}

const FAILURES: Record<string, string> = {
  interrupted: "You stopped this answer.",
  insufficient_credits: "Your wallet does not have enough credits for this. Top up in the wallet and try again.",
  budget_exceeded: "This answer reached its spending limit and stopped.",
  agent_unavailable: "This expert is not available any more.",
  session_deleted: "This conversation was deleted."
}

const Countdown = ({ until }: { until: string }) => {
  const [now, setNow] = useState(Date.now())
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000)
    return () => clearInterval(timer)
  }, [])
  const left = Math.max(0, Math.round((new Date(until).getTime() - now) / 1000))
  return <span className="muted">{left > 0 ? `${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")} left to answer` : "expired"}</span>
}

const pretty = (value: unknown) => {
  if (value === undefined || value === null || value === "") return ""
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2)
    } catch {
      return value
    }
  }
  return JSON.stringify(value, null, 2)
}

const TurnView = ({ turn, onAnswer, onUnlock }: {
  turn: Turn
  onAnswer: (approval: Approval, decision: "approve" | "deny") => void
  onUnlock: () => void
}) => (
  <li className="turn">
    {turn.user !== null && <div className="bubble user"><span className="visually-hidden">You: </span>{turn.user}</div>}
    <div className="bubble assistant" aria-busy={turn.status === "running"}>
      <span className="visually-hidden">Expert: </span>
      {turn.thinking && (
        <details className="thinking">
          <summary>Thinking</summary>
          <p>{turn.thinking}</p>
        </details>
      )}
      {turn.tools.map((tool) => (
        <details key={tool.id} className={`tool tool-${tool.status}`} open={tool.status === "pending"}>
          <summary>Tool <code>{tool.name}</code>: <span data-testid="tool-status">{tool.status}</span></summary>
          {tool.args && <><h4>Arguments</h4><pre>{pretty(tool.args)}</pre></>}
          {tool.result !== undefined && <><h4>Result</h4><pre>{pretty(tool.result)}</pre></>}
          {tool.error !== undefined && <><h4>Error</h4><pre>{pretty(tool.error)}</pre></>}
          {tool.reason !== undefined && <p>Refused: {String(tool.reason)}</p>}
        </details>
      ))}
      {turn.approvals.filter((a) => !a.answered).map((approval) => (
        <div key={approval.approval_id} className="approval" role="group" aria-label={`Approve the tool ${approval.name}?`}>
          <p>The expert wants to run <code>{approval.name}</code> with:</p>
          <pre>{pretty(approval.arguments)}</pre>
          <div className="row">
            <button type="button" onClick={() => onAnswer(approval, "approve")}>Approve</button>
            <button type="button" className="danger" onClick={() => onAnswer(approval, "deny")}>Deny</button>
            <Countdown until={approval.expires_at} />
          </div>
        </div>
      ))}
      {turn.text && <p className="answer" data-testid="answer">{turn.text}</p>}
      {turn.status === "running" && <p className="typing" aria-hidden="true">…</p>}
      {turn.trial && (
        <div className="notice" role="alert">
          <p>Your free trials with this expert are used up. Unlock it to keep chatting.</p>
          <button type="button" onClick={onUnlock}>Unlock for {formatCredits(Number(turn.trial.price))}</button>
        </div>
      )}
      {turn.budget && (
        <p className="notice" role="alert">
          {turn.budget.reason === "wallet"
            ? "Your wallet ran out of credits during this answer. Top up in the wallet to continue."
            : "This answer reached its budget and stopped."}
        </p>
      )}
      {turn.status === "failed" && turn.failure && (
        <p className="error" role="alert" data-testid="failure">
          {FAILURES[turn.failure.code] ?? `The answer failed: ${turn.failure.message || turn.failure.code}`}
        </p>
      )}
      {turn.status === "completed" && turn.credits !== undefined && turn.credits > 0 && (
        <p className="muted small">Charged {formatCredits(turn.credits)}</p>
      )}
    </div>
  </li>
)

export const ChatPage = ({ identifier }: { identifier: string }) => {
  const me = useMe()
  const { search } = useLocation()
  const [sessionId, setSessionId] = useState<string | null>(search.get("session"))
  const [title, setTitle] = useState(identifier)
  const [opening, setOpening] = useState("")
  const [turns, setTurns] = useState<Array<Turn>>([])
  const [message, setMessage] = useState("")
  const [error, setError] = useState<string | null>(null)
  const [connection, setConnection] = useState<"live" | "reconnecting" | null>(null)
  const history = useRef<Array<string>>([])
  /** Messages sent from this page, in order: the user side of the turns the history does not have yet. */
  const sent = useRef<Array<string>>([])
  const input = useRef<HTMLTextAreaElement>(null)

  useEffect(() => {
    call((c) => c.market.agent({ path: { identifier } })).then(
      (a) => { setTitle(a.name); setOpening(a.opening_message) },
      () => call((c) => c.agents.get({ path: { identifier } })).then(
        (a) => { setTitle(a.name); setOpening(a.opening_message) },
        (e: Error) => setError(e.message)
      )
    )
  }, [identifier])

  // Without ?session=, continue the newest conversation with this expert, if any.
  useEffect(() => {
    if (sessionId !== null) return
    call((c) => c.sessions.list({ urlParams: { limit: 100 } })).then((list) => {
      const found = itemsOf<{ id: string; agent: string }>(list).find((s) => s.agent === identifier)
      if (found) {
        setSessionId(found.id)
        navigate(`/chat/${identifier}?session=${found.id}`, true)
      }
    }, () => undefined)
  }, [identifier, sessionId])

  useEffect(() => {
    if (sessionId === null) return
    let follow: { close: () => void } | undefined
    let cancelled = false
    setTurns([])
    call((c) => c.sessions.get({ path: { id: sessionId } })).then((session) => {
      if (cancelled) return
      const users = new Map<number, string>()
      for (const m of session.messages as ReadonlyArray<{ turn: number; role: string; content: unknown }>) {
        if (m.role === "user" && !users.has(m.turn)) users.set(m.turn, typeof m.content === "string" ? m.content : JSON.stringify(m.content))
      }
      history.current = [...users.entries()].sort((a, b) => a[0] - b[0]).map(([, text]) => text)
      const stored = sessionStorage.getItem(`atrium.pending.${sessionId}`)
      sent.current = []
      const userOf = (index: number) =>
        history.current[index] ?? sent.current[index - history.current.length] ?? (index === history.current.length ? stored : null)
      follow = followSession(sessionId, 0, (event) => {
        setTurns((old) => fold(old, event, userOf))
        if (event.type === "run.completed" || event.type === "run.failed") me.refresh()
      }, setConnection)
    }, (e: Error) => setError(e.message))
    return () => {
      cancelled = true
      follow?.close()
    }
  }, [sessionId])

  const running = turns.at(-1)?.status === "running"

  const send = async (e?: FormEvent) => {
    e?.preventDefault()
    const text = message.trim()
    if (!text) return
    setError(null)
    try {
      let id = sessionId
      if (id === null) {
        const session = await call((c) => c.sessions.create({ payload: { agent: identifier, title: text.slice(0, 80) } }))
        id = session.id
      }
      sent.current.push(text)
      sessionStorage.setItem(`atrium.pending.${id}`, text)
      if (id !== sessionId) {
        setSessionId(id)
        navigate(`/chat/${identifier}?session=${id}`, true)
      }
      setMessage("")
      await sendToSession(id, { type: "message", message: text })
    } catch (failure) {
      setError((failure as Error).message)
    }
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
      await call((c) => c.sessions.interrupt({ path: { id: sessionId } }))
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  const unlock = async () => {
    try {
      await call((c) => c.purchases.purchase({ payload: { agent: identifier } }))
      me.refresh()
      setError(null)
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  const onKey = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault()
      void send()
    }
  }

  const live = useMemo(() => turns.at(-1)?.text ?? "", [turns])
  return (
    <section className="chat">
      <header className="chat-head">
        <h1>{title}</h1>
        <p className="muted">
          <Link to={`/marketplace/${identifier}`}>About this expert</Link> · Balance {formatCredits(me.balance)}
          {connection === "reconnecting" && <span role="status"> · Reconnecting…</span>}
        </p>
      </header>
      <ol className="turns" aria-label="Conversation" aria-live="off">
        {opening && <li className="turn"><div className="bubble assistant">{opening}</div></li>}
        {turns.map((turn, i) => <TurnView key={i} turn={turn} onAnswer={answer} onUnlock={unlock} />)}
      </ol>
      <p className="visually-hidden" aria-live="polite">{running ? "" : live}</p>
      {error && <p role="alert" className="error">{error}</p>}
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
        </div>
      </form>
    </section>
  )
}

interface SessionItem { id: string; agent: string; title: string | null; status: string; updated_at: string }

export const ChatListPage = () => {
  const [sessions, setSessions] = useState<ReadonlyArray<SessionItem> | null>(null)
  const [error, setError] = useState<string | null>(null)
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
            <Link to={`/chat/${s.agent}?session=${s.id}`}>{s.title || s.agent}</Link>
            <p className="muted small">{s.agent} · {s.status} · {new Date(s.updated_at).toLocaleString()}</p>
          </li>
        ))}
      </ul>
    </section>
  )
}
