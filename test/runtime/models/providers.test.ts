import { assert, describe, it } from "@effect/vitest"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Duration, Effect, Either, Layer, Option, Redacted, Stream } from "effect"
import { signV4 } from "../../../src/runtime/models/Bedrock.js"
import { retryable } from "../../../src/runtime/models/Health.js"
import { type UpstreamModel, upstreamLanguageModel } from "../../../src/runtime/models/ProviderConfig.js"
import type { ProviderKind } from "../../../src/runtime/models/Providers.js"
import * as Fake from "../../support/ProviderFakes.js"
import * as Mock from "../../support/MockUpstream.js"

/**
 * Every provider kind against a fake upstream that replays its documented wire format over real HTTP (issue 31
 * item 5): reasoning, text, tool calls with streamed arguments and usage with cached tokens come through as
 * `@effect/ai` parts; 429 (with `Retry-After`), 5xx and a stream cut mid-way are failures the engine falls back from.
 */

const KEY = "sk-fake-provider-secret-0123456789"

const upstreamOf = (kind: ProviderKind, base: string, model: string): UpstreamModel => ({
  id: `${kind}/${model}`,
  model,
  inputPer1k: "0.003",
  outputPer1k: "0.015",
  cachedInputPer1k: "0.0003",
  contextWindow: 200_000,
  capabilities: ["tools", "reasoning"],
  provider: { id: kind, kind, baseUrl: base, apiKey: Option.some(Redacted.make(KEY)), models: [] }
})

const timeouts = { idleTimeout: Duration.millis(500), requestTimeout: Duration.seconds(20) }

/** Where each kind's fake is mounted: Anthropic and Gemini add their own `/v1...` paths. */
const CASES: ReadonlyArray<{ kind: ProviderKind; model: string; base: (mock: Mock.MockUpstream) => string; path: string }> = [
  { kind: "anthropic", model: "claude-sonnet-4-5", base: (m) => `http://127.0.0.1:${m.port}`, path: "/v1/messages" },
  {
    kind: "google",
    model: "gemini-2.5-flash",
    base: (m) => `http://127.0.0.1:${m.port}`,
    path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
  },
  { kind: "openrouter", model: "anthropic/claude-sonnet-4.5", base: (m) => `http://127.0.0.1:${m.port}/api/v1`, path: "/api/v1/chat/completions" },
  { kind: "openai-chat", model: "gpt-4o-mini", base: (m) => m.baseUrl, path: "/v1/chat/completions" },
  {
    kind: "bedrock",
    model: "anthropic.claude-sonnet-4-5-v1:0",
    base: (m) => `http://127.0.0.1:${m.port}`,
    path: "/model/anthropic.claude-sonnet-4-5-v1%3A0/converse-stream"
  }
]

const TOOL_CALL = { id: "toolu_forced", name: "calculator", args: { expression: "1 + 1" } }

const PROMPT = [
  { role: "system" as const, content: "You add numbers." },
  { role: "user" as const, content: [{ type: "text" as const, text: "What is 2 + 3?" }] }
]

describe("provider kinds over their wire formats", () => {
  for (const c of CASES) {
    const stream = Fake.STREAMS[c.kind as keyof typeof Fake.STREAMS]

    it.scoped(`${c.kind}: thinking, text, a tool call with streamed arguments, usage with cached tokens`, () =>
      Effect.gen(function*() {
        const mock = yield* Mock.make
        const model = yield* upstreamLanguageModel(timeouts, upstreamOf(c.kind, c.base(mock), c.model))
        yield* mock.script(Mock.stream(stream({
          thinking: "The user wants a sum.",
          text: "Let me compute that.",
          tool: { id: "toolu_01A09q90qw90lq917835lq9", name: "calculator", args: { expression: "2 + 3" } },
          usage: { input: 1200, output: 40, cached: 1000 }
        })))
        const parts = yield* Mock.streamWithTools(model, PROMPT)
        assert.strictEqual(Mock.reasoningOf(parts), "The user wants a sum.")
        assert.strictEqual(Mock.textOf(parts), "Let me compute that.")
        const types = Mock.typesOf(parts)
        assert.includeMembers(types, ["reasoning-start", "reasoning-end", "text-start", "text-end", "tool-params-start", "tool-params-delta", "tool-params-end", "tool-call", "finish"])
        const call = parts.find((p) => p.type === "tool-call") as any
        assert.strictEqual(call.name, "calculator")
        assert.deepStrictEqual(call.params, { expression: "2 + 3" })
        const args = parts.flatMap((p) => p.type === "tool-params-delta" ? [p.delta] : []).join("")
        assert.deepStrictEqual(JSON.parse(args), { expression: "2 + 3" })
        const finish = parts.find((p) => p.type === "finish") as any
        assert.strictEqual(finish.reason, "tool-calls")
        // Every kind reports the whole prompt as input, and the cached part of it.
        const wholeInput = c.kind === "anthropic" ? 2200 : 1200
        assert.strictEqual(finish.usage.inputTokens, wholeInput)
        assert.strictEqual(finish.usage.cachedInputTokens, 1000)
        assert.strictEqual(finish.usage.outputTokens, 40)

        const [sent] = yield* mock.requests
        assert.strictEqual(sent!.path, c.path)
        const headers = JSON.stringify(sent!.headers)
        assert.include(headers, KEY, "the key reaches the upstream in the kind's header")
        if (c.kind === "anthropic") {
          assert.strictEqual(sent!.headers["x-api-key"], KEY)
          assert.strictEqual(sent!.headers["anthropic-version"], "2023-06-01")
          assert.strictEqual(sent!.body.model, "claude-sonnet-4-5")
          assert.isTrue(sent!.body.stream)
          // Prompt caching on by default: the system prompt and the last message are cache breakpoints.
          assert.deepStrictEqual(sent!.body.system.at(-1).cache_control, { type: "ephemeral" })
          assert.deepStrictEqual(sent!.body.messages.at(-1).content.at(-1).cache_control, { type: "ephemeral" })
          assert.deepStrictEqual(sent!.body.thinking, { type: "enabled", budget_tokens: 2048 })
          assert.strictEqual(sent!.body.tools[0].name, "calculator")
        } else if (c.kind === "google") {
          assert.strictEqual(sent!.headers["x-goog-api-key"], KEY)
          assert.deepStrictEqual(sent!.body.systemInstruction, { parts: [{ text: "You add numbers." }] })
          assert.deepStrictEqual(sent!.body.contents, [{ role: "user", parts: [{ text: "What is 2 + 3?" }] }])
          assert.strictEqual(sent!.body.tools[0].functionDeclarations[0].name, "calculator")
          assert.deepStrictEqual(sent!.body.generationConfig, { thinkingConfig: { includeThoughts: true } })
        } else if (c.kind === "bedrock") {
          // A Bedrock API key goes as Bearer; the SigV4 case is its own test below.
          assert.strictEqual(sent!.headers.authorization, `Bearer ${KEY}`)
          assert.deepStrictEqual(sent!.body.system, [{ text: "You add numbers." }])
          assert.deepStrictEqual(sent!.body.messages, [{ role: "user", content: [{ text: "What is 2 + 3?" }] }])
          assert.strictEqual(sent!.body.toolConfig.tools[0].toolSpec.name, "calculator")
          assert.deepStrictEqual(sent!.body.additionalModelRequestFields, { thinking: { type: "enabled", budget_tokens: 2048 } })
        } else {
          assert.strictEqual(sent!.headers.authorization, `Bearer ${KEY}`)
          assert.strictEqual(sent!.body.model, c.model)
        }
      }).pipe(Effect.provide(Layer.merge(NodeHttpClient.layerUndici, Mock.ToolsLayer))))

    it.scoped(`${c.kind}: 429 with Retry-After, 5xx and a cut stream are retryable; 400 is not; no key in errors`, () =>
      Effect.gen(function*() {
        const mock = yield* Mock.make
        const model = yield* upstreamLanguageModel(timeouts, upstreamOf(c.kind, c.base(mock), c.model))
        const turn = { text: "Hello there, this is a longer answer.", usage: { input: 10, output: 5 } }
        yield* mock.script(
          Mock.status(429, Fake.errorBody(c.kind, 429), undefined, { "retry-after": "2" }),
          Mock.status(c.kind === "anthropic" ? 529 : 503, Fake.errorBody(c.kind, 503)),
          Fake.broken(stream(turn), 2),
          Mock.status(400, Fake.errorBody(c.kind, 400))
        )
        const outcomes = []
        for (let i = 0; i < 4; i++) outcomes.push(yield* Effect.either(Mock.streamPlain(model, PROMPT)))
        const errors = outcomes.map((o) => {
          assert(Either.isLeft(o), "each reply fails the call")
          assert.notInclude(Mock.renderings(o.left as any), KEY)
          return o.left
        })
        const now = Date.now()
        const rate = retryable(errors[0], now)
        assert(Option.isSome(rate), "429 is retryable")
        assert.deepStrictEqual(Option.map(rate.value.retryAfter, Duration.toMillis), Option.some(2000))
        assert(Option.isSome(retryable(errors[1], now)), "5xx is retryable")
        assert(Option.isSome(retryable(errors[2], now)), `a stream cut mid-way is retryable: ${JSON.stringify(errors[2])}`)
        assert(Option.isNone(retryable(errors[3], now)), "400 is the request's fault")
      }).pipe(Effect.provide(Layer.merge(NodeHttpClient.layerUndici, Mock.ToolsLayer))))
  }

  it.scoped("anthropic: an error event mid-stream (overloaded) fails the call, retryably", () =>
    Effect.gen(function*() {
      const mock = yield* Mock.make
      const model = yield* upstreamLanguageModel(timeouts, upstreamOf("anthropic", `http://127.0.0.1:${mock.port}`, "claude-sonnet-4-5"))
      yield* mock.script(Mock.stream([Fake.anthropicStart({ usage: { input: 5, output: 1 } }), Fake.anthropicError()]))
      const outcome = yield* Effect.either(Mock.streamPlain(model, PROMPT))
      assert(Either.isLeft(outcome))
      assert.include(outcome.left.message, "Overloaded")
      assert(Option.isSome(retryable(outcome.left, Date.now())))
    }).pipe(Effect.provide(Layer.merge(NodeHttpClient.layerUndici, Mock.ToolsLayer))))

  it.effect("SigV4 signing matches AWS's published test vector (get-vanilla)", () =>
    Effect.gen(function*() {
      const headers = yield* Effect.promise(() => signV4({
        method: "GET",
        url: new URL("https://example.amazonaws.com/"),
        headers: {},
        body: "",
        service: "service",
        region: "us-east-1",
        credentials: { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" },
        now: new Date("2015-08-30T12:36:00Z")
      }))
      assert.strictEqual(
        headers.authorization,
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, " +
          "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
      )
      assert.strictEqual(headers["x-amz-date"], "20150830T123600Z")
    }))

  it.scoped("bedrock with AWS credentials: the request is SigV4-signed over the body it carries; an exception frame fails retryably", () =>
    Effect.gen(function*() {
      const mock = yield* Mock.make
      const secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
      const upstream = upstreamOf("bedrock", `http://127.0.0.1:${mock.port}`, "amazon.nova-pro-v1:0")
      const model = yield* upstreamLanguageModel(timeouts, {
        ...upstream,
        provider: {
          ...upstream.provider,
          apiKey: Option.none(),
          aws: Option.some({ region: "eu-west-1", accessKeyId: "AKIDEXAMPLE", secretAccessKey: Redacted.make(secret), sessionToken: Option.some(Redacted.make("session-token-xyz")) })
        }
      })
      yield* mock.script(
        Mock.stream(Fake.bedrock({ text: "Signed.", usage: { input: 10, output: 2 } })),
        Mock.stream([Fake.bedrockFrame("messageStart", { role: "assistant" }), Fake.bedrockFrame("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "Half" } }), Fake.bedrockException()])
      )
      assert.strictEqual(Mock.textOf(yield* Mock.streamPlain(model, PROMPT)), "Signed.")
      const [sent] = yield* mock.requests
      const auth = sent!.headers.authorization!
      assert.match(auth, /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/eu-west-1\/bedrock\/aws4_request, SignedHeaders=accept;content-type;host;x-amz-date;x-amz-security-token, Signature=[0-9a-f]{64}$/)
      assert.strictEqual(sent!.headers["x-amz-security-token"], "session-token-xyz")
      const date = sent!.headers["x-amz-date"]!
      const again = yield* Effect.promise(() => signV4({
        method: "POST",
        url: new URL(`http://127.0.0.1:${mock.port}${sent!.path}`),
        headers: { accept: sent!.headers.accept!, "content-type": sent!.headers["content-type"]! },
        body: JSON.stringify(sent!.body),
        service: "bedrock",
        region: "eu-west-1",
        credentials: { accessKeyId: "AKIDEXAMPLE", secretAccessKey: secret, sessionToken: "session-token-xyz" },
        now: new Date(`${date.slice(0, 4)}-${date.slice(4, 6)}-${date.slice(6, 8)}T${date.slice(9, 11)}:${date.slice(11, 13)}:${date.slice(13, 15)}Z`)
      }))
      assert.strictEqual(again.authorization, auth, "the signature covers the body that was sent")
      assert.notInclude(JSON.stringify(sent!.headers), secret)

      const failed = yield* Effect.either(Mock.streamPlain(model, PROMPT))
      assert(Either.isLeft(failed))
      assert.include(failed.left.message, "throttlingException")
      assert(Option.isSome(retryable(failed.left, Date.now())))
    }).pipe(Effect.provide(Layer.merge(NodeHttpClient.layerUndici, Mock.ToolsLayer))))

  it.scoped("anthropic: a forced tool choice goes without thinking, which Anthropic refuses beside it", () =>
    Effect.gen(function*() {
      const mock = yield* Mock.make
      const model = yield* upstreamLanguageModel(timeouts, upstreamOf("anthropic", `http://127.0.0.1:${mock.port}`, "claude-sonnet-4-5"))
      yield* mock.script(Mock.stream(Fake.anthropic({ tool: TOOL_CALL, usage: { input: 5, output: 5 } })))
      const parts = yield* model.streamText({ prompt: PROMPT, toolkit: Mock.Tools, toolChoice: "required", disableToolCallResolution: true }).pipe(
        Stream.runCollect
      )
      assert.isTrue([...parts].some((p) => p.type === "tool-call"))
      const [sent] = yield* mock.requests
      assert.isUndefined(sent!.body.thinking)
      assert.deepStrictEqual(sent!.body.tool_choice, { type: "any" })
    }).pipe(Effect.provide(Layer.merge(NodeHttpClient.layerUndici, Mock.ToolsLayer))))
})
