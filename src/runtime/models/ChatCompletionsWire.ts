import { Either, ParseResult, Schema } from "effect"
import type { toResponseFormat } from "./OutputFormat.js"

/**
 * The Chat Completions wire format: the request we send, and the Schema of the `chat.completion.chunk` objects the
 * upstream streams back. The chunk schema takes what the servers we meet send (OpenAI, vLLM, Ollama, DeepSeek, Qwen,
 * OpenRouter): any field may be missing or `null`, fields we do not read are ignored, and a field we read must have
 * its type, else the chunk is refused (a `MalformedOutput` naming the field).
 */

// =============================================================================
// Request
// =============================================================================

export type ContentPart =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "image_url"; readonly image_url: { readonly url: string } }

export interface ToolCallOut {
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

// =============================================================================
// Stream chunk
// =============================================================================

/** Servers send `null` as often as they leave a field out. */
const maybe = <S extends Schema.Schema.Any>(schema: S) => Schema.optional(Schema.NullOr(schema))

export const Usage = Schema.Struct({
  prompt_tokens: maybe(Schema.Number),
  completion_tokens: maybe(Schema.Number),
  total_tokens: maybe(Schema.Number),
  completion_tokens_details: maybe(Schema.Struct({ reasoning_tokens: maybe(Schema.Number) })),
  /** Prompt-cache hits (OpenAI, DeepSeek's own `prompt_cache_hit_tokens` aside). */
  prompt_tokens_details: maybe(Schema.Struct({ cached_tokens: maybe(Schema.Number) }))
})
export type Usage = typeof Usage.Type

/** One fragment of a streamed tool call. */
export const ToolCallDelta = Schema.Struct({
  /** Tells parallel calls apart; servers that omit it send each call whole, in order. */
  index: maybe(Schema.Number),
  id: maybe(Schema.String),
  type: maybe(Schema.String),
  function: maybe(Schema.Struct({
    name: maybe(Schema.String),
    /** A fragment of JSON text; Ollama's native form sends the whole arguments as an object. */
    arguments: maybe(Schema.Union(Schema.String, Schema.Record({ key: Schema.String, value: Schema.Unknown })))
  }))
})
export type ToolCallDelta = typeof ToolCallDelta.Type

export const Delta = Schema.Struct({
  role: maybe(Schema.String),
  content: maybe(Schema.String),
  /** DeepSeek and Qwen name the thinking `reasoning_content`; vLLM and OpenRouter `reasoning`. */
  reasoning_content: maybe(Schema.String),
  reasoning: maybe(Schema.String),
  tool_calls: maybe(Schema.Array(ToolCallDelta))
})
export type Delta = typeof Delta.Type

export const Choice = Schema.Struct({
  index: maybe(Schema.Number),
  delta: maybe(Delta),
  finish_reason: maybe(Schema.String)
})

/** A `chat.completion.chunk`; the trailing one that `include_usage` asks for has no choices, only `usage`. */
export const Chunk = Schema.Struct({
  choices: maybe(Schema.Array(Choice)),
  usage: maybe(Usage)
})
export type Chunk = typeof Chunk.Type

const decode = Schema.decodeUnknownEither(Chunk)

/** The chunk, or what is wrong with it first (`choices.0.delta.content: Expected string, actual 5`). */
export const decodeChunk = (json: unknown): Either.Either<Chunk, string> =>
  Either.mapLeft(decode(json, { errors: "first" }), (error) =>
    ParseResult.ArrayFormatter.formatErrorSync(error)
      .map((issue) => `${issue.path.join(".")}: ${issue.message}`)
      .join("; "))
