import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { requestAt } from "../support/Client.js"
import * as Fake from "../support/ProviderFakes.js"
import * as Mock from "../support/MockUpstream.js"
import { textOf } from "../support/Sse.js"
import { makeMigratedStorage, makeSmsInbox, startServer, TestServer } from "../support/TestServer.js"
import { agentWith, assertCompleted, ENV, fullLedger, LIVE, newUser, only, payloads, runAgent } from "./runs-support.js"

/**
 * Issue 31, done-when: one platform serves experts on the builtin model, an OpenAI-compatible, an Anthropic, a
 * Gemini and an OpenRouter fake upstream at once, each streaming tools and reasoning; a failing provider falls back
 * to the next model; prompt-cache usage is priced at the cached rate; an expert pinned to a removed model fails
 * clearly.
 */

class Fakes extends Context.Tag("test/Fakes")<Fakes, {
  readonly openai: Mock.MockUpstream
  readonly anthropic: Mock.MockUpstream
  readonly gemini: Mock.MockUpstream
  readonly openrouter: Mock.MockUpstream
  readonly bedrock: Mock.MockUpstream
}>() {}

const KEY = "sk-provider-secret-0123456789"

/** Rates chosen so credits come out round: input 1, output 2, cached input 0.1 credits per 1k. */
const MODEL = { input_per_1k: "1", output_per_1k: "2", cached_input_per_1k: "0.1", capabilities: ["tools", "reasoning"] }

export const providersDocument = (fakes: Context.Tag.Service<Fakes>, anthropicModels = ["claude-sonnet-4-5"]) => ({
  providers: [
    { id: "openai", kind: "openai-chat", base_url: fakes.openai.baseUrl, api_key: KEY, models: [{ id: "gpt-4o-mini", ...MODEL }] },
    {
      id: "anthropic",
      kind: "anthropic",
      base_url: `http://127.0.0.1:${fakes.anthropic.port}`,
      api_key: KEY,
      models: anthropicModels.map((id) => ({ id, ...MODEL, context_window: 200000 }))
    },
    { id: "gemini", kind: "google", base_url: `http://127.0.0.1:${fakes.gemini.port}`, api_key: KEY, models: [{ id: "gemini-2.5-flash", ...MODEL }] },
    {
      id: "openrouter",
      kind: "openrouter",
      base_url: `http://127.0.0.1:${fakes.openrouter.port}/api/v1`,
      api_key: KEY,
      models: [{ id: "meta-llama/llama-3.3-70b-instruct", ...MODEL }]
    },
    {
      id: "bedrock",
      kind: "bedrock",
      base_url: `http://127.0.0.1:${fakes.bedrock.port}`,
      region: "us-west-2",
      aws_access_key_id: "AKIDEXAMPLE",
      aws_secret_access_key: KEY,
      models: [{ id: "anthropic.claude-sonnet-4-5-v1:0", ...MODEL }]
    }
  ]
})

const FakesLive = Layer.scoped(
  Fakes,
  Effect.all({ openai: Mock.make, anthropic: Mock.make, gemini: Mock.make, openrouter: Mock.make, bedrock: Mock.make })
)

const Servers = Layer.unwrapScoped(Effect.gen(function*() {
  const fakes = yield* Fakes
  return Layer.merge(
    TestServer.layer({ ...ENV, MODEL_PROVIDERS: JSON.stringify(providersDocument(fakes)), OPENAI_STREAM_IDLE_TIMEOUT: "1 second" }),
    Layer.succeed(Fakes, fakes)
  )
})).pipe(Layer.provide(FakesLive))

const TOOL = { id: "call_calc_1", name: "calculator", args: { expression: "2 + 3" } }

describe("providers side by side", () => {
  layer(Servers, LIVE)((it) => {
    it.effect("GET /v1/models lists every provider's models with kind, capabilities and prices", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const server = yield* TestServer
        const reply = yield* requestAt(server.url, "GET", "/v1/models?limit=100", { token: user.token })
        assert.strictEqual(reply.status, 200, reply.text)
        const ids = reply.body.data.map((m: any) => m.id)
        assert.deepStrictEqual(ids.slice().sort(), [
          "anthropic/claude-sonnet-4-5",
          "bedrock/anthropic.claude-sonnet-4-5-v1:0",
          "builtin",
          "gemini/gemini-2.5-flash",
          "openai/gpt-4o-mini",
          "openrouter/meta-llama/llama-3.3-70b-instruct"
        ])
        const claude = reply.body.data.find((m: any) => m.id === "anthropic/claude-sonnet-4-5")
        assert.deepInclude(claude, { provider: "anthropic", provider_kind: "anthropic", owned_by: "anthropic", context_window: 200000 })
        assert.deepStrictEqual(claude.capabilities, ["tools", "reasoning"])
        assert.deepStrictEqual(claude.pricing, { unit: "1k_tokens", input: 1, output: 2, cached_input: 0.1 })
        assert.notInclude(reply.text, KEY)
        const one = yield* requestAt(server.url, "GET", "/v1/models/anthropic/claude-sonnet-4-5", { token: user.token })
        assert.strictEqual(one.status, 200, one.text)
        assert.strictEqual(one.body.id, "anthropic/claude-sonnet-4-5")
      }))

    it.effect("one platform runs experts on builtin, OpenAI-compatible, Anthropic, Gemini, OpenRouter and Bedrock, each with a tool and reasoning", () =>
      Effect.gen(function*() {
        const fakes = yield* Fakes
        const user = yield* newUser
        const cases = [
          { model: "openai/gpt-4o-mini", fake: fakes.openai, wire: Fake.openrouter },
          { model: "anthropic/claude-sonnet-4-5", fake: fakes.anthropic, wire: Fake.anthropic },
          { model: "gemini/gemini-2.5-flash", fake: fakes.gemini, wire: Fake.gemini },
          { model: "openrouter/meta-llama/llama-3.3-70b-instruct", fake: fakes.openrouter, wire: Fake.openrouter },
          { model: "bedrock/anthropic.claude-sonnet-4-5-v1:0", fake: fakes.bedrock, wire: Fake.bedrock }
        ]
        for (const c of cases) {
          const agent = yield* agentWith(user.token, { calculator: "allow" }, { model: c.model })
          yield* c.fake.script(
            Mock.stream(c.wire({ thinking: "Add them.", tool: TOOL, usage: { input: 100, output: 20 } })),
            Mock.stream(c.wire({ text: "The answer is 5.", usage: { input: 150, output: 10 } }))
          )
          const stream = yield* runAgent(user, agent, "What is 2 + 3?")
          assertCompleted(stream)
          assert.strictEqual(textOf(stream), "The answer is 5.", c.model)
          const thinking = payloads(stream, "output.thinking.delta").map((e) => e.delta).join("")
          assert.strictEqual(thinking, "Add them.", c.model)
          assert.strictEqual(payloads(stream, "tool_call.completed")[0]?.name, "calculator", c.model)
          assert.deepInclude(only(stream, "tool_call.result").output, { result: 5 })
          assert.include(payloads(stream, "tool_call.arguments.delta").map((e) => e.delta).join(""), "2 + 3")
          assert.deepStrictEqual(payloads(stream, "usage.token").map((u) => u.model), [c.model, c.model])
          // 100 in, 20 out at 1 and 2 per 1k = 0.14; then 150 in, 10 out = 0.17.
          assert.deepStrictEqual(payloads(stream, "usage.token").map((u) => u.credits), [0.14, 0.17], c.model)
          if (c.fake === fakes.gemini) {
            // Gemini's signature of a call made while thinking goes back with the call.
            const requests = yield* c.fake.requests
            const model = requests[requests.length - 1]!.body.contents.find((m: any) => m.role === "model")
            assert.deepInclude(model.parts[0], { functionCall: { name: "calculator", args: { expression: "2 + 3" } }, thoughtSignature: "CiQBVKhc7nO6Hl1Zyb5fT0SRm" })
          }
          if (c.fake === fakes.anthropic) {
            // The signed thinking block goes back before the tool call, as Anthropic requires with thinking on.
            const requests = yield* c.fake.requests
            const assistant = requests[requests.length - 1]!.body.messages.find((m: any) => m.role === "assistant")
            assert.deepInclude(assistant.content[0], { type: "thinking", thinking: "Add them." })
            assert.isString(assistant.content[0].signature)
            assert.strictEqual(assistant.content[1].type, "tool_use")
          }
        }
        const builtin = yield* agentWith(user.token, { calculator: "allow" }, { model: "builtin" })
        const stream = yield* runAgent(user, builtin, "/tool calculator {\"expression\": \"2 + 3\"}")
        assertCompleted(stream)
        assert.deepInclude(only(stream, "tool_call.result").output, { result: 5 })
      }))

    it.effect("a failing provider falls back to the next model, as run.model_fallback; each attempt is billed at its own model's rate", () =>
      Effect.gen(function*() {
        const fakes = yield* Fakes
        const user = yield* newUser
        const agent = yield* agentWith(user.token, {}, {
          model: "anthropic/claude-sonnet-4-5",
          fallback_models: ["gemini/gemini-2.5-flash", "openai/gpt-4o-mini"]
        })
        const view = yield* requestAt((yield* TestServer).url, "GET", `/v1/agents/${agent}`, { token: user.token })
        assert.deepStrictEqual(view.body.fallback_models, ["gemini/gemini-2.5-flash", "openai/gpt-4o-mini"])
        // Anthropic is overloaded; Gemini's stream breaks before any output; the OpenAI-compatible one answers.
        yield* fakes.anthropic.script(Mock.status(529, Fake.errorBody("anthropic", 529)))
        yield* fakes.gemini.script(Fake.broken(Fake.gemini({ text: "never seen in full", usage: { input: 1, output: 1 } }), 0))
        yield* fakes.openai.script(Mock.stream(Fake.openrouter({ text: "Answered by the third.", usage: { input: 1000, output: 500 } })))
        const stream = yield* runAgent(user, agent, "hi")
        assertCompleted(stream)
        assert.strictEqual(textOf(stream), "Answered by the third.")
        const fallbacks = payloads(stream, "run.model_fallback")
        assert.deepStrictEqual(fallbacks.map((f) => [f.from, f.to, f.code]), [
          ["anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-flash", "upstream_error"],
          ["gemini/gemini-2.5-flash", "openai/gpt-4o-mini", "upstream_error"]
        ])
        const usage = only(stream, "usage.token")
        assert.deepInclude(usage, { model: "openai/gpt-4o-mini", credits: 2 })
        const ledger = yield* fullLedger(user.token)
        assert.isTrue(ledger.some((line) => (line.description ?? "").includes("openai/gpt-4o-mini")), JSON.stringify(ledger))
      }))

    it.effect("429 with Retry-After: the provider rests and the run moves on; an unknown fallback model is refused", () =>
      Effect.gen(function*() {
        const fakes = yield* Fakes
        const user = yield* newUser
        const server = yield* TestServer
        const agent = yield* agentWith(user.token, {}, { model: "openrouter/meta-llama/llama-3.3-70b-instruct", fallback_models: ["openai/gpt-4o-mini"] })
        yield* fakes.openrouter.script(Mock.status(429, Fake.errorBody("openrouter", 429), undefined, { "retry-after": "30" }))
        yield* fakes.openai.script(
          Mock.stream(Fake.openrouter({ text: "first", usage: { input: 10, output: 10 } })),
          Mock.stream(Fake.openrouter({ text: "second", usage: { input: 10, output: 10 } }))
        )
        const first = yield* runAgent(user, agent, "hi")
        assertCompleted(first)
        assert.deepInclude(only(first, "run.model_fallback"), { code: "upstream_rate_limited", retry_after_ms: 30_000 })
        // Within its Retry-After the provider is not asked at all.
        const before = (yield* fakes.openrouter.requests).length
        const second = yield* runAgent(user, agent, "hi again")
        assertCompleted(second)
        assert.strictEqual(textOf(second), "second")
        assert.strictEqual((yield* fakes.openrouter.requests).length, before)

        const refused = yield* requestAt(server.url, "PATCH", `/v1/agents/${agent}`, { token: user.token, body: { fallback_models: ["nobody/nothing"] } })
        assert.strictEqual(refused.status, 400, refused.text)
        assert.include(refused.body.error.message, "nobody/nothing")
      }))

    it.effect("Anthropic prompt caching: cache breakpoints are sent and cached tokens are priced at the cached rate", () =>
      Effect.gen(function*() {
        const fakes = yield* Fakes
        const user = yield* newUser
        const agent = yield* agentWith(user.token, {}, { model: "anthropic/claude-sonnet-4-5" })
        yield* fakes.anthropic.script(Mock.stream(Fake.anthropic({ text: "Cached.", usage: { input: 200, cached: 1000, output: 100 } })))
        const stream = yield* runAgent(user, agent, "hi")
        assertCompleted(stream)
        // 200 fresh at 1 + 1000 cached at 0.1 + 100 out at 2, per 1k = 0.2 + 0.1 + 0.2.
        assert.deepInclude(only(stream, "usage.token"), { input_tokens: 1200, cached_input_tokens: 1000, output_tokens: 100, credits: 0.5 })
        const requests = yield* fakes.anthropic.requests
        const sent = requests[requests.length - 1]!.body
        assert.deepStrictEqual(sent.system.at(-1).cache_control, { type: "ephemeral" })
      }))
  })

  layer(FakesLive, LIVE)((it) => {
    it.scoped("an expert pinned to a model removed from the settings fails with a clear error, and cannot be published", () =>
      Effect.gen(function*() {
        const fakes = yield* Fakes
        const storage = yield* makeMigratedStorage
        const inbox = yield* makeSmsInbox
        const { agent, user } = yield* Effect.scoped(Effect.gen(function*() {
          const first = yield* startServer(storage, inbox, {
            ...ENV,
            MODEL_PROVIDERS: JSON.stringify(providersDocument(fakes, ["claude-sonnet-4-5", "claude-3-opus"]))
          })
          return yield* Effect.gen(function*() {
            const user = yield* newUser
            const agent = yield* agentWith(user.token, {}, { model: "anthropic/claude-3-opus" })
            return { agent, user }
          }).pipe(Effect.provideService(TestServer, first))
        }))
        const second = yield* startServer(storage, inbox, { ...ENV, MODEL_PROVIDERS: JSON.stringify(providersDocument(fakes)) })
        yield* Effect.gen(function*() {
          const stream = yield* runAgent(user, agent, "hi")
          const failed = only(stream, "run.failed")
          assert.strictEqual(failed.code, "model_unavailable")
          assert.include(failed.message, "anthropic/claude-3-opus")
          assert.include(failed.message, "GET /v1/models")
          const publish = yield* requestAt(second.url, "POST", `/v1/agents/${agent}/publish`, { token: user.token })
          assert.strictEqual(publish.status, 400, publish.text)
          assert.include(publish.body.error.message, "anthropic/claude-3-opus")
        }).pipe(Effect.provideService(TestServer, second))
      }))
  })
})
