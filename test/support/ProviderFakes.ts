import { encodeMessage } from "../../src/runtime/models/AwsEventStream.js"
import { type Write } from "./MockUpstream.js"
import * as Mock from "./MockUpstream.js"

/**
 * Each provider kind's documented streaming format, for `MockUpstream` to replay (issue 31 item 5). Built from the
 * providers' public API references:
 * - Anthropic Messages streaming: `message_start`, `content_block_start/delta/stop` (`thinking_delta`,
 *   `signature_delta`, `text_delta`, `input_json_delta`), `message_delta` with `stop_reason` and output usage,
 *   `message_stop`, and `ping` in between; errors as `event: error`.
 * - Gemini `streamGenerateContent?alt=sse`: `data: <GenerateContentResponse>` events separated by CRLF CRLF, thought
 *   summaries as parts with `thought: true`, whole `functionCall` parts, `usageMetadata` on the last events.
 * - OpenRouter: Chat Completions chunks with `delta.reasoning`, `: OPENROUTER PROCESSING` comment lines, usage with
 *   `prompt_tokens_details.cached_tokens`, `data: [DONE]`.
 */

export interface Turn {
  readonly thinking?: string
  readonly text?: string
  readonly tool?: { readonly id: string; readonly name: string; readonly args: Record<string, unknown> }
  readonly usage: { readonly input: number; readonly output: number; readonly cached?: number; readonly cacheWrite?: number }
}

const ev = (event: string, data: unknown) => Mock.sse(data, event)

/** Splits a JSON text into pieces, as a provider streams arguments. */
const pieces = (text: string, size = 7) => {
  const out: Array<string> = []
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size))
  return out
}

// -----------------------------------------------------------------------------
// Anthropic
// -----------------------------------------------------------------------------

export const anthropicStart = (turn: Turn, model = "claude-sonnet-4-5") =>
  ev("message_start", {
    type: "message_start",
    message: {
      id: "msg_01XFDUDYJgAACzvnptvVoYEL",
      type: "message",
      role: "assistant",
      content: [],
      model,
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: turn.usage.input,
        cache_creation_input_tokens: turn.usage.cacheWrite ?? 0,
        cache_read_input_tokens: turn.usage.cached ?? 0,
        output_tokens: 1
      }
    }
  })

export const anthropic = (turn: Turn): Array<Write> => {
  const writes: Array<Write> = [anthropicStart(turn), ev("ping", { type: "ping" })]
  let index = 0
  if (turn.thinking !== undefined) {
    writes.push(
      ev("content_block_start", { type: "content_block_start", index, content_block: { type: "thinking", thinking: "", signature: "" } }),
      ...pieces(turn.thinking).map((thinking) =>
        ev("content_block_delta", { type: "content_block_delta", index, delta: { type: "thinking_delta", thinking } })
      ),
      ev("content_block_delta", { type: "content_block_delta", index, delta: { type: "signature_delta", signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds" } }),
      ev("content_block_stop", { type: "content_block_stop", index })
    )
    index++
  }
  if (turn.text !== undefined) {
    writes.push(
      ev("content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } }),
      ...pieces(turn.text).map((text) =>
        ev("content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text } })
      ),
      ev("content_block_stop", { type: "content_block_stop", index })
    )
    index++
  }
  if (turn.tool !== undefined) {
    writes.push(
      ev("content_block_start", { type: "content_block_start", index, content_block: { type: "tool_use", id: turn.tool.id, name: turn.tool.name, input: {} } }),
      ev("content_block_delta", { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: "" } }),
      ...pieces(JSON.stringify(turn.tool.args)).map((partial_json) =>
        ev("content_block_delta", { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json } })
      ),
      ev("content_block_stop", { type: "content_block_stop", index })
    )
  }
  writes.push(
    ev("message_delta", {
      type: "message_delta",
      delta: { stop_reason: turn.tool !== undefined ? "tool_use" : "end_turn", stop_sequence: null },
      usage: { output_tokens: turn.usage.output }
    }),
    ev("message_stop", { type: "message_stop" })
  )
  return writes
}

/** Anthropic's mid-stream error event (e.g. `overloaded_error`). */
export const anthropicError = (type = "overloaded_error", message = "Overloaded") =>
  ev("error", { type: "error", error: { type, message } })

// -----------------------------------------------------------------------------
// Gemini
// -----------------------------------------------------------------------------

const gemini1 = (parts: Array<unknown>, extra: Record<string, unknown> = {}) =>
  `data: ${JSON.stringify({
    candidates: [{ content: { parts, role: "model" }, index: 0, ...extra }],
    modelVersion: "gemini-2.5-flash",
    responseId: "mcBxaKfHNpCfz7IPqN2T8Ao"
  })}\r\n\r\n`

export const gemini = (turn: Turn): Array<Write> => {
  const writes: Array<Write> = []
  if (turn.thinking !== undefined) writes.push(gemini1([{ text: turn.thinking, thought: true }]))
  if (turn.text !== undefined) for (const text of pieces(turn.text, 12)) writes.push(gemini1([{ text }]))
  const last: Array<unknown> = turn.tool === undefined
    ? [{ text: "" }]
    : [{ functionCall: { name: turn.tool.name, args: turn.tool.args }, thoughtSignature: "CiQBVKhc7nO6Hl1Zyb5fT0SRm" }]
  writes.push(`data: ${JSON.stringify({
    candidates: [{ content: { parts: last, role: "model" }, finishReason: "STOP", index: 0 }],
    usageMetadata: {
      promptTokenCount: turn.usage.input,
      candidatesTokenCount: turn.usage.output,
      totalTokenCount: turn.usage.input + turn.usage.output,
      ...(turn.usage.cached !== undefined ? { cachedContentTokenCount: turn.usage.cached } : {}),
      ...(turn.thinking !== undefined ? { thoughtsTokenCount: 0 } : {})
    },
    modelVersion: "gemini-2.5-flash",
    responseId: "mcBxaKfHNpCfz7IPqN2T8Ao"
  })}\r\n\r\n`)
  return writes
}

// -----------------------------------------------------------------------------
// OpenRouter (and any Chat Completions server)
// -----------------------------------------------------------------------------

const orChunk = (delta: Record<string, unknown>, finish: string | null = null, extra: Record<string, unknown> = {}) =>
  Mock.sse({
    id: "gen-1747318000-abc",
    provider: "Anthropic",
    model: "anthropic/claude-sonnet-4.5",
    object: "chat.completion.chunk",
    created: 1747318000,
    choices: [{ index: 0, delta, finish_reason: finish, native_finish_reason: finish }],
    ...extra
  })

export const openrouter = (turn: Turn): Array<Write> => {
  const writes: Array<Write> = [": OPENROUTER PROCESSING\n\n"]
  if (turn.thinking !== undefined) {
    for (const reasoning of pieces(turn.thinking)) writes.push(orChunk({ role: "assistant", content: "", reasoning }))
  }
  if (turn.text !== undefined) for (const content of pieces(turn.text)) writes.push(orChunk({ role: "assistant", content }))
  if (turn.tool !== undefined) {
    const args = pieces(JSON.stringify(turn.tool.args))
    writes.push(orChunk({ tool_calls: [{ index: 0, id: turn.tool.id, type: "function", function: { name: turn.tool.name, arguments: "" } }] }))
    for (const a of args) writes.push(orChunk({ tool_calls: [{ index: 0, function: { arguments: a } }] }))
  }
  writes.push(
    orChunk({}, turn.tool !== undefined ? "tool_calls" : "stop"),
    orChunk({}, null, {
      choices: [],
      usage: {
        prompt_tokens: turn.usage.input,
        completion_tokens: turn.usage.output,
        total_tokens: turn.usage.input + turn.usage.output,
        prompt_tokens_details: { cached_tokens: turn.usage.cached ?? 0 },
        completion_tokens_details: { reasoning_tokens: 0 }
      }
    }),
    Mock.DONE
  )
  return writes
}

// -----------------------------------------------------------------------------
// Bedrock ConverseStream (binary event-stream frames)
// -----------------------------------------------------------------------------

export const bedrockFrame = (eventType: string, payload: unknown) =>
  encodeMessage(
    { ":event-type": eventType, ":content-type": "application/json", ":message-type": "event" },
    new TextEncoder().encode(JSON.stringify({ ...(payload as object), p: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123" }))
  )

/** Bedrock's exception frame (`:message-type: exception`), e.g. `throttlingException`. */
export const bedrockException = (type = "throttlingException", message = "Too many requests, please wait before trying again.") =>
  encodeMessage(
    { ":exception-type": type, ":content-type": "application/json", ":message-type": "exception" },
    new TextEncoder().encode(JSON.stringify({ message }))
  )

export const bedrock = (turn: Turn): Array<Write> => {
  const writes: Array<Write> = [bedrockFrame("messageStart", { role: "assistant" })]
  let index = 0
  if (turn.thinking !== undefined) {
    for (const text of pieces(turn.thinking)) writes.push(bedrockFrame("contentBlockDelta", { contentBlockIndex: index, delta: { reasoningContent: { text } } }))
    writes.push(
      bedrockFrame("contentBlockDelta", { contentBlockIndex: index, delta: { reasoningContent: { signature: "ErcBCkgIBRABGAIiQMx0" } } }),
      bedrockFrame("contentBlockStop", { contentBlockIndex: index })
    )
    index++
  }
  if (turn.text !== undefined) {
    for (const text of pieces(turn.text)) writes.push(bedrockFrame("contentBlockDelta", { contentBlockIndex: index, delta: { text } }))
    writes.push(bedrockFrame("contentBlockStop", { contentBlockIndex: index }))
    index++
  }
  if (turn.tool !== undefined) {
    writes.push(bedrockFrame("contentBlockStart", { contentBlockIndex: index, start: { toolUse: { toolUseId: turn.tool.id, name: turn.tool.name } } }))
    for (const input of pieces(JSON.stringify(turn.tool.args))) {
      writes.push(bedrockFrame("contentBlockDelta", { contentBlockIndex: index, delta: { toolUse: { input } } }))
    }
    writes.push(bedrockFrame("contentBlockStop", { contentBlockIndex: index }))
  }
  writes.push(
    bedrockFrame("messageStop", { stopReason: turn.tool !== undefined ? "tool_use" : "end_turn" }),
    bedrockFrame("metadata", {
      usage: {
        inputTokens: turn.usage.input - (turn.usage.cached ?? 0),
        outputTokens: turn.usage.output,
        totalTokens: turn.usage.input + turn.usage.output,
        ...(turn.usage.cached !== undefined ? { cacheReadInputTokens: turn.usage.cached, cacheWriteInputTokens: 0 } : {})
      },
      metrics: { latencyMs: 412 }
    })
  )
  // Frames cut anywhere between TCP writes: the decoder must join them.
  const joined = Buffer.concat(writes.map((w) => Buffer.from(w as Uint8Array)))
  const out: Array<Write> = []
  for (let i = 0; i < joined.length; i += 37) out.push(new Uint8Array(joined.subarray(i, i + 37)))
  return out
}

/** Each kind's stream of one turn. */
export const STREAMS = { anthropic, google: gemini, openrouter, "openai-chat": openrouter, bedrock } as const

/** A reply that breaks after `keep` writes of a turn: the connection drops mid-stream. */
export const broken = (writes: ReadonlyArray<Write>, keep = 2) => Mock.stream(writes.slice(0, keep), { cut: true })

/** Each kind's error body for a status, as its API documents it. */
export const errorBody = (kind: string, status: number) =>
  kind === "anthropic"
    ? { type: "error", error: { type: status === 429 ? "rate_limit_error" : "api_error", message: `status ${status}` } }
    : kind === "google"
    ? { error: { code: status, message: `status ${status}`, status: status === 429 ? "RESOURCE_EXHAUSTED" : "INTERNAL" } }
    : { error: { message: `status ${status}`, code: status } }
