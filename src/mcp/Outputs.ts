import { z } from "zod"

/**
 * Every tool's `outputSchema` (MCP 2025-06-18): the shape of its `structuredContent`, which the SDK's client checks
 * each result against. Written here, beside the tool table, from what each tool answers (docs/mcp.md, Tools); the
 * objects the platform owns are exact (`z.object`: every key listed, none other, published as
 * `additionalProperties: false`), and the ones mirrored from OpenAI's API (vector stores, their files, search pages)
 * and a run's public events name their main keys and allow the rest (`z.looseObject`), since they follow OpenAI's
 * objects as those grow. `test/mcp/outputs.test.ts` calls every tool and checks that none is missing here.
 */

const timestamp = z.string().describe("ISO 8601 time")
const int = z.number().int()

const Billing = z.object({
  type: z.enum(["FREE", "UNLOCK"]),
  price: z.number().describe("Credits to unlock (0 when FREE)"),
  free_trial_per_user: int,
  allow_trial: z.boolean()
})

const PendingSubmission = z.object({ id: z.string(), version: int, status: z.string(), submitted_at: timestamp })

const Expert = z.object({
  identifier: z.string(),
  name: z.string(),
  description: z.string(),
  category: z.string(),
  status: z.enum(["draft", "published"]),
  billing: Billing,
  published_version: int.nullable(),
  pending_submission: PendingSubmission.nullable(),
  created_at: timestamp,
  updated_at: timestamp
})

/** Someone else's published expert has no dates (docs/mcp.md, get_expert_detail). */
const ExpertDetail = Expert.extend({ created_at: timestamp.optional(), updated_at: timestamp.optional() })

const CreatorProfile = z.object({
  user_id: z.string(),
  status: z.enum(["not_applied", "pending", "approved", "rejected"]),
  display_name: z.string().nullable(),
  bio: z.string().nullable(),
  account_type: z.string().nullable(),
  email: z.string().nullable(),
  reason: z.string().nullable(),
  applied_at: timestamp.nullable(),
  decided_at: timestamp.nullable()
})

const Skill = z.object({ name: z.string(), title: z.string(), description: z.string(), tools: z.array(z.string()) })
const SkillList = z.object({ data: z.array(Skill), has_more: z.boolean() })

const Usage = z.object({ input_tokens: int, output_tokens: int })

const Distillation = z.object({
  sessionId: z.string(),
  topic: z.string(),
  draft: z.object({ name: z.string(), description: z.string(), category: z.string(), instructions: z.string() }),
  agent: z.object({ identifier: z.string(), created: z.boolean().optional() }).nullable(),
  materials: z.array(z.object({ filename: z.string(), bytes: int })),
  turns: int,
  created_at: timestamp,
  updated_at: timestamp,
  answer: z.string(),
  run: z.object({ id: z.string(), status: z.string(), credits_charged: z.number(), usage: Usage })
})

const Change = z.looseObject({ type: z.string() }).describe("The change a suggestion makes (docs/evolution.md)")

const Suggestion = z.object({
  id: z.string(),
  agent: z.string(),
  kind: z.string(),
  subject: z.string(),
  title: z.string(),
  rationale: z.string(),
  change: Change,
  evidence: z.record(z.string(), z.number()),
  drafted_by: z.string(),
  status: z.enum(["pending", "accepted", "dismissed"]),
  applied_version: int.nullable(),
  created_at: timestamp,
  updated_at: timestamp,
  accepted_at: timestamp.nullable(),
  dismissed_at: timestamp.nullable()
})

const Outcomes = z.object({
  runs: int,
  completed: int,
  failed: int,
  cancelled: int,
  failure_rate: z.number(),
  failures: z.record(z.string(), int),
  runs_with_denied_tools: int,
  denied_tool_calls: int,
  denied_tools: z.record(z.string(), int),
  unanswered: int
})

const VectorStore = z.looseObject({
  id: z.string(),
  object: z.literal("vector_store"),
  name: z.string(),
  status: z.string(),
  created_at: int
})

const VectorStoreFile = z.looseObject({
  id: z.string(),
  object: z.literal("vector_store.file"),
  vector_store_id: z.string(),
  status: z.string(),
  created_at: int
})

export const TOOL_OUTPUTS: Readonly<Record<string, z.ZodObject>> = {
  get_creator_profile: CreatorProfile,
  apply_creator: CreatorProfile.extend({ message: z.string() }),
  create_expert: Expert,
  update_expert: Expert,
  get_expert_detail: ExpertDetail,
  list_my_experts: z.object({ data: z.array(Expert), has_more: z.boolean() }),
  install_skill: z.object({ success: z.literal(true), installed: z.string() }),
  list_expert_skills: SkillList,
  list_marketplace_skills: SkillList,
  set_billing: z.object({ identifier: z.string(), billingType: z.enum(["METERED", "ONE_TIME"]), billing: Billing }),
  publish_expert: z.object({
    identifier: z.string(),
    submission: z.object({ id: z.string(), version: int, status: z.literal("pending") }),
    published_version: int.nullable(),
    message: z.string()
  }),
  get_submission_status: z.object({
    identifier: z.string(),
    status: z.enum(["draft", "published"]),
    published_version: int.nullable(),
    pending_submission: PendingSubmission.nullable(),
    latest_submission: PendingSubmission.extend({ reason: z.string().nullable(), decided_at: timestamp.nullable() }).nullable()
  }),
  start_distillation: Distillation,
  continue_distillation: Distillation,
  test_expert: z.object({
    runId: z.string(),
    identifier: z.string(),
    version: int.nullable().describe("null: the owner's draft"),
    status: z.enum(["completed", "failed", "cancelled"]),
    output: z.string(),
    creditsCharged: z.number(),
    usage: Usage,
    error: z.object({ code: z.string(), message: z.string() }).optional(),
    notice: z.string().optional(),
    events: z.array(z.looseObject({ type: z.string() })).describe("The run's public events (docs/events.md), without text increments")
  }),
  open_expert_chat: z.object({ identifier: z.string(), url: z.string() }),
  open_platform_page: z.object({ page: z.enum(["studio", "chat", "marketplace", "earnings"]), url: z.string() }),
  list_evolution_suggestions: z.object({ identifier: z.string(), data: z.array(Suggestion), has_more: z.boolean() }),
  accept_evolution: z.object({
    suggestion: Suggestion,
    agent: z.object({
      identifier: z.string(),
      published_version: int.nullable(),
      applied_version: int.nullable(),
      resubmitted_version: int.nullable()
    }),
    already_accepted: z.boolean(),
    message: z.string()
  }),
  get_evolution_stats: z.object({
    identifier: z.string(),
    suggestions: z.object({ made: int, pending: int, accepted: int, dismissed: int }),
    last_accepted_at: timestamp.nullable(),
    published_version: int.nullable(),
    runs: z.object({ all: Outcomes, before_last_accepted: Outcomes.nullable(), after_last_accepted: Outcomes.nullable() }),
    failure_rate_change: z.number().nullable()
  }),
  get_earnings: z.object({
    total: z.number(),
    agents: z.array(z.object({ identifier: z.string(), unlocks: int, gross: z.number(), net: z.number() }))
  }),
  browse_marketplace: z.object({
    data: z.array(z.object({
      identifier: z.string(),
      name: z.string(),
      description: z.string(),
      category: z.string(),
      billing: Billing,
      creator: z.object({ display_name: z.string() }).nullable().describe("The owner's public name when an approved creator"),
      usage: z.object({ conversations: int, people: int })
    })),
    page: int,
    pageSize: int,
    total: int
  }),
  list_knowledge_bases: z.object({ knowledge_bases: z.array(VectorStore) }),
  create_knowledge_base: VectorStore,
  add_knowledge_text: VectorStoreFile,
  knowledge_status: VectorStore.extend({ files: z.array(VectorStoreFile) }),
  search_knowledge: z.looseObject({
    object: z.literal("vector_store.search_results.page"),
    data: z.array(z.looseObject({ file_id: z.string(), filename: z.string(), score: z.number() })),
    has_more: z.boolean()
  }),
  attach_knowledge: z.object({ identifier: z.string(), knowledge_bases: z.array(z.string()) })
}
