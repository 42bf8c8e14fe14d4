import { useEffect, useRef, useState, type FormEvent } from "react"
import { CATEGORIES } from "../../../src/agents/Agent.js"
import type { SuggestionId } from "../../../src/evolution/Domain.js"
import { BUILTIN_TOOLS } from "../../../src/runtime/Expert.js"
import { call, itemsOf } from "../api.js"
import { Link, navigate } from "../router.js"
import { ChatPage } from "./Chat.js"
import { McpForm, mcpProblems, type McpServerForm } from "./McpForm.js"
import { StudioKnowledge } from "./StudioKnowledge.js"
import { StudioTabs } from "./StudioTabs.js"
import { VersionHistory } from "./StudioVersions.js"
import { StudioIcon } from "./StudioIcon.js"

type Category = (typeof CATEGORIES)[number]
type ToolName = (typeof BUILTIN_TOOLS)[number]
type Permission = "allow" | "ask" | "deny"

interface Agent {
  identifier: string
  status: "draft" | "published"
  name: string
  description: string
  category: string
  instructions?: string | undefined
  model?: string | undefined
  fallback_models?: ReadonlyArray<string> | undefined
  tools: ReadonlyArray<unknown>
  subagents?: ReadonlyArray<string> | undefined
  opening_message: string
  case_demos: ReadonlyArray<unknown>
  billing: { type: "FREE" | "UNLOCK"; price: number | string; free_trial_per_user: number; allow_trial: boolean }
  mcp_servers?: ReadonlyArray<unknown> | undefined
  knowledge_bases?: ReadonlyArray<string> | undefined
  trace_content?: boolean | undefined
  memory?: MemoryForm | undefined
  otlp_export?: { endpoint: string; headers: Record<string, string> } | null | undefined
  published_version: number | null
  pending_submission: { id: string; version: number; status: string; submitted_at: string } | null
  review_history?: ReadonlyArray<{ id: string; version: number; status: string; submitted_at: string; reason: string | null; decided_at: string | null }>
}

const REVIEW_WORDS: Record<string, string> = {
  pending: "waiting for review",
  approved: "approved and published",
  rejected: "not approved",
  superseded: "replaced by a newer submission"
}

/** Where each submitted version stands, newest first, with the reviewer's reason for a rejection. */
const ReviewHistory = ({ agent }: { agent: Agent }) =>
  agent.review_history && agent.review_history.length > 0
    ? (
      <section className="card stack" aria-labelledby="review-history">
        <h2 id="review-history">Review</h2>
        <ol className="list" data-testid="review-history">
          {agent.review_history.map((s) => (
            <li key={s.id}>
              Version {s.version}: <strong>{REVIEW_WORDS[s.status] ?? s.status}</strong>{" "}
              <span className="muted small">(submitted {new Date(s.submitted_at).toLocaleString()}{s.decided_at ? `, decided ${new Date(s.decided_at).toLocaleString()}` : ""})</span>
              {s.reason && <p>Reviewer's reason: {s.reason}</p>}
            </li>
          ))}
        </ol>
      </section>
    )
    : null

interface Notice { id: string; title: string; body: string; read: boolean; created_at: string }

/** Review outcomes reach creators as in-app notifications (spec 4.10); the studio lists the latest. */
const Notifications = () => {
  const [items, setItems] = useState<ReadonlyArray<Notice>>([])
  useEffect(() => {
    call((c) => c.notifications.list()).then((l) => setItems(itemsOf<Notice>(l).slice(0, 5)), () => undefined)
  }, [])
  if (items.length === 0) return null
  return (
    <section className="card stack" aria-labelledby="notifications">
      <h2 id="notifications">Notifications</h2>
      <ul className="list" data-testid="notifications">
        {items.map((n) => (
          <li key={n.id}><strong>{n.title}</strong> <span className="muted small">{new Date(n.created_at).toLocaleString()}</span><p>{n.body}</p></li>
        ))}
      </ul>
    </section>
  )
}

const submissionText = (agent: Agent) => {
  const parts: Array<string> = []
  parts.push(agent.published_version !== null ? `Published: version ${agent.published_version}` : "Not published yet")
  if (agent.pending_submission) {
    parts.push(`Submitted: version ${agent.pending_submission.version}, ${agent.pending_submission.status === "pending" ? "waiting for review" : agent.pending_submission.status}`)
  }
  return parts.join(" · ")
}

export const StudioPage = () => {
  const [agents, setAgents] = useState<ReadonlyArray<Agent> | null>(null)
  const [name, setName] = useState("")
  const [category, setCategory] = useState<Category>(CATEGORIES[0])
  const [error, setError] = useState<string | null>(null)
  useEffect(() => {
    call((c) => c.agents.list({ urlParams: {} })).then((l) => setAgents(itemsOf<Agent>(l)), (e: Error) => setError(e.message))
  }, [])
  const create = async (e: FormEvent) => {
    e.preventDefault()
    setError(null)
    try {
      const agent = await call((c) => c.agents.create({ payload: { name, category } }))
      navigate(`/studio/${agent.identifier}`)
    } catch (failure) {
      setError((failure as Error).message)
    }
  }
  return (
    <section className="stack">
      <h1>Studio</h1>
      <form onSubmit={create} className="toolbar card" aria-label="Create an expert">
        <label>
          New expert's name
          <input name="name" required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} />
        </label>
        <label>
          Category
          <select value={category} onChange={(e) => setCategory(e.target.value as Category)}>
            {CATEGORIES.map((c) => <option key={c} value={c}>{c}</option>)}
          </select>
        </label>
        <button type="submit">Create expert</button>
      </form>
      {error && <p role="alert" className="error">{error}</p>}
      <Notifications />
      {agents !== null && agents.length === 0 && <p>You have no experts yet: create your first one above.</p>}
      <ul className="list" aria-label="My experts">
        {agents?.map((a) => (
          <li key={a.identifier} className="card">
            <h2><Link to={`/studio/${a.identifier}`}>{a.name}</Link></h2>
            <p className="muted small">{a.identifier} · {a.category} · {submissionText(a)}</p>
          </li>
        ))}
      </ul>
    </section>
  )
}

interface Demo { title: string; input: string; output: string }
interface Suggestion { id: SuggestionId; title: string; rationale: string; status: string; kind: string }

interface MemoryBlockForm { label: string; description: string; limit: number | string; read_only?: boolean | undefined }
interface MemoryForm { enabled: boolean; extraction?: boolean | undefined; blocks: ReadonlyArray<MemoryBlockForm> }
const NO_MEMORY: MemoryForm = { enabled: false, extraction: false, blocks: [] }
const MAX_BLOCKS = 8
const MAX_BLOCK_LIMIT = 20_000

/** What is wrong with the memory section, in words (the API checks again), or null. */
const memoryProblems = (memory: MemoryForm): string | null => {
  const labels = new Set<string>()
  for (const [i, block] of memory.blocks.entries()) {
    const which = block.label ? `Memory block “${block.label}”` : `Memory block ${i + 1}`
    if (!/^[a-z][a-z0-9_]{0,39}$/.test(block.label)) return `${which}: the label is 1-40 lowercase letters, digits or _, starting with a letter (for example human or preferences).`
    if (labels.has(block.label)) return `${which}: two blocks have this label; give each its own.`
    labels.add(block.label)
    const limit = Number(block.limit)
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_BLOCK_LIMIT) return `${which}: the limit is a whole number of characters from 1 to ${MAX_BLOCK_LIMIT.toLocaleString()}.`
    if (block.description.length > 500) return `${which}: the description is at most 500 characters.`
  }
  return null
}

/** The editor's memory section: on or off, extraction, and the blocks kept about each end user. */
const MemoryFieldset = ({ memory, onChange }: { memory: MemoryForm; onChange: (next: MemoryForm) => void }) => {
  const setBlock = (i: number, patch: Partial<MemoryBlockForm>) =>
    onChange({ ...memory, blocks: memory.blocks.map((b, j) => j === i ? { ...b, ...patch } : b) })
  return (
    <fieldset className="card stack" data-testid="memory-settings">
      <legend id="section-memory">Memory</legend>
      <p className="muted small">
        With memory on, the expert keeps what it learns about each person who talks to it (facts, and the blocks below),
        across their conversations. Each person sees and can edit or delete what it keeps about them; you never see it.
      </p>
      <label className="check">
        <input type="checkbox" checked={memory.enabled} onChange={(e) => onChange({ ...memory, enabled: e.target.checked })} />
        Remember each person across conversations
      </label>
      {memory.enabled && (
        <>
          <label className="check">
            <input type="checkbox" checked={memory.extraction ?? false} onChange={(e) => onChange({ ...memory, extraction: e.target.checked })} />
            After each conversation turn, let a model note what to remember (one more model call, billed to whoever pays for the turn)
          </label>
          <ol className="list">
            {memory.blocks.map((block, i) => (
              <li key={i} className="stack">
                <div className="row">
                  <label>Block label <input value={block.label} maxLength={40} placeholder="human" onChange={(e) => setBlock(i, { label: e.target.value })} /></label>
                  <label>Limit (characters) <input type="number" min={1} max={MAX_BLOCK_LIMIT} value={block.limit} onChange={(e) => setBlock(i, { limit: e.target.value })} /></label>
                </div>
                <label>What it is for <input value={block.description} maxLength={500} placeholder="Who the person is and what they prefer" onChange={(e) => setBlock(i, { description: e.target.value })} /></label>
                <div className="row">
                  <label className="check">
                    <input type="checkbox" checked={block.read_only ?? false} onChange={(e) => setBlock(i, { read_only: e.target.checked })} />
                    Only the person may change it (the expert reads it)
                  </label>
                  <button type="button" className="secondary" onClick={() => onChange({ ...memory, blocks: memory.blocks.filter((_, j) => j !== i) })}>
                    Remove block{block.label ? ` ${block.label}` : ` ${i + 1}`}
                  </button>
                </div>
              </li>
            ))}
          </ol>
          {memory.blocks.length < MAX_BLOCKS
            ? (
              <button type="button" className="secondary" onClick={() => onChange({ ...memory, blocks: [...memory.blocks, { label: "", description: "", limit: 2000 }] })}>
                Add a memory block
              </button>
            )
            : <p className="muted small">At most {MAX_BLOCKS} blocks.</p>}
        </>
      )}
    </fieldset>
  )
}

/** "name: value" lines as headers, or what is wrong with them in words. */
const otlpHeaders = (text: string): Record<string, string> | string => {
  const headers: Record<string, string> = {}
  for (const line of text.split("\n").map((l) => l.trim()).filter(Boolean)) {
    const at = line.indexOf(":")
    const name = at > 0 ? line.slice(0, at).trim() : ""
    if (!/^[A-Za-z0-9-]{1,64}$/.test(name)) return `Trace export headers: write each as “name: value” (the name in letters, digits and -), not “${line.slice(0, 40)}”.`
    headers[name] = line.slice(at + 1).trim()
  }
  return headers
}

export const StudioEditPage = ({ identifier }: { identifier: string }) => {
  const [agent, setAgent] = useState<Agent | null>(null)
  const [models, setModels] = useState<ReadonlyArray<string>>([])
  const [form, setForm] = useState({
    name: "", description: "", category: CATEGORIES[0] as Category, instructions: "", model: "",
    opening_message: "", subagents: "", billingType: "FREE" as "FREE" | "UNLOCK", price: "0", trials: "3", allowTrial: true
  })
  const [tools, setTools] = useState<Record<string, Permission | "off">>({})
  const [demos, setDemos] = useState<Array<Demo>>([])
  /** Models tried in order when the model's provider fails (docs/models.md). */
  const [fallbacks, setFallbacks] = useState<ReadonlyArray<string>>([])
  /** The expert's remote MCP servers (docs/tools.md), edited as a form; checked here in words, then by the API. */
  const [mcpServers, setMcpServers] = useState<Array<McpServerForm>>([])
  /** The knowledge bases its `file_search` searches (docs/knowledge.md), saved with the draft. */
  const [knowledgeBases, setKnowledgeBases] = useState<ReadonlyArray<string>>([])
  /** Traces (docs/traces.md): whether they keep what was said, and where they are also exported. */
  const [traceContent, setTraceContent] = useState(false)
  /** Memory (docs/memory.md): whether the expert remembers each end user, and the blocks it keeps. */
  const [memory, setMemory] = useState<MemoryForm & { changed: boolean }>({ ...NO_MEMORY, changed: false })
  const [otlp, setOtlp] = useState({ endpoint: "", headers: "", changed: false })
  const [testChat, setTestChat] = useState(0)
  /** Counts publishes: the version history reads its list again. */
  const [published, setPublished] = useState(0)
  const [suggestions, setSuggestions] = useState<ReadonlyArray<Suggestion>>([])
  const [status, setStatus] = useState<string | null>(null)
  const [error, setError] = useState<string | null>(null)

  const load = (a: Agent) => {
    // The next form computed from it is the saved draft (autosave compares against it).
    saved.current = null
    setAgent(a)
    setForm({
      name: a.name, description: a.description, category: a.category as Category, instructions: a.instructions ?? "",
      model: a.model ?? "", opening_message: a.opening_message, subagents: (a.subagents ?? []).join(", "),
      billingType: a.billing.type, price: String(a.billing.price), trials: String(a.billing.free_trial_per_user),
      allowTrial: a.billing.allow_trial
    })
    const t: Record<string, Permission | "off"> = {}
    for (const name of BUILTIN_TOOLS) t[name] = "off"
    for (const tool of a.tools as ReadonlyArray<{ name: string; permission: Permission }>) t[tool.name] = tool.permission
    setTools(t)
    setMcpServers((a.mcp_servers ?? []) as Array<McpServerForm>)
    setFallbacks(a.fallback_models ?? [])
    setKnowledgeBases(a.knowledge_bases ?? [])
    setTraceContent(a.trace_content ?? false)
    setMemory({ ...(a.memory ?? NO_MEMORY), changed: false })
    setOtlp({ endpoint: a.otlp_export?.endpoint ?? "", headers: "", changed: false })
    setDemos((a.case_demos as ReadonlyArray<Partial<Demo>>).map((d) => ({ title: d.title ?? "", input: d.input ?? "", output: d.output ?? "" })))
  }

  useEffect(() => {
    call((c) => c.agents.get({ path: { identifier } })).then((a) => load(a as Agent), (e: Error) => setError(e.message))
    // Models only: GET /v1/models also lists the experts one may call as models, which are no model to run on.
    call((c) => c.models.list({ urlParams: {} })).then(
      (l) => setModels(itemsOf<{ id: string; provider: string }>(l).filter((m) => m.provider !== "agent").map((m) => m.id)),
      () => undefined
    )
    call((c) => c.evolution.suggestions({ path: { identifier }, urlParams: {} })).then((l) => setSuggestions(itemsOf<Suggestion>(l)), () => undefined)
  }, [identifier])

  const field = <K extends keyof typeof form>(key: K) => ({
    value: form[key] as string,
    onChange: (e: { target: { value: string } }) => setForm((f) => ({ ...f, [key]: e.target.value }))
  })

  /** The draft as the form says it, or what is wrong with the form in words. */
  const draftOf = (): { payload: Record<string, unknown> } | { problem: string } => {
    const servers = mcpServers
    const problem = mcpProblems(servers)
    if (problem) return { problem }
    if (form.billingType === "UNLOCK" && !/^\d{1,12}(\.\d{1,6})?$/.test(form.price.trim())) {
      return { problem: "Price is not valid. Write a number of credits, for example 5 or 2.5." }
    }
    if (!/^\d{1,4}$/.test(form.trials.trim()) || Number(form.trials) > 1000) {
      return { problem: "Free trial messages: write a whole number from 0 to 1000." }
    }
    const memoryProblem = memoryProblems(memory)
    if (memoryProblem) return { problem: memoryProblem }
    const headers = otlpHeaders(otlp.headers)
    if (otlp.changed && typeof headers === "string") return { problem: headers }
    return {
      payload: {
        trace_content: traceContent,
        // Untouched and never set, memory stays absent rather than saved as "off".
        ...(memory.changed || agent?.memory ? { memory: { enabled: memory.enabled, extraction: memory.extraction ?? false, blocks: memory.blocks.map((b) => ({ ...b, limit: Number(b.limit) })) } } : {}),
        // Sent only when edited: the stored header values are never shown, so an untouched form keeps them.
        ...(otlp.changed ? { otlp_export: otlp.endpoint.trim() ? { endpoint: otlp.endpoint.trim(), headers } : null } : {}),
        name: form.name,
        description: form.description,
        category: form.category,
        instructions: form.instructions,
        ...(form.model ? { model: form.model } : {}),
        fallback_models: fallbacks.filter((m) => m !== form.model),
        opening_message: form.opening_message,
        subagents: form.subagents.split(",").map((s) => s.trim()).filter(Boolean),
        tools: Object.entries(tools).filter(([, p]) => p !== "off").map(([name, permission]) => ({ name: name as ToolName, permission: permission as Permission })),
        mcp_servers: servers,
        knowledge_bases: knowledgeBases,
        case_demos: demos.filter((d) => d.input || d.output).map((d) => ({ ...(d.title ? { title: d.title } : {}), input: d.input, output: d.output })),
        billing: {
          type: form.billingType,
          price: form.billingType === "FREE" ? "0" : form.price,
          free_trial_per_user: Number(form.trials),
          allow_trial: form.allowTrial
        }
      }
    }
  }

  // Autosave (issue 48 item 3): the draft as last saved or loaded, compared with the form's; a change is saved 1.5 s
  // after the last keystroke, and the page asks before it is closed with a change not yet saved.
  const draft = draftOf()
  const current = "payload" in draft ? JSON.stringify(draft.payload) : null
  const saved = useRef<string | null>(null)
  /** A draft the platform refused: not sent again by itself until it changes (the refusal is on the page). */
  const refused = useRef<string | null>(null)
  const [saving, setSaving] = useState(false)
  const [autosaved, setAutosaved] = useState<string | null>(null)
  if (saved.current === null && agent !== null && current !== null) saved.current = current
  const dirty = agent !== null && saved.current !== null && current !== saved.current

  const save = async (e?: FormEvent, auto = false) => {
    e?.preventDefault()
    if (!auto) setStatus(null)
    if ("problem" in draft) {
      setError(auto ? `Not saved yet: ${draft.problem}` : draft.problem)
      return false
    }
    setError(null)
    const sent = JSON.stringify(draft.payload)
    setSaving(true)
    try {
      const updated = await call((c) => c.agents.update({ path: { identifier }, payload: draft.payload as never }))
      if (auto) {
        // Not loaded into the form: what was typed while it saved stays, and is saved next.
        setAgent(updated as Agent)
        saved.current = sent
        setAutosaved(`Draft saved automatically at ${new Date().toLocaleTimeString()}.`)
      } else {
        saved.current = null
        load(updated as Agent)
        setStatus("Saved.")
        setAutosaved(null)
        setTestChat((n) => n + 1)
      }
      return true
    } catch (failure) {
      refused.current = sent
      setError((failure as Error).message)
      return false
    } finally {
      setSaving(false)
    }
  }

  useEffect(() => {
    if (!dirty || saving || "problem" in draft || current === refused.current) return
    const timer = setTimeout(() => void save(undefined, true), 1500)
    return () => clearTimeout(timer)
  }, [current, dirty, saving])

  // Closing or reloading the tab with a change not yet saved: the browser asks first. Leaving for another page of the
  // app saves it on the way out.
  const latest = useRef({ dirty, save })
  latest.current = { dirty, save }
  useEffect(() => {
    const guard = (event: BeforeUnloadEvent) => {
      if (!latest.current.dirty) return
      event.preventDefault()
      event.returnValue = ""
    }
    window.addEventListener("beforeunload", guard)
    return () => {
      window.removeEventListener("beforeunload", guard)
      if (latest.current.dirty) void latest.current.save(undefined, true)
    }
  }, [])

  const publish = async () => {
    if (!(await save())) return
    try {
      const result = await call((c) => c.agents.publish({ path: { identifier } }))
      setStatus(`Version ${result.submission.version} submitted for review. An operator reviews it; you are notified of the outcome here and in the studio.`)
      load(await call((c) => c.agents.get({ path: { identifier } })) as Agent)
      setPublished((n) => n + 1)
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  const accept = async (id: SuggestionId) => {
    try {
      await call((c) => c.evolution.accept({ path: { id } }))
      setStatus("Suggestion accepted: it is live now.")
      load(await call((c) => c.agents.get({ path: { identifier } })) as Agent)
      setSuggestions(itemsOf<Suggestion>(await call((c) => c.evolution.suggestions({ path: { identifier }, urlParams: {} }))))
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  if (!agent) return error ? <p role="alert" className="error">{error}</p> : <p role="status">Loading…</p>
  return (
    <section className="stack">
      <p><Link to="/studio">← Studio</Link></p>
      <h1>{agent.name}</h1>
      <p className="muted" data-testid="submission">{agent.identifier} · {submissionText(agent)}</p>
      <StudioTabs identifier={identifier} />
      <div className="row">
        <Link to={`/chat/${identifier}`} className="button secondary">Test chat</Link>
        {agent.published_version !== null && <Link to={`/marketplace/${identifier}`} className="button secondary">Public page</Link>}
      </div>
      <nav aria-label="Sections" className="sections">
        <ul>
          {[["profile", "Profile"], ["instructions", "Instructions"], ["tools", "Tools"], ["remote", "Remote tools"], ["knowledge", "Knowledge"], ["examples", "Examples"], ["pricing", "Pricing"], ["memory", "Memory"], ["traces", "Traces"], ["publish", "Publish"]].map(([id, label]) => (
            <li key={id}><a href={`#section-${id}`}>{label}</a></li>
          ))}
        </ul>
      </nav>
      <div className="studio-layout">
      <div className="editor stack">
      <StudioIcon identifier={identifier} />
      <form onSubmit={save} className="stack" aria-label="Edit the expert">
        <fieldset className="card stack">
          <legend id="section-profile">Profile</legend>
          <label>Name <input required maxLength={100} {...field("name")} /></label>
          <label>Description <textarea rows={3} maxLength={2000} {...field("description")} /></label>
          <label>
            Category
            <select {...field("category")}>{CATEGORIES.map((c) => <option key={c} value={c}>{c}</option>)}</select>
          </label>
          <label>Opening message <textarea rows={2} maxLength={2000} {...field("opening_message")} /></label>
        </fieldset>
        <fieldset className="card stack">
          <legend id="section-instructions">Instructions and model</legend>
          <label>Instructions <textarea rows={6} maxLength={20000} {...field("instructions")} /></label>
          <label>
            Model
            <select {...field("model")}>
              <option value="">Platform default</option>
              {models.map((m) => <option key={m} value={m}>{m}</option>)}
            </select>
          </label>
          <label>
            Fallback models (tried in order when the model&apos;s provider fails; at most 3)
            <select
              multiple
              value={[...fallbacks]}
              onChange={(e) => setFallbacks(Array.from(e.target.selectedOptions, (o) => o.value).slice(0, 3))}
            >
              {models.filter((m) => m !== form.model).map((m) => <option key={m} value={m}>{m}</option>)}
            </select>
          </label>
          <label>
            Subagents (identifiers, comma-separated)
            <input {...field("subagents")} placeholder="other-expert, another-one" />
          </label>
        </fieldset>
        <fieldset className="card">
          <legend id="section-tools">Tools</legend>
          <div className="table-wrap">
            <table>
              <thead><tr><th scope="col">Tool</th><th scope="col">Off</th><th scope="col">Allow</th><th scope="col">Ask me</th><th scope="col">Deny</th></tr></thead>
              <tbody>
                {BUILTIN_TOOLS.map((name) => (
                  <tr key={name}>
                    <th scope="row"><code>{name}</code></th>
                    {(["off", "allow", "ask", "deny"] as const).map((p) => (
                      <td key={p}>
                        <input
                          type="radio"
                          name={`tool-${name}`}
                          aria-label={`${name}: ${p}`}
                          checked={(tools[name] ?? "off") === p}
                          onChange={() => setTools((t) => ({ ...t, [name]: p }))}
                        />
                      </td>
                    ))}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </fieldset>
        <fieldset className="card stack" id="section-remote">
          <legend>Remote tools (MCP servers)</legend>
          <p className="muted small">
            Tools of remote MCP servers, each with its own permission. The model sees them as <code>server__tool</code>.
          </p>
          <McpForm servers={mcpServers} onChange={setMcpServers} />
        </fieldset>
        <StudioKnowledge attached={knowledgeBases} onAttach={setKnowledgeBases} />
        <fieldset className="card stack">
          <legend id="section-examples">Examples (case demos)</legend>
          {demos.map((demo, i) => (
            <div key={i} className="demo-edit stack">
              <label>Example {i + 1} title <input value={demo.title} onChange={(e) => setDemos((d) => d.map((x, j) => j === i ? { ...x, title: e.target.value } : x))} /></label>
              <label>Example {i + 1} question <textarea rows={2} value={demo.input} onChange={(e) => setDemos((d) => d.map((x, j) => j === i ? { ...x, input: e.target.value } : x))} /></label>
              <label>Example {i + 1} answer <textarea rows={2} value={demo.output} onChange={(e) => setDemos((d) => d.map((x, j) => j === i ? { ...x, output: e.target.value } : x))} /></label>
              <button type="button" className="secondary" onClick={() => setDemos((d) => d.filter((_, j) => j !== i))}>Remove example {i + 1}</button>
            </div>
          ))}
          <button type="button" className="secondary" onClick={() => setDemos((d) => [...d, { title: "", input: "", output: "" }])}>Add an example</button>
        </fieldset>
        <fieldset className="card stack">
          <legend id="section-pricing">Pricing</legend>
          <label>
            Billing
            <select {...field("billingType")}>
              <option value="FREE">Free</option>
              <option value="UNLOCK">Unlock once for a price</option>
            </select>
          </label>
          {form.billingType === "UNLOCK" && (
            <>
              <label>Price (credits) <input inputMode="decimal" {...field("price")} /></label>
              <label>Free trial messages per person <input type="number" min={0} {...field("trials")} /></label>
              <label className="check">
                <input type="checkbox" checked={form.allowTrial} onChange={(e) => setForm((f) => ({ ...f, allowTrial: e.target.checked }))} />
                Allow free trials
              </label>
            </>
          )}
        </fieldset>
        <MemoryFieldset memory={memory} onChange={(next) => setMemory({ ...next, changed: true })} />
        <fieldset className="card stack">
          <legend id="section-traces">Traces</legend>
          <p className="muted small">
            Every run leaves a trace (the <Link to={`/studio/${identifier}/traces`}>Traces</Link> tab): its model and
            tool calls with their tokens, time and credits. What was said is kept only if you choose so here.
          </p>
          <label className="check">
            <input type="checkbox" checked={traceContent} onChange={(e) => setTraceContent(e.target.checked)} />
            Keep message content in traces (your buyers' messages too: say so where you present the expert)
          </label>
          <label>
            Also send traces to (OTLP/HTTP traces URL, optional)
            <input
              type="url"
              inputMode="url"
              placeholder="https://collector.example.com/v1/traces"
              value={otlp.endpoint}
              onChange={(e) => setOtlp((o) => ({ ...o, endpoint: e.target.value, changed: true }))}
            />
          </label>
          {agent?.otlp_export && Object.keys(agent.otlp_export.headers).length > 0 && (
            <p className="muted small">Headers kept (values hidden): {Object.keys(agent.otlp_export.headers).join(", ")}.</p>
          )}
          <label>
            Headers for that URL, one “name: value” a line (changing the URL or the headers replaces all of them)
            <textarea
              rows={2}
              placeholder="authorization: Bearer …"
              value={otlp.headers}
              onChange={(e) => setOtlp((o) => ({ ...o, headers: e.target.value, changed: true }))}
            />
          </label>
        </fieldset>
        <div className="row sticky-actions" id="section-publish">
          <button type="submit">Save draft</button>
          <button type="button" className="secondary" onClick={() => void publish()}>Publish</button>
          <span className="muted small autosave" data-testid="autosave">{saving ? "Saving…" : dirty ? "Changes not saved yet" : autosaved}</span>
        </div>
        <p role="status" aria-live="polite">{status}</p>
        {error && <p role="alert" className="error">{error}</p>}
      </form>
      <ReviewHistory agent={agent} />
      <VersionHistory
        identifier={identifier}
        draft={agent as unknown as Record<string, unknown> | null}
        changes={published}
        onRestored={(a) => {
          load(a as Agent)
          setTestChat((n) => n + 1)
        }}
      />
      <section className="card stack" aria-labelledby="evolution">
        <h2 id="evolution">Suggestions from its conversations</h2>
        {suggestions.length === 0 && <p className="muted">No suggestions yet: they come from the expert's recorded runs.</p>}
        <ul className="list">
          {suggestions.map((s) => (
            <li key={s.id}>
              <strong>{s.title}</strong> <span className="muted small">({s.status})</span>
              <p>{s.rationale}</p>
              {s.status === "pending" && <button type="button" onClick={() => void accept(s.id)}>Accept “{s.title}”</button>}
            </li>
          ))}
        </ul>
      </section>
      </div>
      <aside className="test-chat card" aria-label="Test chat">
        <h2>Try it</h2>
        <p className="muted small">A conversation with the saved draft; saving starts a fresh one.</p>
        <ChatPage key={testChat} identifier={identifier} embedded />
      </aside>
      </div>
    </section>
  )
}
