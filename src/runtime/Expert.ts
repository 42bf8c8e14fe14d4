import { Schema } from "effect"

/**
 * What the run engine runs: an expert (agent) as a run sees it. The engine owns this description; `agents/` stores
 * and versions a larger configuration (category, case demos, opening message...) that includes it, so the engine
 * never imports the agents folder above it.
 */

/** The built-in tools an agent may list (the run engine implements them). */
export const BUILTIN_TOOLS = [
  "get_time",
  "calculator",
  "write_file",
  "read_file",
  "list_files",
  "memory_save",
  "memory_search",
  "run_code",
  "file_search"
] as const

export const ToolPolicy = Schema.Struct({
  name: Schema.Literal(...BUILTIN_TOOLS).annotations({
    message: () => `tools[].name must be one of: ${BUILTIN_TOOLS.join(", ")}`
  }),
  permission: Schema.Literal("allow", "ask", "deny")
})

/**
 * A remote MCP server an expert uses (docs/tools.md): its tools reach the model as `<name>__<tool>`, each with its
 * own permission. `auth`: `none`; `bearer`, the expert owner's stored credential for the URL; `per_end_user`, the
 * calling end user's own (`/v1/credentials`).
 */
export const McpServer = Schema.Struct({
  name: Schema.String.pipe(Schema.pattern(/^[a-z0-9][a-z0-9-]{0,23}$/, {
    message: () => "mcp_servers[].name must be 1-24 characters of a-z, 0-9 and '-', starting with a letter or digit"
  })),
  url: Schema.String.pipe(Schema.filter((url) => {
    try {
      const parsed = new URL(url)
      return (url.length <= 2000 && (parsed.protocol === "https:" || parsed.protocol === "http:")) ||
        "mcp_servers[].url must be an http(s) URL of at most 2000 characters"
    } catch {
      return "mcp_servers[].url must be an http(s) URL of at most 2000 characters"
    }
  })),
  tools: Schema.Array(Schema.Struct({
    name: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_.-]{1,38}$/, {
      message: () => "mcp_servers[].tools[].name must be 1-38 characters of A-Z a-z 0-9 _ . -"
    })),
    permission: Schema.Literal("allow", "ask", "deny")
  })).pipe(Schema.maxItems(50)),
  auth: Schema.Literal("none", "bearer", "per_end_user")
})
export type McpServer = typeof McpServer.Type

/** An expert's price and trials as a run applies them (spec 4.10 rules 4, 8); the price is decimal credits as text. */
export interface ExpertBilling {
  readonly type: "FREE" | "UNLOCK"
  readonly price: string
  readonly free_trial_per_user: number
  readonly allow_trial: boolean
}

/** The parts of an expert's configuration a run uses. */
export interface ExpertConfig {
  readonly instructions: string
  readonly model: string
  /** Models a step moves to, in order, when the model's upstream fails retryably (docs/models.md). */
  readonly fallback_models?: ReadonlyArray<string> | undefined
  readonly tools: ReadonlyArray<typeof ToolPolicy.Type>
  readonly subagents: ReadonlyArray<string>
  readonly billing: ExpertBilling
  /** Absent: none (configurations stored before remote tools existed, agents made by the platform). */
  readonly mcp_servers?: ReadonlyArray<McpServer> | undefined
  /**
   * Knowledge bases (vector store ids of the expert's owner, docs/knowledge.md) its `file_search` tool searches;
   * absent or empty: the expert has no `file_search`.
   */
  readonly knowledge_bases?: ReadonlyArray<string> | undefined
}
