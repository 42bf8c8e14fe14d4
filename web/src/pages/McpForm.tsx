import { useState } from "react"

type Permission = "allow" | "ask" | "deny"
export interface McpTool { name: string; permission: Permission }
export interface McpServerForm { name: string; url: string; auth: "none" | "bearer" | "per_end_user"; tools: Array<McpTool> }

const AUTH: ReadonlyArray<[McpServerForm["auth"], string]> = [
  ["none", "None"],
  ["bearer", "My stored credential for the URL (bearer)"],
  ["per_end_user", "Each user's own credential (per end user)"]
]

/** What the form can say about a server before the API does, in words. */
export const mcpProblems = (servers: ReadonlyArray<McpServerForm>): string | null => {
  for (const [i, s] of servers.entries()) {
    const which = `Remote tools, server ${i + 1}`
    if (!/^[a-z0-9][a-z0-9-]{0,23}$/.test(s.name)) return `${which}: the name is 1 to 24 characters of a-z, 0-9 and "-".`
    try {
      const url = new URL(s.url)
      if (url.protocol !== "https:" && url.protocol !== "http:") throw new Error()
    } catch {
      return `${which}: the URL must start with https:// (for example https://mcp.example.com/mcp).`
    }
    for (const t of s.tools) {
      if (!/^[A-Za-z0-9_.-]{1,38}$/.test(t.name)) return `${which}: a tool name is 1 to 38 characters of letters, digits, "_", "." and "-".`
    }
  }
  return null
}

/**
 * The servers written in the JSON view, in the form's shape, or the first thing wrong with them in words: the form
 * can only show a list of objects with a text name and URL, a known authentication and a list of tools.
 */
export const serversFromJson = (parsed: unknown): { servers: Array<McpServerForm> } | { problem: string } => {
  if (!Array.isArray(parsed)) return { problem: "The JSON must be a list of servers: [ { \"name\": …, \"url\": …, \"auth\": …, \"tools\": [ … ] } ]." }
  const servers: Array<McpServerForm> = []
  for (const [i, item] of parsed.entries()) {
    const which = `Server ${i + 1} in the JSON`
    if (typeof item !== "object" || item === null || Array.isArray(item)) return { problem: `${which} is not an object with a name, a URL, an auth and tools.` }
    const { name, url, auth = "none", tools = [] } = item as Record<string, unknown>
    if (typeof name !== "string") return { problem: `${which}: "name" must be text, like "search".` }
    if (typeof url !== "string") return { problem: `${which}: "url" must be text, like "https://mcp.example.com/mcp".` }
    if (!AUTH.some(([value]) => value === auth)) return { problem: `${which}: "auth" must be "none", "bearer" or "per_end_user".` }
    if (!Array.isArray(tools)) return { problem: `${which}: "tools" must be a list, like [{ "name": "search", "permission": "ask" }].` }
    const shaped: Array<McpTool> = []
    for (const [k, tool] of tools.entries()) {
      const t = tool as Record<string, unknown> | null
      const permission = t?.permission ?? "ask"
      if (typeof t !== "object" || t === null || typeof t.name !== "string" || !["allow", "ask", "deny"].includes(permission as string)) {
        return { problem: `${which}, tool ${k + 1}: each tool has a "name" and a "permission" of "allow", "ask" or "deny".` }
      }
      shaped.push({ name: t.name, permission: permission as Permission })
    }
    servers.push({ name, url, auth: auth as McpServerForm["auth"], tools: shaped })
  }
  return { servers }
}

/**
 * An expert's remote MCP servers as a form (URL, auth, each tool with its permission), with the JSON as an
 * advanced view. The JSON view edits the same list: leaving it with JSON that does not parse says so and stays.
 */
export const McpForm = ({ servers, onChange }: { servers: Array<McpServerForm>; onChange: (next: Array<McpServerForm>) => void }) => {
  const [json, setJson] = useState<string | null>(null)
  const [jsonError, setJsonError] = useState<string | null>(null)
  const set = (i: number, patch: Partial<McpServerForm>) => onChange(servers.map((s, j) => j === i ? { ...s, ...patch } : s))
  const setTool = (i: number, k: number, patch: Partial<McpTool>) =>
    set(i, { tools: servers[i]!.tools.map((t, j) => j === k ? { ...t, ...patch } : t) })

  if (json !== null) {
    return (
      <div className="stack">
        <label>
          MCP servers (JSON)
          <textarea rows={8} spellCheck={false} value={json} onChange={(e) => setJson(e.target.value)} />
        </label>
        {jsonError && <p role="alert" className="error">{jsonError}</p>}
        <button type="button" className="secondary" onClick={() => {
          let parsed: unknown
          try {
            parsed = JSON.parse(json.trim() === "" ? "[]" : json)
          } catch {
            return setJsonError("This is not valid JSON for a list of servers: fix it, or undo your change.")
          }
          const read = serversFromJson(parsed)
          if ("problem" in read) return setJsonError(read.problem)
          onChange(read.servers)
          setJson(null)
          setJsonError(null)
        }}>Back to the form</button>
      </div>
    )
  }
  return (
    <div className="stack">
      {servers.length === 0 && <p className="muted">No remote tools. Add an MCP server to give the expert its tools.</p>}
      {servers.map((server, i) => (
        <fieldset key={i} className="card stack">
          <legend>Server {i + 1}{server.name ? `: ${server.name}` : ""}</legend>
          <label>Server {i + 1} name <input value={server.name} placeholder="search" onChange={(e) => set(i, { name: e.target.value })} /></label>
          <label>Server {i + 1} URL <input inputMode="url" value={server.url} placeholder="https://mcp.example.com/mcp" onChange={(e) => set(i, { url: e.target.value })} /></label>
          <label>
            Server {i + 1} authentication
            <select value={server.auth} onChange={(e) => set(i, { auth: e.target.value as McpServerForm["auth"] })}>
              {AUTH.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
            </select>
          </label>
          {server.tools.map((tool, k) => (
            <div key={k} className="row">
              <label>Tool {k + 1} of server {i + 1} <input value={tool.name} onChange={(e) => setTool(i, k, { name: e.target.value })} /></label>
              <label>
                Permission of tool {k + 1}
                <select value={tool.permission} onChange={(e) => setTool(i, k, { permission: e.target.value as Permission })}>
                  <option value="allow">Allow</option>
                  <option value="ask">Ask me</option>
                  <option value="deny">Deny</option>
                </select>
              </label>
              <button type="button" className="link danger-text" onClick={() => set(i, { tools: server.tools.filter((_, j) => j !== k) })}>Remove tool {k + 1}</button>
            </div>
          ))}
          <div className="row">
            <button type="button" className="secondary" onClick={() => set(i, { tools: [...server.tools, { name: "", permission: "ask" }] })}>Add a tool to server {i + 1}</button>
            <button type="button" className="danger" onClick={() => onChange(servers.filter((_, j) => j !== i))}>Remove server {i + 1}</button>
          </div>
        </fieldset>
      ))}
      <div className="row">
        <button type="button" className="secondary" onClick={() => onChange([...servers, { name: "", url: "", auth: "none", tools: [] }])}>Add an MCP server</button>
        <button type="button" className="link" onClick={() => setJson(JSON.stringify(servers, null, 2))}>Edit as JSON (advanced)</button>
      </div>
    </div>
  )
}
