import { Tool, Toolkit } from "@effect/ai"
import type { AiError, LanguageModel, Response } from "@effect/ai"
import { Cause, Chunk, Context, Effect, Layer, Schema, Scope, Stream } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { TestServer } from "./TestServer.js"

/**
 * A mock OpenAI-compatible upstream over real HTTP: a node:http server on a random loopback port, alive for the
 * enclosing scope. Each request takes the next scripted reply (a stream of raw writes with pauses, an error status,
 * a silence) and is recorded with its path, headers and parsed body for assertions. Writes are raw strings, so a
 * test decides exactly where an SSE line is cut between TCP writes.
 */

/** A raw piece of the body, or a pause between pieces (which also keeps the pieces in separate TCP segments). */
export type Write = string | Uint8Array | { readonly pause: number }

export type Reply =
  /** 200 `text/event-stream`, the writes in order; then the response ends unless `stallAfter` keeps it open. */
  | {
    readonly _tag: "Stream"
    readonly writes: ReadonlyArray<Write>
    readonly stallAfter?: boolean
    /** Destroy the connection after the writes: the stream breaks mid-way (a reset, not an ended response). */
    readonly cut?: boolean
  }
  /** A status with a body, sent whole. */
  | {
    readonly _tag: "Status"
    readonly status: number
    readonly body: unknown
    readonly contentType?: string
    readonly headers?: Readonly<Record<string, string>>
  }
  /** Accept the request and never answer, not even with headers. */
  | { readonly _tag: "Silence" }

export interface RecordedRequest {
  readonly method: string
  readonly path: string
  readonly headers: Readonly<Record<string, string | undefined>>
  /** The body parsed as JSON, or the raw text when it is not JSON. */
  readonly body: any
}

export interface MockUpstream {
  /** The base URL to configure, e.g. `http://127.0.0.1:40123/v1`. */
  readonly baseUrl: string
  readonly port: number
  /** Queues replies; each request takes the next one (an unscripted request gets a 500). */
  readonly script: (...replies: ReadonlyArray<Reply>) => Effect.Effect<void>
  readonly requests: Effect.Effect<ReadonlyArray<RecordedRequest>>
}

// -----------------------------------------------------------------------------
// Reply builders
// -----------------------------------------------------------------------------

export const stream = (
  writes: ReadonlyArray<Write>,
  options?: { readonly stallAfter?: boolean; readonly cut?: boolean }
): Reply => ({
  _tag: "Stream",
  writes,
  ...(options?.stallAfter ? { stallAfter: true } : {}),
  ...(options?.cut ? { cut: true } : {})
})

export const status = (
  code: number,
  body: unknown,
  contentType?: string,
  headers?: Readonly<Record<string, string>>
): Reply => ({
  _tag: "Status",
  status: code,
  body,
  ...(contentType !== undefined ? { contentType } : {}),
  ...(headers !== undefined ? { headers } : {})
})

export const silence: Reply = { _tag: "Silence" }

/** One SSE event: `data: <json>` (and `event: <name>` when given), then the blank line. */
export const sse = (data: unknown, event?: string): string =>
  `${event !== undefined ? `event: ${event}\n` : ""}data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`

export const DONE = "data: [DONE]\n\n"

/** Cuts a text into pieces of `size` characters with a pause between them, so lines break anywhere. */
export const chop = (text: string, size: number, pause = 5): Array<Write> => {
  const writes: Array<Write> = []
  for (let i = 0; i < text.length; i += size) {
    if (i > 0) writes.push({ pause })
    writes.push(text.slice(i, i + size))
  }
  return writes
}

/** A Chat Completions chunk with one choice. */
export const chatChunk = (
  delta: Record<string, unknown>,
  finishReason: string | null = null,
  extra: Record<string, unknown> = {}
) => ({
  id: "chatcmpl-mock",
  object: "chat.completion.chunk",
  created: 1_700_000_000,
  model: "mock-model",
  choices: [{ index: 0, delta, finish_reason: finishReason }],
  ...extra
})

/** The trailing chunk `stream_options.include_usage` asks for: no choices, only usage. */
export const usageChunk = (promptTokens: number, completionTokens: number) => ({
  id: "chatcmpl-mock",
  object: "chat.completion.chunk",
  created: 1_700_000_000,
  model: "mock-model",
  choices: [],
  usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens }
})

/** A whole Chat Completions stream of text deltas, as SSE text. */
export const chatText = (deltas: ReadonlyArray<string>, usage?: readonly [number, number]): string =>
  [
    sse(chatChunk({ role: "assistant", content: "" })),
    ...deltas.map((content) => sse(chatChunk({ content }))),
    sse(chatChunk({}, "stop")),
    ...(usage ? [sse(usageChunk(usage[0], usage[1]))] : []),
    DONE
  ].join("")

// -----------------------------------------------------------------------------
// Server
// -----------------------------------------------------------------------------

/** Real pauses of the mock upstream: a trickling or stalling model over real HTTP is the scenario under test. */
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const headerRecord = (headers: Http.IncomingHttpHeaders): Record<string, string | undefined> => {
  const out: Record<string, string | undefined> = {}
  for (const [name, value] of Object.entries(headers)) out[name] = Array.isArray(value) ? value.join(", ") : value
  return out
}

export const make: Effect.Effect<MockUpstream, never, Scope.Scope> = Effect.gen(function*() {
  const queue: Array<Reply> = []
  const recorded: Array<RecordedRequest> = []
  const sockets = new Set<import("node:net").Socket>()

  const play = async (reply: Reply, res: Http.ServerResponse) => {
    switch (reply._tag) {
      case "Silence":
        return
      case "Status": {
        const text = typeof reply.body === "string" ? reply.body : JSON.stringify(reply.body)
        res.writeHead(reply.status, {
          "content-type": reply.contentType ?? (typeof reply.body === "string" ? "text/plain" : "application/json"),
          ...reply.headers
        })
        res.end(text)
        return
      }
      case "Stream": {
        res.socket?.setNoDelay(true)
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
        res.flushHeaders()
        for (const write of reply.writes) {
          if (res.destroyed) return
          if (typeof write === "string" || write instanceof Uint8Array) res.write(write)
          else await sleep(write.pause)
        }
        if (reply.cut) {
          // Let the last write reach the client before the connection drops.
          await sleep(20)
          res.destroy()
          return
        }
        if (!reply.stallAfter) res.end()
        return
      }
    }
  }

  const server = Http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      let body: unknown = text
      try {
        body = text.length > 0 ? JSON.parse(text) : undefined
      } catch {
        // Recorded as text.
      }
      recorded.push({ method: req.method ?? "GET", path: req.url ?? "/", headers: headerRecord(req.headers), body })
      const reply = queue.shift() ??
        status(500, { error: { message: "mock upstream: no scripted reply for this request" } })
      play(reply, res).catch(() => res.destroy())
    })
  })
  server.on("connection", (socket) => {
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
  })

  const port = yield* Effect.acquireRelease(
    Effect.async<number>((resume) => {
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.address() as AddressInfo).port)))
    }),
    () =>
      Effect.async<void>((resume) => {
        // Stalled replies hold their sockets open forever; closing the server must not wait for them.
        for (const socket of sockets) socket.destroy()
        server.close(() => resume(Effect.void))
      })
  )

  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    port,
    script: (...replies) => Effect.sync(() => void queue.push(...replies)),
    requests: Effect.sync(() => [...recorded])
  } satisfies MockUpstream
})

// -----------------------------------------------------------------------------
// Helpers for the model provider tests
// -----------------------------------------------------------------------------

/** The mock upstream of a `serverWithUpstream` layer, for a test to script and inspect. */
export class Upstream extends Context.Tag("test/Upstream")<Upstream, MockUpstream>() {}

/** A mock model for the platform: one model, `mock-model`, at 0.5 / 1 credits per 1k tokens, with a short idle timeout. */
export const MOCK_MODEL_ENV = {
  OPENAI_API_KEY: "sk-upstream-secret-0123456789",
  OPENAI_MODELS: "mock-model",
  OPENAI_MODEL_RATES: "mock-model=0.5:1",
  OPENAI_STREAM_IDLE_TIMEOUT: "400 millis"
} as const

/** The test platform with its OpenAI Chat Completions provider pointed at a fresh mock upstream (`Upstream`). */
export const serverWithUpstream = (env: Record<string, string>) =>
  Layer.unwrapScoped(Effect.map(make, (upstream) =>
    Layer.merge(
      TestServer.layer({ ...env, MODEL_PROVIDER: "openai-chat", OPENAI_BASE_URL: upstream.baseUrl }),
      Layer.succeed(Upstream, upstream)
    )))

/** Tools shaped like the engine's: one with a required argument, one without. */
export const Calculator = Tool.make("calculator", {
  description: "Evaluates an arithmetic expression",
  parameters: { expression: Schema.String },
  success: Schema.String
})

export const GetTime = Tool.make("get_time", {
  description: "The current time",
  success: Schema.String
})

export const Tools = Toolkit.make(Calculator, GetTime)

/** Handlers are never called (the engine resolves calls itself), but the toolkit needs them to be built. */
export const ToolsLayer = Tools.toLayer({
  calculator: () => Effect.succeed("0"),
  get_time: () => Effect.succeed("now")
})

export type Part = Response.StreamPart<Toolkit.Tools<typeof Tools>>

/** A stream the way the run engine asks for it. */
export const streamWithTools = (model: LanguageModel.Service, prompt: LanguageModel.GenerateTextOptions<any>["prompt"]) =>
  model.streamText({ prompt, toolkit: Tools, disableToolCallResolution: true }).pipe(
    Stream.runCollect,
    Effect.map((chunk) => Chunk.toArray(chunk) as Array<Part>)
  )

export const streamPlain = (model: LanguageModel.Service, prompt: LanguageModel.GenerateTextOptions<any>["prompt"]) =>
  model.streamText({ prompt }).pipe(
    Stream.runCollect,
    Effect.map((chunk) => Chunk.toArray(chunk) as Array<Part>)
  )

export const textOf = (parts: ReadonlyArray<Part>) =>
  parts.flatMap((part) => part.type === "text-delta" ? [part.delta] : []).join("")

export const reasoningOf = (parts: ReadonlyArray<Part>) =>
  parts.flatMap((part) => part.type === "reasoning-delta" ? [part.delta] : []).join("")

export const typesOf = (parts: ReadonlyArray<Part>) => parts.map((part) => part.type)

/** Every way an error could be shown: a key must not appear in any of them. */
export const renderings = (error: AiError.AiError): string =>
  [String(error), error.message, JSON.stringify(error), Cause.pretty(Cause.fail(error))].join("\n")
