import type { Prompt } from "@effect/ai"
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Chunk, type Duration, Effect, Layer, Option, Stream } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive, Caller } from "../identity/Authentication.js"
import { duration } from "../platform/Config.js"
import { errorBody } from "../platform/Errors.js"
import { newId } from "../platform/Ids.js"
import { parseCredits, toNumber } from "../platform/Money.js"
import * as Heartbeat from "../platform/Heartbeat.js"
import * as Sse from "../platform/Sse.js"
import { Approvals } from "../runtime/Approvals.js"
import { type InternalEvent, publicPayload } from "../runtime/Events.js"
import type { ChatPayload } from "./Api.js"
import { partitionOf, Runs } from "./Runs.js"

type Wire = { readonly type: string; readonly [key: string]: unknown }
const wire = (events: Stream.Stream<InternalEvent>) => events as Stream.Stream<Wire>

/** The public events of a finished run, text and thinking increments left out (they are in `output`). */
const summaryOf = (events: ReadonlyArray<InternalEvent>) =>
  events.flatMap((event, index) =>
    event.type === "text" || event.type === "reasoning" || event.type === "tool_call_chunk"
      ? []
      : [publicPayload(event as Wire, index + 1)]
  )

const textOf = (content: ChatPayload["messages"][number]["content"]): string =>
  content === null ? "" : typeof content === "string" ? content : content.map((part) => part.text ?? "").join("")

const encoder = new TextEncoder()
const data = (payload: unknown) => encoder.encode(`data: ${JSON.stringify(payload)}\n\n`)
const PING = encoder.encode(Sse.PING)

/** What a trial that is used up says in a chat: it is not an error, the user is to be offered the unlock. */
const trialNotice = (event: Extract<InternalEvent, { type: "trial_exhausted" }>) =>
  `Your ${event.trials_used} free trial turns of ${event.agent} are used up. Unlock it for ${event.price} credits to go on.`

/**
 * `chat.completion.chunk` lines from a run's events (the OpenAI wire format: data lines only, then `[DONE]`). A
 * failed run sends an `error` object, which OpenAI's clients raise as an error.
 */
const chatChunks = (
  events: Stream.Stream<InternalEvent>,
  meta: { id: string; created: number; model: string; includeUsage: boolean },
  heartbeat: Duration.DurationInput
) => {
  const chunk = (delta: Record<string, unknown>, finish: string | null) => ({
    id: meta.id,
    object: "chat.completion.chunk",
    created: meta.created,
    model: meta.model,
    choices: [{ index: 0, delta, finish_reason: finish }]
  })
  const body = events.pipe(
    Stream.mapConcat((event): Array<Uint8Array> => {
      switch (event.type) {
        case "text":
          return [data(chunk({ content: event.delta }, null))]
        case "reasoning":
          return [data(chunk({ reasoning_content: event.delta }, null))]
        case "trial_exhausted":
          return [data(chunk({ content: trialNotice(event) }, null))]
        case "complete": {
          const usage = {
            prompt_tokens: event.usage.input_tokens,
            completion_tokens: event.usage.output_tokens,
            total_tokens: event.usage.input_tokens + event.usage.output_tokens
          }
          const last = [data(chunk({}, "stop"))]
          if (meta.includeUsage) last.push(data({ ...chunk({}, null), choices: [], usage }))
          return last
        }
        case "error":
          return [data({ error: { message: event.message, type: "run_failed", code: event.code } })]
        default:
          return []
      }
    }),
    Stream.prepend(Chunk.of(data(chunk({ role: "assistant", content: "" }, null)))),
    Stream.concat(Stream.make(encoder.encode(Sse.DONE)))
  ) as Stream.Stream<Uint8Array>
  return Heartbeat.during(body, heartbeat, PING)
}

/** The HTTP status of a run that failed before answering anything, for answers that are not streamed. */
const statusOf = (code: string) =>
  code === "budget_exhausted" ? 402 : code.startsWith("upstream") || code.startsWith("model") ? 502 : 500

export const RunsHttp = HttpApiBuilder.group(AtriumApi, "runs", (handlers) =>
  Effect.gen(function*() {
    const runs = yield* Runs
    const approvals = yield* Approvals
    // How long a stream may stay quiet before a `: ping` comment; tests shorten it to see one.
    const heartbeat = yield* duration("SSE_HEARTBEAT", Sse.HEARTBEAT_INTERVAL)

    const budgetOf = (budget: number | string | undefined) => {
      if (budget === undefined) return Effect.succeed(undefined)
      const micros = parseCredits(String(budget).trim())
      return micros === undefined || micros <= 0n
        ? Effect.fail(runs.invalid("Invalid request: budget: must be a positive amount of credits with at most 6 decimal places"))
        : Effect.succeed(micros)
    }

    return handlers
      .handle("run", ({ payload }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const budget = yield* budgetOf(payload.budget)
          const agent = yield* runs.agentFor(payload.agent, caller)
          const request = runs.request(caller, agent, payload.message, { budget })
          if (payload.stream === false) {
            const { events, result } = yield* runs.collect(request)
            return {
              id: request.runId,
              object: "run" as const,
              agent: agent.identifier,
              status: result.status,
              output: result.output,
              usage: { input_tokens: result.inputTokens, output_tokens: result.outputTokens },
              credits_charged: toNumber(result.creditsCharged),
              error: Option.getOrNull(result.failure),
              events: summaryOf(events)
            }
          }
          return Sse.response(Sse.encode(wire(runs.stream(request)), { done: true, heartbeat }))
        }))
      .handle("chatCompletions", ({ payload }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const last = payload.messages[payload.messages.length - 1]!
          if (last.role !== "user") {
            return yield* runs.invalid("Invalid request: messages: the last message must be the user's")
          }
          const history: Array<Prompt.MessageEncoded> = payload.messages.slice(0, -1).flatMap((message): Array<Prompt.MessageEncoded> => {
            const text = textOf(message.content)
            switch (message.role) {
              case "system":
              case "developer":
                return [{ role: "system", content: text }]
              case "user":
                return [{ role: "user", content: [{ type: "text", text }] }]
              case "assistant":
                return text.length > 0 ? [{ role: "assistant", content: [{ type: "text", text }] }] : []
              default:
                // Client-side tools are not part of this API: their results have nothing to answer here.
                return []
            }
          })
          const message = textOf(last.content)
          if (message.length === 0) return yield* runs.invalid("Invalid request: messages: the last message is empty")
          const agent = yield* runs.agentOrModel(payload.model, caller)
          const request = runs.request(caller, agent, message, { history })
          const meta = { id: `chatcmpl-${newId("run").slice(4)}`, created: Math.floor(Date.now() / 1000), model: payload.model }
          if (payload.stream === true) {
            return Sse.response(chatChunks(runs.stream(request), { ...meta, includeUsage: payload.stream_options?.include_usage === true }, heartbeat))
          }
          const { events, result } = yield* runs.collect(request)
          if (result.status === "failed") {
            const failure = Option.getOrThrow(result.failure)
            return HttpServerResponse.unsafeJson(errorBody(failure.code, failure.message), { status: statusOf(failure.code) })
          }
          const trial = events.find((event) => event.type === "trial_exhausted")
          const content = trial?.type === "trial_exhausted" ? trialNotice(trial) : result.output
          return {
            ...meta,
            object: "chat.completion" as const,
            choices: [{
              index: 0,
              message: {
                role: "assistant",
                content,
                ...(result.reasoning.length > 0 ? { reasoning_content: result.reasoning } : {})
              },
              finish_reason: "stop"
            }],
            usage: {
              prompt_tokens: result.inputTokens,
              completion_tokens: result.outputTokens,
              total_tokens: result.inputTokens + result.outputTokens
            }
          }
        }))
      .handle("answerApproval", ({ path, payload }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const approved = payload.decision === "approve"
          yield* approvals.answer(partitionOf(caller), path.approval_id, {
            approved,
            reason: payload.reason ?? (approved ? "" : "denied by the user")
          })
          return { approval_id: path.approval_id, decision: payload.decision }
        }))
  })).pipe(Layer.provide(AuthenticationLive))

export const RunsHttpLive = RunsHttp.pipe(Layer.provide([Runs.Default, Approvals.Default]))
