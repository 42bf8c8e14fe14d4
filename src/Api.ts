import * as HttpApi from "@effect/platform/HttpApi"
import type * as HttpApiError from "@effect/platform/HttpApiError"
import * as OpenApi from "@effect/platform/OpenApi"
import { Option, Schema, type SchemaAST } from "effect"
import { AgentsApi, PurchasesApi, ReviewsApi } from "./agents/Api.js"
import { RunsApi } from "./runs/Api.js"
import { ResponsesApi } from "./responses/Api.js"
import { EvolutionApi } from "./evolution/Api.js"
import { DistillationsApi } from "./distillation/Api.js"
import { SessionsApi } from "./sessions/Api.js"
import { AppsApi, CreditsApi, EventsApi, InternalBillingApi, MetersApi, PaymentNotifyApi, WalletApi } from "./billing/Api.js"
import { CredentialsApi } from "./credentials/Api.js"
import { MemoryApi } from "./memory/Api.js"
import { EnvironmentsApi } from "./environments/Api.js"
import { FilesApi } from "./files/Api.js"
import { KnowledgeApi } from "./knowledge/Api.js"
import { AccountApi, AuthApi } from "./identity/Api.js"
import { AdminApi, AgentIconsApi, AgentSkillsApi, CreatorReviewsApi, CreatorsApi, MarketApi, MarketReviewsApi, ProfileApi } from "./market/Api.js"
import { NotificationsApi } from "./notifications/Api.js"
import { END_USER_ROUTES } from "./identity/Domain.js"
import { OAUTH_PATHS, OAUTH_TAG } from "./identity/oauth/OpenApi.js"
import { HealthApi } from "./platform/Api.js"
import { DailyCapExceeded, IdempotencyConflict, InsufficientCredits } from "./billing/Domain.js"
import {
  DecodeFailure,
  Forbidden,
  InternalError,
  InvalidRequest,
  MethodNotAllowed,
  NotFound,
  PayloadTooLarge,
  RateLimited,
  ServiceUnavailable,
  Unauthorized,
  UnsupportedMediaType
} from "./platform/Errors.js"
import { SessionBusy } from "./sessions/Domain.js"
import { ModelsApi } from "./runtime/models/Api.js"
import { InternalWebhooksApi, WebhooksApi } from "./webhooks/Api.js"
import { SchedulesApi } from "./schedules/Api.js"
import { TracesApi } from "./traces/Api.js"
import { EvalsApi } from "./evals/Api.js"

/** Operations that answer `text/event-stream` (always, or with `stream: true`), and what their events are. */
const STREAMS: Record<string, { readonly only: boolean; readonly events: string }> = {
  "post /v1/agents/run": { only: false, events: "The run's events (docs/events.md): run.created, output.text.delta, tool_call.*, approval.required, usage.token, run.completed or run.failed, then data: [DONE]." },
  "get /v1/runs/{id}/events": { only: true, events: "A background run's events (docs/events.md) from `after` (or Last-Event-ID) on, each with its place in the run's log as the SSE id, live while it runs; run.completed or run.failed (code cancelled or max_duration for a stopped run), then data: [DONE]." },
  "post /v1/chat/completions": { only: false, events: "With stream: true, chat.completion.chunk data lines (no event: lines), an error data line for a failed run, then data: [DONE]." },
  "post /v1/responses": { only: false, events: "With stream: true, OpenAI's Responses events: response.created, response.in_progress, response.output_item.added, response.content_part.added, response.output_text.delta, response.output_text.done, response.function_call_arguments.delta, response.function_call_arguments.done, response.content_part.done, response.output_item.done, then response.completed or response.failed." },
  "get /v1/responses/{id}": { only: false, events: "With stream=true (a background response), the response's events as POST /v1/responses streams them, from the start or after starting_after (a sequence_number), live while it runs: response.created (queued), response.in_progress, ..., then response.completed, response.failed (also a cancelled one, status cancelled) or response.incomplete." },
  "post /v1/sessions/{id}/events": { only: true, events: "The turn's events (docs/events.md), each with its session-wide seq as the SSE id, then data: [DONE]." },
  "get /v1/sessions/{id}/events": { only: true, events: "The session's events (docs/events.md) from `after` (or Last-Event-ID) on, then live ones, each with its seq as the SSE id." }
}

/** Answers that are plain text, not JSON (the generated document would say JSON). */
const TEXT_ANSWERS = new Set(["get /v1/sessions/{id}/files/content"])

const openAiErrorBody = (description: string) => ({
  description,
  content: {
    "application/json": {
      schema: {
        type: "object",
        required: ["error"],
        properties: {
          error: {
            type: "object",
            required: ["type", "code", "message", "param"],
            properties: {
              type: { type: "string", description: "invalid_request_error, insufficient_quota, rate_limit_error or server_error" },
              code: { type: "string", description: "the run.failed code (docs/events.md)" },
              message: { type: "string" },
              param: { anyOf: [{ type: "string" }, { type: "null" }] }
            }
          }
        }
      }
    }
  }
})

/** Statuses the handlers answer themselves (a failed run, a retry with the same key), beside the declared ones. */
const RUN_STATUSES: Record<string, Record<string, ReturnType<typeof openAiErrorBody>>> = {
  "post /v1/chat/completions": {
    "400": openAiErrorBody("Also a run that failed for a reason retrying cannot fix (its code, e.g. model_refused); x-should-retry: false."),
    "402": openAiErrorBody("The run stopped: the wallet cannot pay (budget_exhausted); x-should-retry: false."),
    "409": openAiErrorBody("Idempotency-Key sent with another body, or while its first request is still starting."),
    "429": openAiErrorBody("The model upstream was rate limited (upstream_rate_limited); Retry-After says when to retry."),
    "500": openAiErrorBody("The run failed on our side (internal_error); x-should-retry: false."),
    "502": openAiErrorBody("The model upstream failed (upstream_error); Retry-After."),
    "503": openAiErrorBody("The model upstream could not be reached (upstream_unavailable), or the platform is busy; Retry-After."),
    "504": openAiErrorBody("The model upstream timed out (upstream_timeout); Retry-After.")
  },
  "post /v1/responses": { "409": openAiErrorBody("Idempotency-Key sent with another body, or while its first request is still starting.") },
  "post /v1/agents/run": { "409": openAiErrorBody("Idempotency-Key sent with another body, or while its first request is still starting.") }
}

/**
 * The declared answers with a failed run's beside them: a status both give (400) takes either body; its description
 * stays the declared one's.
 */
const withRunStatuses = (
  declared: Record<string, any>,
  statuses: Record<string, ReturnType<typeof openAiErrorBody>>
): Record<string, any> => {
  const merged: Record<string, any> = { ...statuses, ...declared }
  for (const [status, run] of Object.entries(statuses)) {
    const schema = declared[status]?.content?.["application/json"]?.schema
    if (schema === undefined) continue
    merged[status] = {
      ...declared[status],
      content: { "application/json": { schema: { anyOf: [schema, run.content["application/json"].schema] } } }
    }
  }
  return merged
}

/**
 * What the generated document cannot know: the streaming answers, the `X-End-User-Id` header that API keys must
 * send on the end-user routes, where the API is served, and a summary for every operation. `X-End-User-Id` is the
 * authentication middleware's (identity/Authentication.ts reads it for every end-user route before a route decodes
 * its own headers), and an HttpApi middleware cannot declare a header; the headers a route reads itself
 * (`Idempotency-Key`, `Last-Event-ID`) are declared in its contract (platform/http/Headers.ts).
 */
const documentTruth = (spec: Record<string, any>): Record<string, any> => {
  spec.servers = [{ url: "/", description: "this platform (the document is served by it)" }]
  spec.info.license = { name: "Proprietary", url: "/docs" }
  for (const [path, operations] of Object.entries<Record<string, any>>(spec.paths ?? {})) {
    for (const [method, operation] of Object.entries<any>(operations)) {
      if (typeof operation !== "object" || operation === null || !("responses" in operation)) continue
      const description: string | undefined = operation.description
      if (operation.summary === undefined) {
        const first = description?.split(/(?<=\.)\s/)[0]?.replace(/\.$/, "")
        operation.summary = first !== undefined && first.length > 0 && first.length <= 100 ? first : `${method.toUpperCase()} ${path}`
      }
      if (description === undefined) operation.description = operation.summary
      const stream = STREAMS[`${method} ${path}`]
      if (stream !== undefined) {
        const ok = operation.responses["200"] ?? (operation.responses["200"] = { description: "Success" })
        const eventStream = { schema: { type: "string", description: stream.events } }
        ok.content = stream.only ? { "text/event-stream": eventStream } : { ...ok.content, "text/event-stream": eventStream }
      }
      if (TEXT_ANSWERS.has(`${method} ${path}`)) {
        const ok = operation.responses["200"] ?? (operation.responses["200"] = { description: "Success" })
        ok.content = { "text/plain": { schema: { type: "string" } } }
      }
      const statuses = RUN_STATUSES[`${method} ${path}`]
      if (statuses !== undefined) operation.responses = withRunStatuses(operation.responses, statuses)
      // Query numbers arrive as text and are decoded to integers: say what a client sends, an integer.
      for (const parameter of operation.parameters ?? []) {
        if (parameter.in === "query" && (parameter.name === "limit" || parameter.name === "starting_after" || (parameter.name === "after" && path.endsWith("/events")))) {
          // The ledger pages up to 200 (src/billing/Api.ts); every other list up to 100 (ListParams).
          const { maximum, minimum } = parameter.name === "limit"
            ? { minimum: 1, maximum: path === "/api/wallet/ledger" ? 200 : 100 }
            : { minimum: 0, maximum: undefined }
          parameter.schema = { type: "integer", minimum, ...(maximum === undefined ? {} : { maximum }) }
        }
      }
      if (END_USER_ROUTES.test(path)) {
        operation.parameters = [...(operation.parameters ?? []), {
          name: "X-End-User-Id",
          in: "header",
          required: false,
          description: "Required with an API key (Bearer sk_...): a stable id of your end user (1-128 characters of " +
            "A-Z a-z 0-9 . _ : @ -); their sessions, files and memory are kept apart. Login and OAuth callers may omit it.",
          schema: { type: "string", pattern: "^[A-Za-z0-9._:@-]{1,128}$" }
        }]
      }
    }
  }
  return withoutAnonymousIds(withOAuth(spec))
}

/** The OAuth routes are not HttpApi endpoints (their errors are RFC 6749's, not the envelope), so they join last. */
const withOAuth = (spec: Record<string, any>): Record<string, any> => {
  spec.paths = { ...spec.paths, ...OAUTH_PATHS }
  spec.tags = [...(spec.tags ?? []), OAUTH_TAG]
  return spec
}

/**
 * Schema generation marks schemas it cannot name with `"$id": "/schemas/unknown"`, the same id many times over; a
 * validator (ajv) refuses a document whose ids repeat, and an id says nothing here, so those go.
 */
const withoutAnonymousIds = <A>(value: A): A => {
  if (Array.isArray(value)) {
    value.forEach(withoutAnonymousIds)
  } else if (typeof value === "object" && value !== null) {
    const record = value as Record<string, unknown>
    if (record["$id"] === "/schemas/unknown") delete record["$id"]
    Object.values(record).forEach(withoutAnonymousIds)
  }
  return value
}

/**
 * HttpApi starts every API with its own decode failure, `HttpApiDecodeError`, which it writes as `{_tag, issues}`.
 * This API starts from `DecodeFailure` instead: the same error, written as the envelope (platform/Errors.ts).
 */
const makeApi = <const Id extends string>(identifier: Id): HttpApi.HttpApi<Id, never, HttpApiError.HttpApiDecodeError> =>
  Object.assign(HttpApi.make(identifier), { errorSchema: DecodeFailure })

/** The whole HTTP API: one group per domain. Handlers live in each domain's `Http.ts`. */
export class AtriumApi extends makeApi("atrium")
  .add(HealthApi)
  .add(AuthApi)
  .add(AccountApi)
  .add(ModelsApi)
  .add(MetersApi)
  .add(EventsApi)
  .add(CreditsApi)
  .add(WalletApi)
  .add(PaymentNotifyApi)
  .add(AppsApi)
  .add(InternalBillingApi)
  .add(AgentsApi)
  .add(RunsApi)
  .add(ResponsesApi)
  .add(SessionsApi)
  .add(PurchasesApi)
  .add(ReviewsApi)
  .add(FilesApi)
  .add(KnowledgeApi)
  .add(EnvironmentsApi)
  .add(CredentialsApi)
  .add(MemoryApi)
  .add(MarketApi)
  .add(MarketReviewsApi)
  .add(CreatorsApi)
  .add(NotificationsApi)
  .add(CreatorReviewsApi)
  .add(AdminApi)
  .add(ProfileApi)
  .add(AgentSkillsApi)
  .add(AgentIconsApi)
  .add(EvolutionApi)
  .add(DistillationsApi)
  .add(WebhooksApi)
  .add(InternalWebhooksApi)
  .add(SchedulesApi)
  .add(TracesApi)
  .add(EvalsApi)
  .annotate(OpenApi.Title, "Atrium platform API")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(OpenApi.Transform, documentTruth)
  .annotate(
    OpenApi.Description,
    "Run and publish AI experts, paid with credits. Errors are {\"error\":{\"type\",\"message\"}}."
  )
{}

/** What the platform's edge answers outside any endpoint's declared errors (a guard, an outage, an unknown route). */
export const EdgeError = Schema.Union(
  InvalidRequest,
  Unauthorized,
  Forbidden,
  NotFound,
  MethodNotAllowed,
  PayloadTooLarge,
  UnsupportedMediaType,
  RateLimited,
  InternalError,
  ServiceUnavailable,
  InsufficientCredits,
  DailyCapExceeded,
  IdempotencyConflict,
  SessionBusy
)
export type EdgeError = typeof EdgeError.Type

/** Every wire error the API declares, then the edge's: the schemas a failed answer is decoded through. */
export const AnyError: Schema.Schema<EdgeError, unknown> = (() => {
  const members = new Set<SchemaAST.AST>()
  HttpApi.reflect(AtriumApi, {
    onGroup: () => {},
    onEndpoint: ({ errors }) =>
      errors.forEach(({ ast }) => {
        if (Option.isNone(ast)) return
        for (const member of ast.value._tag === "Union" ? ast.value.types : [ast.value]) members.add(member)
      })
  })
  // Each member's type is only known as an AST here; together they decode to the declared errors and the edge's.
  return Schema.Union(...[...members].map((ast) => Schema.make(ast)), EdgeError) as unknown as Schema.Schema<EdgeError, unknown>
})()

