import { useEffect, useState } from "react"
import { call, itemsOf } from "../api.js"
import { OlderButton } from "./ListTable.js"
import { when } from "./StudioTabs.js"

/** A version as `GET /v1/agents/:identifier/versions` lists it (docs/agents.md "Version history"). */
interface Version {
  version: number
  created_at: string
  review_status: string | null
  reason: string | null
  live: boolean
}

/** The fields of an expert a person compares, in words, in the editor's order. */
const FIELDS: ReadonlyArray<readonly [string, string]> = [
  ["name", "Name"],
  ["description", "Description"],
  ["category", "Category"],
  ["instructions", "Instructions"],
  ["model", "Model"],
  ["fallback_models", "Fallback models"],
  ["opening_message", "Opening message"],
  ["tools", "Tools"],
  ["subagents", "Experts it can hand tasks to"],
  ["mcp_servers", "Remote tools (MCP servers)"],
  ["knowledge_bases", "Knowledge bases"],
  ["case_demos", "Examples"],
  ["memory", "Memory"],
  ["billing", "Pricing"]
]

const REVIEW: Record<string, string> = {
  pending: "waiting for review",
  approved: "approved",
  rejected: "not approved",
  superseded: "replaced by a newer version before review"
}

const PERMISSION: Record<string, string> = { allow: "runs without asking", ask: "asks first", deny: "refused" }

/** A field's value as a person reads it: never JSON. */
const inWords = (key: string, value: unknown): string => {
  if (value === undefined || value === null || value === "") return "(none)"
  if (key === "tools" && Array.isArray(value)) {
    return value.length === 0 ? "(none)" : value.map((t: { name?: string; permission?: string } | string) =>
      typeof t === "string" ? t : `${t.name} (${PERMISSION[t.permission ?? ""] ?? t.permission})`).join(", ")
  }
  if (key === "billing" && typeof value === "object") {
    const b = value as { type?: string; price?: number | string; free_trial_per_user?: number; allow_trial?: boolean }
    return b.type === "UNLOCK"
      ? `Unlock once for ${new Intl.NumberFormat().format(Number(b.price))} credits, ${b.allow_trial ? `${b.free_trial_per_user} free messages` : "no free trial"}`
      : "Free"
  }
  if (key === "memory" && typeof value === "object") {
    const m = value as { enabled?: boolean; blocks?: ReadonlyArray<{ label: string; limit: number }> }
    return m.enabled ? `On, blocks: ${(m.blocks ?? []).map((b) => `${b.label} (${b.limit} characters)`).join(", ") || "none"}` : "Off"
  }
  if (key === "mcp_servers" && Array.isArray(value)) {
    return value.length === 0 ? "(none)" : value.map((s: { name?: string; url?: string }) => `${s.name ?? "server"} at ${s.url ?? "?"}`).join(", ")
  }
  if (key === "case_demos" && Array.isArray(value)) {
    return value.length === 0 ? "(none)" : value.map((d: { title?: string; input?: string }) => d.title || d.input || "example").join("; ")
  }
  if (Array.isArray(value)) return value.length === 0 ? "(none)" : value.map(String).join(", ")
  if (typeof value === "object") {
    return Object.entries(value as Record<string, unknown>).map(([k, v]) => `${k.replace(/_/g, " ")}: ${String(v)}`).join(", ")
  }
  return String(value)
}

/** Lines removed and added between two texts (a longest-common-subsequence diff, fine for instructions' size). */
const lineDiff = (before: string, after: string) => {
  const a = before.split("\n")
  const b = after.split("\n")
  const n = a.length
  const m = b.length
  const lcs: Array<Array<number>> = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0))
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!)
  }
  const out: Array<{ kind: "same" | "removed" | "added"; line: string }> = []
  let i = 0
  let j = 0
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      out.push({ kind: "same", line: a[i]! })
      i++
      j++
    } else if (j < m && (i >= n || lcs[i]![j + 1]! >= lcs[i + 1]![j]!)) {
      out.push({ kind: "added", line: b[j]! })
      j++
    } else {
      out.push({ kind: "removed", line: a[i]! })
      i++
    }
  }
  return out
}

const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null)

/** The fields where the version and the draft differ, the version's value first. */
const Diff = ({ version, draft }: { version: Record<string, unknown>; draft: Record<string, unknown> }) => {
  const changed = FIELDS.filter(([key]) => !same(version[key], draft[key]))
  if (changed.length === 0) return <p className="muted" data-testid="version-diff">The draft is the same as this version.</p>
  return (
    <dl className="facts version-diff" data-testid="version-diff">
      {changed.map(([key, label]) => (
        <div key={key} className="contents">
          <dt>{label}</dt>
          <dd>
            {key === "instructions" && typeof version[key] === "string" && typeof draft[key] === "string"
              ? (
                <pre className="line-diff">
                  {lineDiff(version[key] as string, draft[key] as string).map((d, i) => (
                    <span key={i} className={`diff-${d.kind}`}>
                      {d.kind === "removed" ? "− " : d.kind === "added" ? "+ " : "  "}{d.line}{"\n"}
                    </span>
                  ))}
                </pre>
              )
              : (
                <>
                  <span className="diff-removed">In this version: {inWords(key, version[key])}</span><br />
                  <span className="diff-added">In the draft: {inWords(key, draft[key])}</span>
                </>
              )}
          </dd>
        </div>
      ))}
    </dl>
  )
}

/**
 * The expert's version history under the editor (issue 48 item 3): each version with its review and whether it is
 * live, compared with the saved draft, and restored as the draft on request. `onRestored` gets the agent as the
 * restore answered it, for the editor to load.
 */
export const VersionHistory = ({ identifier, draft, changes, onRestored }: {
  identifier: string
  /** The saved draft, in the shape of GET /v1/agents/:identifier. */
  draft: Record<string, unknown> | null
  /** Changes every time the list may have changed (a publish). */
  changes: number
  onRestored: (agent: unknown) => void
}) => {
  const [versions, setVersions] = useState<ReadonlyArray<Version> | null>(null)
  const [more, setMore] = useState(false)
  const [open, setOpen] = useState<{ version: number; agent: Record<string, unknown> } | null>(null)
  const [status, setStatus] = useState<string | null>(null)
  const [error, setError] = useState<string | null>(null)

  const load = (after?: number) =>
    call((c) => c.agents.versions({ path: { identifier }, urlParams: after === undefined ? { limit: 10 } : { limit: 10, after: String(after) } })).then((page) => {
      const items = itemsOf<Version>(page)
      setVersions((old) => after === undefined ? items : [...(old ?? []), ...items])
      setMore(page.has_more)
    }, (e: Error) => setError(e.message))

  useEffect(() => {
    void load()
  }, [identifier, changes])

  const compare = async (version: number) => {
    setError(null)
    if (open?.version === version) return setOpen(null)
    try {
      const found = await call((c) => c.agents.version({ path: { identifier, version } }))
      setOpen({ version, agent: found.agent as unknown as Record<string, unknown> })
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  const restore = async (version: number) => {
    setError(null)
    if (!window.confirm(`Make the draft a copy of version ${version}? The draft's current content is replaced; nothing is published.`)) return
    try {
      const agent = await call((c) => c.agents.restoreVersion({ path: { identifier, version } }))
      onRestored(agent)
      setOpen(null)
      setStatus(`Version ${version} restored as the draft. Publish it to send it to review again.`)
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  return (
    <section className="card stack" aria-labelledby="versions">
      <h2 id="versions">Versions</h2>
      {versions !== null && versions.length === 0 && <p className="muted">No versions yet: each Publish makes one.</p>}
      {versions !== null && versions.length > 0 && (
        <ol className="list" data-testid="versions">
          {versions.map((v) => (
            <li key={v.version} className="stack">
              <p>
                <strong>Version {v.version}</strong>{" "}
                <span className="muted small">published {when(v.created_at)}, {REVIEW[v.review_status ?? ""] ?? "not submitted"}</span>
                {v.live && <span className="badge status-completed"> live</span>}
              </p>
              {v.reason && <p className="muted small">Reviewer's reason: {v.reason}</p>}
              <div className="row">
                <button type="button" className="secondary" aria-expanded={open?.version === v.version} onClick={() => void compare(v.version)}>
                  Compare version {v.version} with the draft
                </button>
                <button type="button" className="secondary" onClick={() => void restore(v.version)}>Restore version {v.version} as draft</button>
              </div>
              {open?.version === v.version && draft !== null && <Diff version={open.agent} draft={draft} />}
            </li>
          ))}
        </ol>
      )}
      <OlderButton rows={versions} label="Older versions" more={more} onClick={(last) => void load(last.version)} />
      <p role="status" aria-live="polite">{status}</p>
      {error && <p role="alert" className="error">{error}</p>}
    </section>
  )
}
