import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { DailyCapExceeded, IdempotencyConflict, InsufficientCredits } from "../billing/Domain.js"
import { PlatformAuthentication, UserAuthentication } from "../identity/Domain.js"
import { Forbidden, InvalidRequest, NotFound } from "../platform/Errors.js"
import { AgentFields, AgentRef, Identifier } from "./Agent.js"
import { MemorySettings } from "../runtime/Expert.js"
import { EvalGateFailed, IdentifierTaken, SubmissionId } from "./Domain.js"
import { ListParams } from "../platform/http/Lists.js"

const BillingView = Schema.Struct({
  type: Schema.Literal("FREE", "UNLOCK"),
  price: Schema.Number,
  free_trial_per_user: Schema.Int,
  allow_trial: Schema.Boolean
})

export const SubmissionView = Schema.Struct({
  id: Schema.String,
  version: Schema.Int,
  status: Schema.Literal("pending", "approved", "rejected", "superseded"),
  submitted_at: Schema.String
})

/**
 * What the views say of an expert's tools, demos and remote servers: the stored configuration's fields, typed for
 * clients (answers are read back from what was validated on write; fields beside these are kept, never dropped).
 */
const Rest = Schema.Record({ key: Schema.String, value: Schema.Unknown })
export const ToolView = Schema.Struct({ name: Schema.String, permission: Schema.Literal("allow", "ask", "deny") }, Rest)
  .annotations({ identifier: "ExpertTool" })
export const CaseDemoView = Schema.Struct({ title: Schema.optional(Schema.String), input: Schema.String, output: Schema.String }, Rest)
  .annotations({ identifier: "ExpertCaseDemo" })
export const McpServerView = Schema.Struct({
  name: Schema.String,
  url: Schema.String,
  tools: Schema.Array(Schema.Struct({ name: Schema.String, permission: Schema.Literal("allow", "ask", "deny") }, Rest))
}, Rest).annotations({ identifier: "ExpertMcpServer" })

/** A stored configuration (a draft or a version) as the review console shows it, the price as a number. */
export const ExpertConfigView = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  category: Schema.String,
  instructions: Schema.String,
  model: Schema.String,
  fallback_models: Schema.optional(Schema.Array(Schema.String)),
  tools: Schema.Array(ToolView),
  subagents: Schema.Array(Schema.String),
  opening_message: Schema.String,
  case_demos: Schema.Array(CaseDemoView),
  billing: Schema.Struct({ type: Schema.String, price: Schema.Number }, Rest),
  mcp_servers: Schema.optional(Schema.Array(McpServerView)),
  knowledge_bases: Schema.optional(Schema.Array(Schema.String))
}, Rest).annotations({ identifier: "ExpertConfig" })

/** The owner's view: the whole draft and where it stands. */
export const AgentView = Schema.Struct({
  identifier: Schema.String,
  status: Schema.Literal("draft", "published"),
  name: Schema.String,
  description: Schema.String,
  category: Schema.String,
  instructions: Schema.optional(Schema.String),
  model: Schema.optional(Schema.String),
  fallback_models: Schema.optional(Schema.Array(Schema.String)),
  /** The owner sees each tool with its permission; anyone else (a published expert's page) its name. */
  tools: Schema.Array(Schema.Union(ToolView, Schema.String)),
  subagents: Schema.optional(Schema.Array(Schema.String)),
  opening_message: Schema.String,
  case_demos: Schema.Array(CaseDemoView),
  billing: BillingView,
  /** Remote MCP servers and their tools' permissions (docs/tools.md); absent when the expert has none. */
  mcp_servers: Schema.optional(Schema.Array(McpServerView)),
  /** The owner's knowledge bases its `file_search` tool searches (docs/knowledge.md); absent when none. */
  knowledge_bases: Schema.optional(Schema.Array(Schema.String)),
  /** Whether the expert remembers each end user, and its blocks (docs/memory.md); absent when never set. */
  memory: Schema.optional(MemorySettings),
  /** Whether runs' traces keep message content and tool data (docs/traces.md); false by default. */
  trace_content: Schema.optional(Schema.Boolean),
  /** Where the expert's spans are also exported (OTLP/HTTP); header values are never shown. */
  otlp_export: Schema.optional(Schema.NullOr(Schema.Struct({
    endpoint: Schema.String,
    headers: Schema.Record({ key: Schema.String, value: Schema.String })
  }))),
  /** The eval gate on publishing (docs/evals.md): a dataset of this expert and the pass-rate drop it tolerates. */
  eval_gate: Schema.optional(Schema.NullOr(Schema.Struct({ dataset: Schema.String, threshold: Schema.Number }))),
  published_version: Schema.NullOr(Schema.Int),
  pending_submission: Schema.NullOr(SubmissionView),
  /** The owner's single-agent view only: every submission, newest first, with the reviewer's reason. */
  review_history: Schema.optional(Schema.Array(Schema.Struct({
    ...SubmissionView.fields,
    reason: Schema.NullOr(Schema.String),
    decided_at: Schema.NullOr(Schema.String)
  }))),
  created_at: Schema.optional(Schema.String),
  updated_at: Schema.optional(Schema.String)
})

const Path = Schema.Struct({ identifier: Schema.String })
const VersionPath = Schema.Struct({ identifier: Schema.String, version: Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 1_000_000)) })

/** A version in the expert's history (docs/agents.md "Versions"). */
const VersionSummary = Schema.Struct({
  version: Schema.Int,
  created_at: Schema.String,
  /** Its review: `pending`, `approved`, `rejected` or `superseded` (a newer publish replaced it before review). */
  review_status: Schema.NullOr(Schema.String),
  reason: Schema.NullOr(Schema.String),
  /** Whether it is what everyone runs now. */
  live: Schema.Boolean
})

/** Spec 4.3. */
export class AgentsApi extends HttpApiGroup.make("agents")
  .add(
    HttpApiEndpoint.post("create", "/v1/agents")
      .setPayload(
        Schema.Struct({ name: AgentFields.name, identifier: Schema.optional(Identifier) }).pipe(
          Schema.extend(Schema.partial(Schema.Struct(AgentFields).pipe(Schema.omit("name"))))
        )
      )
      .addSuccess(AgentView, { status: 201 })
      .addError(IdentifierTaken)
      .annotate(OpenApi.Description, "Create an agent draft; `identifier` is derived from the name unless given.")
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/agents")
      .setUrlParams(ListParams)
      .addSuccess(Schema.Struct({ data: Schema.Array(AgentView), has_more: Schema.Boolean }))
      .addError(NotFound)
  )
  .add(HttpApiEndpoint.get("get", "/v1/agents/:identifier").setPath(Path).addSuccess(AgentView).addError(NotFound))
  .add(
    HttpApiEndpoint.patch("update", "/v1/agents/:identifier")
      .setPath(Path)
      .setPayload(Schema.Struct(AgentFields).pipe(Schema.partial))
      .addSuccess(AgentView)
      .addError(NotFound)
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.post("publish", "/v1/agents/:identifier/publish")
      .setPath(Path)
      .addSuccess(Schema.Struct({ submission: Schema.Struct({ id: Schema.String, version: Schema.Int, status: Schema.Literal("pending") }) }))
      .addError(NotFound)
      .addError(Forbidden)
      .addError(EvalGateFailed)
      .annotate(
        OpenApi.Description,
        "Freeze the draft as a new version and submit it for review; it does not go live yet. With an `eval_gate` " +
          "set, a draft whose pass rate on the gate's dataset falls below the live version's by more than the threshold " +
          "(or that has no finished eval run to compare) is refused: 409 `eval_gate_failed`, both pass rates in " +
          "`error.details` (docs/evals.md)."
      )
  )
  .add(
    HttpApiEndpoint.get("versions", "/v1/agents/:identifier/versions")
      .setPath(Path)
      .setUrlParams(ListParams)
      .addSuccess(Schema.Struct({ data: Schema.Array(VersionSummary), has_more: Schema.Boolean }))
      .addError(NotFound)
      .addError(Forbidden)
      .annotate(
        OpenApi.Description,
        "The expert's versions, newest first (each made by a publish), with their review's outcome and which one is live. " +
          "Its creator only. Pages with `limit` and `after` (a version number)."
      )
  )
  .add(
    HttpApiEndpoint.get("version", "/v1/agents/:identifier/versions/:version")
      .setPath(VersionPath)
      .addSuccess(Schema.Struct({ ...VersionSummary.fields, agent: AgentView }))
      .addError(NotFound)
      .addError(Forbidden)
      .annotate(OpenApi.Description, "One version as it was frozen (`agent`, in the shape of GET /v1/agents/{identifier}); its creator only.")
  )
  .add(
    HttpApiEndpoint.post("restoreVersion", "/v1/agents/:identifier/versions/:version/restore")
      .setPath(VersionPath)
      .addSuccess(AgentView)
      .addError(NotFound)
      .addError(Forbidden)
      .annotate(
        OpenApi.Description,
        "Makes the draft a copy of this version (\"restore as draft\"); nothing is published. The expert's live settings " +
          "(`trace_content`, `otlp_export`) stay as they are. Answers the agent with its new draft."
      )
  )
  .add(
    HttpApiEndpoint.get("profile", "/v1/agents/:identifier/profile")
      .setPath(Path)
      .addSuccess(Schema.Struct({
        identifier: Schema.String,
        name: Schema.String,
        description: Schema.String,
        category: Schema.String,
        opening_message: Schema.String,
        case_demos: Schema.Array(CaseDemoView),
        billing: BillingView,
        tools: Schema.Array(Schema.String),
        version: Schema.Int,
        published_at: Schema.NullOr(Schema.String)
      }))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.get("openingMessage", "/v1/agents/:identifier/opening-message")
      .setPath(Path)
      .addSuccess(Schema.Struct({ message: Schema.String }))
      .addError(NotFound)
  )
  .middleware(PlatformAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Agents")
  .annotate(OpenApi.Description, "Experts (agents): create, update, publish, and the owner's view of each.")
{}

/** Unlocking an UNLOCK agent (item 3 of the agents issue). */
export class PurchasesApi extends HttpApiGroup.make("purchases")
  .add(
    HttpApiEndpoint.post("purchase", "/api/purchases")
      .setPayload(Schema.Struct({ agent: AgentRef }))
      .addSuccess(Schema.Struct({ agent: Schema.String, charged: Schema.Number, balance_remaining: Schema.Number }))
      .addError(NotFound)
      .addError(InsufficientCredits)
      .addError(IdempotencyConflict)
      .addError(DailyCapExceeded)
  )
  .add(
    HttpApiEndpoint.get("status", "/api/purchases/:agent")
      .setPath(Schema.Struct({ agent: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64)) }))
      .addSuccess(Schema.Struct({ agent: Schema.String, unlocked: Schema.Boolean }))
      .annotate(
        OpenApi.Description,
        "Whether the logged-in user may use the expert without trials: unlocked, its creator, or a free expert. False for an unknown one."
      )
  )
  .middleware(UserAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Purchases")
  .annotate(OpenApi.Description, "Unlocking a published expert with credits.")
{}

/** The review desk (private network). */
export class ReviewsApi extends HttpApiGroup.make("reviews")
  .add(
    HttpApiEndpoint.post("approve", "/internal/reviews/:id/approve")
      .setPath(Schema.Struct({ id: SubmissionId.unchecked }))
      .addSuccess(Schema.Struct({ id: SubmissionId, version: Schema.Int, status: Schema.String }))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("reject", "/internal/reviews/:id/reject")
      .setPath(Schema.Struct({ id: SubmissionId.unchecked }))
      .setPayload(Schema.Struct({ reason: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2000)) }))
      .addSuccess(Schema.Struct({ id: SubmissionId, version: Schema.Int, status: Schema.String }))
      .addError(NotFound)
  )
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Review (internal)")
  .annotate(OpenApi.Description, "Operator review of published experts; private network only.")
{}
