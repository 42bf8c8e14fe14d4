import { Schema } from "effect"
import { AcceptedView, StatsView, SuggestionView } from "../evolution/Api.js"
import { BillingView as Billing, CreatorView, MarketItem, SkillList } from "../market/Api.js"
import { RunObject } from "../runs/Api.js"
import { ScheduleView } from "../schedules/Domain.js"
import { MemorySettings } from "../runtime/Expert.js"
import { EvalRunView, ResultView } from "../evals/Domain.js"

/**
 * Every tool's `outputSchema` (MCP 2025-06-18): the shape of its `structuredContent`, which the SDK's client checks
 * each result against. Effect Schemas, published as JSON Schema (`jsonSchemaOf`); the HTTP contracts' views where a
 * tool answers what a route answers (creator profile, billing, skills, marketplace items, evolution), the rest
 * written here from what each tool answers (docs/mcp.md, Tools). The objects the platform owns are exact (every key
 * listed, none other, published as `additionalProperties: false`), and the ones mirrored from OpenAI's API (vector
 * stores, their files, search pages) and a run's public events name their main keys and allow the rest (`loose`),
 * since they follow OpenAI's objects as those grow. `test/mcp/outputs.test.ts` calls every tool and checks that
 * none is missing here.
 */

const timestamp = Schema.String.annotations({ description: "ISO 8601 time" })
const int = Schema.Int

const Rest = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** An object with these keys and any others. */
const loose = <Fields extends Schema.Struct.Fields>(fields: Fields) => Schema.Struct(fields, Rest)

const PendingSubmission = Schema.Struct({ id: Schema.String, version: int, status: Schema.String, submitted_at: timestamp })

const ExpertFields = {
  identifier: Schema.String,
  name: Schema.String,
  description: Schema.String,
  category: Schema.String,
  status: Schema.Literal("draft", "published"),
  billing: Billing,
  published_version: Schema.NullOr(int),
  pending_submission: Schema.NullOr(PendingSubmission),
  created_at: timestamp,
  updated_at: timestamp
}
const Expert = Schema.Struct(ExpertFields)

/** Someone else's published expert has no dates (docs/mcp.md, get_expert_detail). */
const ExpertDetail = Schema.Struct({
  ...ExpertFields,
  created_at: Schema.optional(timestamp),
  updated_at: Schema.optional(timestamp)
})

const Usage = Schema.Struct({ input_tokens: int, output_tokens: int })

const Distillation = Schema.Struct({
  sessionId: Schema.String,
  topic: Schema.String,
  draft: Schema.Struct({ name: Schema.String, description: Schema.String, category: Schema.String, instructions: Schema.String }),
  agent: Schema.NullOr(Schema.Struct({ identifier: Schema.String, created: Schema.optional(Schema.Boolean) })),
  materials: Schema.Array(Schema.Struct({ filename: Schema.String, bytes: int })),
  turns: int,
  created_at: timestamp,
  updated_at: timestamp,
  answer: Schema.String,
  run: Schema.Struct({ id: Schema.String, status: Schema.String, credits_charged: Schema.Number, usage: Usage })
})

const VectorStore = loose({
  id: Schema.String,
  object: Schema.Literal("vector_store"),
  name: Schema.String,
  status: Schema.String,
  created_at: int
})

const VectorStoreFile = loose({
  id: Schema.String,
  object: Schema.Literal("vector_store.file"),
  vector_store_id: Schema.String,
  status: Schema.String,
  created_at: int
})

export const TOOL_OUTPUTS: Readonly<Record<string, Schema.Schema<any, any, never>>> = {
  get_creator_profile: CreatorView,
  apply_creator: Schema.Struct({ ...CreatorView.fields, message: Schema.String }),
  create_expert: Expert,
  update_expert: Expert,
  get_expert_detail: ExpertDetail,
  list_my_experts: Schema.Struct({ data: Schema.Array(Expert), has_more: Schema.Boolean }),
  install_skill: Schema.Struct({ success: Schema.Literal(true), installed: Schema.String }),
  list_expert_skills: SkillList,
  list_marketplace_skills: SkillList,
  set_billing: Schema.Struct({ identifier: Schema.String, billingType: Schema.Literal("METERED", "ONE_TIME"), billing: Billing }),
  publish_expert: Schema.Struct({
    identifier: Schema.String,
    submission: Schema.Struct({ id: Schema.String, version: int, status: Schema.Literal("pending") }),
    published_version: Schema.NullOr(int),
    message: Schema.String
  }),
  get_submission_status: Schema.Struct({
    identifier: Schema.String,
    status: Schema.Literal("draft", "published"),
    published_version: Schema.NullOr(int),
    pending_submission: Schema.NullOr(PendingSubmission),
    latest_submission: Schema.NullOr(Schema.Struct({
      ...PendingSubmission.fields,
      reason: Schema.NullOr(Schema.String),
      decided_at: Schema.NullOr(timestamp)
    }))
  }),
  start_distillation: Distillation,
  continue_distillation: Distillation,
  test_expert: Schema.Struct({
    runId: Schema.String,
    identifier: Schema.String,
    version: Schema.NullOr(int).annotations({ description: "null: the owner's draft" }),
    status: Schema.Literal("completed", "failed", "cancelled"),
    output: Schema.String,
    creditsCharged: Schema.Number,
    usage: Usage,
    error: Schema.optional(Schema.Struct({ code: Schema.String, message: Schema.String })),
    notice: Schema.optional(Schema.String),
    events: Schema.Array(loose({ type: Schema.String })).annotations({
      description: "The run's public events (docs/events.md), without text increments"
    })
  }),
  open_expert_chat: Schema.Struct({ identifier: Schema.String, url: Schema.String }),
  open_platform_page: Schema.Struct({ page: Schema.Literal("studio", "chat", "marketplace", "earnings"), url: Schema.String }),
  list_evolution_suggestions: Schema.Struct({ identifier: Schema.String, data: Schema.Array(SuggestionView), has_more: Schema.Boolean }),
  accept_evolution: AcceptedView,
  get_evolution_stats: StatsView,
  get_earnings: Schema.Struct({
    total: Schema.Number,
    agents: Schema.Array(Schema.Struct({ identifier: Schema.String, unlocks: int, gross: Schema.Number, net: Schema.Number }))
  }),
  browse_marketplace: Schema.Struct({ data: Schema.Array(MarketItem), page: int, pageSize: int, total: int }),
  run_eval: EvalRunView,
  cancel_eval: EvalRunView,
  get_eval_results: Schema.Struct({ run: EvalRunView, results: Schema.Array(ResultView), has_more: Schema.Boolean }),
  list_knowledge_bases: Schema.Struct({ knowledge_bases: Schema.Array(VectorStore) }),
  create_knowledge_base: VectorStore,
  add_knowledge_text: VectorStoreFile,
  knowledge_status: Schema.Struct(
    { ...VectorStore.fields, files: Schema.Array(VectorStoreFile) },
    Rest
  ),
  search_knowledge: loose({
    object: Schema.Literal("vector_store.search_results.page"),
    data: Schema.Array(loose({ file_id: Schema.String, filename: Schema.String, score: Schema.Number })),
    has_more: Schema.Boolean
  }),
  attach_knowledge: Schema.Struct({ identifier: Schema.String, knowledge_bases: Schema.Array(Schema.String) }),
  configure_memory: Schema.Struct({
    identifier: Schema.String,
    memory: MemorySettings,
    usage: Schema.Struct({ end_users: int, facts: int, blocks: int })
  }),
  list_runs: Schema.Struct({ runs: Schema.Array(RunObject), has_more: Schema.Boolean }),
  get_run: RunObject,
  cancel_run: RunObject,
  create_schedule: ScheduleView,
  list_schedules: Schema.Struct({ schedules: Schema.Array(ScheduleView) })
}
