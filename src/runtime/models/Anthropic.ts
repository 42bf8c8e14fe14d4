import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type { Context } from "effect"
import { Duration, Effect, Option, Stream } from "effect"
import type { Options } from "./ChatCompletions.js"
import { guardModel, idleGuard } from "./Responses.js"
import { displayUrl, scrubber } from "./Upstream.js"

/**
 * Anthropic's Messages API through `@effect/ai-anthropic` (`POST {baseUrl}/v1/messages`, SSE), with the guarantees
 * of the other providers (`guardModel`: idle and overall timeouts, errors without headers, tolerant tool arguments)
 * and two choices of ours:
 * - prompt caching is on: the system prompt and the last message carry `cache_control: ephemeral`, so a run's
 *   second step (and a session's next turn) reads the instructions and the history from Anthropic's cache;
 * - usage is reported as the other providers report it: `inputTokens` is the whole prompt (Anthropic's
 *   `input_tokens` + `cache_creation_input_tokens` + `cache_read_input_tokens`), `cachedInputTokens` the part read
 *   from the cache, which the engine prices at the model's cached rate.
 * A model with the `reasoning` capability thinks (`thinking: enabled`, 2,048 budget tokens); its thinking blocks
 * stream as reasoning parts.
 */

const MODULE = "Anthropic"

/** What a reply may hold; above the thinking budget, as Anthropic requires. */
export const MAX_TOKENS = 8192
export const THINKING_BUDGET = 2048

const EPHEMERAL = { type: "ephemeral" } as const

/** The prompt with cache breakpoints on the system message and on the last message. */
export const withCacheControl = (prompt: unknown): unknown => {
  if (!Array.isArray(prompt)) return prompt
  const messages = prompt as ReadonlyArray<Prompt.MessageEncoded>
  const mark = (message: Prompt.MessageEncoded): Prompt.MessageEncoded =>
    ({
      ...message,
      options: { ...message.options, anthropic: { ...(message.options?.anthropic as object), cacheControl: EPHEMERAL } }
    }) as Prompt.MessageEncoded
  const lastSystem = messages.map((m) => m.role).lastIndexOf("system")
  return messages.map((message, index) =>
    index === lastSystem || (index === messages.length - 1 && message.role !== "system") ? mark(message) : message
  )
}

/** Anthropic's `input_tokens` leaves out what was written to and read from the cache; ours is the whole prompt. */
const wholePrompt = (part: any): any => {
  if (part?.type !== "finish") return part
  const meta = part.metadata?.anthropic?.usage ?? {}
  const read = Number(meta.cache_read_input_tokens ?? part.usage?.cachedInputTokens ?? 0)
  const written = Number(meta.cache_creation_input_tokens ?? 0)
  const input = (part.usage?.inputTokens ?? 0) + read + written
  return {
    ...part,
    usage: {
      ...part.usage,
      inputTokens: input,
      cachedInputTokens: read,
      totalTokens: input + (part.usage?.outputTokens ?? 0)
    }
  }
}

/**
 * `@effect/ai-anthropic` writes every tool result as `JSON.stringify(result)`, so a result the caller sent as text
 * ("42", a chat's `role: "tool"` content) reached Claude JSON-quoted (`"\"42\""`). Text results go as the text
 * (issue 44 gap 10); structured results stay JSON, which is what they are.
 */
export const unquoteToolResults = (body: unknown): unknown => {
  const messages = (body as { messages?: unknown })?.messages
  if (!Array.isArray(messages)) return body
  let changed = false
  const fixed = messages.map((message) => {
    if (!Array.isArray(message?.content)) return message
    const content = message.content.map((block: any) => {
      if (block?.type !== "tool_result" || typeof block.content !== "string") return block
      let parsed: unknown
      try {
        parsed = JSON.parse(block.content)
      } catch {
        return block
      }
      if (typeof parsed !== "string") return block
      changed = true
      return { ...block, content: parsed }
    })
    return { ...message, content }
  })
  return changed ? { ...(body as object), messages: fixed } : body
}

const decoder = new TextDecoder()

/** The request body with its text tool results unquoted (`unquoteToolResults`). */
const plainToolResults = (client: HttpClient.HttpClient): HttpClient.HttpClient =>
  HttpClient.mapRequest(client, (request) => {
    if (request.body._tag !== "Uint8Array") return request
    let body: unknown
    try {
      body = JSON.parse(decoder.decode(request.body.body))
    } catch {
      return request
    }
    const fixed = unquoteToolResults(body)
    return fixed === body ? request : HttpClientRequest.bodyUnsafeJson(request, fixed)
  })

const forcesTool = (choice: unknown): boolean =>
  choice === "required" ||
  (typeof choice === "object" && choice !== null && ("tool" in choice || (choice as { mode?: unknown }).mode === "required"))

export const make = (
  options: Options & { readonly reasoning: boolean }
): Effect.Effect<LanguageModel.Service, never, import("@effect/platform/HttpClient").HttpClient> =>
  Effect.gen(function*() {
    const idle = Duration.decode(options.idleTimeout)
    const total = Duration.decode(options.requestTimeout)
    const baseUrl = options.baseUrl.replace(/\/+$/, "")
    const [AnthropicClient, AnthropicLanguageModel] = yield* Effect.promise(() =>
      Promise.all([import("@effect/ai-anthropic/AnthropicClient"), import("@effect/ai-anthropic/AnthropicLanguageModel")])
    )
    // The scope only bounds the library's header-redaction setting; the client outlives it.
    const client = yield* Effect.scoped(AnthropicClient.make({
      apiKey: Option.getOrUndefined(options.apiKey),
      apiUrl: baseUrl,
      transformClient: (http) => idleGuard(idle)(plainToolResults(http))
    }))
    const model = yield* AnthropicLanguageModel.make({
      model: options.model,
      config: {
        max_tokens: MAX_TOKENS,
        ...(options.reasoning ? { thinking: { type: "enabled", budget_tokens: THINKING_BUDGET } } : {})
      }
    }).pipe(Effect.provideService(AnthropicClient.AnthropicClient, client))

    // Anthropic refuses thinking with a forced tool choice (`any`, `tool`): such a call goes without thinking.
    const unforced = <A, E, R>(request: any, stream: Stream.Stream<A, E, R>) =>
      options.reasoning && forcesTool(request?.toolChoice)
        ? stream.pipe(Stream.provideService(AnthropicLanguageModel.Config, 
          // `thinking: undefined` overrides the model's configured thinking for this call; the type has no undefined.
          { thinking: undefined } as unknown as Context.Tag.Service<typeof AnthropicLanguageModel.Config>
        ))
        : stream
    const cached: LanguageModel.Service = {
      ...model,
      generateText: (request) => model.generateText({ ...request, prompt: withCacheControl(request.prompt) }),
      streamText: (request) =>
        unforced(request, model.streamText({ ...request, prompt: withCacheControl(request.prompt) })).pipe(Stream.map(wholePrompt))
    }
    return guardModel(cached, {
      module: MODULE,
      idle,
      total,
      shownUrl: displayUrl(`${baseUrl}/v1/messages`),
      scrub: scrubber(options.apiKey)
    })
  })
