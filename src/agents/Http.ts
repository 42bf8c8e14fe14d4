import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer, Option } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { type AgentConfig, publicView } from "./Agent.js"
import { Agents } from "./Agents.js"
import type { AgentRow, Submission } from "./Repo.js"
import { isCreator } from "./Policy.js"
import { pageOf } from "../platform/http/Lists.js"
import { Caller, CurrentUser } from "../identity/Domain.js"

export const billingView = (config: AgentConfig) => ({ ...config.billing, price: Number(config.billing.price) })

export const submissionView = (submission: Submission) => ({
  id: submission.id,
  version: submission.version,
  status: submission.status,
  submitted_at: submission.submittedAt.toISOString()
})

/** The owner sees the whole draft, its review state and its prompt layers. */
const ownerView = (agent: AgentRow, pending: Option.Option<Submission>) => ({
  identifier: agent.identifier,
  status: agent.publishedVersion === null ? ("draft" as const) : ("published" as const),
  ...agent.draft,
  fallback_models: agent.draft.fallback_models ?? [],
  trace_content: agent.draft.trace_content ?? false,
  otlp_export: agent.draft.otlp_export == null ? null : {
    endpoint: agent.draft.otlp_export.endpoint,
    headers: Object.fromEntries(agent.draft.otlp_export.header_names.map((name) => [name, "[redacted]"]))
  },
  billing: billingView(agent.draft),
  eval_gate: agent.draft.eval_gate ?? null,
  published_version: agent.publishedVersion,
  pending_submission: Option.match(pending, { onNone: () => null, onSome: submissionView }),
  created_at: agent.createdAt.toISOString(),
  updated_at: agent.updatedAt.toISOString()
})

const versionSummary = (
  agent: AgentRow,
  v: { version: number; createdAt: Date; status: string | null; reason: string | null }
) => ({
  version: v.version,
  created_at: v.createdAt.toISOString(),
  review_status: v.status,
  reason: v.reason,
  live: agent.publishedVersion === v.version
})

export const AgentsHttp = HttpApiBuilder.group(AtriumApi, "agents", (handlers) =>
  Effect.gen(function*() {
    const agents = yield* Agents
    const withPending = (agent: AgentRow) => Effect.map(agents.pendingOf(agent), (pending) => ownerView(agent, pending))
    return handlers
      .handle("create", ({ payload }) =>
        Effect.flatMap(Caller, (caller) => Effect.flatMap(agents.create(caller.userId, payload), withPending)))
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const page = yield* pageOf(yield* agents.byOwner(caller.userId), urlParams, (agent) => agent.identifier)
          return { data: yield* Effect.forEach(page.data, withPending), has_more: page.has_more }
        }))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const agent = yield* agents.byIdentifier(path.identifier)
          if (Option.isSome(agent) && isCreator(caller.userId, agent.value)) {
            const history = yield* agents.submissions(agent.value.id)
            return {
              ...(yield* withPending(agent.value)),
              review_history: history.map((s) => ({
                ...submissionView(s),
                reason: s.reason,
                decided_at: s.decidedAt === null ? null : s.decidedAt.toISOString()
              }))
            }
          }
          // Anyone else sees the published version only, and nothing of what waits for review.
          const { config, version } = yield* agents.published(path.identifier)
          return {
            ...publicView(path.identifier, config),
            tools: config.tools.map((tool) => tool.name),
            status: "published" as const,
            published_version: version,
            pending_submission: null
          }
        }))
      .handle("update", ({ path, payload }) =>
        Effect.flatMap(Caller, (caller) =>
          Effect.flatMap(agents.update(path.identifier, caller.userId, payload), withPending)))
      .handle("publish", ({ path }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const submission = yield* agents.publish(path.identifier, caller.userId)
          return { submission: { id: submission.id, version: submission.version, status: "pending" as const } }
        }))
      .handle("versions", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const agent = yield* agents.owned(path.identifier, caller.userId)
          const all = (yield* agents.versions(agent.id)).map((v) => versionSummary(agent, v))
          return yield* pageOf(all, urlParams, (v) => String(v.version))
        }))
      .handle("version", ({ path }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const { agent, config, summary } = yield* agents.ownedVersion(path.identifier, caller.userId, path.version)
          return {
            ...versionSummary(agent, summary),
            agent: ownerView({ ...agent, draft: config }, Option.none())
          }
        }))
      .handle("restoreVersion", ({ path }) =>
        Effect.flatMap(Caller, (caller) =>
          Effect.flatMap(agents.restore(path.identifier, caller.userId, path.version), withPending)))
      .handle("profile", ({ path }) =>
        Effect.gen(function*() {
          const { agent, config, version } = yield* agents.published(path.identifier)
          return {
            ...publicView(path.identifier, config),
            version,
            published_at: agent.publishedAt === null ? null : agent.publishedAt.toISOString()
          }
        }))
      .handle("openingMessage", ({ path }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const agent = yield* agents.byIdentifier(path.identifier)
          if (Option.isSome(agent) && isCreator(caller.userId, agent.value)) {
            return { message: agent.value.draft.opening_message }
          }
          const { config } = yield* agents.published(path.identifier)
          return { message: config.opening_message }
        }))
  })).pipe(Layer.provide(AuthenticationLive))

export const PurchasesHttp = HttpApiBuilder.group(AtriumApi, "purchases", (handlers) =>
  Effect.gen(function*() {
    const agents = yield* Agents
    return handlers
      .handle("purchase", ({ payload }) => Effect.flatMap(CurrentUser, (user) => agents.purchase(user.userId, payload.agent)))
      .handle("status", ({ path }) =>
        Effect.flatMap(CurrentUser, (user) =>
          Effect.map(agents.unlocked(user.userId, path.agent), (unlocked) => ({ agent: path.agent, unlocked }))))
  })).pipe(Layer.provide(AuthenticationLive))

export const ReviewsHttp = HttpApiBuilder.group(AtriumApi, "reviews", (handlers) =>
  Effect.gen(function*() {
    const agents = yield* Agents
    const view = (s: Submission) => ({ id: s.id, version: s.version, status: s.status })
    return handlers
      .handle("approve", ({ path }) => Effect.map(agents.decide(path.id, "approved", null), view))
      .handle("reject", ({ path, payload }) => Effect.map(agents.decide(path.id, "rejected", payload.reason), view))
  }))

export const AgentsHttpLive = Layer.mergeAll(AgentsHttp, PurchasesHttp, ReviewsHttp).pipe(Layer.provide(Agents.Default))
