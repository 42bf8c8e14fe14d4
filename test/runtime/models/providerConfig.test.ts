import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
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
      assert.deepStrictEqual(chat.upstreamModels.map((m) => [m.id, m.model, m.provider.id, m.provider.kind, m.inputPer1k, m.outputPer1k, m.cachedInputPer1k]), [
        ["openai/gpt-4o-mini", "gpt-4o-mini", "openai", "openai-chat", "0.0015", "0.006", "0.00075"],
        ["openai/deepseek-chat", "deepseek-chat", "openai", "openai-chat", DEFAULT_UPSTREAM_RATE.inputPer1k, DEFAULT_UPSTREAM_RATE.outputPer1k, "0.005"]
      ])
    }))

  const document = {
    providers: [
      {
        id: "anthropic",
        kind: "anthropic",
        base_url: "http://127.0.0.1:1/",
        api_key: "sk-ant-secret",
        models: [{ id: "claude-sonnet-4-5", input_per_1k: "0.003", output_per_1k: "0.015", context_window: 200000, capabilities: ["tools", "vision", "reasoning"] }]
      },
      { id: "gemini", kind: "google", models: [{ id: "gemini-2.5-flash", input_per_1k: 0.0003, output_per_1k: "0.0025", cached_input_per_1k: "0.00003" }] }
    ]
  }

  it.effect("MODEL_PROVIDERS lists providers side by side, beside the OPENAI_* shorthand", () =>
    Effect.gen(function*() {
      const settings = yield* ModelProviderSettings.pipe(
        Effect.provide(ModelProviderSettings.Default),
        Effect.withConfigProvider(provider({
          MODEL_PROVIDER: "openai-chat",
          OPENAI_MODELS: "gpt-4o-mini",
          MODEL_PROVIDERS: JSON.stringify(document)
        }))
      )
      assert.deepStrictEqual(settings.upstreamModels.map((m) => m.id), ["openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-flash"])
      const claude = settings.upstreamModels[1]!
      assert.strictEqual(claude.provider.baseUrl, "http://127.0.0.1:1")
      assert.strictEqual(Option.map(claude.provider.apiKey, Redacted.value).pipe(Option.getOrNull), "sk-ant-secret")
      assert.notInclude(JSON.stringify(settings.providers), "sk-ant-secret")
      // Anthropic's cache reads cost a tenth of the input rate unless the file says otherwise.
      assert.strictEqual(claude.cachedInputPer1k, "0.0003")
      assert.deepStrictEqual(claude.capabilities, ["tools", "vision", "reasoning"])
      assert.strictEqual(claude.contextWindow, 200000)
      const gemini = settings.upstreamModels[2]!
      assert.strictEqual(gemini.provider.baseUrl, "https://generativelanguage.googleapis.com")
      assert.strictEqual(gemini.inputPer1k, "0.0003")
      assert.strictEqual(gemini.cachedInputPer1k, "0.00003")
      assert.deepStrictEqual(gemini.capabilities, ["tools"])
    }))

  it.scoped("MODEL_PROVIDERS_FILE is read once at start-up; a bad document names the provider and the field", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "providers-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      const file = join(dir, "providers.json")
      writeFileSync(file, JSON.stringify(document))
      const ok = yield* load({ MODEL_PROVIDERS_FILE: file })
      assert.deepStrictEqual(ok.providers.map((p) => p.id), ["anthropic", "gemini"])

      const bad = (patch: (doc: any) => void) => {
        const doc = structuredClone(document) as any
        patch(doc)
        return JSON.stringify(doc)
      }
      const cases: Array<[Record<string, string>, ReadonlyArray<string>]> = [
        [{ MODEL_PROVIDERS: bad((d) => (d.providers[1].models[0].input_per_1k = "cheap")) }, ["MODEL_PROVIDERS", "\"gemini\"", "models[0].input_per_1k"]],
        [{ MODEL_PROVIDERS: bad((d) => (d.providers[0].kind = "claude")) }, ["\"anthropic\"", "kind"]],
        [{ MODEL_PROVIDERS: bad((d) => Object.assign(d.providers[0], { kind: "bedrock", region: "mars" })) }, ["\"anthropic\"", "region"]],
        [{ MODEL_PROVIDERS: bad((d) => Object.assign(d.providers[0], { kind: "bedrock", aws_access_key_id: "AKID" })) }, ["\"anthropic\"", "aws_secret_access_key"]],
        [{ MODEL_PROVIDERS: bad((d) => (d.providers[0].base_url = "ftp://x")) }, ["\"anthropic\"", "base_url"]],
        [{ MODEL_PROVIDERS: bad((d) => (d.providers[0].models[0].capabilities = ["telepathy"])) }, ["\"anthropic\"", "capabilities"]],
        [{ MODEL_PROVIDERS: bad((d) => (d.providers[1].id = "anthropic")) }, ["\"anthropic\"", "listed twice"]],
        [{ MODEL_PROVIDERS: bad((d) => (d.providers[0].models = [])) }, ["\"anthropic\"", "models"]],
        [{ MODEL_PROVIDERS: "{not json" }, ["MODEL_PROVIDERS", "not JSON"]],
        [{ MODEL_PROVIDERS_FILE: join(dir, "missing.json") }, ["MODEL_PROVIDERS_FILE", "cannot read"]],
        [{ MODEL_PROVIDERS_FILE: file, MODEL_PROVIDERS: "{}" }, ["not both"]],
        [{ MODEL_PROVIDER: "openai-chat", OPENAI_MODELS: "m", MODEL_PROVIDERS: JSON.stringify({ providers: [{ ...document.providers[0], id: "openai" }] }) }, ["MODEL_PROVIDER", "openai"]]
      ]
      for (const [settings, needles] of cases) {
        const result = yield* Effect.either(load(settings))
        assert(Either.isLeft(result), `${JSON.stringify(settings)} should be refused`)
        for (const needle of needles) assert.include(String(result.left), needle)
        assert.notInclude(String(result.left), "sk-ant-secret")
      }
    }))
})
