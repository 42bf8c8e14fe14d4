import * as AiError from "@effect/ai/AiError"
import * as IdGenerator from "@effect/ai/IdGenerator"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Tool from "@effect/ai/Tool"
import type * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import { Duration, Effect, Either, Encoding, FiberRef, Option, Redacted, Stream } from "effect"
import { CurrentOutputFormat, toResponseFormat } from "./OutputFormat.js"
import {
  displayUrl,
  excerpt,
  executeUpstream,
  parseToolArguments,
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
 * path owns the parsing, the timeouts and the error mapping.
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

type ContentPart =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "image_url"; readonly image_url: { readonly url: string } }

interface ToolCallOut {
  readonly id: string
  readonly type: "function"
  readonly function: { readonly name: string; readonly arguments: string }
}

export type ChatMessage =
  | { readonly role: "system"; readonly content: string }
  | { readonly role: "user"; readonly content: string | ReadonlyArray<ContentPart> }
  | { readonly role: "assistant"; readonly content: string | null; readonly tool_calls?: ReadonlyArray<ToolCallOut> }
  | { readonly role: "tool"; readonly tool_call_id: string; readonly content: string }

export interface ChatRequest {
  readonly model: string
  readonly messages: ReadonlyArray<ChatMessage>
  readonly stream: true
  readonly stream_options: { readonly include_usage: true }
  readonly tools?: ReadonlyArray<{
    readonly type: "function"
    readonly function: { readonly name: string; readonly description?: string; readonly parameters: unknown }
  }>
  readonly tool_choice?: "auto" | "none" | "required" | {
    readonly type: "function"
    readonly function: { readonly name: string }
  }
  /** Structured output, when the run asks for it (`CurrentOutputFormat`). */
  readonly response_format?: ReturnType<typeof toResponseFormat>
}

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
      const description = Tool.getDescription(tool as any)
      tools.push({
        type: "function",
        function: {
          name: tool.name,
          ...(description !== undefined ? { description } : {}),
          parameters: Tool.getJsonSchema(tool as any)
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

// =============================================================================
// Stream decoding
// =============================================================================

interface UsageJson {
  readonly prompt_tokens?: number | null
  readonly completion_tokens?: number | null
  readonly total_tokens?: number | null
  readonly completion_tokens_details?: { readonly reasoning_tokens?: number | null } | null
  readonly prompt_tokens_details?: { readonly cached_tokens?: number | null } | null
}

interface PendingCall {
  id: string
  name: string
  args: string
  started: boolean
}

const isRecord = (value: unknown): value is Record<string, any> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const num = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isFinite(value) ? value : undefined
const str = (value: unknown): string | undefined => typeof value === "string" && value.length > 0 ? value : undefined

export const mapFinishReason = (reason: string | undefined): Response.FinishReason => {
  switch (reason) {
    case "stop":
    case "eos":
      return "stop"
    case "length":
      return "length"
    case "tool_calls":
    case "function_call":
      return "tool-calls"
    case "content_filter":
      return "content-filter"
    case undefined:
      return "unknown"
    default:
      return "other"
  }
}

/**
 * The state of one streamed response: turns SSE `data` payloads into `@effect/ai` stream parts. Synchronous and
 * free of I/O so the grammar of the upstream dialect can be reasoned about (and tested) on its own.
 */
export class ChunkDecoder {
  private text: string | undefined
  private reasoning: string | undefined
  private blocks = 0
  private readonly calls = new Map<number, PendingCall>()
  private finishReason: string | undefined
  private usage: UsageJson | undefined
  private sawToolCalls = false
  private done = false

  constructor(
    private readonly streamId: string,
    private readonly toolNames: ReadonlySet<string>,
    private readonly method: string,
    private readonly scrub: (text: string) => string = (text) => text
  ) {}

  /** One SSE event. `[DONE]` ends the stream; an `error` event or object fails it. */
  onEvent(event: string, data: string): Either.Either<Array<Response.StreamPartEncoded>, AiError.AiError> {
    if (this.done) return Either.right([])
    if (data.trim() === "[DONE]") {
      this.done = true
      return Either.right([])
    }
    let chunk: unknown
    try {
      chunk = JSON.parse(data)
    } catch {
      return Either.left(
        new AiError.MalformedOutput({
          module: MODULE,
          method: this.method,
          description: `the model upstream sent a stream chunk that is not JSON: ${this.scrub(excerpt(data))}`
        })
      )
    }
    if (!isRecord(chunk)) {
      return Either.left(
        new AiError.MalformedOutput({
          module: MODULE,
          method: this.method,
          description: `the model upstream sent a stream chunk that is not an object: ${this.scrub(excerpt(data))}`
        })
      )
    }
    if (event === "error" || chunk.error !== undefined && chunk.error !== null) {
      const message = upstreamMessage(JSON.stringify(chunk.error ?? chunk)) ?? "no details"
      return Either.left(
        new AiError.UnknownError({
          module: MODULE,
          method: this.method,
          description: `the model upstream reported an error mid-stream: ${this.scrub(message)}`
        })
      )
    }
    const parts: Array<Response.StreamPartEncoded> = []
    if (isRecord(chunk.usage)) this.usage = chunk.usage
    const choices: Array<any> = Array.isArray(chunk.choices) ? chunk.choices : []
    // Only the first choice: we never ask for n > 1.
    const choice = choices.find((c) => isRecord(c) && (c.index ?? 0) === 0)
    if (choice === undefined) return Either.right(parts)
    const delta: Record<string, any> = isRecord(choice.delta) ? choice.delta : {}

    const reasoning = str(delta.reasoning_content) ?? str(delta.reasoning)
    if (reasoning !== undefined) {
      this.closeText(parts)
      if (this.reasoning === undefined) {
        this.reasoning = this.nextId("reasoning")
        parts.push({ type: "reasoning-start", id: this.reasoning })
      }
      parts.push({ type: "reasoning-delta", id: this.reasoning, delta: reasoning })
    }

    const content = str(delta.content)
    if (content !== undefined) {
      this.closeReasoning(parts)
      if (this.text === undefined) {
        this.text = this.nextId("text")
        parts.push({ type: "text-start", id: this.text })
      }
      parts.push({ type: "text-delta", id: this.text, delta: content })
    }

    if (Array.isArray(delta.tool_calls)) {
      this.closeReasoning(parts)
      this.closeText(parts)
      let position = 0
      for (const fragment of delta.tool_calls as Array<any>) {
        const error = this.onToolCallFragment(fragment, position++, parts)
        if (error !== undefined) return Either.left(error)
      }
    }

    const finishReason = str(choice.finish_reason)
    if (finishReason !== undefined) {
      this.finishReason = finishReason
      const error = this.flush(parts)
      if (error !== undefined) return Either.left(error)
    }
    return Either.right(parts)
  }

  /** The end of the byte stream: completes what is open and adds the `finish` part. */
  onEnd(): Either.Either<Array<Response.StreamPartEncoded>, AiError.AiError> {
    if (!this.done && this.finishReason === undefined) {
      return Either.left(
        new AiError.UnknownError({
          module: MODULE,
          method: this.method,
          description: "the model upstream closed the stream before the response was finished"
        })
      )
    }
    const parts: Array<Response.StreamPartEncoded> = []
    const error = this.flush(parts)
    if (error !== undefined) return Either.left(error)
    const mapped = mapFinishReason(this.finishReason)
    // Ollama and some vLLM templates say "stop" after a tool call; the engine keys its loop on "tool-calls".
    const reason = this.sawToolCalls && (mapped === "stop" || mapped === "unknown") ? "tool-calls" : mapped
    const usage = this.usage
    const inputTokens = num(usage?.prompt_tokens)
    const outputTokens = num(usage?.completion_tokens)
    parts.push({
      type: "finish",
      reason,
      usage: {
        inputTokens,
        outputTokens,
        totalTokens: num(usage?.total_tokens) ??
          (inputTokens !== undefined && outputTokens !== undefined ? inputTokens + outputTokens : undefined),
        reasoningTokens: num(usage?.completion_tokens_details?.reasoning_tokens),
        cachedInputTokens: num(usage?.prompt_tokens_details?.cached_tokens)
      }
    })
    return Either.right(parts)
  }

  private nextId(kind: string) {
    return `${this.streamId}-${kind}-${this.blocks++}`
  }

  private closeText(parts: Array<Response.StreamPartEncoded>) {
    if (this.text !== undefined) {
      parts.push({ type: "text-end", id: this.text })
      this.text = undefined
    }
  }

  private closeReasoning(parts: Array<Response.StreamPartEncoded>) {
    if (this.reasoning !== undefined) {
      parts.push({ type: "reasoning-end", id: this.reasoning })
      this.reasoning = undefined
    }
  }

  private onToolCallFragment(
    fragment: any,
    position: number,
    parts: Array<Response.StreamPartEncoded>
  ): AiError.AiError | undefined {
    if (!isRecord(fragment)) return undefined
    const f = fragment
    // `index` tells parallel calls apart; servers that omit it send each call whole, in order.
    const index = typeof f.index === "number" ? f.index : position
    let call = this.calls.get(index)
    if (call === undefined) {
      call = { id: str(f.id) ?? `${this.streamId}-call-${index}`, name: "", args: "", started: false }
      this.calls.set(index, call)
    } else if (!call.started && str(f.id) !== undefined) {
      call.id = f.id
    }
    const name = str(f.function?.name)
    if (name !== undefined && call.name === "") call.name = name
    const args = typeof f.function?.arguments === "string"
      ? f.function.arguments
      : isRecord(f.function?.arguments)
      ? JSON.stringify(f.function.arguments) // Ollama's native form: arguments as an object.
      : ""
    if (args.length > 0) {
      call.args += args
      if (call.started) parts.push({ type: "tool-params-delta", id: call.id, delta: args })
    }
    if (!call.started && call.name !== "") return this.start(call, parts)
    return undefined
  }

  private start(call: PendingCall, parts: Array<Response.StreamPartEncoded>): AiError.AiError | undefined {
    if (!this.toolNames.has(call.name)) {
      return new AiError.MalformedOutput({
        module: MODULE,
        method: this.method,
        description: `the model called a tool it was not offered: ${excerpt(call.name, 80)}`
      })
    }
    call.started = true
    parts.push({ type: "tool-params-start", id: call.id, name: call.name, providerExecuted: false })
    if (call.args.length > 0) parts.push({ type: "tool-params-delta", id: call.id, delta: call.args })
    return undefined
  }

  /** Closes open blocks and completes every pending tool call, in index order. */
  private flush(parts: Array<Response.StreamPartEncoded>): AiError.AiError | undefined {
    this.closeReasoning(parts)
    this.closeText(parts)
    const pending = [...this.calls.entries()].sort(([a], [b]) => a - b)
    this.calls.clear()
    for (const [, call] of pending) {
      if (!call.started) {
        if (call.name === "") {
          return new AiError.MalformedOutput({
            module: MODULE,
            method: this.method,
            description: "the model upstream sent a tool call without a function name"
          })
        }
        const error = this.start(call, parts)
        if (error !== undefined) return error
      }
      parts.push({ type: "tool-params-end", id: call.id })
      parts.push({
        type: "tool-call",
        id: call.id,
        name: call.name,
        params: parseToolArguments(call.args),
        providerExecuted: false
      })
      this.sawToolCalls = true
    }
    return undefined
  }
}

/** A whole `chat.completion` body rewritten as the equivalent single stream chunk (message -> delta). */
const asChunk = (body: string): string => {
  try {
    const json: unknown = JSON.parse(body)
    if (!isRecord(json) || !Array.isArray(json.choices)) return body
    return JSON.stringify({
      ...json,
      choices: json.choices.map((choice: unknown) =>
        isRecord(choice)
          ? { ...choice, delta: choice.message ?? choice.delta ?? {}, finish_reason: choice.finish_reason ?? "stop" }
          : choice
      )
    })
  } catch {
    // Left to the decoder, which reports it as a chunk that is not JSON.
    return body
  }
}


/** `text-delta`s and friends folded into whole parts, for `generateText`. */
export const collectParts = (parts: Iterable<Response.StreamPartEncoded>): Array<Response.PartEncoded> => {
  const out: Array<Response.PartEncoded> = []
  const open = new Map<string, { kind: "text" | "reasoning"; text: string }>()
  for (const part of parts) {
    switch (part.type) {
      case "text-start":
      case "reasoning-start":
        open.set(part.id, { kind: part.type === "text-start" ? "text" : "reasoning", text: "" })
        break
      case "text-delta":
      case "reasoning-delta": {
        const block = open.get(part.id)
        if (block !== undefined) block.text += part.delta
        break
      }
      case "text-end":
      case "reasoning-end": {
        const block = open.get(part.id)
        open.delete(part.id)
        if (block !== undefined) out.push({ type: block.kind, text: block.text })
        break
      }
      case "tool-call":
      case "finish":
        out.push(part)
        break
    }
  }
  return out
}

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
