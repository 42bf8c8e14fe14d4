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

/** The tools an expert with memory has (docs/memory.md), beside `memory_save`, which adds a fact. */
export const MEMORY_TOOLS = ["memory_read", "memory_replace", "memory_append", "memory_search", "fact_add", "fact_supersede"] as const
export type MemoryToolName = typeof MEMORY_TOOLS[number] | "memory_save"

/** The most characters one block may hold, and the most blocks: what memory may add to every prompt stays bounded. */
export const MAX_BLOCK_LIMIT = 20_000
export const MAX_BLOCKS = 8

/** A block the expert keeps about each end user: its label, what it is for, and the most characters it holds. */
export const MemoryBlockSetting = Schema.Struct({
  label: Schema.String.pipe(Schema.pattern(/^[a-z][a-z0-9_]{0,39}$/, {
    message: () => "memory.blocks[].label must be 1-40 characters of a-z, 0-9 and _, starting with a letter"
  })),
  description: Schema.String.pipe(Schema.maxLength(500)),
  limit: Schema.Int.pipe(Schema.between(1, MAX_BLOCK_LIMIT, {
    message: () => `memory.blocks[].limit must be an integer from 1 to ${MAX_BLOCK_LIMIT} (characters)`
  })),
  read_only: Schema.optional(Schema.Boolean)
})
export type MemoryBlockSetting = typeof MemoryBlockSetting.Type

/** Whether the expert remembers its end users, and which blocks it keeps (the creator's choice). */
export const MemorySettings = Schema.Struct({
  enabled: Schema.Boolean,
  blocks: Schema.Array(MemoryBlockSetting).pipe(Schema.maxItems(MAX_BLOCKS)),
  /**
   * After a turn, one model call proposes facts and block edits (docs/memory.md, "Extraction"), billed to the
   * turn's payer as a `memory` ledger line. Off unless set: it is a model call per (debounced) turn.
   */
  extraction: Schema.optional(Schema.Boolean)
})
export type MemorySettings = typeof MemorySettings.Type

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
  /** Memory of each end user (docs/memory.md); absent: none beyond the `memory_save` tool if it is listed. */
  readonly memory?: MemorySettings | undefined
}
