import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Chunk, Effect, Either, Exit, Layer, Option, Stream } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { AppConfig } from "../platform/Config.js"
import { asJson, type Attached, Attachments, type Durable, keyedToken } from "../platform/http/Attach.js"
import { newId } from "../platform/Ids.js"
import { toNumber } from "../platform/Money.js"
import * as Sse from "../platform/sse/Sse.js"
import { Approvals } from "../runtime/Approvals.js"
import { type InternalEvent, publicFrame, publicPayload } from "../runtime/Events.js"
import { RunId } from "../runtime/Domain.js"
import type { RunResult } from "../runtime/Run.js"
import { chatConversation, clientToolsOf, failedRunAnswer, outputFormatOf, refuseUnsupported, runError } from "./OpenAi.js"
import { Runs } from "./Runs.js"
import { BackgroundRuns } from "./Background.js"
import { TurnCancels } from "./Lifecycle.js"
import { RunRecords } from "./Repo.js"
import { rowStatus, runObject } from "./Views.js"
import { ownedBy } from "./Policy.js"
import { Caller } from "../identity/Domain.js"
import type { CallerIdentity } from "../identity/Domain.js"

type Wire = { readonly type: string; readonly [key: string]: unknown }

/** The public events of a finished run, text and thinking increments left out (they are in `output`). */
const summaryOf = (events: ReadonlyArray<InternalEvent>) =>
  events.flatMap((event, index) =>
    event.type === "text" || event.type === "reasoning" || event.type === "tool_call_chunk"
      ? []
      // Every public payload has its `type` (publicPayload keeps the event's, renamed): the answer's schema types it.
      : [publicPayload(event as Wire, index + 1) as { readonly type: string; readonly [key: string]: unknown }]
  )

/** A chat-completion frame: the OpenAI wire format has data lines only. */
const data = (payload: unknown): Sse.Frame => ({ data: payload })

/** What a trial that is used up says in a chat: it is not an error, the user is to be offered the unlock. */
const trialNotice = (event: Extract<InternalEvent, { type: "trial_exhausted" }>) =>
  `Your ${event.trials_used} free trial turns of ${event.agent} are used up. Unlock it for ${event.price} credits to go on.`

/**
 * `chat.completion.chunk` frames from a run's events (the OpenAI wire format: data lines only; the encoder adds
 * `[DONE]`). A failed run sends an `error` object, which OpenAI's clients raise as an error.
 */
const chatChunks = (
  events: Stream.Stream<InternalEvent>,
  meta: { id: string; created: number; model: string; includeUsage: boolean; clientTools: ReadonlySet<string> }
): Stream.Stream<Sse.Frame> => {
  const chunk = (delta: Record<string, unknown>, finish: string | null) => ({
    id: meta.id,
    object: "chat.completion.chunk",
    created: meta.created,
    model: meta.model,
    choices: [{ index: 0, delta, finish_reason: finish }]
  })
  // The caller's tool calls by id, numbered in the order they began (`index` of OpenAI's tool-call deltas).
  const calls = new Map<string, number>()
  let cached = 0
  const body = events.pipe(
    Stream.mapConcat((event): Array<Sse.Frame> => {
      switch (event.type) {
        case "text":
          return [data(chunk({ content: event.delta }, null))]
        case "reasoning":
          return [data(chunk({ reasoning_content: event.delta }, null))]
        case "trial_exhausted":
          return [data(chunk({ content: trialNotice(event) }, null))]
        case "tool_call": {
          if (event.status !== "pending" || !meta.clientTools.has(event.name) || calls.has(event.tool_call_id)) return []
          const index = calls.size
          calls.set(event.tool_call_id, index)
          const args = event.arguments === undefined ? "" : JSON.stringify(event.arguments)
          return [data(chunk({
            tool_calls: [{ index, id: event.tool_call_id, type: "function", function: { name: event.name, arguments: args } }]
          }, null))]
        }
        case "tool_call_chunk": {
          const index = calls.get(event.tool_call_id)
          if (index === undefined) return []
          return [data(chunk({ tool_calls: [{ index, function: { arguments: event.delta } }] }, null))]
        }
        case "token_usage":
          cached += event.cached_input_tokens ?? 0
          return []
        case "complete": {
          const usage = chatUsage(event.usage.input_tokens, event.usage.output_tokens, cached)
          const last = [data(chunk({}, calls.size > 0 ? "tool_calls" : "stop"))]
          if (meta.includeUsage) last.push(data({ ...chunk({}, null), choices: [], usage }))
          return last
        }
        case "error":
          // After a 200 the failure can only be told in the stream: OpenAI's clients raise it and do not retry.
          return [data({ error: runError(event.code, event.message) })]
        default:
          return []
      }
    }),
    Stream.prepend(Chunk.of(data(chunk({ role: "assistant", content: "" }, null))))
  )
  return body
}

/**
 * OpenAI's chat usage; `prompt_tokens_details.cached_tokens` is the part of the prompt the upstream read from its
 * prompt cache (its own figure, summed over the run's model calls; billed at the cached rate, docs/billing.md).
 */
const chatUsage = (input: number, output: number, cached: number) => ({
  prompt_tokens: input,
  completion_tokens: output,
  total_tokens: input + output,
  prompt_tokens_details: { cached_tokens: cached }
})

/** Cached input tokens of a finished run's model calls. */
const cachedOf = (events: ReadonlyArray<InternalEvent>) =>
  events.reduce((sum, event) => event.type === "token_usage" ? sum + (event.cached_input_tokens ?? 0) : sum, 0)

/** The header of an answer given again to a retry with the same `Idempotency-Key`. */
const replayedHeaders = (replayed: boolean): Record<string, string> => replayed ? { "idempotent-replayed": "true" } : {}

/** Exit of an answer: a success crosses runners as its JSON; a failure (before the run started) is not kept. */
const successOnly = <E>(): Durable<Exit.Exit<ChatAnswer, E>> => ({
  encode: (exit) => Exit.isSuccess(exit) ? Option.some(exit.value) : Option.none(),
  decode: (json) => Exit.succeed(json as ChatAnswer)
})

interface ChatAnswer {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: unknown
}

/** A finished chat run as its HTTP answer: the completion, or a failed run's error (docs/runs.md "Retries"). */
const chatAnswer = (
  meta: { id: string; created: number; model: string },
  events: ReadonlyArray<InternalEvent>,
  result: RunResult
): ChatAnswer => {
  if (result.status === "failed") {
    const failure = Option.getOrThrow(result.failure)
    // The run started and failed: only a transient upstream failure invites a retry (docs/runs.md "Retries").
    return { ...failedRunAnswer(failure.code), body: { error: runError(failure.code, failure.message) } }
  }
  const trial = events.find((event) => event.type === "trial_exhausted")
  const content = trial?.type === "trial_exhausted" ? trialNotice(trial) : result.output
  const toolCalls = result.clientToolCalls.map((call) => ({
    id: call.id,
    type: "function" as const,
    function: { name: call.name, arguments: JSON.stringify(call.params ?? {}) }
  }))
  return {
    status: 200,
    headers: {},
    body: {
      ...meta,
      object: "chat.completion" as const,
      choices: [{
        index: 0,
        message: {
          role: "assistant",
          content: toolCalls.length > 0 && content.length === 0 ? null : content,
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
          ...(result.reasoning.length > 0 ? { reasoning_content: result.reasoning } : {})
        },
        finish_reason: toolCalls.length > 0 ? "tool_calls" : "stop"
      }],
      usage: chatUsage(result.inputTokens, result.outputTokens, cachedOf(events))
    }
  }
}

export const RunsHttp = HttpApiBuilder.group(AtriumApi, "runs", (handlers) =>
  Effect.gen(function*() {
    const runs = yield* Runs
    const background = yield* BackgroundRuns
    const records = yield* RunRecords
    const approvals = yield* Approvals
    const turns = yield* TurnCancels
    const attachments = yield* Attachments

    /** Whose keys a request's are: the route's, the account's and the end user's. */
    const keyScope = (route: string, caller: CallerIdentity) => {
      const partition = ownedBy(caller)
      return `${route}\n${partition.accountId}\n${partition.endUserId}`
    }
    /**
     * With an `Idempotency-Key`, what `answer` gives is shared by every request with that key (Attach.ts): a stream's
     * frames from the start, or a whole answer once it is ready. Without one, `answer` as it is.
     */
    const shared = <A>(
      route: string,
      caller: CallerIdentity,
      key: string | undefined,
      payload: unknown,
      answer: Stream.Stream<A>,
      durable?: Durable<A>
    ): Effect.Effect<Either.Either<Attached<A>, HttpServerResponse.HttpServerResponse>> =>
      attachments.attachWith(key, keyScope(route, caller), payload, Effect.succeed(answer), durable)
    const sharedAnswer = <A>(
      route: string,
      caller: CallerIdentity,
      key: string | undefined,
      payload: unknown,
      answer: Effect.Effect<A>,
      durable?: Durable<NoInfer<A>>
    ): Effect.Effect<Either.Either<{ value: A; replayed: boolean }, HttpServerResponse.HttpServerResponse>> =>
      Effect.flatMap(shared(route, caller, key, payload, Stream.fromEffect(answer), durable), (attached): Effect.Effect<Either.Either<{ value: A; replayed: boolean }, HttpServerResponse.HttpServerResponse>> =>
        Either.isLeft(attached)
          ? Effect.succeed(Either.left(attached.left))
          : Effect.map(Stream.runHead(attached.right.items), (head) => Either.right({ value: Option.getOrThrow(head), replayed: attached.right.replayed })))
    /** An SSE answer of shared frames, marked when it is an earlier request's (docs/http.md). */
    const sseOf = (attached: Attached<Sse.Frame>) => {
      const response = Sse.response(Sse.encode(attached.items, { done: true, heartbeat }))
      return attached.replayed ? HttpServerResponse.setHeader(response, "idempotent-replayed", "true") : response
    }
    // How long a stream may stay quiet before a `: ping` comment; tests shorten it to see one.
    const { sseHeartbeat: heartbeat } = yield* AppConfig

    return handlers
      .handle("run", ({ headers, payload }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const key = headers["idempotency-key"]
          const agent = yield* runs.agentFor(payload.agent, caller)
          if (payload.background === true) {
            // Answered at once with the run; it goes on as a workflow, on whichever runner owns it (Background.ts).
            // With a key, the run is named after it: a retry whose first attempt queued the run but failed before it
            // answered (its runner met a database restart, or died), here or on another runner, gets that run, not a
            // second one.
            const runId = key === undefined ? undefined : RunId.make(`run_${keyedToken(keyScope("run-background", caller), key, payload)}`)
            const queued = yield* sharedAnswer("run-background", caller, key, payload, Effect.orDie(background.start(caller, agent, {
              message: payload.message,
              history: [],
              budget: payload.budget === undefined ? null : payload.budget.toString()
            }, runId)))
            return Either.isLeft(queued)
              ? queued.left
              : HttpServerResponse.unsafeJson(runObject(queued.right.value), { status: 202, headers: replayedHeaders(queued.right.replayed) })
          }
          const request = runs.request(caller, agent, payload.message, { budget: payload.budget })
          if (payload.stream === false) {
            const answer = yield* sharedAnswer("run", caller, key, payload, Effect.map(runs.collect(request), ({ events, result }) => ({
              id: request.runId,
              object: "run" as const,
              agent: agent.identifier,
              status: result.status,
              output: result.output,
              usage: { input_tokens: result.inputTokens, output_tokens: result.outputTokens },
              credits_charged: toNumber(result.creditsCharged),
              error: Option.getOrNull(result.failure),
              events: summaryOf(events)
            })), asJson)
            if (Either.isLeft(answer)) return answer.left
            return answer.right.replayed ? HttpServerResponse.unsafeJson(answer.right.value, { headers: replayedHeaders(true) }) : answer.right.value
          }
          if (key !== undefined) {
            let id = 0
            const frames = runs.stream(request).pipe(Stream.map((event) => publicFrame(event as Wire, ++id)))
            const attached = yield* shared("run", caller, key, payload, frames, asJson)
            return Either.isLeft(attached) ? attached.left : sseOf(attached.right)
          }
          let eventId = 0
          return yield* Sse.written((outlet) =>
            runs.execute(request, (event) => outlet.send(publicFrame(event as Wire, ++eventId))).pipe(
              // The run's fiber belongs to the response: a client that leaves interrupts it (recorded as cancelled).
              Effect.ensuring(Effect.sync(outlet.end)),
              Effect.forkScoped
            ), { heartbeat, greet: false })
        }))
      .handle("chatCompletions", ({ headers, payload }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const key = headers["idempotency-key"]
          yield* refuseUnsupported(payload)
          const outputFormat = yield* outputFormatOf(payload.response_format)
          const conversation = yield* chatConversation(payload.messages)
          const agent = yield* runs.agentOrModel(payload.model, caller)
          const tools = yield* clientToolsOf(payload, agent)
          const request = {
            ...runs.request(caller, agent, conversation.message, { history: conversation.history }),
            clientTools: tools.clientTools,
            toolChoice: tools.toolChoice,
            outputFormat,
            resume: conversation.resume
          }
          const meta = { id: `chatcmpl-${newId("run").slice(4)}`, created: Math.floor(Date.now() / 1000), model: payload.model }
          const clientTools = new Set(tools.clientTools.map((tool) => tool.name))
          if (payload.stream === true) {
            const chunks = chatChunks(runs.stream(request), { ...meta, includeUsage: payload.stream_options?.include_usage === true, clientTools })
            const attached = yield* shared("chat", caller, key, payload, chunks, asJson)
            return Either.isLeft(attached) ? attached.left : sseOf(attached.right)
          }
          // The whole answer (its id included) is what a retry with the same key gets again, on any runner.
          const answer = yield* sharedAnswer(
            "chat",
            caller,
            key,
            payload,
            Effect.exit(Effect.map(runs.collect(request), ({ events, result }) => chatAnswer(meta, events, result))),
            successOnly()
          )
          if (Either.isLeft(answer)) return answer.left
          if (Exit.isFailure(answer.right.value)) return yield* Effect.failCause(answer.right.value.cause)
          const { body, headers: answered, status } = answer.right.value.value
          return HttpServerResponse.unsafeJson(body, { status, headers: { ...answered, ...replayedHeaders(answer.right.replayed) } })
        }))
      .handle("getRun", ({ path }) =>
        Effect.map(Effect.flatMap(Caller, (caller) => background.get(ownedBy(caller), path.id)), runObject))
      .handle("listRuns", ({ urlParams }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const page = yield* records.list(ownedBy(caller), {
            agent: urlParams.agent ?? null,
            status: urlParams.status === undefined ? null : rowStatus(urlParams.status),
            createdAfter: urlParams.created_after ?? null,
            createdBefore: urlParams.created_before ?? null,
            after: urlParams.after ?? null,
            limit: urlParams.limit ?? 20
          })
          return { data: page.data.map(runObject), has_more: page.hasMore }
        }))
      .handle("cancelRun", ({ path }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const run = yield* background.get(ownedBy(caller), path.id)
          // A session's turn is the session's to stop (as its interrupt route does); any other run is a workflow.
          return runObject(run.sessionId !== null ? yield* turns.cancel(caller, path.id) : yield* background.cancel(ownedBy(caller), path.id))
        }))
      .handle("runEvents", ({ headers, path, urlParams }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const run = yield* background.get(ownedBy(caller), path.id)
          if (run.sessionId !== null) {
            return yield* runs.invalid(`A session's turn is told in its session's events: GET /v1/sessions/${run.sessionId}/events.`)
          }
          if (!run.background) {
            return yield* runs.invalid("Events are kept for background runs; a foreground run told its events on its own stream.")
          }
          const after = urlParams.after ?? headers["last-event-id"] ?? 0
          const frames = background.events(run, after).pipe(Stream.map(({ payload, place, seq }) => publicFrame(payload as Wire, place, seq)))
          return Sse.response(Sse.endingAtStop(Sse.encode(frames, { done: true, heartbeat })))
        }))
      .handle("answerApproval", ({ path, payload }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const approved = payload.decision === "approve"
          const decision = { approved, reason: payload.reason ?? (approved ? "" : "denied by the user") }
          const durable = yield* approvals.answer(ownedBy(caller), path.approval_id, decision)
          // A background run's approval: claimed above, its workflow (suspended on it) goes on with the decision.
          if (Option.isSome(durable)) yield* background.approve(durable.value, path.approval_id, decision)
          return { approval_id: path.approval_id, decision: payload.decision }
        }))
  })).pipe(Layer.provide(AuthenticationLive))

export const RunsHttpLive = RunsHttp.pipe(Layer.provide([Runs.Default, Approvals.Default, Attachments.Default, BackgroundRuns.Default, RunRecords.Default]))
