import { Effect, Option, Schema } from "effect"
import { AgentFields, AgentRef, Category } from "../agents/Agent.js"
import { Agents, type Submission } from "../agents/Agents.js"
import type { AgentRow } from "../agents/Repo.js"
import { billingView, submissionView } from "../agents/Http.js"
import { DistillationMessage, StartDistillation } from "../distillation/Api.js"
import { DistillationId } from "../distillation/Domain.js"
import { SuggestionId } from "../evolution/Domain.js"
import { CreatorApplication, MAX_PAGE, MAX_PAGE_SIZE, MarketKeyword } from "../market/Api.js"
import { Creators } from "../market/Creators.js"
import { Market } from "../market/Market.js"
import { errorType } from "../platform/Errors.js"
import type { UserId } from "../platform/Ids.js"
import { RunPayload } from "../runs/Api.js"
import { McpConfig } from "./Config.js"
import { EngineTools } from "./EngineTools.js"
import { KnowledgeTools } from "./KnowledgeTools.js"
import { MemoryTools } from "./MemoryTools.js"
import { RunTools } from "./RunTools.js"
import { EvalTools } from "./EvalTools.js"
import { publicTool, type ToolDefinition, ToolFailure, userTool } from "./Tool.js"
import { canRun, isCreator } from "../agents/Policy.js"

/**
 * The 22 tools of spec 4.10, as one table: name, description, parameters (an Effect Schema struct, published as JSON
 * Schema; its fields are the HTTP contracts' own where HTTP asks the same, so each limit is written once) and what
 * runs. Each is a thin proxy over a platform service; the six that need the run engine go to
 * `EngineTools`. Names and parameters are the spec's, exactly; `test/mcp/tools.test.ts` holds the same table.
 */

/** Spec 4.10 `open_platform_page`: the browser pages an IDE may open, and where they live under `PUBLIC_URL`. */
export const PLATFORM_PAGES = {
  studio: "/studio",
  chat: "/chat",
  marketplace: "/marketplace",
  earnings: "/earnings"
} as const

/** Where a person chats with one expert in the browser (`open_expert_chat`). */
export const chatPath = (identifier: string) => `/chat/${encodeURIComponent(identifier)}`

/** A service failure (`NotFound`, `Forbidden`, `InvalidRequest`, ...) as a tool failure with the same type and text. */
const proxy = <A, E extends { readonly _tag: string; readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.mapError(effect, (error) => new ToolFailure({ type: errorType(error._tag), message: error.message }))

/**
 * A field with its description, as the tool's JSON Schema shows it. On the property, not on its schema: there the
 * description would replace the schema's own wording in an error ("Expected Display name").
 */
const described = <S extends Schema.Schema.Any>(schema: S, description: string) =>
  Schema.propertySignature(schema).annotations({ description })
const optional = <S extends Schema.Schema.Any>(schema: S, description: string) => Schema.optional(schema).annotations({ description })

const identifier = described(AgentRef, "The agent's identifier (its URL slug, e.g. travel-planner-k3x9qa)")

/** A tool without parameters. */
const none = Schema.Struct({})

/**
 * An agent as the tools show it: basic metadata, billing and review state. Prompt layers (`instructions`),
 * subagents and case demos are not reachable through the tools (spec 4.10 rule 2), for reading either.
 */
const expertView = (agent: AgentRow, pending: Option.Option<Submission>) => ({
  identifier: agent.identifier,
  name: agent.draft.name,
  description: agent.draft.description,
  category: agent.draft.category,
  status: agent.publishedVersion === null ? ("draft" as const) : ("published" as const),
  billing: billingView(agent.draft),
  published_version: agent.publishedVersion,
  pending_submission: Option.match(pending, { onNone: () => null, onSome: submissionView }),
  created_at: agent.createdAt.toISOString(),
  updated_at: agent.updatedAt.toISOString()
})

export class McpTools extends Effect.Service<McpTools>()("atrium/mcp/McpTools", {
  effect: Effect.gen(function*() {
    const agents = yield* Agents
    const creators = yield* Creators
    const market = yield* Market
    const engine = yield* EngineTools
    const config = yield* McpConfig
    const knowledgeTools = yield* KnowledgeTools
    const memoryTools = yield* MemoryTools
    const runTools = yield* RunTools
    const evalTools = yield* EvalTools

    const withPending = (agent: AgentRow) => Effect.map(agents.pendingOf(agent), (pending) => expertView(agent, pending))

    /** The caller's own agent (404 for a draft of someone else, 403 for their published one), as `/v1` decides. */
    const owned = (identifier: string, userId: UserId) => proxy(agents.owned(identifier, userId))

    const tools: ReadonlyArray<ToolDefinition> = [
      // Identity
      userTool(
        "get_creator_profile",
        "Your creator profile: status (not_applied, pending, approved, rejected), display name, bio, account type, email.",
        none,
        (_args, caller) => creators.profile(caller.userId)
      ),
      userTool(
        "apply_creator",
        "Apply to become a creator. The application enters human review; the outcome arrives as an in-app notification.",
        Schema.Struct({
          displayName: described(CreatorApplication.fields.displayName, "Name shown beside your published agents"),
          bio: described(CreatorApplication.fields.bio, "A short description of you"),
          accountType: described(CreatorApplication.fields.accountType, "individual or organization"),
          email: described(CreatorApplication.fields.email, "Contact email for the review")
        }),
        (args, caller) =>
          Effect.map(
            proxy(creators.apply({ userId: caller.userId, ...args })),
            (profile) => ({
              ...profile,
              message: "Your application is under human review; the outcome will arrive as an in-app notification."
            })
          )
      ),

      // Agent configuration
      userTool(
        "create_expert",
        "Create a new expert (agent) draft with a name, a description and a category. Returns the draft.",
        Schema.Struct({
          name: described(AgentFields.name, "Display name"),
          description: described(AgentFields.description, "What the expert does"),
          category: described(Category, "Marketplace category")
        }),
        (args, caller) => Effect.flatMap(proxy(agents.create(caller.userId, args)), withPending)
      ),
      userTool(
        "update_expert",
        "Change an expert's basic metadata (name, description, category) and its model with fallbacks. Only these fields: prompt layers, subagents, " +
          "case demos and tools (the built-ins, run_code for Python and JavaScript in a sandbox, and remote MCP servers " +
          "with per-tool permissions) are edited in the studio or through PATCH /v1/agents/{identifier}.",
        Schema.Struct({
          identifier,
          name: optional(AgentFields.name, "New display name"),
          description: optional(AgentFields.description, "New description"),
          category: optional(Category, "New category"),
          model: optional(AgentFields.model, "Model as <provider>/<model> from GET /v1/models"),
          fallback_models: optional(
            AgentFields.fallback_models,
            "Models tried in order when the model's provider fails (each <provider>/<model>)"
          )
        }),
        ({ category, description, fallback_models, identifier, model, name }, caller) =>
          // Only these fields are passed on: whatever else a caller sends never reaches the service (rule 2; the model
          // counts as basic metadata, issue 31).
          Effect.flatMap(
            proxy(agents.update(identifier, caller.userId, { name, description, category, model, fallback_models })),
            withPending
          )
      ),
      userTool(
        "get_expert_detail",
        "An expert's metadata, billing and review state (published version, pending submission). Others' experts " +
          "show their published version.",
        Schema.Struct({ identifier }),
        ({ identifier }, caller) =>
          Effect.gen(function*() {
            const agent = yield* agents.byIdentifier(identifier)
            if (Option.isSome(agent) && isCreator(caller.userId, agent.value)) return yield* withPending(agent.value)
            const { agent: row, config, version } = yield* proxy(agents.published(identifier))
            return {
              identifier: row.identifier,
              name: config.name,
              description: config.description,
              category: config.category,
              status: "published" as const,
              billing: billingView(config),
              published_version: version,
              pending_submission: null
            }
          })
      ),
      userTool(
        "list_my_experts",
        "Every expert you created, drafts included, newest first.",
        none,
        (_args, caller) =>
          Effect.map(
            Effect.flatMap(agents.byOwner(caller.userId), Effect.forEach(withPending)),
            (data) => ({ data, has_more: false })
          )
      ),

      // Skills
      userTool(
        "install_skill",
        "Acknowledges a skill for an expert. Installs nothing: an expert's skills follow from its tools, which are " +
          "configured in the studio.",
        Schema.Struct({
          identifier,
          skillName: described(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)), "Name of a marketplace skill")
        }),
        // Spec 4.10 rule 3, literally: no lookup, no write; `list_expert_skills` is unchanged afterwards.
        ({ skillName }) => Effect.succeed({ success: true, installed: skillName })
      ),
      userTool(
        "list_expert_skills",
        "The skills an expert has (those whose tools it has, none denied): the draft's for its owner, the published " +
          "version's for others.",
        Schema.Struct({ identifier }),
        ({ identifier }, caller) => proxy(market.agentSkills(identifier, caller.userId))
      ),
      userTool(
        "list_marketplace_skills",
        "Search the skills catalogue by name, title or description; an empty keyword lists every skill.",
        Schema.Struct({ keyword: optional(MarketKeyword, "Words to search for") }),
        ({ keyword }) => market.skills(keyword?.trim() || undefined)
      ),

      // Billing and publishing
      userTool(
        "set_billing",
        "Set an expert's pricing. METERED makes it free (price 0); ONE_TIME makes buyers unlock it once for `price` " +
          "credits. Applies to the draft: buyers see it once a version carrying it is published and approved.",
        // The agent contract's billing, in the spec's words (METERED, ONE_TIME, camelCase).
        Schema.Struct({
          identifier,
          billingType: described(Schema.Literal("METERED", "ONE_TIME"), "METERED: free, price 0. ONE_TIME: unlock on purchase"),
          price: optional(Schema.NonNegative, "Credits to unlock (ONE_TIME, required, > 0); ignored for METERED"),
          freeTrialPerUser: Schema.optionalWith(AgentFields.billing.fields.free_trial_per_user.from, { default: () => 3 })
            .annotations({ description: "Free trial turns per user (default 3)", default: 3 }),
          allowTrial: Schema.optionalWith(Schema.Boolean, { default: () => true })
            .annotations({ description: "Whether users may try before buying (default true)", default: true })
        }),
        (args, caller) =>
          Effect.gen(function*() {
            if (args.billingType === "ONE_TIME" && (args.price === undefined || args.price <= 0)) {
              return yield* new ToolFailure({
                type: "invalid_request",
                message: "Invalid request: price: a ONE_TIME expert needs a price above 0 credits."
              })
            }
            // The agent model knows FREE and UNLOCK only (rule 4): METERED is written as FREE, whose price is 0.
            const billing = {
              type: args.billingType === "METERED" ? ("FREE" as const) : ("UNLOCK" as const),
              price: args.billingType === "ONE_TIME" ? args.price ?? 0 : 0,
              free_trial_per_user: args.freeTrialPerUser,
              allow_trial: args.allowTrial
            }
            const agent = yield* proxy(agents.update(args.identifier, caller.userId, { billing }))
            return { identifier: agent.identifier, billingType: args.billingType, billing: billingView(agent.draft) }
          })
      ),
      userTool(
        "publish_expert",
        "Submit the expert's current draft for review as a new version. Nothing goes live until it is approved; a " +
          "version already published stays online meanwhile.",
        Schema.Struct({ identifier }),
        ({ identifier }, caller) =>
          Effect.gen(function*() {
            const submission = yield* proxy(agents.publish(identifier, caller.userId))
            const agent = yield* owned(identifier, caller.userId)
            return {
              identifier,
              submission: { id: submission.id, version: submission.version, status: "pending" as const },
              published_version: agent.publishedVersion,
              message: agent.publishedVersion === null
                ? `Version ${submission.version} is waiting for review; it goes live once approved.`
                : `Version ${submission.version} is waiting for review; version ${agent.publishedVersion} stays online until then.`
            }
          })
      ),
      userTool(
        "get_submission_status",
        "Where an expert stands in review: its published version, the submission waiting for review (if any) and the " +
          "latest decision with its reason.",
        Schema.Struct({ identifier }),
        ({ identifier }, caller) =>
          Effect.gen(function*() {
            const agent = yield* owned(identifier, caller.userId)
            const pending = yield* agents.pendingOf(agent)
            const latest = yield* agents.latestSubmission(agent.id)
            return {
              identifier,
              status: agent.publishedVersion === null ? ("draft" as const) : ("published" as const),
              published_version: agent.publishedVersion,
              pending_submission: Option.match(pending, { onNone: () => null, onSome: submissionView }),
              latest_submission: Option.match(latest, {
                onNone: () => null,
                onSome: (s) => ({
                  ...submissionView(s),
                  reason: s.reason,
                  decided_at: s.decidedAt === null ? null : s.decidedAt.toISOString()
                })
              })
            }
          })
      ),

      // Distillation (run engine)
      userTool(
        "start_distillation",
        "Start distilling an expert from a topic and source materials (file contents, not paths): the distiller reads " +
          "them and drafts an agent. Returns a sessionId for continue_distillation, its answer and the draft. Runs once " +
          "and bills credits; can be slow (sends progress notifications when asked).",
        Schema.Struct({
          topic: described(StartDistillation.fields.topic, "What the expert should know and do"),
          // Limits are checked by the service, so a breach gets a message that says what to fix.
          materials: described(StartDistillation.fields.materials, "Source materials, by content: 1-20 files, 1 MB in all")
        }),
        (args, caller) => engine.startDistillation(args, caller)
      ),
      userTool(
        "continue_distillation",
        "Continue a distillation started with start_distillation: ask for changes (\"name: ...\", \"description: " +
          "...\", \"category: coding\", any other text is added to the instructions), or say \"create\" to create the " +
          "agent draft. Runs once and bills credits; can be slow.",
        Schema.Struct({
          // Unchecked: an id of another kind is a distillation that is not there, as it was.
          sessionId: described(DistillationId.unchecked.pipe(Schema.minLength(1), Schema.maxLength(128)), "The sessionId from start_distillation"),
          message: described(DistillationMessage.fields.message, "What to change, or \"create\"")
        }),
        (args, caller) => engine.continueDistillation(args, caller)
      ),

      // Testing
      userTool(
        "test_expert",
        "Run an expert once with a message and return its answer (your own expert's draft; others' published " +
          "version). Really executes and bills credits.",
        Schema.Struct({ identifier, message: described(RunPayload.fields.message, "The message to send") }),
        (args, caller) => engine.testExpert(args, caller)
      ),
      userTool(
        "open_expert_chat",
        "A browser URL for chatting with the expert. Free: nothing runs until you chat.",
        Schema.Struct({ identifier }),
        ({ identifier }, caller) =>
          Effect.gen(function*() {
            // Only an expert the caller can see gets a link: their own, or a published one.
            const agent = yield* agents.byIdentifier(identifier)
            const visible = Option.exists(agent, (a) => canRun(caller.userId, a))
            if (!visible) return yield* new ToolFailure({ type: "not_found", message: `No agent ${identifier}.` })
            return { identifier, url: `${config.baseUrl}${chatPath(identifier)}` }
          })
      ),

      // Navigation
      userTool(
        "open_platform_page",
        "A browser URL of a platform page: studio, chat, marketplace or earnings. Returns the URL only.",
        Schema.Struct({
          page: described(
            Schema.Literal(...(Object.keys(PLATFORM_PAGES) as Array<keyof typeof PLATFORM_PAGES>)),
            "studio, chat, marketplace or earnings"
          )
        }),
        ({ page }) => Effect.succeed({ page, url: `${config.baseUrl}${PLATFORM_PAGES[page]}` })
      ),

      // Self-evolution (run engine)
      userTool(
        "list_evolution_suggestions",
        "Improvements the platform suggests for your expert, derived from its recorded runs (failures, denied " +
          "tools, interrupted runs, unanswered questions), each with the concrete change it would make.",
        Schema.Struct({ identifier }),
        (args, caller) => engine.listEvolutionSuggestions(args, caller)
      ),
      userTool(
        "accept_evolution",
        "Apply a suggested improvement. Takes effect immediately, without another review: the draft and the " +
          "published version both get the change.",
        Schema.Struct({
          // Unchecked: an id of another kind is a suggestion that is not there, as it was.
          suggestionId: described(SuggestionId.unchecked.pipe(Schema.minLength(1), Schema.maxLength(128)), "The id of a suggestion")
        }),
        (args, caller) => engine.acceptEvolution(args, caller)
      ),
      userTool(
        "get_evolution_stats",
        "How an expert has evolved: suggestions made and accepted, and its run outcomes before and after the last " +
          "accepted suggestion.",
        Schema.Struct({ identifier }),
        (args, caller) => engine.getEvolutionStats(args, caller)
      ),

      // Earnings
      userTool(
        "get_earnings",
        "Your earnings as a creator: per expert, unlocks, what buyers paid (gross) and your share (net); total is the " +
          "sum of net.",
        none,
        (_args, caller) => creators.earnings(caller.userId)
      ),
      publicTool(
        "browse_marketplace",
        "Browse published experts, newest first. Needs no sign-in.",
        Schema.Struct({
          keyword: optional(MarketKeyword, "Matches name or description"),
          category: optional(Category, "Only this category"),
          page: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, MAX_PAGE)), { default: () => 1 })
            .annotations({ description: "Page, from 1", default: 1 }),
          pageSize: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, MAX_PAGE_SIZE)), { default: () => 20 })
            .annotations({ description: `Items per page, 1-${MAX_PAGE_SIZE} (default 20)`, default: 20 })
        }),
        (args) =>
          market.browse({
            keyword: args.keyword?.trim() || undefined,
            category: args.category,
            page: args.page,
            pageSize: args.pageSize
          })
      ),
      // Beyond the spec's table: knowledge bases (docs/knowledge.md).
      ...knowledgeTools.tools,
      ...memoryTools.tools,
      // Beyond it too: runs and schedules (docs/runs.md, docs/schedules.md).
      ...runTools.tools,
      ...evalTools.tools
    ]

    return { tools } as const
  }),
  // `Agents` needs `Wallets` (the cluster's wallet entities), which the server provides once for every route.
  dependencies: [Agents.Default, Creators.Default, Market.Default, EngineTools.Default, McpConfig.Default, KnowledgeTools.Default, MemoryTools.Default, RunTools.Default, EvalTools.Default]
}) {}
