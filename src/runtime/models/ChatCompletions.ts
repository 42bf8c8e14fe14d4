import * as AiError from "@effect/ai/AiError"
import * as IdGenerator from "@effect/ai/IdGenerator"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Tool from "@effect/ai/Tool"
import { toolDescription, toolParameters } from "./AdapterParts.js"
import type * as Prompt from "@effect/ai/Prompt"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import { Duration, Effect, Either, Encoding, FiberRef, Option, Redacted, Stream } from "effect"
import { asChunk, ChunkDecoder, collectParts } from "./ChatCompletionsStream.js"
import type { ChatMessage, ChatRequest, ContentPart, ToolCallOut } from "./ChatCompletionsWire.js"
import { CurrentOutputFormat, toResponseFormat } from "./OutputFormat.js"
import {
  displayUrl,
  executeUpstream,
  requestDetails,
  scrubber,
  sseEvents,
  timeoutError,
  tolerateToolArguments,
  transportCause,
  upstreamMessage,
  UpstreamTimeout
} from "./Upstream.js"


/**
 * An OpenAI Chat Completions provider: the dialect vLLM, Ollama, DeepSeek, Qwen and most hosted models speak, which
 * `@effect/ai-openai` (Responses API only) does not. It always streams, even for `generateText`, so that one code
 * path owns the parsing, the timeouts and the error mapping. The wire format and its chunk Schema are in
 * `ChatCompletionsWire.ts`, the stream assembler in `ChatCompletionsStream.ts`.
 *
 * Failures are always an `AiError`, never a hung stream:
 * - upstream status >= 400            -> `HttpResponseError` (reason `StatusCode`, `response.status`, body excerpt)
 * - connection refused / reset early  -> `HttpRequestError` (reason `Transport`)
 * - no byte for `idleTimeout`, or the whole call over `requestTimeout`
 *                                     -> `UnknownError` whose `cause` is an `UpstreamTimeout`
 * - a chunk that is not JSON, a tool the model was not offered
 *                                     -> `MalformedOutput`
 * - an `error` object inside the stream, the stream cut before it finished, the connection lost mid-stream
 *                                     -> `UnknownError`
 * `describeFailure` turns any of them into the `code` and `message` of `run.failed`. No message ever carries the
 * API key: request headers are never copied into errors and upstream text is scrubbed of the key before use.
 */

const MODULE = "ChatCompletions"

export interface Options {
  /** e.g. `https://api.openai.com/v1`; `/chat/completions` is appended. */
  readonly baseUrl: string
  readonly apiKey: Option.Option<Redacted.Redacted>
  readonly model: string
  /** No byte from the upstream (headers or body) for this long fails the call. */
  readonly idleTimeout: Duration.DurationInput
  /** The most one call may take, however steadily it streams. */
  readonly requestTimeout: Duration.DurationInput
}

// =============================================================================
// Request encoding
// =============================================================================

const malformedInput = (method: string, description: string) =>
  new AiError.MalformedInput({ module: MODULE, method, description })

const imageUrl = (part: Prompt.FilePart): string => {
  const data = part.data
  if (data instanceof URL) return data.href
  if (data instanceof Uint8Array) return `data:${part.mediaType};base64,${Encoding.encodeBase64(data)}`
  return /^(https?:|data:)/.test(data) ? data : `data:${part.mediaType};base64,${data}`
}

const toolResultContent = (result: unknown): string =>
  typeof result === "string" ? result : JSON.stringify(result ?? null)

/** Arguments as the upstream expects them back: always a JSON object text, even for a call it garbled. */
const toolArguments = (params: unknown): string => JSON.stringify(params ?? {})

/**
 * The prompt in Chat Completions form. Reasoning is not sent back: DeepSeek rejects `reasoning_content` in input
 * messages and no other server reads it. Each tool result becomes its own `tool` message, as the API requires.
 */
export const encodeMessages = (
  prompt: Prompt.Prompt,
  method = "encodeMessages"
): Either.Either<Array<ChatMessage>, AiError.MalformedInput> => {
  const messages: Array<ChatMessage> = []
  for (const message of prompt.content) {
    switch (message.role) {
      case "system": {
        messages.push({ role: "system", content: message.content })
        break
      }
      case "user": {
        const parts: Array<ContentPart> = []
        for (const part of message.content) {
          if (part.type === "text") {
            parts.push({ type: "text", text: part.text })
          } else if (part.mediaType.startsWith("image/")) {
            parts.push({ type: "image_url", image_url: { url: imageUrl(part) } })
          } else {
            return Either.left(
              malformedInput(method, `Chat Completions cannot carry a file of type ${part.mediaType}`)
            )
          }
        }
        // Plain strings where possible: several servers (DeepSeek among them) reject content arrays of text.
        const textOnly = parts.every((part) => part.type === "text")
        messages.push({
          role: "user",
          content: textOnly ? parts.map((part) => (part as { text: string }).text).join("\n") : parts
        })
        break
      }
      case "assistant": {
        let text = ""
        const toolCalls: Array<ToolCallOut> = []
        for (const part of message.content) {
          if (part.type === "text") text += part.text
          else if (part.type === "tool-call" && !part.providerExecuted) {
            toolCalls.push({
              id: part.id,
              type: "function",
              function: { name: part.name, arguments: toolArguments(part.params) }
            })
          }
        }
        if (text.length === 0 && toolCalls.length === 0) break
        messages.push(
          toolCalls.length > 0
            ? { role: "assistant", content: text.length > 0 ? text : null, tool_calls: toolCalls }
            : { role: "assistant", content: text }
        )
        break
      }
      case "tool": {
        for (const part of message.content) {
          messages.push({ role: "tool", tool_call_id: part.id, content: toolResultContent(part.result) })
        }
        break
      }
    }
  }
  return Either.right(messages)
}

export const encodeRequest = (
  model: string,
  options: Pick<LanguageModel.ProviderOptions, "prompt" | "tools" | "toolChoice">,
  method = "encodeRequest"
): Either.Either<ChatRequest, AiError.MalformedInput> =>
  Either.gen(function*() {
    const messages = yield* encodeMessages(options.prompt, method)
    const base: ChatRequest = { model, messages, stream: true, stream_options: { include_usage: true } }
    if (options.tools.length === 0) return base
    const tools: Array<NonNullable<ChatRequest["tools"]>[number]> = []
    for (const tool of options.tools) {
      if (Tool.isProviderDefined(tool)) {
        return yield* Either.left(
          malformedInput(method, `the provider-defined tool ${tool.name} cannot be used over Chat Completions`)
        )
      }
      const description = toolDescription(tool)
      tools.push({
        type: "function",
        function: {
          name: tool.name,
          ...(description !== undefined ? { description } : {}),
          parameters: toolParameters(tool)
        }
      })
    }
    const choice = options.toolChoice
    const tool_choice: NonNullable<ChatRequest["tool_choice"]> = typeof choice === "string"
      ? choice
      : "tool" in choice
      ? { type: "function", function: { name: choice.tool } }
      : choice.mode ?? "auto"
    return { ...base, tools, tool_choice }
  })

export const make = (options: Options): Effect.Effect<LanguageModel.Service, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const idle = Duration.decode(options.idleTimeout)
    const total = Duration.decode(options.requestTimeout)
    const url = `${options.baseUrl.replace(/\/+$/, "")}/chat/completions`
    const shownUrl = displayUrl(url)
    const scrub = scrubber(options.apiKey)

    const responseError = (
      method: string,
      status: number,
      contentType: string | undefined,
      body: string,
      retryAfter?: string | undefined
    ) => {
      const message = upstreamMessage(scrub(body))
      return new AiError.HttpResponseError({
        module: MODULE,
        method,
        reason: "StatusCode",
        request: requestDetails(shownUrl),
        // `retry-after` is kept for the engine's fallback rule (docs/models.md); no other header is.
        response: {
          status,
          headers: {
            ...(contentType === undefined ? {} : { "content-type": contentType }),
            ...(retryAfter === undefined ? {} : { "retry-after": retryAfter })
          }
        },
        ...(message !== undefined ? { body: message } : {}),
        description: `the model upstream returned ${status}${message === undefined ? "" : `: ${message}`}`
      })
    }

    const parts = (provider: LanguageModel.ProviderOptions, method: string) =>
      Stream.unwrap(Effect.gen(function*() {
        const format = yield* FiberRef.get(CurrentOutputFormat)
        const encoded = yield* encodeRequest(options.model, provider, method)
        const body: ChatRequest = format === undefined ? encoded : { ...encoded, response_format: toResponseFormat(format) }
        const streamId = yield* Effect.flatMap(IdGenerator.IdGenerator, (ids) => ids.generateId())
        provider.span.attribute("gen_ai.system", "openai-chat")
        provider.span.attribute("gen_ai.request.model", options.model)

        const request = HttpClientRequest.post(url).pipe(
          HttpClientRequest.bodyUnsafeJson(body),
          Option.match(options.apiKey, {
            onNone: () => (request: HttpClientRequest.HttpClientRequest) => request,
            onSome: (key) => HttpClientRequest.bearerToken(key)
          })
        )
        const idleError = () => timeoutError(MODULE, method, new UpstreamTimeout({ phase: "idle", after: idle }))

        const response = yield* executeUpstream(client, request, { module: MODULE, method, shownUrl, idle, idleError, scrub })

        if (response.status >= 300) {
          // The body of an error is read under the same idle rule: a 500 that then stalls must not hang us.
          const text = yield* response.text.pipe(
            Effect.timeout(idle),
            Effect.orElseSucceed(() => "")
          )
          return yield* responseError(
            method,
            response.status,
            response.headers["content-type"],
            text,
            response.headers["retry-after"]
          )
        }

        const decoder = new ChunkDecoder(
          streamId,
          new Set(provider.tools.map((tool) => tool.name)),
          method,
          scrub
        )

        // A server that ignores `stream: true` answers with one `chat.completion`; replay it as a single chunk.
        if ((response.headers["content-type"] ?? "").includes("application/json")) {
          const text = yield* response.text.pipe(
            Effect.timeoutFail({ duration: idle, onTimeout: idleError }),
            Effect.catchIf(
              (error): error is HttpClientError.ResponseError => !AiError.isAiError(error),
              (error) =>
                Effect.fail(
                  new AiError.UnknownError({
                    module: MODULE,
                    method,
                    description: `the connection to the model upstream failed: ${scrub(transportCause(error))}`
                  })
                )
            )
          )
          return Stream.fromIterableEffect(Effect.gen(function*() {
            const replayed = yield* decoder.onEvent("message", asChunk(text))
            return [...replayed, ...(yield* decoder.onEnd())]
          }))
        }
        const bytes = response.stream.pipe(
          Stream.mapError((error) =>
            new AiError.UnknownError({
              module: MODULE,
              method,
              description: `the connection to the model upstream failed mid-stream: ${scrub(transportCause(error))}`
            })
          ),
          Stream.timeoutFail(idleError, idle)
        )
        const events = sseEvents<AiError.AiError, never>(bytes, () =>
          new AiError.MalformedOutput({
            module: MODULE,
            method,
            description: "the model upstream sent an event larger than 10 MiB"
          })).pipe(
            // Stop reading at [DONE]: a server that keeps the connection open afterwards must not look stalled.
            Stream.takeUntil((event) => event.data.trim() === "[DONE]")
          )
        return events.pipe(
          Stream.mapConcatEffect((event) => decoder.onEvent(event.event, event.data)),
          Stream.concat(Stream.fromIterableEffect(Effect.suspend(() => decoder.onEnd()))),
          Stream.tap((part) =>
            Effect.sync(() => {
              if (part.type === "finish") {
                provider.span.attribute("gen_ai.response.finish_reasons", [part.reason])
                if (part.usage.inputTokens !== undefined) {
                  provider.span.attribute("gen_ai.usage.input_tokens", part.usage.inputTokens)
                }
                if (part.usage.outputTokens !== undefined) {
                  provider.span.attribute("gen_ai.usage.output_tokens", part.usage.outputTokens)
                }
              }
            })
          )
        )
      })).pipe(
        Stream.interruptWhen(
          Effect.sleep(total).pipe(
            Effect.zipRight(
              Effect.fail(timeoutError(MODULE, method, new UpstreamTimeout({ phase: "request", after: total })))
            )
          )
        )
      )

    const service = yield* LanguageModel.make({
      generateText: Effect.fn("ChatCompletions.generateText")(function*(provider) {
        const all = yield* Stream.runCollect(parts(provider, "generateText"))
        return collectParts(all)
      }),
      streamText: (provider) => parts(provider, "streamText").pipe(Stream.withSpan("ChatCompletions.streamText"))
    })
    return tolerateToolArguments(service)
  })
