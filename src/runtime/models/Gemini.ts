import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import * as Tool from "@effect/ai/Tool"
import { blockDelta, blockEnd, blockStart, toolDescription, toolParameters } from "./AdapterParts.js"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { Duration, Effect, Either, Encoding, Option, Redacted, Stream } from "effect"
import type { Options } from "./ChatCompletions.js"
import { collectParts, mapFinishReason } from "./ChatCompletionsStream.js"
import { displayUrl, excerpt, executeUpstream, scrubber, sseEvents, statusError, timeoutError, tolerateToolArguments, transportCause, upstreamMessage, UpstreamTimeout } from "./Upstream.js"

/**
 * Google's Gemini API: `POST {baseUrl}/v1beta/models/{model}:streamGenerateContent?alt=sse`, key in
 * `x-goog-api-key`. Written against the wire format rather than `@effect/ai-google`, whose 0.15 line is built for
 * `@effect/ai` 0.36 (docs/models.md). Each SSE event is a `GenerateContentResponse`:
 * - `candidates[0].content.parts[]`: `{text}` is answer text, `{text, thought: true}` a thought summary (reasoning
 *   parts), `{functionCall: {name, args}}` a whole tool call (Gemini does not stream arguments: the call is told as
 *   one `tool-params-delta`);
 * - `candidates[0].finishReason`; `usageMetadata` (`promptTokenCount` includes `cachedContentTokenCount`, thoughts
 *   are output tokens);
 * - `{error: {...}}` fails the stream.
 */

const MODULE = "Gemini"

const malformed = (method: string, description: string) => new AiError.MalformedInput({ module: MODULE, method, description })

const inline = (part: Prompt.FilePart) => {
  const data = part.data
  if (data instanceof URL) return { fileData: { mimeType: part.mediaType, fileUri: data.href } }
  return {
    inlineData: {
      mimeType: part.mediaType,
      data: data instanceof Uint8Array ? Encoding.encodeBase64(data) : data.replace(/^data:[^,]*,/, "")
    }
  }
}

/** The request body for a prompt and its tools. */
export const encodeRequest = (
  options: Pick<LanguageModel.ProviderOptions, "prompt" | "tools" | "toolChoice">,
  reasoning: boolean,
  method = "encodeRequest"
): Either.Either<Record<string, unknown>, AiError.MalformedInput> => {
  const system: Array<string> = []
  const contents: Array<{ role: "user" | "model"; parts: Array<unknown> }> = []
  const push = (role: "user" | "model", parts: Array<unknown>) => {
    if (parts.length === 0) return
    const last = contents[contents.length - 1]
    // Gemini wants turns to alternate: consecutive parts of one role are one turn.
    if (last !== undefined && last.role === role) last.parts.push(...parts)
    else contents.push({ role, parts })
  }
  const names = new Map<string, string>()
  for (const message of options.prompt.content) {
    switch (message.role) {
      case "system":
        system.push(message.content)
        break
      case "user":
        push("user", message.content.map((part) => part.type === "text" ? { text: part.text } : inline(part)))
        break
      case "assistant": {
        const parts: Array<unknown> = []
        for (const part of message.content) {
          if (part.type === "text" && part.text.length > 0) parts.push({ text: part.text })
          else if (part.type === "tool-call" && !part.providerExecuted) {
            names.set(part.id, part.name)
            const signature = (part.options as { google?: { thoughtSignature?: unknown } }).google?.thoughtSignature
            parts.push({
              functionCall: { name: part.name, args: part.params ?? {} },
              ...(typeof signature === "string" ? { thoughtSignature: signature } : {})
            })
          }
        }
        push("model", parts)
        break
      }
      case "tool":
        push(
          "user",
          message.content.map((part) => ({
            functionResponse: {
              name: names.get(part.id) ?? part.name,
              // `response` must be an object.
              response: typeof part.result === "object" && part.result !== null && !Array.isArray(part.result)
                ? part.result
                : { result: part.result ?? null }
            }
          }))
        )
        break
    }
  }
  const body: Record<string, unknown> = {
    contents,
    ...(system.length > 0 ? { systemInstruction: { parts: [{ text: system.join("\n\n") }] } } : {}),
    ...(reasoning ? { generationConfig: { thinkingConfig: { includeThoughts: true } } } : {})
  }
  if (options.tools.length === 0) return Either.right(body)
  const declarations: Array<unknown> = []
  for (const tool of options.tools) {
    if (Tool.isProviderDefined(tool)) return Either.left(malformed(method, `the tool ${tool.name} cannot be used with Gemini`))
    const description = toolDescription(tool)
    declarations.push({
      name: tool.name,
      ...(description !== undefined ? { description } : {}),
      parametersJsonSchema: toolParameters(tool)
    })
  }
  const choice = options.toolChoice
  const functionCallingConfig = typeof choice === "string"
    ? { mode: choice === "none" ? "NONE" : choice === "required" ? "ANY" : "AUTO" }
    : "tool" in choice
    ? { mode: "ANY", allowedFunctionNames: [choice.tool] }
    : { mode: choice.mode === "required" ? "ANY" : "AUTO", allowedFunctionNames: [...choice.oneOf] }
  return Either.right({ ...body, tools: [{ functionDeclarations: declarations }], toolConfig: { functionCallingConfig } })
}

const FINISH: Readonly<Record<string, string>> = {
  STOP: "stop",
  MAX_TOKENS: "length",
  SAFETY: "content_filter",
  RECITATION: "content_filter",
  BLOCKLIST: "content_filter",
  PROHIBITED_CONTENT: "content_filter",
  SPII: "content_filter"
}

/** One stream's state: which block is open, the calls seen, the last usage. */
export class EventDecoder {
  private open: "text" | "reasoning" | undefined
  private blocks = 0
  private calls = 0
  private finish: string | undefined
  private usage: Record<string, number | undefined> | undefined
  constructor(private readonly streamId: string, private readonly tools: ReadonlySet<string>, private readonly method: string) {}

  private switchTo(kind: "text" | "reasoning" | undefined, parts: Array<Response.StreamPartEncoded>) {
    if (this.open === kind) return
    if (this.open !== undefined) parts.push(blockEnd(this.open, `${this.streamId}-${this.blocks}`))
    this.open = kind
    if (kind !== undefined) parts.push(blockStart(kind, `${this.streamId}-${++this.blocks}`))
  }

  onEvent(data: string): Either.Either<Array<Response.StreamPartEncoded>, AiError.AiError> {
    let json: any
    try {
      json = JSON.parse(data)
    } catch {
      return Either.left(new AiError.MalformedOutput({ module: MODULE, method: this.method, description: `the model upstream sent an event that is not JSON: ${excerpt(data, 80)}` }))
    }
    if (json?.error !== undefined) {
      return Either.left(new AiError.UnknownError({ module: MODULE, method: this.method, description: `the model upstream reported an error mid-stream: ${upstreamMessage(data) ?? "no details"}` }))
    }
    const parts: Array<Response.StreamPartEncoded> = []
    const candidate = json?.candidates?.[0]
    for (const part of candidate?.content?.parts ?? []) {
      if (typeof part?.text === "string" && part.text.length > 0) {
        const kind = part.thought === true ? "reasoning" : "text"
        this.switchTo(kind, parts)
        parts.push(blockDelta(kind, `${this.streamId}-${this.blocks}`, part.text))
      } else if (part?.functionCall !== undefined) {
        this.switchTo(undefined, parts)
        const name = String(part.functionCall.name ?? "")
        if (!this.tools.has(name)) {
          return Either.left(new AiError.MalformedOutput({ module: MODULE, method: this.method, description: `the model called a tool it was not offered: ${excerpt(name, 80)}` }))
        }
        const id = typeof part.functionCall.id === "string" ? part.functionCall.id : `${this.streamId}-call-${++this.calls}`
        const params = part.functionCall.args ?? {}
        parts.push({ type: "tool-params-start", id, name, providerExecuted: false })
        parts.push({ type: "tool-params-delta", id, delta: JSON.stringify(params) })
        parts.push({ type: "tool-params-end", id })
        parts.push({
          type: "tool-call",
          id,
          name,
          params,
          providerExecuted: false,
          ...(typeof part.thoughtSignature === "string" ? { metadata: { google: { thoughtSignature: part.thoughtSignature } } } : {})
        })
        this.calls++
      }
    }
    if (typeof candidate?.finishReason === "string") this.finish = candidate.finishReason
    if (json?.usageMetadata !== undefined) this.usage = json.usageMetadata
    return Either.right(parts)
  }

  onEnd(): Either.Either<Array<Response.StreamPartEncoded>, AiError.AiError> {
    if (this.finish === undefined) {
      return Either.left(new AiError.UnknownError({ module: MODULE, method: this.method, description: "the model upstream closed the stream before the response was finished" }))
    }
    const parts: Array<Response.StreamPartEncoded> = []
    this.switchTo(undefined, parts)
    const mapped = mapFinishReason(FINISH[this.finish] ?? "other")
    const u = this.usage ?? {}
    const output = u.candidatesTokenCount === undefined && u.thoughtsTokenCount === undefined
      ? undefined
      : (u.candidatesTokenCount ?? 0) + (u.thoughtsTokenCount ?? 0)
    parts.push({
      type: "finish",
      reason: this.calls > 0 && mapped === "stop" ? "tool-calls" : mapped,
      usage: {
        inputTokens: u.promptTokenCount,
        outputTokens: output,
        totalTokens: u.totalTokenCount,
        reasoningTokens: u.thoughtsTokenCount,
        cachedInputTokens: u.cachedContentTokenCount
      }
    })
    return Either.right(parts)
  }
}

export const make = (
  options: Options & { readonly reasoning: boolean }
): Effect.Effect<LanguageModel.Service, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const idle = Duration.decode(options.idleTimeout)
    const total = Duration.decode(options.requestTimeout)
    const url = `${options.baseUrl.replace(/\/+$/, "")}/v1beta/models/${encodeURIComponent(options.model)}:streamGenerateContent?alt=sse`
    const shownUrl = displayUrl(url)
    const scrub = scrubber(options.apiKey)
    let streams = 0

    const parts = (provider: LanguageModel.ProviderOptions, method: string) =>
      Stream.unwrap(Effect.gen(function*() {
        const body = yield* encodeRequest(provider, options.reasoning, method)
        const idleError = () => timeoutError(MODULE, method, new UpstreamTimeout({ phase: "idle", after: idle }))
        const request = HttpClientRequest.post(url).pipe(
          HttpClientRequest.bodyUnsafeJson(body),
          Option.match(options.apiKey, {
            onNone: () => (request: HttpClientRequest.HttpClientRequest) => request,
            onSome: (key) => HttpClientRequest.setHeader("x-goog-api-key", Redacted.value(key))
          })
        )
        const call = { module: MODULE, method, shownUrl, idle, idleError, scrub }
        const response = yield* executeUpstream(client, request, call)
        if (response.status >= 300) return yield* statusError(response, call)
        const decoder = new EventDecoder(`gemini-${++streams}`, new Set(provider.tools.map((tool) => tool.name)), method)
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
        return sseEvents<AiError.AiError, never>(bytes, () =>
          new AiError.MalformedOutput({ module: MODULE, method, description: "the model upstream sent an event larger than 10 MiB" })).pipe(
            Stream.mapConcatEffect((event) => decoder.onEvent(event.data)),
            Stream.concat(Stream.fromIterableEffect(Effect.suspend(() => decoder.onEnd())))
          )
      })).pipe(
        Stream.interruptWhen(
          Effect.sleep(total).pipe(
            Effect.zipRight(Effect.fail(timeoutError(MODULE, method, new UpstreamTimeout({ phase: "request", after: total }))))
          )
        )
      )

    const service = yield* LanguageModel.make({
      generateText: Effect.fn("Gemini.generateText")(function*(provider) {
        return collectParts(yield* Stream.runCollect(parts(provider, "generateText")))
      }),
      streamText: (provider) => parts(provider, "streamText").pipe(Stream.withSpan("Gemini.streamText"))
    })
    return tolerateToolArguments(service)
  })
