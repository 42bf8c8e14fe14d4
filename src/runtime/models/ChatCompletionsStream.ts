import * as AiError from "@effect/ai/AiError"
import type * as Response from "@effect/ai/Response"
import { Either } from "effect"
import * as Wire from "./ChatCompletionsWire.js"
import { excerpt, parseToolArguments, upstreamMessage } from "./Upstream.js"

/**
 * The Chat Completions stream assembler: SSE `data` payloads, decoded with the chunk Schema
 * (`ChatCompletionsWire.ts`), turned into `@effect/ai` stream parts. Synchronous and free of I/O so the grammar of
 * the upstream dialect can be reasoned about (and tested) on its own.
 */

const MODULE = "ChatCompletions"

interface PendingCall {
  id: string
  name: string
  args: string
  started: boolean
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** A value that says something: `null`, absent and `""` say nothing. */
const num = (value: number | null | undefined): number | undefined => value ?? undefined
const str = (value: string | null | undefined): string | undefined =>
  value === null || value === undefined || value.length === 0 ? undefined : value

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

/** The state of one streamed response. */
export class ChunkDecoder {
  private text: string | undefined
  private reasoning: string | undefined
  private blocks = 0
  private readonly calls = new Map<number, PendingCall>()
  private finishReason: string | undefined
  private usage: Wire.Usage | undefined
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
    let json: unknown
    try {
      json = JSON.parse(data)
    } catch {
      return Either.left(this.malformed(`a stream chunk that is not JSON: ${this.scrub(excerpt(data))}`))
    }
    if (!isRecord(json)) {
      return Either.left(this.malformed(`a stream chunk that is not an object: ${this.scrub(excerpt(data))}`))
    }
    // Before the shape: an error object mid-stream has a shape of its own, whatever the server.
    if (event === "error" || json.error !== undefined && json.error !== null) {
      const message = upstreamMessage(JSON.stringify(json.error ?? json)) ?? "no details"
      return Either.left(
        new AiError.UnknownError({
          module: MODULE,
          method: this.method,
          description: `the model upstream reported an error mid-stream: ${this.scrub(message)}`
        })
      )
    }
    const decoded = Wire.decodeChunk(json)
    if (Either.isLeft(decoded)) {
      return Either.left(
        this.malformed(`a stream chunk of an unexpected shape (${decoded.left}): ${this.scrub(excerpt(data))}`)
      )
    }
    const chunk = decoded.right
    const parts: Array<Response.StreamPartEncoded> = []
    if (chunk.usage !== undefined && chunk.usage !== null) this.usage = chunk.usage
    // Only the first choice: we never ask for n > 1.
    const choice = chunk.choices?.find((c) => (c.index ?? 0) === 0)
    if (choice === undefined) return Either.right(parts)
    const delta: Wire.Delta = choice.delta ?? {}

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

    if (delta.tool_calls !== undefined && delta.tool_calls !== null) {
      this.closeReasoning(parts)
      this.closeText(parts)
      let position = 0
      for (const fragment of delta.tool_calls) {
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

  private malformed(description: string) {
    return new AiError.MalformedOutput({
      module: MODULE,
      method: this.method,
      description: `the model upstream sent ${description}`
    })
  }

  private onToolCallFragment(
    fragment: Wire.ToolCallDelta,
    position: number,
    parts: Array<Response.StreamPartEncoded>
  ): AiError.AiError | undefined {
    // `index` tells parallel calls apart; servers that omit it send each call whole, in order.
    const index = fragment.index ?? position
    const id = str(fragment.id)
    let call = this.calls.get(index)
    if (call === undefined) {
      call = { id: id ?? `${this.streamId}-call-${index}`, name: "", args: "", started: false }
      this.calls.set(index, call)
    } else if (!call.started && id !== undefined) {
      call.id = id
    }
    const name = str(fragment.function?.name)
    if (name !== undefined && call.name === "") call.name = name
    const raw = fragment.function?.arguments
    // Ollama's native form: arguments as an object.
    const args = typeof raw === "string" ? raw : raw === undefined || raw === null ? "" : JSON.stringify(raw)
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
export const asChunk = (body: string): string => {
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
