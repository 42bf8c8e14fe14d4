import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Either, Option, Redacted } from "effect"
import {
  DEFAULT_UPSTREAM_RATE,
  ModelProviderConfig,
  ModelProviderSettings,
  parseRates
} from "../../../src/runtime/models/ProviderConfig.js"

const provider = (settings: Record<string, string>) => ConfigProvider.fromMap(new Map(Object.entries(settings)))

const load = (settings: Record<string, string>) => Effect.withConfigProvider(ModelProviderConfig, provider(settings))

describe("model provider settings", () => {
  it.effect("defaults: builtin, api.openai.com, no key, no models, 60 s idle, 10 min per call", () =>
    Effect.gen(function*() {
      const config = yield* load({})
      assert.strictEqual(config.provider, "builtin")
      assert.strictEqual(config.baseUrl, "https://api.openai.com/v1")
      assert.isTrue(Option.isNone(config.apiKey))
      assert.deepStrictEqual(config.models, [])
      assert.strictEqual(config.rates.size, 0)
      assert.isTrue(Duration.equals(config.idleTimeout, Duration.seconds(60)))
      assert.isTrue(Duration.equals(config.requestTimeout, Duration.minutes(10)))
    }))

  it.effect("empty values count as unset", () =>
    Effect.gen(function*() {
      const config = yield* load({
        MODEL_PROVIDER: "",
        OPENAI_BASE_URL: "",
        OPENAI_API_KEY: " ",
        OPENAI_MODELS: "",
        OPENAI_MODEL_RATES: "",
        OPENAI_STREAM_IDLE_TIMEOUT: "",
        OPENAI_REQUEST_TIMEOUT: ""
      })
      assert.strictEqual(config.provider, "builtin")
      assert.strictEqual(config.baseUrl, "https://api.openai.com/v1")
      assert.isTrue(Option.isNone(config.apiKey))
      assert.isTrue(Duration.equals(config.idleTimeout, Duration.seconds(60)))
    }))

  it.effect("set values: provider, trimmed URL, redacted key, model list, rates, durations", () =>
    Effect.gen(function*() {
      const config = yield* load({
        MODEL_PROVIDER: "openai-chat",
        OPENAI_BASE_URL: "http://127.0.0.1:11434/v1/",
        OPENAI_API_KEY: "sk-abc",
        OPENAI_MODELS: " gpt-4o-mini, deepseek-chat,,llama3:8b,gpt-4o-mini ",
        OPENAI_MODEL_RATES: "gpt-4o-mini=0.0015:0.006, llama3:8b=0:0",
        OPENAI_STREAM_IDLE_TIMEOUT: "300 millis",
        OPENAI_REQUEST_TIMEOUT: "2 minutes"
      })
      assert.strictEqual(config.provider, "openai-chat")
      assert.strictEqual(config.baseUrl, "http://127.0.0.1:11434/v1")
      assert.strictEqual(Option.map(config.apiKey, Redacted.value).pipe(Option.getOrNull), "sk-abc")
      assert.notInclude(String(config.apiKey), "sk-abc")
      assert.deepStrictEqual(config.models, ["gpt-4o-mini", "deepseek-chat", "llama3:8b"])
      assert.deepStrictEqual(config.rates.get("gpt-4o-mini"), { inputPer1k: "0.0015", outputPer1k: "0.006" })
      assert.deepStrictEqual(config.rates.get("llama3:8b"), { inputPer1k: "0", outputPer1k: "0" })
      assert.isTrue(Duration.equals(config.idleTimeout, Duration.millis(300)))
      assert.isTrue(Duration.equals(config.requestTimeout, Duration.minutes(2)))
    }))

  it.effect("bad values are configuration errors that name the setting", () =>
    Effect.gen(function*() {
      const cases: Array<[Record<string, string>, string]> = [
        [{ MODEL_PROVIDER: "anthropic" }, "MODEL_PROVIDER"],
        [{ OPENAI_MODEL_RATES: "gpt-4o=0.1" }, "OPENAI_MODEL_RATES"],
        [{ OPENAI_MODEL_RATES: "gpt-4o=1e-3:0.1" }, "OPENAI_MODEL_RATES"],
        [{ OPENAI_MODEL_RATES: "gpt-4o=0.0000001:0.1" }, "OPENAI_MODEL_RATES"],
        [{ OPENAI_STREAM_IDLE_TIMEOUT: "soon" }, "OPENAI_STREAM_IDLE_TIMEOUT"],
        [{ OPENAI_REQUEST_TIMEOUT: "0 seconds" }, "OPENAI_REQUEST_TIMEOUT"]
      ]
      for (const [settings, name] of cases) {
        const result = yield* Effect.either(load(settings))
        assert(Either.isLeft(result), `${JSON.stringify(settings)} should be refused`)
        assert.include(String(result.left), name)
      }
    }))

  it("rates keep the exact decimal text", () => {
    const rates = parseRates("a=0.000001:12.5")
    assert(Either.isRight(rates))
    assert.deepStrictEqual(rates.right.get("a"), { inputPer1k: "0.000001", outputPer1k: "12.5" })
  })

  it.effect("the settings service offers the listed models with their rates, none under builtin", () =>
    Effect.gen(function*() {
      const settings = { OPENAI_MODELS: "gpt-4o-mini,deepseek-chat", OPENAI_MODEL_RATES: "gpt-4o-mini=0.0015:0.006" }
      const builtin = yield* ModelProviderSettings.pipe(
        Effect.provide(ModelProviderSettings.Default),
        Effect.withConfigProvider(provider(settings))
      )
      assert.deepStrictEqual(builtin.upstreamModels, [])
      const chat = yield* ModelProviderSettings.pipe(
        Effect.provide(ModelProviderSettings.Default),
        Effect.withConfigProvider(provider({ ...settings, MODEL_PROVIDER: "openai-chat" }))
      )
      assert.deepStrictEqual(chat.upstreamModels, [
        { id: "gpt-4o-mini", provider: "openai-chat", inputPer1k: "0.0015", outputPer1k: "0.006" },
        { id: "deepseek-chat", provider: "openai-chat", ...DEFAULT_UPSTREAM_RATE }
      ])
    }))
})
