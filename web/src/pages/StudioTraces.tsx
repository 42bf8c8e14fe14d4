import { useEffect, useRef, useState } from "react"
import { call, itemsOf } from "../api.js"
import { Link, navigate, useLocation } from "../router.js"
import { ListTable } from "./ListTable.js"
import { credits, duration, StudioHeader, when } from "./StudioTabs.js"
import { RunId } from "../../../src/runtime/Domain.js"
import { EvalDatasetId } from "../../../src/platform/Ids.js"

/** A trace as `GET /v1/traces` lists it (src/traces/Domain.ts). */
interface TraceSummary {
  trace_id: string
  run_id: string
  agent: string
  version: number | null
  session_id: string | null
  status: "ok" | "error"
  error_type: string | null
  credits: string
  duration_ms: number
  tools: ReadonlyArray<string>
  span_count: number
  started_at: string
  access: "own" | "creator"
}

/** One span of `GET /v1/runs/:id/trace`. */
interface Span {
  span_id: string
  parent_span_id: string | null
  run_id: string
  name: string
  kind: string
  start_time: string
  end_time: string
  duration_ms: number
  status: "ok" | "error"
  attributes: Record<string, unknown>
  credits: string
}

const PAGE = 20

/**
 * The traces of one expert (issue 46 item 2): every run of it the creator may read, their own and their buyers',
 * with what each cost and took; `?trace=<run id>` opens one as a timeline of its spans.
 */
export const StudioTracesPage = ({ identifier }: { identifier: string }) => {
  const { search } = useLocation()
  const open = search.get("trace")
  return (
    <section className="stack">
      <StudioHeader identifier={identifier} title="Traces" />
      {open ? <TraceDetail identifier={identifier} runId={open} /> : <TraceList identifier={identifier} />}
    </section>
  )
}

type StatusFilter = "" | "ok" | "error"

const TraceList = ({ identifier }: { identifier: string }) => {
  const [traces, setTraces] = useState<ReadonlyArray<TraceSummary> | null>(null)
  const [more, setMore] = useState(false)
  const [error, setError] = useState<string | null>(null)
  const [status, setStatus] = useState<StatusFilter>("")
  const [tool, setTool] = useState("")
  const [applied, setApplied] = useState<{ status: StatusFilter; tool: string }>({ status: "", tool: "" })
  const generation = useRef(0)

  const load = (after?: string) => {
    const mine = ++generation.current
    const filters = {
      agent: identifier,
      limit: PAGE,
      ...(applied.status ? { status: applied.status } : {}),
      ...(applied.tool.trim() ? { tool: applied.tool.trim() } : {}),
      ...(after ? { after } : {})
    }
    return call((c) => c.traces.searchTraces({ urlParams: filters as never })).then((page) => {
      // An answer to filters that changed since is dropped: the list shows what the form says.
      if (mine !== generation.current) return
      const items = itemsOf<TraceSummary>(page)
      setTraces((old) => after ? [...(old ?? []), ...items] : items)
      setMore(page.has_more)
      setError(null)
    }, (e: Error) => setError(e.message))
  }

  useEffect(() => {
    setTraces(null)
    void load()
  }, [identifier, applied])

  const filtered = applied.status !== "" || applied.tool.trim() !== ""
  return (
    <div className="stack">
      <p className="muted">
        Every run of this expert as a trace: each model call, tool call and approval wait, with its tokens, time and
        the credits it was charged. Your own runs and your buyers' runs are here; what was said is kept only when
        <Link to={`/studio/${identifier}`}> the editor</Link>'s “Keep message content in traces” is on.
      </p>
      <form
        className="row"
        aria-label="Filter traces"
        onSubmit={(e) => {
          e.preventDefault()
          setApplied({ status, tool })
        }}
      >
        <label>
          Outcome{" "}
          <select value={status} onChange={(e) => setStatus(e.target.value as StatusFilter)}>
            <option value="">Any</option>
            <option value="ok">Succeeded</option>
            <option value="error">Failed</option>
          </select>
        </label>
        <label>
          Used the tool{" "}
          <input value={tool} maxLength={100} placeholder="e.g. calculator" onChange={(e) => setTool(e.target.value)} />
        </label>
        <button type="submit" className="secondary">Filter</button>
        <button type="button" className="secondary" onClick={() => void load()}>Refresh</button>
      </form>
      {error && <p role="alert" className="error">{error}</p>}
      <ListTable
        caption="Traces, newest first"
        captionHidden
        testId="traces"
        rows={traces}
        rowKey={(trace) => trace.trace_id}
        failed={error !== null}
        empty={
          <p className="empty-state" data-testid="traces-empty">
            {filtered
              ? "No trace matches these filters."
              : <>No traces yet. Every run leaves one a moment after it ends: try the expert in the <Link to={`/chat/${identifier}`}>test chat</Link>.</>}
          </p>
        }
        first={{
          label: "Started",
          cell: (trace) => (
            <Link to={`/studio/${identifier}/traces?trace=${encodeURIComponent(trace.run_id)}`}>
              {when(trace.started_at)}<span className="visually-hidden">: open this trace</span>
            </Link>
          )
        }}
        columns={[
          {
            label: "Outcome",
            cell: (trace) => (
              <span className={`badge ${trace.status === "ok" ? "status-completed" : "status-failed"}`}>
                {trace.status === "ok" ? "Succeeded" : `Failed${trace.error_type ? ` (${trace.error_type})` : ""}`}
              </span>
            )
          },
          { label: "Whose", cell: (trace) => <>{trace.access === "own" ? "Yours" : "A buyer's"}{trace.session_id ? ", a conversation turn" : ""}</> },
          { label: "Tools", cell: (trace) => trace.tools.length > 0 ? trace.tools.join(", ") : "—" },
          { label: "Duration", numeric: true, cell: (trace) => duration(trace.duration_ms) },
          { label: "Credits", numeric: true, cell: (trace) => credits(trace.credits) }
        ]}
        older={{ label: "Older traces", more, onClick: (last) => void load(last.trace_id) }}
      />
    </div>
  )
}

/** The spans as a tree: each span's children in the order they started. */
const treeOf = (spans: ReadonlyArray<Span>) => {
  const ids = new Set(spans.map((s) => s.span_id))
  const children = new Map<string | null, Array<Span>>()
  for (const span of spans) {
    // A span whose parent is not in the trace (a delegated run's root, read alone) hangs from the top.
    const parent = span.parent_span_id !== null && ids.has(span.parent_span_id) ? span.parent_span_id : null
    children.set(parent, [...(children.get(parent) ?? []), span])
  }
  for (const list of children.values()) list.sort((a, b) => Date.parse(a.start_time) - Date.parse(b.start_time))
  return children
}

const number = (v: unknown) => typeof v === "number" ? v : typeof v === "string" && v !== "" && Number.isFinite(Number(v)) ? Number(v) : undefined

/** "1,200 in, 80 out (1,000 cached)" from the span's GenAI usage attributes, or nothing. */
const tokensOf = (attributes: Record<string, unknown>) => {
  const input = number(attributes["gen_ai.usage.input_tokens"])
  const output = number(attributes["gen_ai.usage.output_tokens"])
  const cached = number(attributes["gen_ai.usage.cache_read.input_tokens"] ?? attributes["gen_ai.usage.cached_tokens"])
  if (input === undefined && output === undefined) return ""
  const f = new Intl.NumberFormat()
  return `${f.format(input ?? 0)} in, ${f.format(output ?? 0)} out${cached ? ` (${f.format(cached)} cached)` : ""}`
}

/** What a span's kind is, in words. */
const KINDS: Record<string, string> = {
  invoke_agent: "The run",
  chat: "Model call",
  execute_tool: "Tool call",
  retrieval: "Search of knowledge",
  await_approval: "Waiting for an approval"
}

const kindOf = (span: Span) => KINDS[span.name.split(" ")[0] ?? ""] ?? span.kind

/** An attribute's value as text: strings as they are, anything else as JSON. */
const shown = (value: unknown) => typeof value === "string" ? value : JSON.stringify(value, null, 2)

const CONTENT_KEYS = new Set(["gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "input", "output"])

const SpanNode = ({ span, children, start, total }: { span: Span; children: Map<string | null, Array<Span>>; start: number; total: number }) => {
  const offset = total > 0 ? ((Date.parse(span.start_time) - start) / total) * 100 : 0
  const width = total > 0 ? Math.max(0.5, (span.duration_ms / total) * 100) : 100
  const tokens = tokensOf(span.attributes)
  const content = Object.entries(span.attributes).filter(([key]) => CONTENT_KEYS.has(key))
  const facts = Object.entries(span.attributes).filter(([key]) => !CONTENT_KEYS.has(key))
  const below = children.get(span.span_id) ?? []
  return (
    <li data-testid="span">
      <details>
        <summary>
          <span className="span-name">
            <strong>{span.name}</strong>{" "}
            <span className="muted small">{kindOf(span)}</span>
            {span.status === "error" && <span className="badge status-failed"> failed</span>}
          </span>
          <span className="span-bar" aria-hidden="true">
            <span className={span.status === "error" ? "error" : undefined} style={{ marginLeft: `${Math.min(99.5, offset)}%`, width: `${Math.min(100, width)}%` }} />
          </span>
          <span className="span-figures small">
            {duration(span.duration_ms)}
            {tokens && <> · {tokens}</>}
            {" · "}<span data-testid="span-credits" data-credits={span.credits}>{credits(span.credits)}</span>
          </span>
        </summary>
        <div className="stack span-detail">
          <dl className="facts">
            <dt>Started</dt><dd>+{duration(Date.parse(span.start_time) - start)}</dd>
            {facts.map(([key, value]) => <FactRow key={key} name={key} value={value} />)}
          </dl>
          {content.length > 0
            ? content.map(([key, value]) => (
              <div key={key}>
                <p className="muted small">{key}</p>
                <pre className="span-content">{shown(value)}</pre>
              </div>
            ))
            : span.name.startsWith("chat ") && <p className="muted small">Message content is not kept for this expert.</p>}
        </div>
      </details>
      {below.length > 0 && (
        <ol className="trace-tree">
          {below.map((child) => <SpanNode key={child.span_id} span={child} children={children} start={start} total={total} />)}
        </ol>
      )}
    </li>
  )
}

const FactRow = ({ name, value }: { name: string; value: unknown }) => (
  <>
    <dt><code>{name}</code></dt>
    <dd>{shown(value)}</dd>
  </>
)

const TraceDetail = ({ identifier, runId }: { identifier: string; runId: string }) => {
  const [spans, setSpans] = useState<ReadonlyArray<Span> | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [tries, setTries] = useState(0)

  useEffect(() => {
    setSpans(null)
    setError(null)
    call((c) => c.traces.runTrace({ path: { id: RunId.unchecked.make(runId) } })).then(
      (trace) => setSpans(trace.spans as ReadonlyArray<Span>),
      (e: Error) => setError(e.message)
    )
  }, [runId, tries])

  if (error !== null) {
    return (
      <div className="stack">
        <p role="alert" className="error">
          {error} A run's trace is written a moment after the run ends; a run that is still going has none yet.
        </p>
        <div className="row">
          <button type="button" className="secondary" onClick={() => setTries((n) => n + 1)}>Try again</button>
          <Link to={`/studio/${identifier}/traces`}>← All traces</Link>
        </div>
      </div>
    )
  }
  if (spans === null) return <p role="status">Loading…</p>
  const start = Math.min(...spans.map((s) => Date.parse(s.start_time)))
  const end = Math.max(...spans.map((s) => Date.parse(s.end_time)))
  const children = treeOf(spans)
  // Summed in micro-credits, as the ledger keeps them, so the total is exact.
  const micros = spans.reduce((sum, s) => sum + Math.round(Number(s.credits) * 1_000_000), 0)
  const models = spans.filter((s) => s.name.startsWith("chat ")).length
  const tools = spans.filter((s) => s.name.startsWith("execute_tool ")).length
  const failed = spans.some((s) => s.status === "error" && s.parent_span_id === null)
  return (
    <div className="stack" data-testid="trace">
      <p><Link to={`/studio/${identifier}/traces`}>← All traces</Link></p>
      <h2>Trace of the run started {when(new Date(start).toISOString())}</h2>
      <dl className="facts">
        <dt>Outcome</dt><dd>{failed ? "Failed" : "Succeeded"}</dd>
        <dt>Duration</dt><dd>{duration(end - start)}</dd>
        <dt>Credits</dt><dd data-testid="trace-credits" data-credits={(micros / 1_000_000).toFixed(6)}>{credits(micros / 1_000_000)}</dd>
        <dt>Steps</dt><dd>{models} model call{models === 1 ? "" : "s"}, {tools} tool call{tools === 1 ? "" : "s"}</dd>
        <dt>Run</dt><dd><Link to={`/studio/${identifier}/runs?run=${encodeURIComponent(runId)}`}>Open the run</Link> <span className="muted small">(yours only)</span></dd>
      </dl>
      <section className="card stack" aria-labelledby="trace-spans">
        <h3 id="trace-spans">Timeline</h3>
        <p className="muted small">Open a step to read its attributes: model, tokens, finish reason, the error if any, and what was said when kept.</p>
        <ol className="trace-tree root">
          {(children.get(null) ?? []).map((span) => <SpanNode key={span.span_id} span={span} children={children} start={start} total={end - start} />)}
        </ol>
      </section>
      <AddToDataset identifier={identifier} runId={runId} answer={answerOf(spans, runId)} />
      <p><button type="button" className="secondary" onClick={() => navigate(`/studio/${identifier}/traces`)}>Back to the traces</button></p>
    </div>
  )
}

const textOf = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.map((part) => (typeof part === "object" && part !== null && (part as { type?: string }).type === "text" ? String((part as { text?: unknown }).text ?? "") : "")).join("")
    : ""

/** The run's last answer as its trace kept it (only when the expert keeps message content); null otherwise. */
const answerOf = (spans: ReadonlyArray<Span>, runId: string): string | null => {
  const chats = spans.filter((s) => s.run_id === runId && s.name.startsWith("chat "))
  const kept = chats[chats.length - 1]?.attributes["gen_ai.output.messages"]
  if (typeof kept !== "string") return null
  try {
    return textOf(JSON.parse(kept))
  } catch {
    return null
  }
}

/**
 * "Add to dataset" (docs/evals.md, "Rows from a run"): the run's question becomes a row of one of the expert's
 * datasets, its answer the expected one unless edited. A buyer's run can be added only when its content was kept.
 */
const AddToDataset = ({ identifier, runId, answer }: { identifier: string; runId: string; answer: string | null }) => {
  const [datasets, setDatasets] = useState<ReadonlyArray<{ id: string; name: string }> | null>(null)
  const [chosen, setChosen] = useState("")
  const [expected, setExpected] = useState(answer ?? "")
  const [status, setStatus] = useState<string | null>(null)
  const [error, setError] = useState<string | null>(null)

  useEffect(() => {
    call((c) => c.evals.listDatasets({ urlParams: { agent: identifier, limit: 100 } })).then((page) => {
      const list = itemsOf<{ id: string; name: string }>(page)
      setDatasets(list)
      setChosen((now) => now || (list[0]?.id ?? ""))
    }, () => setDatasets([]))
    // Not kept in the trace: the creator's own run has its answer in its record (a buyer's is not readable).
    if (answer === null) {
      call((c) => c.runs.getRun({ path: { id: RunId.unchecked.make(runId) } })).then((run) => setExpected((now) => now || (run.output ?? "")), () => undefined)
    }
  }, [identifier, runId, answer])

  const add = async () => {
    setError(null)
    setStatus(null)
    const name = datasets?.find((d) => d.id === chosen)?.name ?? "the dataset"
    try {
      const added = await call((c) => c.evals.fromRun({ path: { id: EvalDatasetId.unchecked.make(chosen) }, payload: { run: RunId.unchecked.make(runId), expected: expected.trim() === "" ? null : expected } }))
      setStatus(added.added === 0 ? `This run is already in “${name}”.` : `Added to “${name}”.`)
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  if (datasets === null) return null
  return (
    <section className="card stack" aria-labelledby="add-to-dataset" data-testid="add-to-dataset">
      <h3 id="add-to-dataset">Add to a dataset</h3>
      {datasets.length === 0
        ? <p className="muted">No dataset yet: <Link to={`/studio/${identifier}/evals`}>make one on the Evals tab</Link>, then add this run's question to it.</p>
        : (
          <form className="stack" onSubmit={(e) => { e.preventDefault(); void add() }}>
            <p className="muted small">
              The question of this run becomes a row to evaluate the expert with; its answer below is what a good answer
              should be (edit it, or empty it for none). Someone else's run can be added only when this expert keeps message content.
            </p>
            <label>
              Dataset{" "}
              <select value={chosen} onChange={(e) => setChosen(e.target.value)}>
                {datasets.map((d) => <option key={d.id} value={d.id}>{d.name}</option>)}
              </select>
            </label>
            <label>A good answer <textarea rows={3} value={expected} onChange={(e) => setExpected(e.target.value)} /></label>
            <div className="row"><button type="submit">Add to dataset</button></div>
            <p role="status" aria-live="polite">{status}</p>
            {error && <p role="alert" className="error">{error}</p>}
          </form>
        )}
    </section>
  )
}
