import { AiError, Prompt } from "@effect/ai"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it, layer } from "@effect/vitest"
import { Duration, Effect, Either, Layer, Option, Redacted, Stream } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as ChatCompletions from "../../../src/runtime/models/ChatCompletions.js"
import * as ChatCompletionsStream from "../../../src/runtime/models/ChatCompletionsStream.js"
import * as Upstream from "../../../src/runtime/models/Upstream.js"
import * as Mock from "../../support/MockUpstream.js"

const KEY = "sk-test-4f9d2c7e1a0b3c5d"

const setup = (options: {
  readonly apiKey?: string
  readonly idleTimeout?: Duration.DurationInput
  readonly requestTimeout?: Duration.DurationInput
} = {}) =>
  Effect.gen(function*() {
    const upstream = yield* Mock.make
    const model = yield* ChatCompletions.make({
      baseUrl: upstream.baseUrl,
      apiKey: options.apiKey === undefined ? Option.none() : Option.some(Redacted.make(options.apiKey)),
      model: "mock-model",
      idleTimeout: options.idleTimeout ?? "5 seconds",
      requestTimeout: options.requestTimeout ?? "20 seconds"
    })
    return { upstream, model }
  })

const fail = <A, E extends AiError.AiError, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.either(effect), (result) =>
    Either.isLeft(result)
      ? Effect.succeed(result.left as AiError.AiError)
      : Effect.dieMessage(`expected a failure, got ${JSON.stringify(result.right).slice(0, 300)}`))

layer(Layer.merge(NodeHttpClient.layerUndici, Mock.ToolsLayer), { excludeTestServices: true })("Chat Completions provider", (it) => {
  describe("streaming", () => {
    it.scoped("streams text deltas cut anywhere across TCP writes, with usage from include_usage", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup()
        // Lines cut every 7 characters, a 4-byte emoji and CJK included, so cuts fall mid-line and mid-character.
        yield* upstream.script(Mock.stream(Mock.chop(Mock.chatText(["Hel", "lo, ", "世界 🌍", "!"], [12, 5]), 7)))
        const parts = yield* Mock.streamPlain(model, "hi")
        assert.strictEqual(Mock.textOf(parts), "Hello, 世界 🌍!")
        assert.deepStrictEqual(
          Mock.typesOf(parts),
          ["text-start", "text-delta", "text-delta", "text-delta", "text-delta", "text-end", "finish"]
        )
        const finish = parts.at(-1)
        assert(finish?.type === "finish")
        assert.strictEqual(finish.reason, "stop")
        assert.strictEqual(finish.usage.inputTokens, 12)
        assert.strictEqual(finish.usage.outputTokens, 5)
        assert.strictEqual(finish.usage.totalTokens, 17)

        const [request] = yield* upstream.requests
        assert.strictEqual(request?.method, "POST")
        assert.strictEqual(request?.path, "/v1/chat/completions")
        assert.strictEqual(request?.body.model, "mock-model")
        assert.strictEqual(request?.body.stream, true)
        assert.deepStrictEqual(request?.body.stream_options, { include_usage: true })
        assert.deepStrictEqual(request?.body.messages, [{ role: "user", content: "hi" }])
        assert.isUndefined(request?.body.tools, "no tools offered, none sent")
        assert.isUndefined(request?.body.tool_choice)
        assert.isUndefined(request?.headers.authorization, "no key configured, no Authorization header")
      }))

    it.scoped("reasoning_content (and reasoning) become reasoning parts ahead of the text", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup()
        yield* upstream.script(Mock.stream([
          Mock.sse(Mock.chatChunk({ role: "assistant", reasoning_content: "Let me " })),
          Mock.sse(Mock.chatChunk({ reasoning_content: "think." })),
          Mock.sse(Mock.chatChunk({ reasoning: " Still thinking." })),
          Mock.sse(Mock.chatChunk({ content: "Answer" })),
          Mock.sse(Mock.chatChunk({}, "stop")),
          Mock.sse(Mock.usageChunk(3, 9)),
          Mock.DONE
        ]))
        const parts = yield* Mock.streamPlain(model, "why?")
        assert.strictEqual(Mock.reasoningOf(parts), "Let me think. Still thinking.")
        assert.strictEqual(Mock.textOf(parts), "Answer")
        assert.deepStrictEqual(Mock.typesOf(parts), [
          "reasoning-start",
          "reasoning-delta",
          "reasoning-delta",
          "reasoning-delta",
          "reasoning-end",
          "text-start",
          "text-delta",
          "text-end",
          "finish"
        ])
      }))

    it.scoped("a tool call with arguments in fragments: params deltas, then the complete call", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup()
        const call = (args: string, first?: { readonly id: string; readonly name: string }) =>
          Mock.sse(Mock.chatChunk({
            tool_calls: [
              first
                ? { index: 0, id: first.id, type: "function", function: { name: first.name, arguments: args } }
                : { index: 0, function: { arguments: args } }
            ]
          }))
        yield* upstream.script(Mock.stream([
          Mock.sse(Mock.chatChunk({ role: "assistant", content: "Let me compute." })),
          call("", { id: "call_abc", name: "calculator" }),
          call("{\"expr"),
          call("ession\": \"1"),
          call(" + 2\"}"),
          Mock.sse(Mock.chatChunk({}, "tool_calls")),
          Mock.sse(Mock.usageChunk(40, 12)),
          Mock.DONE
        ]))
        const parts = yield* Mock.streamWithTools(model, "what is 1 + 2?")
        assert.strictEqual(Mock.textOf(parts), "Let me compute.")
        const start = parts.find((part) => part.type === "tool-params-start")
        assert(start?.type === "tool-params-start")
        assert.strictEqual(start.id, "call_abc")
        assert.strictEqual(start.name, "calculator")
        const deltas = parts.flatMap((part) => part.type === "tool-params-delta" ? [part.delta] : [])
        assert.deepStrictEqual(deltas, ["{\"expr", "ession\": \"1", " + 2\"}"])
        const types = Mock.typesOf(parts)
        assert.isTrue(types.indexOf("tool-params-end") > types.lastIndexOf("tool-params-delta"))
        assert.isTrue(types.indexOf("tool-call") > types.indexOf("tool-params-end"))
        const call0 = parts.find((part) => part.type === "tool-call")
        assert(call0?.type === "tool-call")
        assert.strictEqual(call0.id, "call_abc")
        assert.strictEqual(call0.name, "calculator")
        assert.deepStrictEqual(call0.params, { expression: "1 + 2" })
        const finish = parts.at(-1)
        assert(finish?.type === "finish")
        assert.strictEqual(finish.reason, "tool-calls")
        assert.strictEqual(finish.usage.inputTokens, 40)

        const [request] = yield* upstream.requests
        assert.strictEqual(request?.body.tool_choice, "auto")
        const tools = request?.body.tools as Array<any>
        assert.deepStrictEqual(tools.map((tool) => tool.function.name).sort(), ["calculator", "get_time"])
        const calculator = tools.find((tool) => tool.function.name === "calculator")
        assert.strictEqual(calculator.type, "function")
        assert.strictEqual(calculator.function.description, "Evaluates an arithmetic expression")
        assert.deepStrictEqual(calculator.function.parameters.required, ["expression"])
        assert.deepStrictEqual(calculator.function.parameters.properties.expression, { type: "string" })
      }))

    it.scoped("two parallel tool calls with interleaved fragments come out whole, in index order", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup()
        const fragment = (index: number, fn: Record<string, unknown>, id?: string) =>
          Mock.sse(Mock.chatChunk({
            tool_calls: [{ index, ...(id ? { id, type: "function" } : {}), function: fn }]
          }))
        yield* upstream.script(Mock.stream([
          fragment(0, { name: "calculator", arguments: "" }, "call_0"),
          fragment(0, { arguments: "{\"expression\":" }),
          fragment(1, { name: "get_time", arguments: "" }, "call_1"),
          fragment(0, { arguments: "\"6*7\"}" }),
          fragment(1, { arguments: "{}" }),
          Mock.sse(Mock.chatChunk({}, "tool_calls")),
          Mock.DONE
        ]))
        const parts = yield* Mock.streamWithTools(model, "time and 6*7")
        const calls = parts.flatMap((part) => part.type === "tool-call" ? [part] : [])
        assert.deepStrictEqual(
          calls.map((call) => [call.id, call.name, call.params]),
          [["call_0", "calculator", { expression: "6*7" }], ["call_1", "get_time", {}]]
        )
        const deltasOf = (id: string) =>
          parts.flatMap((part) => part.type === "tool-params-delta" && part.id === id ? [part.delta] : []).join("")
        assert.strictEqual(deltasOf("call_0"), "{\"expression\":\"6*7\"}")
        assert.strictEqual(deltasOf("call_1"), "{}")
        assert.strictEqual(parts.filter((part) => part.type === "tool-params-end").length, 2)
      }))

    it.scoped("arguments that are not JSON still give a tool call, marked __invalid_arguments", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup()
        yield* upstream.script(Mock.stream([
          Mock.sse(Mock.chatChunk({
            tool_calls: [{ index: 0, id: "call_bad", type: "function", function: { name: "calculator", arguments: "{\"expression\": 1 +" } }]
          })),
          Mock.sse(Mock.chatChunk({
            tool_calls: [{ index: 1, id: "call_wrong", type: "function", function: { name: "calculator", arguments: "{\"expr\": \"2\"}" } }]
          })),
          Mock.sse(Mock.chatChunk({}, "tool_calls")),
          Mock.DONE
        ]))
        // Through `streamText` with the toolkit, as the engine calls it: the calculator's schema requires
        // `expression`, so a stock LanguageModel would fail the whole stream here.
        const parts = yield* Mock.streamWithTools(model, "compute")
        const calls = parts.flatMap((part) => part.type === "tool-call" ? [part] : [])
        assert.strictEqual(calls.length, 2)
        assert.deepStrictEqual(calls[0]?.params as unknown, { __invalid_arguments: "{\"expression\": 1 +" })
        assert.isTrue(Upstream.isInvalidArguments(calls[0]?.params))
        // Valid JSON the schema rejects passes through untouched for Toolkit.handle to reject precisely.
        assert.deepStrictEqual(calls[1]?.params as unknown, { expr: "2" })
        const finish = parts.at(-1)
        assert(finish?.type === "finish")
        assert.strictEqual(finish.reason, "tool-calls")
      }))

    it.scoped("a server that ignores stream:true and answers one chat.completion still works", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup()
        yield* upstream.script(Mock.status(200, {
          id: "chatcmpl-1",
          object: "chat.completion",
          choices: [{
            index: 0,
            message: {
              role: "assistant",
              content: "Checking.",
              tool_calls: [{ id: "c9", type: "function", function: { name: "get_time", arguments: "{}" } }]
            },
            finish_reason: "tool_calls"
          }],
          usage: { prompt_tokens: 4, completion_tokens: 6, total_tokens: 10 }
        }))
        const parts = yield* Mock.streamWithTools(model, "time?")
        assert.strictEqual(Mock.textOf(parts), "Checking.")
        const call = parts.find((part) => part.type === "tool-call")
        assert.strictEqual(call?.name, "get_time")
        const finish = parts.at(-1)
        assert(finish?.type === "finish")
        assert.strictEqual(finish.reason, "tool-calls")
        assert.strictEqual(finish.usage.outputTokens, 6)
      }))

    it.scoped("generateText collects text, reasoning, tool calls and usage", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup()
        yield* upstream.script(Mock.stream([
          Mock.sse(Mock.chatChunk({ reasoning_content: "hmm" })),
          Mock.sse(Mock.chatChunk({ content: "Sure, " })),
          Mock.sse(Mock.chatChunk({ content: "computing." })),
          Mock.sse(Mock.chatChunk({
            tool_calls: [{ index: 0, id: "c1", type: "function", function: { name: "calculator", arguments: "{\"expression\":\"2+2\"}" } }]
          })),
          Mock.sse(Mock.chatChunk({}, "tool_calls")),
          Mock.sse(Mock.usageChunk(7, 3)),
          Mock.DONE
        ]))
        const response = yield* model.generateText({
          prompt: "2+2",
          toolkit: Mock.Tools,
          disableToolCallResolution: true
        })
        assert.strictEqual(response.text, "Sure, computing.")
        assert.strictEqual(response.reasoningText, "hmm")
        assert.deepStrictEqual(response.toolCalls.map((call) => [call.name, call.params]), [[
          "calculator",
          { expression: "2+2" }
        ]])
        assert.strictEqual(response.finishReason, "tool-calls")
        assert.strictEqual(response.usage.outputTokens, 3)
      }))
  })

  describe("prompt encoding", () => {
    it.scoped("an earlier tool call and its result go back as assistant tool_calls and a tool message", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup()
        yield* upstream.script(Mock.stream([Mock.chatText(["It is 3."])]))
        const prompt = Prompt.make([
          { role: "system", content: "You are terse." },
          { role: "user", content: "what is 1 + 2?" },
          {
            role: "assistant",
            content: [
              { type: "reasoning", text: "use the tool" },
              { type: "text", text: "Computing." },
              { type: "tool-call", id: "call_1", name: "calculator", params: { expression: "1 + 2" } }
            ]
          },
          {
            role: "tool",
            content: [{ type: "tool-result", id: "call_1", name: "calculator", isFailure: false, result: "3", providerExecuted: false }]
          },
          {
            role: "assistant",
            content: [{ type: "tool-call", id: "call_2", name: "get_time", params: {} }]
          },
          {
            role: "tool",
            content: [{
              type: "tool-result",
              id: "call_2",
              name: "get_time",
              isFailure: true,
              result: { error: "clock broken" },
              providerExecuted: false
            }]
          }
        ])
        const parts = yield* Mock.streamWithTools(model, prompt)
        assert.strictEqual(Mock.textOf(parts), "It is 3.")
        const [request] = yield* upstream.requests
        assert.deepStrictEqual(request?.body.messages, [
          { role: "system", content: "You are terse." },
          { role: "user", content: "what is 1 + 2?" },
          {
            role: "assistant",
            content: "Computing.",
            tool_calls: [{
              id: "call_1",
              type: "function",
              function: { name: "calculator", arguments: "{\"expression\":\"1 + 2\"}" }
            }]
          },
          { role: "tool", tool_call_id: "call_1", content: "3" },
          {
            role: "assistant",
            content: null,
            tool_calls: [{ id: "call_2", type: "function", function: { name: "get_time", arguments: "{}" } }]
          },
          { role: "tool", tool_call_id: "call_2", content: "{\"error\":\"clock broken\"}" }
        ])
      }))

    it.scoped("toolChoice: a named tool becomes a function tool_choice", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup()
        yield* upstream.script(Mock.stream([Mock.chatText(["ok"])]))
        yield* model.streamText({
          prompt: "go",
          toolkit: Mock.Tools,
          toolChoice: { tool: "get_time" },
          disableToolCallResolution: true
        }).pipe(Stream.runDrain)
        const [request] = yield* upstream.requests
        assert.deepStrictEqual(request?.body.tool_choice, { type: "function", function: { name: "get_time" } })
      }))
  })

  describe("failures", () => {
    it.scoped("a 500 with a JSON error body is an HttpResponseError carrying the status and the message", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup()
        yield* upstream.script(
          Mock.status(500, { error: { message: "The engine is currently overloaded", type: "server_error" } })
        )
        const error = yield* fail(Mock.streamPlain(model, "hi"))
        assert.strictEqual(error._tag, "HttpResponseError")
        assert(error._tag === "HttpResponseError")
        assert.strictEqual(error.response.status, 500)
        const failure = Upstream.describeFailure(error)
        assert.strictEqual(failure.code, "upstream_error")
        assert.strictEqual(failure.message, "The model upstream returned 500: The engine is currently overloaded")
      }))

    it.scoped("a 429 is upstream_rate_limited", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup()
        yield* upstream.script(Mock.status(429, { error: { message: "Rate limit reached" } }))
        const error = yield* fail(Mock.streamPlain(model, "hi"))
        assert.deepStrictEqual(Upstream.describeFailure(error), {
          code: "upstream_rate_limited",
          message: "The model upstream returned 429: Rate limit reached"
        })
      }))

    it.scoped("a stall after the first chunk fails within the idle timeout, after what did arrive", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup({ idleTimeout: "300 millis" })
        yield* upstream.script(Mock.stream([Mock.sse(Mock.chatChunk({ content: "Hel" }))], { stallAfter: true }))
        const seen: Array<string> = []
        const error = yield* fail(
          model.streamText({ prompt: "hi" }).pipe(
            Stream.runForEach((part) => Effect.sync(() => seen.push(part.type)))
          )
        )
        // Which timer ended the call is in its error (the idle timeout, not the request timeout), not in a stopwatch.
        assert.deepStrictEqual(seen, ["text-start", "text-delta"])
        assert.strictEqual(error._tag, "UnknownError")
        const failure = Upstream.describeFailure(error)
        assert.strictEqual(failure.code, "upstream_timeout")
        assert.strictEqual(failure.message, "The model upstream timed out: nothing received for 300ms")
        // Callers that only read `message` (not `describeFailure`) still see a timeout.
        assert.match(error.message, /timed out/)
      }))

    it.scoped("an upstream that never answers (no headers) fails within the idle timeout", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup({ idleTimeout: "300 millis" })
        yield* upstream.script(Mock.silence)
        const error = yield* fail(Mock.streamPlain(model, "hi"))
        assert.strictEqual(Upstream.describeFailure(error).code, "upstream_timeout")
      }))

    it.scoped("a stream that trickles forever hits the overall request timeout", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup({ idleTimeout: "2 seconds", requestTimeout: "600 millis" })
        const writes: Array<Mock.Write> = []
        for (let i = 0; i < 100; i++) writes.push(Mock.sse(Mock.chatChunk({ content: "." })), { pause: 50 })
        yield* upstream.script(Mock.stream(writes))
        const error = yield* fail(Mock.streamPlain(model, "hi"))
        // The request timeout ended it (its message says so), though chunks kept the idle timeout from firing.
        const failure = Upstream.describeFailure(error)
        assert.strictEqual(failure.code, "upstream_timeout")
        assert.strictEqual(failure.message, "The model call timed out: not finished within 600ms")
      }))

    it.scoped("connection refused is an HttpRequestError: upstream_unavailable", () =>
      Effect.gen(function*() {
        const port = yield* Effect.promise(() =>
          new Promise<number>((resolve) => {
            const server = Http.createServer()
            server.listen(0, "127.0.0.1", () => {
              const { port } = server.address() as AddressInfo
              server.close(() => resolve(port))
            })
          })
        )
        const model = yield* ChatCompletions.make({
          baseUrl: `http://127.0.0.1:${port}/v1`,
          apiKey: Option.some(Redacted.make(KEY)),
          model: "m",
          idleTimeout: "5 seconds",
          requestTimeout: "10 seconds"
        })
        const error = yield* fail(Mock.streamPlain(model, "hi"))
        assert.strictEqual(error._tag, "HttpRequestError")
        const failure = Upstream.describeFailure(error)
        assert.strictEqual(failure.code, "upstream_unavailable")
        assert.match(failure.message, /ECONNREFUSED/)
        assert.notInclude(Mock.renderings(error), KEY)
      }))

    it.scoped("a chunk that is not JSON is a MalformedOutput", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup()
        yield* upstream.script(Mock.stream([Mock.sse(Mock.chatChunk({ content: "ok" })), "data: {not json\n\n"]))
        const error = yield* fail(Mock.streamPlain(model, "hi"))
        assert.strictEqual(error._tag, "MalformedOutput")
        const failure = Upstream.describeFailure(error)
        assert.strictEqual(failure.code, "model_output_invalid")
        assert.match(failure.message, /not JSON: \{not json/)
      }))

    it.scoped("an error object inside the stream fails it with the upstream's message", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup()
        yield* upstream.script(Mock.stream([
          Mock.sse(Mock.chatChunk({ content: "partial" })),
          Mock.sse({ error: { message: "CUDA out of memory", code: 500 } })
        ]))
        const error = yield* fail(Mock.streamPlain(model, "hi"))
        assert.deepStrictEqual(Upstream.describeFailure(error), {
          code: "upstream_error",
          message: "The model upstream reported an error mid-stream: CUDA out of memory"
        })
      }))

    it.scoped("a stream cut before it finished is an error, not a silent short answer", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup()
        yield* upstream.script(Mock.stream([Mock.sse(Mock.chatChunk({ content: "The answer is" }))]))
        const error = yield* fail(Mock.streamPlain(model, "hi"))
        assert.match(Upstream.describeFailure(error).message, /closed the stream before the response was finished/)
      }))

    it.scoped("a tool the model was not offered is a MalformedOutput naming it", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup()
        yield* upstream.script(Mock.stream([
          Mock.sse(Mock.chatChunk({
            tool_calls: [{ index: 0, id: "c", type: "function", function: { name: "rm_rf", arguments: "{}" } }]
          })),
          Mock.sse(Mock.chatChunk({}, "tool_calls")),
          Mock.DONE
        ]))
        const error = yield* fail(Mock.streamWithTools(model, "hi"))
        assert.strictEqual(error._tag, "MalformedOutput")
        assert.match(Upstream.describeFailure(error).message, /not offered: rm_rf/)
      }))
  })

  describe("the API key", () => {
    it.scoped("is sent as a Bearer token when configured and never appears in an error", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup({ apiKey: KEY })
        yield* upstream.script(
          Mock.stream([Mock.chatText(["ok"])]),
          // Some servers echo what they were sent; the key must still not travel on.
          Mock.status(401, { error: { message: `Incorrect API key provided: ${KEY}` } })
        )
        assert.strictEqual(Mock.textOf(yield* Mock.streamPlain(model, "hi")), "ok")
        const error = yield* fail(Mock.streamPlain(model, "hi"))
        const [first, second] = yield* upstream.requests
        assert.strictEqual(first?.headers.authorization, `Bearer ${KEY}`)
        assert.strictEqual(second?.headers.authorization, `Bearer ${KEY}`)
        assert(error._tag === "HttpResponseError")
        assert.strictEqual(error.response.status, 401)
        const failure = Upstream.describeFailure(error)
        assert.strictEqual(failure.message, "The model upstream returned 401: Incorrect API key provided: [redacted]")
        assert.notInclude(Mock.renderings(error), KEY)
        assert.notInclude(failure.message, KEY)
      }))

    it.scoped("a stalled keyed call's timeout error does not carry the key either", () =>
      Effect.gen(function*() {
        const { model, upstream } = yield* setup({ apiKey: KEY, idleTimeout: "200 millis" })
        yield* upstream.script(Mock.silence)
        const error = yield* fail(Mock.streamPlain(model, "hi"))
        assert.strictEqual(Upstream.describeFailure(error).code, "upstream_timeout")
        assert.notInclude(Mock.renderings(error), KEY)
      }))
  })
})

describe("ChunkDecoder (dialects)", () => {
  const decode = (events: ReadonlyArray<unknown>, tools: ReadonlyArray<string> = ["calculator", "get_time"]) => {
    const decoder = new ChatCompletionsStream.ChunkDecoder("s", new Set(tools), "test")
    const parts: Array<any> = []
    for (const event of events) {
      const result = decoder.onEvent("message", typeof event === "string" ? event : JSON.stringify(event))
      if (Either.isLeft(result)) return Either.left(result.left)
      parts.push(...result.right)
    }
    return Either.map(decoder.onEnd(), (end) => [...parts, ...end])
  }

  it("Ollama style: a whole call without index, arguments as an object, finish 'stop' means tool-calls", () => {
    const result = decode([
      Mock.chatChunk({ tool_calls: [{ id: "call_x", function: { name: "calculator", arguments: { expression: "9" } } }] }),
      Mock.chatChunk({}, "stop"),
      "[DONE]"
    ])
    assert(Either.isRight(result))
    const call = result.right.find((part) => part.type === "tool-call")
    assert.deepStrictEqual(call?.params, { expression: "9" })
    assert.strictEqual(result.right.at(-1)?.reason, "tool-calls")
  })

  it("a call without an id gets a stable generated one; empty arguments mean {}", () => {
    const result = decode([
      Mock.chatChunk({ tool_calls: [{ index: 0, function: { name: "get_time", arguments: "" } }] }),
      Mock.chatChunk({}, "tool_calls")
    ])
    assert(Either.isRight(result))
    const start = result.right.find((part) => part.type === "tool-params-start")
    const call = result.right.find((part) => part.type === "tool-call")
    assert.strictEqual(start?.id, call?.id)
    assert.deepStrictEqual(call?.params, {})
  })

  it("nulls where a field may be absent are absent (OpenAI sends them); usage with cached and reasoning tokens", () => {
    const result = decode([
      Mock.chatChunk({ role: "assistant", content: null, reasoning_content: null, tool_calls: null }),
      Mock.chatChunk({ content: "hi" }),
      { choices: [{ index: 0, delta: null, finish_reason: "stop" }], usage: null },
      {
        choices: [],
        usage: {
          prompt_tokens: 10,
          completion_tokens: 4,
          total_tokens: null,
          completion_tokens_details: { reasoning_tokens: 2 },
          prompt_tokens_details: { cached_tokens: 6 }
        }
      },
      "[DONE]"
    ])
    assert(Either.isRight(result))
    assert.deepStrictEqual(result.right.filter((part) => part.type === "text-delta").map((part) => part.delta), ["hi"])
    assert.deepStrictEqual(result.right.at(-1)?.usage, {
      inputTokens: 10,
      outputTokens: 4,
      totalTokens: 14,
      reasoningTokens: 2,
      cachedInputTokens: 6
    })
  })

  it("a chunk whose fields have the wrong type is a MalformedOutput naming the field", () => {
    const result = decode([Mock.chatChunk({ content: 5 })])
    assert(Either.isLeft(result))
    assert.strictEqual(result.left._tag, "MalformedOutput")
    assert.match(result.left.message, /choices\.0\.delta\.content/)
  })

  it("a double-encoded arguments string is unwrapped", () => {
    assert.deepStrictEqual(Upstream.parseToolArguments(JSON.stringify("{\"expression\":\"1\"}")), {
      expression: "1"
    })
  })

  it("finish reasons map to @effect/ai's", () => {
    assert.strictEqual(ChatCompletionsStream.mapFinishReason("stop"), "stop")
    assert.strictEqual(ChatCompletionsStream.mapFinishReason("length"), "length")
    assert.strictEqual(ChatCompletionsStream.mapFinishReason("tool_calls"), "tool-calls")
    assert.strictEqual(ChatCompletionsStream.mapFinishReason("content_filter"), "content-filter")
    assert.strictEqual(ChatCompletionsStream.mapFinishReason("weird"), "other")
  })

  it("[DONE] without a finish reason still finishes (reason unknown); no [DONE] and no reason is an error", () => {
    const done = decode([Mock.chatChunk({ content: "x" }), "[DONE]"])
    assert(Either.isRight(done))
    assert.strictEqual(done.right.at(-1)?.reason, "unknown")
    assert.isTrue(Either.isLeft(decode([Mock.chatChunk({ content: "x" })])))
  })

  it("upstream error messages are shortened and unwrapped", () => {
    assert.strictEqual(Upstream.upstreamMessage("{\"detail\":\"Not Found\"}"), "Not Found")
    assert.strictEqual(Upstream.upstreamMessage("{\"error\":\"model not loaded\"}"), "model not loaded")
    assert.strictEqual(Upstream.upstreamMessage("<html>Bad Gateway</html>"), "<html>Bad Gateway</html>")
    assert.strictEqual(Upstream.upstreamMessage("x".repeat(500))?.length, 201)
  })
})
