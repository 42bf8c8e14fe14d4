import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Response from "@effect/ai/Response"
import * as Tool from "@effect/ai/Tool"
import { blockEnd, blockStart, toolDescription, toolParameters } from "./AdapterParts.js"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { AwsV4Signer } from "aws4fetch"
import { Clock, Duration, Effect, Either, Encoding, Option, Redacted, Stream } from "effect"
import { EventStreamDecoder } from "./AwsEventStream.js"
import type { Options } from "./ChatCompletions.js"
import { collectParts, mapFinishReason } from "./ChatCompletionsStream.js"
import { displayUrl, excerpt, executeUpstream, parseToolArguments, scrubber, statusError, timeoutError, tolerateToolArguments, transportCause, upstreamMessage, UpstreamTimeout } from "./Upstream.js"

/**
 * Amazon Bedrock's Converse API, streamed: `POST {baseUrl}/model/{modelId}/converse-stream`, answered in the binary
 * `application/vnd.amazon.eventstream` framing (`AwsEventStream.ts`). Signed with SigV4 (`aws4fetch`) when the provider has AWS
 * credentials, else sent with a Bedrock API key as `Authorization: Bearer`. Events by `:event-type`:
 * `messageStart`, `contentBlockStart` (`start.toolUse`), `contentBlockDelta` (`text`, `toolUse.input` fragments,
 * `reasoningContent.text` / `.signature`), `contentBlockStop`, `messageStop` (`stopReason`), `metadata` (`usage`
 * with `cacheReadInputTokens`); a `:message-type` of `exception` fails the stream (throttling, model stream errors).
 */

const MODULE = "Bedrock"

export interface AwsSettings {
  readonly region: string
  readonly accessKeyId: string
  readonly secretAccessKey: Redacted.Redacted
  readonly sessionToken: Option.Option<Redacted.Redacted>
}

const THINKING = { thinking: { type: "enabled", budget_tokens: 2048 } }

const STOP: Readonly<Record<string, string>> = {
  end_turn: "stop",
  stop_sequence: "stop",
  tool_use: "tool_calls",
  max_tokens: "length",
  guardrail_intervened: "content_filter",
  content_filtered: "content_filter"
}

export interface AwsCredentials {
  readonly accessKeyId: string
  readonly secretAccessKey: string
  readonly sessionToken?: string | undefined
}

/**
 * The headers of a request signed with AWS Signature Version 4 by `aws4fetch`: the given ones, `x-amz-date`,
 * `x-amz-security-token` when there is one, and `authorization`. Every header given is signed (`content-type`
 * among them, which aws4fetch leaves out unless told). The canonical URI encodes each path segment once more, as
 * every service but S3 expects.
 */
export const signV4 = async (options: {
  readonly method: string
  readonly url: URL
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
  readonly service: string
  readonly region: string
  readonly credentials: AwsCredentials
  readonly now: Date
}): Promise<Record<string, string>> => {
  const signer = new AwsV4Signer({
    method: options.method,
    url: options.url.toString(),
    headers: { ...options.headers },
    body: options.body,
    accessKeyId: options.credentials.accessKeyId,
    secretAccessKey: options.credentials.secretAccessKey,
    ...(options.credentials.sessionToken !== undefined ? { sessionToken: options.credentials.sessionToken } : {}),
    service: options.service,
    region: options.region,
    datetime: options.now.toISOString().replace(/[:-]|\.\d{3}/g, ""),
    allHeaders: true
  })
  return Object.fromEntries((await signer.sign()).headers)
}

const imageFormat = (mediaType: string) => mediaType.replace(/^image\//, "").replace("jpg", "jpeg")

export const encodeRequest = (
  options: Pick<LanguageModel.ProviderOptions, "prompt" | "tools" | "toolChoice">,
  reasoning: boolean,
  method = "encodeRequest"
): Either.Either<Record<string, unknown>, AiError.MalformedInput> => {
  const system: Array<unknown> = []
  const messages: Array<{ role: "user" | "assistant"; content: Array<unknown> }> = []
  const push = (role: "user" | "assistant", content: Array<unknown>) => {
    if (content.length === 0) return
    const last = messages[messages.length - 1]
    // Converse wants turns to alternate: consecutive blocks of one role are one message.
    if (last !== undefined && last.role === role) last.content.push(...content)
    else messages.push({ role, content })
  }
  for (const message of options.prompt.content) {
    switch (message.role) {
      case "system":
        system.push({ text: message.content })
        break
      case "user": {
        const content: Array<unknown> = []
        for (const part of message.content) {
          if (part.type === "text") content.push({ text: part.text })
          else if (part.mediaType.startsWith("image/") && !(part.data instanceof URL)) {
            const bytes = part.data instanceof Uint8Array ? Encoding.encodeBase64(part.data) : part.data.replace(/^data:[^,]*,/, "")
            content.push({ image: { format: imageFormat(part.mediaType), source: { bytes } } })
          } else {
            return Either.left(new AiError.MalformedInput({ module: MODULE, method, description: `Bedrock cannot carry a file of type ${part.mediaType} here` }))
          }
        }
        push("user", content)
        break
      }
      case "assistant": {
        const content: Array<unknown> = []
        for (const part of message.content) {
          if (part.type === "reasoning") {
            const signature = (part.options as { anthropic?: { signature?: unknown } }).anthropic?.signature
            if (typeof signature === "string") content.push({ reasoningContent: { reasoningText: { text: part.text, signature } } })
          } else if (part.type === "text" && part.text.length > 0) content.push({ text: part.text })
          else if (part.type === "tool-call" && !part.providerExecuted) {
            content.push({ toolUse: { toolUseId: part.id, name: part.name, input: part.params ?? {} } })
          }
        }
        push("assistant", content)
        break
      }
      case "tool":
        push(
          "user",
          message.content.map((part) => ({
            toolResult: {
              toolUseId: part.id,
              content: [typeof part.result === "object" && part.result !== null && !Array.isArray(part.result)
                ? { json: part.result }
                : { text: typeof part.result === "string" ? part.result : JSON.stringify(part.result ?? null) }],
              status: part.isFailure ? "error" : "success"
            }
          }))
        )
        break
    }
  }
  const body: Record<string, unknown> = {
    messages,
    ...(system.length > 0 ? { system } : {}),
    inferenceConfig: { maxTokens: 8192 },
    ...(reasoning ? { additionalModelRequestFields: THINKING } : {})
  }
  if (options.tools.length === 0) return Either.right(body)
  const tools: Array<unknown> = []
  for (const tool of options.tools) {
    if (Tool.isProviderDefined(tool)) {
      return Either.left(new AiError.MalformedInput({ module: MODULE, method, description: `the tool ${tool.name} cannot be used with Bedrock` }))
    }
    const description = toolDescription(tool)
    tools.push({ toolSpec: { name: tool.name, ...(description !== undefined ? { description } : {}), inputSchema: { json: toolParameters(tool) } } })
  }
  const choice = options.toolChoice
  // Converse has no "none": the tools stay (the history may hold calls) and the model chooses.
  const toolChoice = typeof choice === "string"
    ? choice === "required" ? { any: {} } : { auto: {} }
    : "tool" in choice
    ? { tool: { name: choice.tool } }
    : choice.mode === "required" ? { any: {} } : { auto: {} }
  return Either.right({ ...body, toolConfig: { tools, toolChoice } })
}

/** One ConverseStream's state: open blocks by index, tool calls being streamed, the stop reason and usage. */
export class ConverseDecoder {
  private readonly blocks = new Map<number, { kind: "text" | "reasoning" | "tool"; id: string; name?: string; args: string }>()
  private stop: string | undefined
  private usage: Record<string, number | undefined> | undefined
  private calls = 0
  constructor(private readonly streamId: string, private readonly tools: ReadonlySet<string>, private readonly method: string) {}

  private fail(description: string) {
    return Either.left(new AiError.UnknownError({ module: MODULE, method: this.method, description }))
  }

  onEvent(
    headers: Readonly<Record<string, unknown>>,
    payloadText: string
  ): Either.Either<Array<Response.StreamPartEncoded>, AiError.AiError> {
    const type = headers[":message-type"]
    if (type === "exception" || type === "error") {
      const name = String(headers[":exception-type"] ?? headers[":error-code"] ?? "error")
      return this.fail(`the model upstream reported an error mid-stream: ${name}: ${upstreamMessage(payloadText) ?? "no details"}`)
    }
    let json: any
    try {
      json = JSON.parse(payloadText)
    } catch {
      return Either.left(new AiError.MalformedOutput({ module: MODULE, method: this.method, description: `the model upstream sent an event that is not JSON: ${excerpt(payloadText, 80)}` }))
    }
    const parts: Array<Response.StreamPartEncoded> = []
    const index = Number(json?.contentBlockIndex ?? 0)
    switch (headers[":event-type"]) {
      case "contentBlockStart": {
        const start = json?.start?.toolUse
        if (start !== undefined) {
          const name = String(start.name ?? "")
          if (!this.tools.has(name)) {
            return Either.left(new AiError.MalformedOutput({ module: MODULE, method: this.method, description: `the model called a tool it was not offered: ${excerpt(name, 80)}` }))
          }
          const id = String(start.toolUseId ?? `${this.streamId}-call-${index}`)
          this.blocks.set(index, { kind: "tool", id, name, args: "" })
          parts.push({ type: "tool-params-start", id, name, providerExecuted: false })
        }
        break
      }
      case "contentBlockDelta": {
        const delta = json?.delta ?? {}
        let block = this.blocks.get(index)
        const open = (kind: "text" | "reasoning") => {
          if (block === undefined) {
            block = { kind, id: `${this.streamId}-${index}`, args: "" }
            this.blocks.set(index, block)
            parts.push(blockStart(kind, block.id))
          }
          return block
        }
        if (typeof delta.text === "string") parts.push({ type: "text-delta", id: open("text").id, delta: delta.text })
        else if (delta.reasoningContent !== undefined) {
          const b = open("reasoning")
          if (typeof delta.reasoningContent.text === "string") parts.push({ type: "reasoning-delta", id: b.id, delta: delta.reasoningContent.text })
          if (typeof delta.reasoningContent.signature === "string") {
            parts.push({ type: "reasoning-delta", id: b.id, delta: "", metadata: { anthropic: { type: "thinking", signature: delta.reasoningContent.signature } } })
          }
        } else if (delta.toolUse !== undefined && block?.kind === "tool") {
          const input = typeof delta.toolUse.input === "string" ? delta.toolUse.input : JSON.stringify(delta.toolUse.input ?? {})
          block.args += input
          if (input.length > 0) parts.push({ type: "tool-params-delta", id: block.id, delta: input })
        }
        break
      }
      case "contentBlockStop": {
        const block = this.blocks.get(index)
        this.blocks.delete(index)
        if (block?.kind === "tool") {
          parts.push({ type: "tool-params-end", id: block.id })
          parts.push({ type: "tool-call", id: block.id, name: block.name!, params: parseToolArguments(block.args), providerExecuted: false })
          this.calls++
        } else if (block !== undefined) parts.push(blockEnd(block.kind, block.id))
        break
      }
      case "messageStop":
        this.stop = String(json?.stopReason ?? "end_turn")
        break
      case "metadata":
        this.usage = json?.usage
        break
    }
    return Either.right(parts)
  }

  onEnd(): Either.Either<Array<Response.StreamPartEncoded>, AiError.AiError> {
    if (this.stop === undefined) return this.fail("the model upstream closed the stream before the response was finished")
    const parts: Array<Response.StreamPartEncoded> = []
    for (const block of this.blocks.values()) if (block.kind !== "tool") parts.push(blockEnd(block.kind, block.id))
    const u = this.usage ?? {}
    const read = u.cacheReadInputTokens ?? 0
    const written = u.cacheWriteInputTokens ?? 0
    const input = u.inputTokens === undefined ? undefined : u.inputTokens + read + written
    const mapped = mapFinishReason(STOP[this.stop] ?? "other")
    parts.push({
      type: "finish",
      reason: this.calls > 0 && mapped === "stop" ? "tool-calls" : mapped,
      usage: { inputTokens: input, outputTokens: u.outputTokens, totalTokens: u.totalTokens, cachedInputTokens: read }
    })
    return Either.right(parts)
  }
}

/** `bedrock-runtime.eu-west-1.amazonaws.com` -> `eu-west-1`. */
export const regionOf = (baseUrl: string, fallback: string) => /bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com/.exec(baseUrl)?.[1] ?? fallback

export const make = (
  options: Options & { readonly reasoning: boolean; readonly aws: Option.Option<AwsSettings> }
): Effect.Effect<LanguageModel.Service, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const idle = Duration.decode(options.idleTimeout)
    const total = Duration.decode(options.requestTimeout)
    const url = `${options.baseUrl.replace(/\/+$/, "")}/model/${encodeURIComponent(options.model)}/converse-stream`
    const shownUrl = displayUrl(url)
    const secrets = [options.apiKey, Option.map(options.aws, (a) => a.secretAccessKey), Option.flatMap(options.aws, (a) => a.sessionToken)]
    const scrubs = secrets.map((secret) => scrubber(secret))
    const scrub = (text: string) => scrubs.reduce((t, s) => s(t), text)
    let streams = 0

    const parts = (provider: LanguageModel.ProviderOptions, method: string) =>
      Stream.unwrap(Effect.gen(function*() {
        const body = JSON.stringify(yield* encodeRequest(provider, options.reasoning, method))
        const idleError = () => timeoutError(MODULE, method, new UpstreamTimeout({ phase: "idle", after: idle }))
        const base = { "content-type": "application/json", accept: "application/vnd.amazon.eventstream" }
        const now = new Date(yield* Clock.currentTimeMillis)
        const headers: Record<string, string> = yield* Option.match(options.aws, {
          onSome: (aws) => {
            const credentials: AwsCredentials = {
              accessKeyId: aws.accessKeyId,
              secretAccessKey: Redacted.value(aws.secretAccessKey),
              sessionToken: Option.getOrUndefined(Option.map(aws.sessionToken, Redacted.value))
            }
            // WebCrypto's HMAC behind a promise; it fails only on arguments we build ourselves.
            return Effect.promise(() =>
              signV4({ method: "POST", url: new URL(url), headers: base, body, service: "bedrock", region: aws.region, credentials, now })
            )
          },
          onNone: () =>
            Effect.succeed(Option.match(options.apiKey, {
              onNone: () => base,
              onSome: (key) => ({ ...base, authorization: `Bearer ${Redacted.value(key)}` })
            }))
        })
        const request = HttpClientRequest.post(url).pipe(
          HttpClientRequest.setHeaders(headers),
          HttpClientRequest.bodyText(body, "application/json")
        )
        const call = { module: MODULE, method, shownUrl, idle, idleError, scrub }
        const response = yield* executeUpstream(client, request, call)
        if (response.status >= 300) return yield* statusError(response, call)
        const converse = new ConverseDecoder(`bedrock-${++streams}`, new Set(provider.tools.map((tool) => tool.name)), method)
        const frames = new EventStreamDecoder()
        const text = new TextDecoder()
        return response.stream.pipe(
          Stream.mapError((error) =>
            new AiError.UnknownError({ module: MODULE, method, description: `the connection to the model upstream failed mid-stream: ${scrub(transportCause(error))}` })
          ),
          Stream.timeoutFail(idleError, idle),
          Stream.mapConcatEffect((chunk) =>
            Effect.suspend(() => {
              let messages
              try {
                messages = frames.feed(chunk)
              } catch (error) {
                return Effect.fail(new AiError.MalformedOutput({ module: MODULE, method, description: `the model upstream sent a broken event-stream frame: ${(error as Error).message}` }))
              }
              const out: Array<Response.StreamPartEncoded> = []
              for (const message of messages) {
                const decoded = converse.onEvent(message.headers, scrub(text.decode(message.payload)))
                if (Either.isLeft(decoded)) return Effect.fail(decoded.left)
                out.push(...decoded.right)
              }
              return Effect.succeed(out)
            })
          ),
          Stream.concat(Stream.fromIterableEffect(Effect.suspend(() => converse.onEnd())))
        )
      })).pipe(
        Stream.interruptWhen(
          Effect.sleep(total).pipe(
            Effect.zipRight(Effect.fail(timeoutError(MODULE, method, new UpstreamTimeout({ phase: "request", after: total }))))
          )
        )
      )

    const service = yield* LanguageModel.make({
      generateText: Effect.fn("Bedrock.generateText")(function*(provider) {
        return collectParts(yield* Stream.runCollect(parts(provider, "generateText")))
      }),
      streamText: (provider) => parts(provider, "streamText").pipe(Stream.withSpan("Bedrock.streamText"))
    })
    return tolerateToolArguments(service)
  })

