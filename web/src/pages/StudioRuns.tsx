import * as Sse from "@effect/experimental/Sse"
import { useEffect, useRef, useState } from "react"
import { call, failureOf, itemsOf } from "../api.js"
import { readablePreview } from "../chat/Sidebar.js"
import { Link, navigate, useLocation } from "../router.js"
import { ListTable } from "./ListTable.js"
import { credits, duration, StudioHeader, when } from "./StudioTabs.js"
import { RunId } from "../../../src/runtime/Domain.js"

/** A run as `GET /v1/runs/:id` tells it (src/runs/Api.ts). */
interface Run {
  id: string
  agent: string | null
  status: "queued" | "in_progress" | "completed" | "failed" | "cancelled" | "incomplete"
  background: boolean
  output: string | null
  usage: { input_tokens: number; output_tokens: number }
  credits_charged: number
  error: { code: string; message: string } | null
  incomplete_details: { reason: string } | null
  session_id: string | null
  created_at: string
  started_at: string | null
  completed_at: string | null
  cancel_requested: boolean
}

const STATUS: Record<Run["status"], string> = {
  queued: "Waiting to start",
  in_progress: "Running",
  completed: "Completed",
  failed: "Failed",
  cancelled: "Cancelled",
  incomplete: "Stopped before finishing"
}

const REASONS: Record<string, string> = {
  max_duration: "it ran past its time limit",
  cancelled: "it was cancelled"
}

const live = (run: Run) => run.status === "queued" || run.status === "in_progress"

const statusOf = (run: Run) =>
  live(run) && run.cancel_requested ? "Cancelling" : STATUS[run.status] ?? run.status

/** From its start (or creation) to its end, or to now while it runs. */
const durationOf = (run: Run, now: number) => {
  const start = Date.parse(run.started_at ?? run.created_at)
  const end = run.completed_at ? Date.parse(run.completed_at) : live(run) ? now : NaN
  return duration(end - start)
}

const kindOf = (run: Run) =>
  run.session_id ? "Conversation turn" : run.background ? "Background run" : "Run"

const PAGE = 20

/** The runs of one expert, newest first (GET /v1/runs?agent=), and one run opened with `?run=`. */
export const StudioRunsPage = ({ identifier }: { identifier: string }) => {
  const { search } = useLocation()
  const open = search.get("run")
  return (
    <section className="stack">
      <StudioHeader identifier={identifier} title="Runs" />
      {open ? <RunDetail identifier={identifier} id={open} /> : <RunList identifier={identifier} />}
    </section>
  )
}

const RunList = ({ identifier }: { identifier: string }) => {
  const [runs, setRuns] = useState<ReadonlyArray<Run> | null>(null)
  const [more, setMore] = useState(false)
  const [error, setError] = useState<string | null>(null)
  const [now, setNow] = useState(Date.now())
  const count = useRef(PAGE)

  const load = (after?: string) =>
    call((c) => c.runs.listRuns({
      urlParams: after ? { agent: identifier, limit: PAGE, after } : { agent: identifier, limit: Math.min(100, Math.max(PAGE, count.current)) }
    })).then((page) => {
      const items = itemsOf<Run>(page)
      setRuns((old) => {
        const next = after ? [...(old ?? []), ...items] : items
        count.current = next.length
        return next
      })
      if (!after || items.length > 0) setMore(page.has_more)
      setError(null)
    }, (e: Error) => setError(e.message))

  useEffect(() => {
    count.current = PAGE
    void load()
  }, [identifier])

  // New runs (from the API, a schedule) appear by themselves; while one waits or runs, its status and duration are
  // read again every 2 s. A tab out of sight reads nothing.
  const anyLive = runs?.some(live) ?? false
  useEffect(() => {
    const timer = setInterval(() => {
      if (document.visibilityState === "hidden") return
      setNow(Date.now())
      void load()
    }, anyLive ? 2000 : 5000)
    return () => clearInterval(timer)
  }, [anyLive, identifier])

  return (
    <div className="stack">
      <p className="muted">
        The runs of this expert started with your account: through the API (<code>POST /v1/agents/run</code>, also in
        the background), by its schedules, and your own test chats. Open one to read what it did.
      </p>
      <div className="row">
        <button type="button" className="secondary" onClick={() => void load()}>Refresh</button>
      </div>
      {error && <p role="alert" className="error">{error}</p>}
      <ListTable
        caption="Runs, newest first"
        captionHidden
        testId="runs"
        rows={runs}
        rowKey={(run) => run.id}
        failed={error !== null}
        empty={
          <p className="empty-state" data-testid="runs-empty">
            No runs yet. Start one from the API with <code>POST /v1/agents/run</code> (add <code>"background": true</code> to
            run it without waiting), add a schedule in <Link to={`/studio/${identifier}/schedules`}>Schedules</Link>, or
            talk to it in the <Link to={`/chat/${identifier}`}>test chat</Link>.
          </p>
        }
        first={{
          label: "Started",
          cell: (run) => (
            <Link to={`/studio/${identifier}/runs?run=${encodeURIComponent(run.id)}`}>
              {when(run.started_at ?? run.created_at)}<span className="visually-hidden">: open this run</span>
            </Link>
          )
        }}
        columns={[
          { label: "Status", cell: (run) => <span className={`badge status-${run.status}`}>{statusOf(run)}</span> },
          { label: "Kind", cell: kindOf },
          { label: "Duration", numeric: true, cell: (run) => durationOf(run, now) },
          { label: "Credits", numeric: true, cell: (run) => credits(run.credits_charged) }
        ]}
        older={{ label: "Older runs", more, onClick: (last) => void load(last.id) }}
      />
    </div>
  )
}

/** One line of what a run did, as a person reads it. */
type Entry =
  | { kind: "text"; text: string }
  | { kind: "tool"; id: string; name: string; args: string; status: string; result?: string; error?: string }
  | { kind: "note"; text: string; tone?: "error" | "ok" }
  | { kind: "approval"; id: string; toolCallId: string; name: string; args: string; expiresAt: string; answered?: "approve" | "deny" }

interface Wire { readonly type: string; readonly [key: string]: unknown }

const str = (v: unknown) => typeof v === "string" ? v : v === undefined || v === null ? "" : JSON.stringify(v)

const FAILURES: Record<string, string> = {
  cancelled: "it was cancelled",
  max_duration: "it ran past its time limit",
  budget_exhausted: "the budget or the wallet could not pay the next step",
  max_steps: "the model kept calling tools (at most 12 model calls)",
  model_unavailable: "the expert's model is not configured on this platform",
  model_error: "the model failed"
}

/** An approval the run went on from (its tool ran or was refused): no longer waiting for an answer. */
const answered = (out: Array<Entry>, toolCallId: unknown, decision: "approve" | "deny") => {
  const i = out.findIndex((e) => e.kind === "approval" && e.toolCallId === toolCallId)
  const entry = out[i]
  if (entry?.kind === "approval" && entry.answered === undefined) out[i] = { ...entry, answered: decision }
}

/** Folds one event into the entries (docs/events.md); events a person has no use for are left out. */
const foldEvent = (entries: Array<Entry>, event: Wire): Array<Entry> => {
  const out = [...entries]
  const last = out[out.length - 1]
  const toolIndex = (id: unknown) => out.findIndex((e) => e.kind === "tool" && e.id === id)
  const updateTool = (id: unknown, patch: Partial<Extract<Entry, { kind: "tool" }>>) => {
    const i = toolIndex(id)
    if (i >= 0) out[i] = { ...(out[i] as Extract<Entry, { kind: "tool" }>), ...patch }
  }
  switch (event.type) {
    case "run.created":
      out.push({ kind: "note", text: "Started." })
      break
    case "output.text.delta": {
      const delta = str(event.delta ?? event.content)
      if (last?.kind === "text") out[out.length - 1] = { kind: "text", text: last.text + delta }
      else out.push({ kind: "text", text: delta })
      break
    }
    case "tool_call.created":
      if (toolIndex(event.tool_call_id) < 0) {
        out.push({ kind: "tool", id: str(event.tool_call_id), name: str(event.name), args: str(event.arguments), status: "pending" })
      }
      break
    case "tool_call.arguments.delta": {
      const i = toolIndex(event.tool_call_id)
      if (i >= 0) updateTool(event.tool_call_id, { args: (out[i] as Extract<Entry, { kind: "tool" }>).args + str(event.delta) })
      break
    }
    case "tool_call.in_progress":
      updateTool(event.tool_call_id, { status: "running" })
      answered(out, event.tool_call_id, "approve")
      break
    case "tool_call.completed":
      updateTool(event.tool_call_id, { status: "completed" })
      break
    case "tool_call.result":
      updateTool(event.tool_call_id, { result: str(event.output) })
      break
    case "tool_call.failed":
      updateTool(event.tool_call_id, { status: "failed", error: str(event.error) })
      break
    case "tool_call.denied":
      answered(out, event.tool_call_id, "deny")
      if (toolIndex(event.tool_call_id) < 0) out.push({ kind: "tool", id: str(event.tool_call_id), name: str(event.name), args: "", status: "denied" })
      updateTool(event.tool_call_id, { status: "denied", error: str(event.reason) })
      break
    case "approval.required":
      out.push({
        kind: "approval",
        id: str(event.approval_id),
        toolCallId: str(event.tool_call_id),
        name: str(event.name),
        args: str(event.arguments),
        expiresAt: str(event.expires_at)
      })
      break
    case "delegation.started":
      out.push({ kind: "note", text: `Handed a task to the expert ${str(event.agent)}.` })
      break
    case "delegation.completed":
      out.push({ kind: "note", text: `The expert ${str(event.agent)} ${event.status === "failed" ? "failed its task" : "finished its task"}.` })
      break
    case "usage.budget_exhausted":
      out.push({ kind: "note", text: "The budget or the wallet could not pay the next step.", tone: "error" })
      break
    case "usage.trial_exhausted":
      out.push({ kind: "note", text: "The free trial messages are used up." })
      break
    case "run.completed":
      out.push({ kind: "note", text: `Completed, ${credits(event.credits_charged as number)} charged.`, tone: "ok" })
      break
    case "run.failed": {
      const code = str(event.code)
      const message = str(event.message)
      out.push({ kind: "note", text: `Failed: ${message || FAILURES[code] || "the run stopped with an error"}.`.replace(/\.\.$/, "."), tone: "error" })
      break
    }
  }
  return out
}

const TOOL_STATUS: Record<string, string> = {
  pending: "called",
  running: "running",
  completed: "done",
  failed: "failed",
  denied: "refused"
}

const EntryView = ({ entry, onAnswer }: { entry: Entry; onAnswer: (approvalId: string, decision: "approve" | "deny") => void }) => {
  if (entry.kind === "text") return <li className="bubble assistant">{entry.text}</li>
  if (entry.kind === "approval") {
    const args = entry.args ? readablePreview(entry.args) : ""
    return (
      <li className="approval">
        <p>
          {entry.answered === undefined ? "Waiting for your approval" : entry.answered === "approve" ? "Approved" : "Denied"}
          {" "}to run <strong>{entry.name}</strong>{args && <> with {args}</>}
          {entry.answered === undefined && entry.expiresAt && <span className="muted small"> (until {when(entry.expiresAt)})</span>}
        </p>
        {entry.answered === undefined && (
          <div className="row">
            <button type="button" onClick={() => onAnswer(entry.id, "approve")}>Approve<span className="visually-hidden"> {entry.name}</span></button>
            <button type="button" className="danger" onClick={() => onAnswer(entry.id, "deny")}>Deny<span className="visually-hidden"> {entry.name}</span></button>
          </div>
        )}
      </li>
    )
  }
  if (entry.kind === "note") return <li className={entry.tone === "error" ? "error" : "muted"}>{entry.text}</li>
  const args = entry.args ? readablePreview(entry.args) : ""
  return (
    <li className={`tool tool-${entry.status}`}>
      <p>
        Tool <strong>{entry.name}</strong> <span className="tool-badge">{TOOL_STATUS[entry.status] ?? entry.status}</span>
        {args && <> with {args}</>}
      </p>
      {entry.result !== undefined && entry.result !== "" && <p>Result: {readablePreview(entry.result)}</p>}
      {entry.error && <p className="error">Why: {entry.error}</p>}
    </li>
  )
}

/** Reads a background run's events (`GET /v1/runs/:id/events`, SSE) from the last one seen, until `[DONE]`. */
const followRun = (id: string, onEvent: (event: Wire) => void, onEnd: () => void, onError: (message: string) => void) => {
  let closed = false
  let seen = 0
  const controller = new AbortController()
  const run = async () => {
    for (let attempt = 0; !closed && attempt < 30; attempt++) {
      let done = false
      try {
        const response = await fetch(`/v1/runs/${encodeURIComponent(id)}/events?after=${seen}`, {
          credentials: "same-origin",
          headers: { accept: "text/event-stream" },
          signal: controller.signal
        })
        if (!response.ok || response.body === null) {
          onError((await failureOf(response)).message)
          return
        }
        const parser = Sse.makeParser((event) => {
          if (event._tag !== "Event") return
          if (event.data === "[DONE]") {
            done = true
            return
          }
          try {
            const parsed = JSON.parse(event.data) as Wire
            const at = Number(event.id ?? parsed.event_id)
            if (Number.isFinite(at)) {
              if (at <= seen) return
              seen = at
            }
            onEvent(parsed)
          } catch {
            // Not one of our events.
          }
        })
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
        for (;;) {
          const chunk = await reader.read()
          if (chunk.done) break
          parser.feed(chunk.value)
        }
      } catch {
        // A lost connection: read again from the last event seen.
      }
      if (done || closed) break
      await new Promise((resolve) => setTimeout(resolve, 1000))
    }
    if (!closed) onEnd()
  }
  void run()
  return () => {
    closed = true
    controller.abort()
  }
}

const RunDetail = ({ identifier, id }: { identifier: string; id: string }) => {
  const [run, setRun] = useState<Run | null>(null)
  const [entries, setEntries] = useState<Array<Entry>>([])
  const [ended, setEnded] = useState(false)
  const [error, setError] = useState<string | null>(null)
  const [status, setStatus] = useState<string | null>(null)
  const [now, setNow] = useState(Date.now())

  const reload = () => call((c) => c.runs.getRun({ path: { id: RunId.unchecked.make(id) } })).then((r) => setRun(r as Run), (e: Error) => setError(e.message))

  useEffect(() => {
    setRun(null)
    setEntries([])
    setEnded(false)
    void reload()
  }, [id])

  const background = run?.background ?? false
  useEffect(() => {
    if (!background) return
    return followRun(id, (event) => setEntries((old) => foldEvent(old, event)), () => {
      setEnded(true)
      void reload()
    }, setError)
  }, [id, background])

  // The status line (and duration) keeps up while the run goes on.
  const running = run !== null && live(run)
  useEffect(() => {
    if (!running) return
    const timer = setInterval(() => {
      setNow(Date.now())
      void reload()
    }, 2000)
    return () => clearInterval(timer)
  }, [running, id])

  const cancel = async () => {
    setError(null)
    try {
      const r = await call((c) => c.runs.cancelRun({ path: { id: RunId.unchecked.make(id) } }))
      setRun(r as Run)
      setStatus("Cancel requested: the run stops within a second and is billed only for what it used.")
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  const answer = async (approvalId: string, decision: "approve" | "deny") => {
    setError(null)
    try {
      await call((c) => c.runs.answerApproval({ path: { approval_id: approvalId as never }, payload: { decision } }))
      setEntries((old) => old.map((e) => e.kind === "approval" && e.id === approvalId ? { ...e, answered: decision } : e))
      setStatus(decision === "approve" ? "Approved: the run goes on." : "Denied: the tool does not run, and the run goes on without it.")
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  if (run === null) return error ? <p role="alert" className="error">{error}</p> : <p role="status">Loading…</p>
  return (
    <div className="stack" data-testid="run">
      <p><Link to={`/studio/${identifier}/runs`}>← All runs</Link></p>
      <h2>Run started {when(run.started_at ?? run.created_at)}</h2>
      <dl className="facts">
        <dt>Status</dt>
        <dd data-testid="run-status">
          {statusOf(run)}
          {run.status === "incomplete" && run.incomplete_details && ` (${REASONS[run.incomplete_details.reason] ?? run.incomplete_details.reason})`}
        </dd>
        <dt>Kind</dt><dd>{kindOf(run)}</dd>
        <dt>Duration</dt><dd>{durationOf(run, now)}</dd>
        <dt>Credits</dt><dd>{credits(run.credits_charged)}</dd>
        <dt>Tokens</dt><dd>{new Intl.NumberFormat().format(run.usage.input_tokens)} in, {new Intl.NumberFormat().format(run.usage.output_tokens)} out</dd>
        {run.error && <><dt>Error</dt><dd className="error">{run.error.message || FAILURES[run.error.code] || "The run stopped with an error."}</dd></>}
        {!live(run) && <><dt>Trace</dt><dd><Link to={`/studio/${identifier}/traces?trace=${encodeURIComponent(run.id)}`}>Open its trace</Link></dd></>}
      </dl>
      {live(run) && run.background && !run.cancel_requested && (
        <div className="row"><button type="button" className="danger" onClick={() => void cancel()}>Cancel this run</button></div>
      )}
      <p role="status" aria-live="polite">{status}</p>
      {error && <p role="alert" className="error">{error}</p>}
      <section className="card stack" aria-labelledby="run-events">
        <h3 id="run-events">What it did</h3>
        {run.background
          ? (
            <>
              {entries.length === 0 && <p className="muted">{ended ? "This run told no events." : "Waiting for its first event…"}</p>}
              <ol className="list run-events" data-testid="run-events">
                {entries.map((entry, i) => <EntryView key={i} entry={entry} onAnswer={(id, decision) => void answer(id, decision)} />)}
              </ol>
              {!ended && entries.length > 0 && <p className="muted small" role="status">Following the run as it goes…</p>}
            </>
          )
          : (
            <>
              <p className="muted">
                Its events were told on the stream of the request that started it; only background runs keep them.
                {run.session_id && " Read it in its conversation."}
              </p>
              {run.output && <p className="bubble assistant">{run.output}</p>}
              {run.session_id && <p><Link to={`/chat/${run.agent ?? identifier}?session=${encodeURIComponent(run.session_id)}`}>Open the conversation</Link></p>}
            </>
          )}
      </section>
      <p><button type="button" className="secondary" onClick={() => navigate(`/studio/${identifier}/runs`)}>Back to the runs</button></p>
    </div>
  )
}
