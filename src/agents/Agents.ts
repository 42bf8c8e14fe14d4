import { Effect, Option, Redacted, Schema } from "effect"
import { SecretBox } from "../credentials/SecretBox.js"
import { ToolsConfig } from "../runtime/tools/Config.js"
import { checkUrl, makeHostAddresses, OutboundRefused } from "../runtime/tools/Outbound.js"
import { Wallets } from "../billing/Wallets.js"
import { AgentsConfig } from "./Config.js"
import { KnowledgeRepo } from "../knowledge/Repo.js"
import { Notifications } from "../notifications/Notifications.js"
import { Forbidden, InvalidRequest, NotFound } from "../platform/Errors.js"
import { AgentId, randomBase62, type UserId } from "../platform/Ids.js"
import { parseCredits, toNumber } from "../platform/Money.js"
import { ModelCatalog } from "../runtime/models/Catalog.js"
import { type AgentConfig, type AgentFields, defaultBilling, normalizeBilling, type OtlpExportInput } from "./Agent.js"
import { type AgentRow, AgentsRepo, type Submission } from "./Repo.js"
import { IdentifierTaken, SubmissionId } from "./Domain.js"
import { EvalGate } from "./Gate.js"
import { canDelegateTo, changeAccess, isCreator } from "./Policy.js"

type Fields = { readonly [K in keyof typeof AgentFields]?: Schema.Schema.Type<(typeof AgentFields)[K]> | undefined }

/** "Travel Planner!" -> "travel-planner" */
const slugify = (name: string) =>
  name.normalize("NFKD").toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 48)

const notFound = (identifier: string) => new NotFound({ message: `No agent ${identifier}.` })

/**
 * Agents and their life cycle (spec 3.3, 4.3): a creator edits a draft; publishing freezes it as a version and
 * submits that for review; an approved version is what everyone else sees and runs, and it stays online while a
 * newer version waits. Unlocking an UNLOCK agent charges the buyer through the Wallet entity and credits the
 * creator's share.
 */
export class Agents extends Effect.Service<Agents>()("atrium/agents/Agents", {
  effect: Effect.gen(function*() {
    const repo = yield* AgentsRepo
    const catalog = yield* ModelCatalog
    const notifications = yield* Notifications
    const wallets = yield* Wallets
    const { platformSharePercent } = yield* AgentsConfig
    const knowledge = yield* KnowledgeRepo
    const box = yield* SecretBox
    const { allowedHosts } = yield* ToolsConfig
    const own = makeHostAddresses()
    const gate = yield* EvalGate

    /**
     * The OTLP export a creator set (docs/traces.md): the endpoint passes the outbound rule now (and again at every
     * export), and its headers (credentials, usually) are sealed under SECRETS_KEY, never stored or shown in clear.
     */
    const otlpExport = (input: typeof OtlpExportInput.Type) =>
      Effect.gen(function*() {
        if (input === null) return null
        yield* Effect.tryPromise({
          try: () => checkUrl(new URL(input.endpoint), allowedHosts, own()),
          catch: (error) =>
            new InvalidRequest({
              message: `Invalid request: otlp_export.endpoint: ${
                error instanceof OutboundRefused ? error.message : "its host could not be resolved"
              }`
            })
        })
        const headers = input.headers ?? {}
        const names = Object.keys(headers)
        if (names.length === 0) return { endpoint: input.endpoint, header_names: [], headers_sealed: null }
        const sealed = box.seal(Redacted.make(JSON.stringify(headers)))
        if (Option.isNone(sealed)) {
          return yield* new InvalidRequest({
            message: "Invalid request: otlp_export.headers need SECRETS_KEY on this deployment (they are stored sealed)."
          })
        }
        return { endpoint: input.endpoint, header_names: names, headers_sealed: sealed.value }
      })

    /**
     * Applies `fields` to `base`, checking what a schema cannot: the model exists, subagents exist, billing. A
     * subagent is one of the owner's agents or a published one: someone else's draft is "no agent", as everywhere.
     */
    const merge = Effect.fn("Agents.merge")(function*(
      base: AgentConfig,
      fields: Fields,
      ownerId: UserId,
      selfIdentifier?: string,
      agentId?: AgentId
    ) {
      const next = { ...base }
      if (fields.name !== undefined) next.name = fields.name
      if (fields.description !== undefined) next.description = fields.description
      if (fields.category !== undefined) next.category = fields.category
      if (fields.instructions !== undefined) next.instructions = fields.instructions
      if (fields.opening_message !== undefined) next.opening_message = fields.opening_message
      if (fields.case_demos !== undefined) next.case_demos = fields.case_demos
      if (fields.tools !== undefined) {
        const names = fields.tools.map((t) => t.name)
        if (new Set(names).size !== names.length) {
          return yield* new InvalidRequest({ message: "Invalid request: tools: each tool may appear once" })
        }
        next.tools = fields.tools
      }
      if (fields.mcp_servers !== undefined) {
        const names = fields.mcp_servers.map((server) => server.name)
        if (new Set(names).size !== names.length) {
          return yield* new InvalidRequest({ message: "Invalid request: mcp_servers: each server name may appear once" })
        }
        for (const server of fields.mcp_servers) {
          const tools = server.tools.map((tool) => tool.name)
          if (new Set(tools).size !== tools.length) {
            return yield* new InvalidRequest({ message: `Invalid request: mcp_servers: each tool of ${server.name} may appear once` })
          }
        }
        next.mcp_servers = fields.mcp_servers
      }
      if (fields.knowledge_bases !== undefined) {
        // The owner's own knowledge bases (their account's, not an end user's): anyone else's is "no store".
        const wanted = [...new Set(fields.knowledge_bases)]
        const found = yield* knowledge.existing({ accountId: ownerId, endUserId: "" }, wanted)
        const missing = wanted.filter((id) => !found.includes(id))
        if (missing.length > 0) {
          return yield* new InvalidRequest({ message: `Invalid request: knowledge_bases: no knowledge base ${missing.join(", ")} of yours` })
        }
        next.knowledge_bases = wanted
      }
      if (fields.memory !== undefined) {
        const labels = fields.memory.blocks.map((block) => block.label)
        if (new Set(labels).size !== labels.length) {
          return yield* new InvalidRequest({ message: "Invalid request: memory.blocks: each label may appear once" })
        }
        next.memory = fields.memory
      }
      if (fields.model !== undefined) {
        if (Option.isNone(yield* catalog.find(fields.model))) {
          return yield* new InvalidRequest({
            message: `Invalid request: model: unknown model "${fields.model}" (see GET /v1/models)`
          })
        }
        next.model = fields.model
      }
      if (fields.fallback_models !== undefined) {
        const seen = new Set<string>()
        for (const model of fields.fallback_models) {
          const entry = yield* catalog.find(model)
          if (Option.isNone(entry)) {
            return yield* new InvalidRequest({
              message: `Invalid request: fallback_models: unknown model "${model}" (see GET /v1/models)`
            })
          }
          if (seen.has(entry.value.id)) {
            return yield* new InvalidRequest({ message: `Invalid request: fallback_models: "${model}" is listed twice` })
          }
          seen.add(entry.value.id)
        }
        next.fallback_models = fields.fallback_models
      }
      if (fields.subagents !== undefined) {
        for (const identifier of fields.subagents) {
          if (identifier === selfIdentifier) {
            return yield* new InvalidRequest({ message: "Invalid request: subagents: an agent cannot delegate to itself" })
          }
          const subagent = yield* repo.byIdentifier(identifier)
          if (Option.isNone(subagent) || !canDelegateTo(ownerId, subagent.value)) {
            return yield* new InvalidRequest({ message: `Invalid request: subagents: no agent ${identifier}` })
          }
        }
        next.subagents = [...new Set(fields.subagents)]
      }
      if (fields.trace_content !== undefined) next.trace_content = fields.trace_content
      if (fields.otlp_export !== undefined) next.otlp_export = yield* otlpExport(fields.otlp_export)
      if (fields.eval_gate !== undefined) {
        if (fields.eval_gate !== null) {
          if (agentId === undefined) {
            return yield* new InvalidRequest({ message: "Invalid request: eval_gate: set it once the expert exists (its datasets are made for it)" })
          }
          yield* gate.validate(agentId, ownerId, fields.eval_gate.dataset)
        }
        next.eval_gate = fields.eval_gate
      }
      if (fields.billing !== undefined) {
        const billing = normalizeBilling(fields.billing, base.billing)
        if (typeof billing === "string") return yield* new InvalidRequest({ message: `Invalid request: ${billing}` })
        next.billing = billing
      }
      return next
    })

    const create = Effect.fn("Agents.create")(function*(
      ownerId: UserId,
      fields: Fields & { readonly name: string; readonly identifier?: string | undefined }
    ) {
      const base: AgentConfig = {
        name: fields.name,
        description: "",
        category: "other",
        instructions: "",
        model: "builtin",
        tools: [],
        subagents: [],
        opening_message: "",
        case_demos: [],
        billing: defaultBilling
      }
      const draft = yield* merge(base, fields, ownerId)
      const wanted = fields.identifier
      // A chosen identifier is taken or not; a derived one gets a random tail so two "Travel Planner"s coexist.
      for (let attempt = 0; attempt < 5; attempt++) {
        const stem = slugify(fields.name)
        const identifier = wanted ?? `${stem.length >= 3 ? stem : "agent"}-${randomBase62(6).toLowerCase()}`
        const inserted = yield* repo.insert({ id: AgentId.random(), identifier, ownerId, draft })
        if (Option.isSome(inserted)) return inserted.value
        if (wanted !== undefined) {
          return yield* new IdentifierTaken({ message: `The identifier "${wanted}" is taken.` })
        }
      }
      return yield* Effect.dieMessage("could not find a free identifier")
    })

    /**
     * The agent if `viewerId` owns it. Anyone else gets 404 for an unpublished agent, whether it exists or not, and
     * 403 for a published one (its existence is public anyway).
     */
    const owned = (identifier: string, viewerId: UserId) =>
      Effect.flatMap(repo.byIdentifier(identifier), (agent): Effect.Effect<AgentRow, NotFound | Forbidden> => {
        const access = Option.isSome(agent) ? changeAccess(viewerId, agent.value) : "hidden"
        if (access === "creator" && Option.isSome(agent)) return Effect.succeed(agent.value)
        if (access === "forbidden") return Effect.fail(new Forbidden({ message: `Only the creator of ${identifier} can change it.` }))
        return Effect.fail(notFound(identifier))
      })

    /** The published configuration of an agent; 404 when nothing is published. */
    const published = (identifier: string) =>
      Effect.gen(function*() {
        const agent = yield* repo.byIdentifier(identifier)
        if (Option.isNone(agent) || agent.value.publishedVersion === null) return yield* notFound(identifier)
        const config = yield* repo.version(agent.value.id, agent.value.publishedVersion)
        return { agent: agent.value, config: Option.getOrThrow(config), version: agent.value.publishedVersion }
      })

    const update = Effect.fn("Agents.update")(function*(identifier: string, ownerId: UserId, fields: Fields) {
      const agent = yield* owned(identifier, ownerId)
      const draft = yield* merge(agent.draft, fields, ownerId, agent.identifier, agent.id)
      return yield* repo.updateDraft(agent.id, draft)
    })

    /** One frozen version of the owner's agent (what a publish sent to review), or 404. */
    const ownedVersion = Effect.fn("Agents.ownedVersion")(function*(identifier: string, ownerId: UserId, version: number) {
      const agent = yield* owned(identifier, ownerId)
      const detail = yield* repo.versionDetail(agent.id, version)
      if (Option.isNone(detail)) return yield* new NotFound({ message: `${identifier} has no version ${version}.` })
      const { config, ...summary } = detail.value
      return { agent, config, summary }
    })

    /**
     * The draft becomes a copy of a version ("restore as draft"); nothing is published. The live settings that are
     * not a version's (trace content, OTLP export: docs/traces.md) stay as the draft has them.
     */
    const restore = Effect.fn("Agents.restore")(function*(identifier: string, ownerId: UserId, version: number) {
      const { agent, config } = yield* ownedVersion(identifier, ownerId, version)
      const { otlp_export: _otlp, trace_content: _content, ...versioned } = config
      const draft: AgentConfig = {
        ...versioned,
        ...(agent.draft.trace_content === undefined ? {} : { trace_content: agent.draft.trace_content }),
        ...(agent.draft.otlp_export === undefined ? {} : { otlp_export: agent.draft.otlp_export })
      }
      return yield* repo.updateDraft(agent.id, draft)
    })

    const publish = Effect.fn("Agents.publish")(function*(identifier: string, ownerId: UserId) {
      const agent = yield* owned(identifier, ownerId)
      // A model removed from the providers setting since the draft named it: a version that could never run is not
      // sent to review.
      for (const model of [agent.draft.model, ...(agent.draft.fallback_models ?? [])]) {
        if (Option.isNone(yield* catalog.find(model))) {
          return yield* new InvalidRequest({
            message: `Cannot publish ${identifier}: the model "${model}" is not offered by this platform (see GET /v1/models).`
          })
        }
      }
      // The eval gate, here so every path that publishes meets it (agents/Gate.ts).
      if (agent.draft.eval_gate != null) yield* gate.check(agent)
      return yield* repo.publish(agent.id, SubmissionId.random())
    })

    const decide = Effect.fn("Agents.decide")(function*(
      submissionId: SubmissionId,
      decision: "approved" | "rejected",
      reason: string | null
    ) {
      const found = yield* repo.submission(submissionId)
      if (Option.isNone(found)) return yield* new NotFound({ message: `No submission ${submissionId}.` })
      const decided = yield* repo.decide(submissionId, decision, reason)
      if (Option.isNone(decided)) {
        return yield* new InvalidRequest({ message: `Submission ${submissionId} is ${found.value.status}, not pending.` })
      }
      const { identifier, ownerId, version } = found.value
      yield* notifications.notify(
        ownerId,
        decision === "approved" ? "agent_approved" : "agent_rejected",
        decision === "approved" ? `Version ${version} of ${identifier} is live` : `Version ${version} of ${identifier} was not approved`,
        decision === "approved"
          ? "It passed review and is now what everyone sees and runs."
          : `Reason: ${(reason ?? "not given").trim().replace(/[.!?]+$/, "")}. The previously published version (if any) stays online.`,
        { agent: identifier, version, submission_id: submissionId }
      )
      return decided.value
    })

    /**
     * Unlocks an UNLOCK agent for `buyerId`. The charge is keyed by buyer and agent, so a repeat (or a retry after a
     * crash) charges nothing more, and the creator's credit carries the same key, so it is paid exactly once.
     */
    const purchase = Effect.fn("Agents.purchase")(function*(buyerId: UserId, identifier: string) {
      const { agent, config } = yield* published(identifier)
      if (config.billing.type !== "UNLOCK") {
        return yield* new InvalidRequest({ message: `${identifier} is free: there is nothing to unlock.` })
      }
      if (isCreator(buyerId, agent)) {
        return yield* new InvalidRequest({ message: "You created this agent: it is already yours." })
      }
      const key = `${buyerId}:${agent.id}`
      if (yield* repo.hasPurchased(buyerId, agent.id)) {
        return { agent: identifier, charged: 0, balance_remaining: toNumber(yield* wallets.balance(buyerId)) }
      }
      const price = parseCredits(config.billing.price)!
      const movement = yield* wallets.charge(buyerId, price, {
        kind: "purchase",
        scope: "purchase",
        key,
        description: `Unlock ${identifier}`
      })
      const share = (movement.amount * BigInt(100 - platformSharePercent)) / 100n
      yield* repo.recordPurchase({ userId: buyerId, agentId: agent.id, price: movement.amount, creatorShare: share })
      if (share > 0n) {
        yield* wallets.credit(agent.ownerId, share, {
          kind: "earning",
          scope: "earning",
          key,
          description: `Unlock of ${identifier}`
        }).pipe(Effect.orDie)
      }
      return {
        agent: identifier,
        charged: movement.replay ? 0 : toNumber(movement.amount),
        balance_remaining: toNumber(movement.balance)
      }
    })

    const pendingOf = (agent: AgentRow) => repo.pendingSubmission(agent.id)

    /** Whether `userId` runs the published expert without trials: a free one, their own, or one they unlocked. */
    const unlocked = Effect.fn("Agents.unlocked")(function*(userId: UserId, identifier: string) {
      const found = yield* Effect.option(published(identifier))
      if (Option.isNone(found)) return false
      const { agent, config } = found.value
      if (config.billing.type !== "UNLOCK" || isCreator(userId, agent)) return true
      return yield* repo.hasPurchased(userId, agent.id)
    })

    return {
      create,
      owned,
      published,
      update,
      ownedVersion,
      restore,
      versions: repo.versions,
      publish,
      decide,
      purchase,
      pendingOf,
      unlocked,
      byOwner: repo.byOwner,
      byIdentifier: repo.byIdentifier,
      earnings: repo.earnings,
      market: repo.published,
      marketCategories: repo.publishedCategories,
      hasPurchased: repo.hasPurchased,
      latestSubmission: repo.latestSubmission,
      pendingSubmissions: repo.pendingSubmissions,
      /** The eval gate's scorecard of a submitted version (the review console's). */
      scorecard: gate.scorecard,
      submissions: repo.submissions,
      submission: repo.submission,
      version: repo.version
    } as const
  }),
  dependencies: [
    AgentsConfig.Default,
    AgentsRepo.Default,
    ModelCatalog.Default,
    Notifications.Default,
    KnowledgeRepo.Default,
    SecretBox.Default,
    ToolsConfig.Default,
    EvalGate.Default
  ]
}) {}

export type { Submission }
