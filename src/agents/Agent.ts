import { Schema } from "effect"
import { EvalDatasetId } from "../platform/Ids.js"
import { BUILTIN_TOOLS, McpServer, MemorySettings, ToolPolicy } from "../runtime/Expert.js"

/**
 * An agent's configuration: what a creator edits in the draft and what a version freezes. Stored as JSON (the
 * draft and each version); the credit price is kept as a decimal string so it never passes through a float.
 */

export const CATEGORIES = [
  "writing",
  "coding",
  "research",
  "education",
  "business",
  "design",
  "productivity",
  "lifestyle",
  "other"
] as const

export const Category = Schema.Literal(...CATEGORIES).annotations({
  message: () => `category must be one of: ${CATEGORIES.join(", ")}`
})

export const Identifier = Schema.String.pipe(
  Schema.pattern(/^[a-z0-9](?:[a-z0-9-]{1,62}[a-z0-9])$/, {
    message: () => "identifier must be 3-64 characters of a-z, 0-9 and '-', not starting or ending with '-'"
  })
)

/** An agent as a caller names it (a purchase, an MCP tool's argument): looked up as given, 1-64 characters. */
export const AgentRef = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64))

export const CaseDemo = Schema.Struct({
  title: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
  input: Schema.String.pipe(Schema.maxLength(4000)),
  output: Schema.String.pipe(Schema.maxLength(8000))
})

/** Decimal credits as text ("12.5"); at most 6 places. */
export const PriceText = Schema.String.pipe(Schema.pattern(/^\d{1,12}(\.\d{1,6})?$/))

export const BillingInput = Schema.Struct({
  type: Schema.Literal("FREE", "UNLOCK"),
  price: Schema.optional(Schema.Union(Schema.Number, Schema.String)),
  free_trial_per_user: Schema.optional(Schema.Int.pipe(Schema.between(0, 1000))),
  allow_trial: Schema.optional(Schema.Boolean)
})

export const Billing = Schema.Struct({
  type: Schema.Literal("FREE", "UNLOCK"),
  price: PriceText,
  free_trial_per_user: Schema.Int,
  allow_trial: Schema.Boolean
})
export type Billing = typeof Billing.Type

/** An OTLP export as stored: the endpoint, the headers' names, and the headers themselves sealed (JSON, or none). */
export const StoredOtlpExport = Schema.Struct({
  endpoint: Schema.String,
  header_names: Schema.Array(Schema.String),
  headers_sealed: Schema.NullOr(Schema.String)
})
export type StoredOtlpExport = typeof StoredOtlpExport.Type

const httpUrl = (field: string) =>
  Schema.String.pipe(Schema.filter((url) => {
    try {
      const parsed = new URL(url)
      return (url.length <= 2000 && (parsed.protocol === "https:" || parsed.protocol === "http:")) ||
        `${field} must be an http(s) URL of at most 2000 characters`
    } catch {
      return `${field} must be an http(s) URL of at most 2000 characters`
    }
  }))

/** `otlp_export` as a creator sends it: an OTLP/HTTP traces URL (`.../v1/traces`) and the headers it needs. */
export const OtlpExportInput = Schema.NullOr(Schema.Struct({
  endpoint: httpUrl("otlp_export.endpoint"),
  headers: Schema.optional(
    Schema.Record({
      key: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9-]{1,64}$/, {
        message: () => "otlp_export.headers names must be 1-64 characters of A-Z a-z 0-9 -"
      })),
      value: Schema.String.pipe(Schema.maxLength(4096))
    }).pipe(Schema.filter((headers) => Object.keys(headers).length <= 20 || "otlp_export.headers may have at most 20 entries"))
  )
}))

/** The stored configuration (draft or version). */
export const AgentConfig = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  category: Schema.String,
  instructions: Schema.String,
  model: Schema.String,
  /** Tried in order when the model's upstream fails retryably (docs/models.md); absent: none. */
  fallback_models: Schema.optional(Schema.Array(Schema.String)),
  tools: Schema.Array(ToolPolicy),
  subagents: Schema.Array(Schema.String),
  opening_message: Schema.String,
  case_demos: Schema.Array(CaseDemo),
  billing: Billing,
  /** Absent: none (configurations stored before remote tools existed, agents made by the platform). */
  mcp_servers: Schema.optional(Schema.Array(McpServer)),
  /** Knowledge bases its `file_search` searches (docs/knowledge.md); absent: none. */
  knowledge_bases: Schema.optional(Schema.Array(Schema.String)),
  /** Memory of each end user (docs/memory.md); absent: none. */
  memory: Schema.optional(MemorySettings),
  /**
   * The creator's trace setting (docs/traces.md): runs' traces keep messages and tool data. A setting of the expert,
   * read from the draft for every run (a version's copy is not used): turning it off stops capture at once.
   */
  trace_content: Schema.optional(Schema.Boolean),
  /**
   * Where the expert's spans are also sent (docs/traces.md, "OTLP export"): an OTLP/HTTP traces endpoint and its
   * headers, sealed under `SECRETS_KEY` (only their names stay readable); absent or null: nowhere.
   */
  otlp_export: Schema.optional(Schema.NullOr(StoredOtlpExport)),
  /**
   * The eval gate (docs/evals.md, "Publish gate"): a new version whose pass rate on `dataset` falls below the live
   * version's by more than `threshold` (0 to 1) is not submitted. A setting of the expert, read from the draft.
   */
  eval_gate: Schema.optional(Schema.NullOr(Schema.Struct({ dataset: EvalDatasetId.unchecked, threshold: Schema.Number })))
})
export type AgentConfig = typeof AgentConfig.Type

/** How many fallback models an expert may name: each is one more attempt a failing step may take. */
export const MAX_FALLBACK_MODELS = 3

/** Fields a create or an update may carry; each is checked, and `billing` is normalised (see `normalizeBilling`). */
export const AgentFields = {
  name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
  description: Schema.String.pipe(Schema.maxLength(2000)),
  category: Category,
  instructions: Schema.String.pipe(Schema.maxLength(20_000)),
  /** `<provider>/<model>` from `GET /v1/models` (a bare model id that one provider offers is accepted too). */
  model: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  fallback_models: Schema.Array(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))).pipe(
    Schema.maxItems(MAX_FALLBACK_MODELS)
  ),
  tools: Schema.Array(ToolPolicy).pipe(Schema.maxItems(BUILTIN_TOOLS.length)),
  subagents: Schema.Array(Identifier).pipe(Schema.maxItems(10)),
  opening_message: Schema.String.pipe(Schema.maxLength(2000)),
  case_demos: Schema.Array(CaseDemo).pipe(Schema.maxItems(20)),
  billing: BillingInput,
  mcp_servers: Schema.Array(McpServer).pipe(Schema.maxItems(10)),
  knowledge_bases: Schema.Array(Schema.String.pipe(Schema.maxLength(64))).pipe(Schema.maxItems(10)),
  memory: MemorySettings,
  trace_content: Schema.Boolean,
  otlp_export: OtlpExportInput,
  eval_gate: Schema.NullOr(Schema.Struct({
    dataset: EvalDatasetId.unchecked.pipe(Schema.minLength(1), Schema.maxLength(100)),
    threshold: Schema.Number.pipe(Schema.between(0, 1))
  }))
}

export const defaultBilling: Billing = { type: "FREE", price: "0", free_trial_per_user: 3, allow_trial: true }

/** A FREE agent costs 0 whatever price was sent; an UNLOCK agent needs a positive price. */
export const normalizeBilling = (input: typeof BillingInput.Type, previous: Billing = defaultBilling): Billing | string => {
  const priceText = input.price === undefined ? previous.price : String(input.price).trim()
  if (!/^\d{1,12}(\.\d{1,6})?$/.test(priceText)) return "billing.price must be a non-negative amount with at most 6 decimal places"
  const price = input.type === "FREE" ? "0" : priceText.replace(/(\.\d*?)0+$/, "$1").replace(/\.$/, "")
  if (input.type === "UNLOCK" && Number(price) <= 0) return "billing.price must be positive for an UNLOCK agent"
  return {
    type: input.type,
    price,
    free_trial_per_user: input.free_trial_per_user ?? previous.free_trial_per_user,
    allow_trial: input.allow_trial ?? previous.allow_trial
  }
}

/** What others see of a published agent: its prompt layers (instructions) stay the creator's. */
export const publicView = (identifier: string, config: AgentConfig) => ({
  identifier,
  name: config.name,
  description: config.description,
  category: config.category,
  opening_message: config.opening_message,
  case_demos: config.case_demos,
  billing: { ...config.billing, price: Number(config.billing.price) },
  tools: config.tools.map((tool) => tool.name)
})
