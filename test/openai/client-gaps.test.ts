import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import OpenAI from "openai"
import * as Fake from "../support/ProviderFakes.js"
import * as Mock from "../support/MockUpstream.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, LIVE, newUser } from "../runs/runs-support.js"
import { rejection } from "./support.js"

/**
 * Issue 44 item 6: the client gaps, each tried through the official `openai` SDK (its default retries on, so a
 * status it retries shows as a second request) against the platform with an Anthropic fake upstream.
 */

class Anthropic extends Context.Tag("test/Anthropic")<Anthropic, Mock.MockUpstream>() {}

const MODEL = { input_per_1k: "1", output_per_1k: "2", cached_input_per_1k: "0.1", capabilities: ["tools"] }

const Servers = Layer.unwrapScoped(Effect.gen(function*() {
  const anthropic = yield* Mock.make
  const providers = {
    providers: [{
      id: "anthropic",
      kind: "anthropic",
      base_url: `http://127.0.0.1:${anthropic.port}`,
      api_key: "sk-provider-secret-0123456789",
      models: [{ id: "claude-sonnet-4-5", ...MODEL, context_window: 200000 }]
    }]
  }
  return Layer.merge(
    TestServer.layer({ ...ENV, MODEL_PROVIDERS: JSON.stringify(providers), OPENAI_STREAM_IDLE_TIMEOUT: "1 second" }),
    Layer.succeed(Anthropic, anthropic)
  )
}))

/** The `openai` SDK with its default retries (2), counting the HTTP requests it makes. */
const sdk = (apiKey: string, headers: Record<string, string> = { "X-End-User-Id": "u1" }) =>
  Effect.map(TestServer, (server) => {
    const calls: Array<string> = []
    const client = new OpenAI({
      baseURL: `${server.url}/v1`,
      apiKey,
      defaultHeaders: headers,
      fetch: (input: any, init?: any) => {
        calls.push(`${init?.method ?? "GET"} ${String(input instanceof Request ? input.url : input)}`)
        return fetch(input, init)
      }
    })
    return { client, calls }
  })

const WEATHER: OpenAI.Chat.Completions.ChatCompletionTool = {
  type: "function",
  function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } }
}

describe("client gaps (issue 44 item 6)", () => {
  layer(Servers, LIVE)((it) => {
    it.effect("an upstream 400 is final: 400 with x-should-retry false and no Retry-After, one request", () =>
      Effect.gen(function*() {
        const anthropic = yield* Anthropic
        const user = yield* newUser
        const agent = yield* agentWith(user.token, {}, { model: "anthropic/claude-sonnet-4-5" })
        const { calls, client } = yield* sdk(yield* apiKeyOf(user))
        yield* anthropic.script(Mock.status(400, { type: "error", error: { type: "invalid_request_error", message: "prompt is too long" } }))
        const error = yield* rejection(() => client.chat.completions.create({ model: agent, messages: [{ role: "user", content: "hi" }] }))
        assert.instanceOf(error, OpenAI.BadRequestError)
        const failure = error as InstanceType<typeof OpenAI.BadRequestError>
        assert.strictEqual(failure.status, 400)
        assert.strictEqual(failure.headers.get("x-should-retry"), "false")
        assert.isNull(failure.headers.get("retry-after"))
        assert.deepInclude(failure.error as object, { code: "upstream_rejected", type: "invalid_request_error" })
        assert.include(failure.message, "prompt is too long")
        assert.strictEqual(calls.length, 1, calls.join(", "))
      }))

    it.effect("cached tokens: chat usage.prompt_tokens_details and Responses usage.input_tokens_details, the upstream's figure", () =>
      Effect.gen(function*() {
        const anthropic = yield* Anthropic
        const user = yield* newUser
        const agent = yield* agentWith(user.token, {}, { model: "anthropic/claude-sonnet-4-5" })
        const { client } = yield* sdk(yield* apiKeyOf(user))
        const turn = { text: "Cached.", usage: { input: 5, output: 3, cached: 11 } }
        yield* anthropic.script(Mock.stream(Fake.anthropic(turn)), Mock.stream(Fake.anthropic(turn)), Mock.stream(Fake.anthropic(turn)))
        const chat = yield* Effect.promise(() => client.chat.completions.create({ model: agent, messages: [{ role: "user", content: "hi" }] }))
        assert.strictEqual(chat.choices[0]!.message.content, "Cached.")
        assert.strictEqual(chat.usage!.prompt_tokens, 16)
        assert.strictEqual(chat.usage!.prompt_tokens_details!.cached_tokens, 11)

        const stream = yield* Effect.promise(() =>
          client.chat.completions.create({ model: agent, messages: [{ role: "user", content: "hi" }], stream: true, stream_options: { include_usage: true } })
        )
        let usage: OpenAI.CompletionUsage | undefined
        yield* Effect.promise(async () => {
          for await (const chunk of stream) if (chunk.usage) usage = chunk.usage
        })
        assert.strictEqual(usage?.prompt_tokens_details?.cached_tokens, 11)

        const response = yield* Effect.promise(() => client.responses.create({ model: agent, input: "hi" }))
        assert.strictEqual(response.usage!.input_tokens_details.cached_tokens, 11)
      }))

    it.effect("a tool result goes to Anthropic as the caller sent it, not JSON-quoted", () =>
      Effect.gen(function*() {
        const anthropic = yield* Anthropic
        const user = yield* newUser
        const agent = yield* agentWith(user.token, {}, { model: "anthropic/claude-sonnet-4-5" })
        const { client } = yield* sdk(yield* apiKeyOf(user))
        yield* anthropic.script(Mock.stream(Fake.anthropic({ text: "It is 42 degrees.", usage: { input: 5, output: 3 } })))
        const answer = yield* Effect.promise(() =>
          client.chat.completions.create({
            model: agent,
            tools: [WEATHER],
            messages: [
              { role: "user", content: "Weather in Oslo?" },
              { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Oslo\"}" } }] },
              { role: "tool", tool_call_id: "call_1", content: "42" }
            ]
          })
        )
        assert.strictEqual(answer.choices[0]!.message.content, "It is 42 degrees.")
        const requests = yield* anthropic.requests
        const sent = requests[requests.length - 1]!.body.messages as Array<any>
        const result = sent.flatMap((m) => Array.isArray(m.content) ? m.content : []).find((c: any) => c.type === "tool_result")
        assert.strictEqual(result.tool_use_id, "call_1")
        const text = typeof result.content === "string" ? result.content : result.content.map((c: any) => c.text).join("")
        assert.strictEqual(text, "42")
      }))

    it.effect("a bad API key without X-End-User-Id is 401 (authentication before the header check)", () =>
      Effect.gen(function*() {
        const { calls, client } = yield* sdk("sk_this-key-does-not-exist-0123456789", {})
        const error = yield* rejection(() => client.chat.completions.create({ model: "builtin", messages: [{ role: "user", content: "hi" }] }))
        assert.instanceOf(error, OpenAI.AuthenticationError)
        assert.strictEqual((error as any).headers.get("www-authenticate"), "Bearer realm=\"atrium\"")
        assert.strictEqual(calls.length, 1)
        // A good key without the header is still told what is missing.
        const user = yield* newUser
        const good = yield* sdk(yield* apiKeyOf(user), {})
        const missing = yield* rejection(() => good.client.chat.completions.create({ model: "builtin", messages: [{ role: "user", content: "hi" }] }))
        assert.instanceOf(missing, OpenAI.BadRequestError)
        assert.include((missing as Error).message, "X-End-User-Id")
      }))

    it.effect("a replay with the same Idempotency-Key is the same completion, Idempotent-Replayed; another body is a final 409", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const { calls, client } = yield* sdk(yield* apiKeyOf(user))
        const body = { model: agent, messages: [{ role: "user" as const, content: "hello" }] }
        const key = { headers: { "Idempotency-Key": `chat-${Date.now()}` } }
        const first = yield* Effect.promise(() => client.chat.completions.create(body, key).withResponse())
        assert.isNull(first.response.headers.get("idempotent-replayed"))
        const again = yield* Effect.promise(() => client.chat.completions.create(body, key).withResponse())
        assert.match(first.data.id, /^chatcmpl-/)
        assert.strictEqual(again.data.id, first.data.id)
        assert.deepStrictEqual(again.data, first.data)
        assert.strictEqual(again.response.headers.get("idempotent-replayed"), "true")

        calls.length = 0
        const conflict = yield* rejection(() => client.chat.completions.create({ ...body, messages: [{ role: "user", content: "other" }] }, key))
        assert.instanceOf(conflict, OpenAI.ConflictError)
        assert.strictEqual((conflict as any).headers.get("x-should-retry"), "false")
        assert.strictEqual(calls.length, 1, "the SDK, which retries a 409, sends it once")
      }))
  })
})
