import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, LogLevel, Option, Redacted } from "effect"
import { ChallengeConfig } from "../../src/identity/Config.js"
import { KnowledgeConfig } from "../../src/knowledge/Config.js"
import { PlatformConfig, TelemetryConfig } from "../../src/platform/Config.js"
import { SandboxSettings } from "../../src/runtime/sandbox/Config.js"
import { ToolsConfig } from "../../src/runtime/tools/Config.js"

const provider = (settings: Record<string, string>) => ConfigProvider.fromMap(new Map(Object.entries(settings)))

const load = (settings: Record<string, string>) => Effect.withConfigProvider(PlatformConfig, provider(settings))

/** A config module's service, built under these settings alone. */
const build = <A, E>(service: Effect.Effect<A, E>, settings: Record<string, string>) =>
  Effect.withConfigProvider(service, provider(settings))

/** One setting of each kind (text, number, yes/no, duration, list, choice), set to the empty string. */
const EMPTY = {
  PORT: "",
  HOST: "",
  DATA_DIR: "",
  KEY_PREFIX: " ",
  TRUST_PROXY: "",
  WEB_DIST: "",
  WORKERS: "",
  RUNNER_HOST: "",
  RUNNER_PORT: "",
  WORKER_INDEX: "",
  SMS_PROVIDER: "",
  SMS_MAX_ATTEMPTS: "",
  JWT_TTL: "",
  LOG_FORMAT: "",
  LOG_LEVEL: "",
  METRICS_PORT: "",
  METRICS_HOST: "",
  OTEL_SERVICE_NAME: "",
  OTEL_EXPORTER_OTLP_HEADERS: "",
  TOOL_ALLOWED_HOSTS: "",
  MCP_TOOL_TIMEOUT_MS: "",
  SMS_CHALLENGE_MAX_NUMBER: "",
  SMS_CHALLENGE_TTL: "",
  EMBEDDINGS_DIMENSIONS: "",
  KNOWLEDGE_LANGUAGE: "",
  SANDBOX_TIME_MS: "",
  SANDBOX_REQUIRE_NETNS: ""
}

describe("configuration", () => {
  it.effect("an optional setting set to the empty string counts as unset", () =>
    Effect.gen(function*() {
      // What `PUBLIC_URL=` in an env file or `PUBLIC_URL: ${PUBLIC_URL}` in a compose file hands the process.
      const config = yield* load({
        DATABASE_URL: "",
        REDIS_URL: " ",
        PUBLIC_URL: "",
        SMS_HTTP_URL: ""
      })
      assert.isTrue(Option.isNone(config.databaseUrl), "DATABASE_URL")
      assert.isTrue(Option.isNone(config.redisUrl), "REDIS_URL")
      assert.isTrue(Option.isNone(config.publicUrl), "PUBLIC_URL")
      assert.isTrue(Option.isNone(config.sms.httpUrl), "SMS_HTTP_URL")
    }))

  it.effect("a setting with a default, set to the empty string, takes its default (every kind, every config module)", () =>
    Effect.gen(function*() {
      const config = yield* load(EMPTY)
      assert.strictEqual(config.port, 8080, "PORT")
      assert.strictEqual(config.host, "0.0.0.0", "HOST")
      // Not the empty path, which would put the database in whatever folder the process started in.
      assert.strictEqual(config.dataDir, "./data", "DATA_DIR")
      assert.strictEqual(config.keyPrefix, "atrium:", "KEY_PREFIX")
      assert.isFalse(config.trustProxy, "TRUST_PROXY")
      assert.strictEqual(config.webDist, "web/dist", "WEB_DIST")
      assert.strictEqual(config.workers, "1", "WORKERS")
      assert.deepStrictEqual(config.runner, { host: "127.0.0.1", port: Option.none(), worker: 0 }, "RUNNER_*")
      assert.strictEqual(config.sms.provider, "console", "SMS_PROVIDER")
      assert.strictEqual(config.sms.maxAttempts, 5, "SMS_MAX_ATTEMPTS")
      assert.isTrue(Duration.equals(config.login.tokenTtl, Duration.days(7)), "JWT_TTL")

      const telemetry = yield* build(TelemetryConfig, EMPTY)
      assert.isTrue(Option.isNone(telemetry.logFormat), "LOG_FORMAT")
      assert.strictEqual(telemetry.logLevel, LogLevel.Info, "LOG_LEVEL")
      assert.isTrue(Option.isNone(telemetry.metricsPort), "METRICS_PORT")
      assert.strictEqual(telemetry.metricsHost, "127.0.0.1", "METRICS_HOST")
      assert.strictEqual(telemetry.serviceName, "atrium", "OTEL_SERVICE_NAME")
      assert.isTrue(Option.isNone(telemetry.otlpHeaders), "OTEL_EXPORTER_OTLP_HEADERS")
      assert.isTrue(Option.isNone(telemetry.worker), "WORKER_INDEX")

      const tools = yield* build(Effect.provide(ToolsConfig, ToolsConfig.Default), EMPTY)
      assert.strictEqual(tools.allowedHosts.size, 0, "TOOL_ALLOWED_HOSTS")
      assert.strictEqual(tools.mcpTimeoutMs, 30_000, "MCP_TOOL_TIMEOUT_MS")

      const challenge = yield* build(Effect.provide(ChallengeConfig, ChallengeConfig.Default), EMPTY)
      assert.strictEqual(challenge.maxNumber, 100_000, "SMS_CHALLENGE_MAX_NUMBER")
      assert.isTrue(Duration.equals(challenge.lifetime, Duration.minutes(10)), "SMS_CHALLENGE_TTL")
      assert.isTrue(Option.isNone(challenge.hmacKey), "SMS_CHALLENGE_KEY")

      const knowledge = yield* build(Effect.provide(KnowledgeConfig, KnowledgeConfig.Default), EMPTY)
      assert.strictEqual(knowledge.language, "english", "KNOWLEDGE_LANGUAGE")

      const sandbox = yield* build(SandboxSettings, EMPTY)
      assert.strictEqual(sandbox.timeMs, 30_000, "SANDBOX_TIME_MS")
      assert.isTrue(sandbox.requireNetworkNamespace, "SANDBOX_REQUIRE_NETNS")
    }))

  it.effect("the moved settings, set, are read as given; a bad value still stops start-up, naming it", () =>
    Effect.gen(function*() {
      const settings = {
        WEB_DIST: "/srv/web",
        WORKERS: "auto",
        RUNNER_HOST: "10.0.0.5",
        RUNNER_PORT: "19000",
        WORKER_INDEX: "2",
        METRICS_PORT: "9464",
        LOG_FORMAT: "pretty",
        TOOL_ALLOWED_HOSTS: "127.0.0.1, Example.INTERNAL",
        MCP_TOOL_TIMEOUT_MS: "5000",
        SMS_CHALLENGE_MAX_NUMBER: "5000"
      }
      const config = yield* load(settings)
      assert.strictEqual(config.webDist, "/srv/web")
      assert.strictEqual(config.workers, "auto")
      assert.deepStrictEqual(config.runner, { host: "10.0.0.5", port: Option.some(19000), worker: 2 })
      const telemetry = yield* build(TelemetryConfig, settings)
      assert.deepStrictEqual(telemetry.metricsPort, Option.some(9464))
      assert.deepStrictEqual(telemetry.logFormat, Option.some("pretty" as const))
      const tools = yield* build(Effect.provide(ToolsConfig, ToolsConfig.Default), settings)
      assert.deepStrictEqual([...tools.allowedHosts], ["127.0.0.1", "example.internal"])
      assert.strictEqual(tools.mcpTimeoutMs, 5000)
      const challenge = yield* build(Effect.provide(ChallengeConfig, ChallengeConfig.Default), settings)
      assert.strictEqual(challenge.maxNumber, 5000)

      const badPort = yield* Effect.flip(build(TelemetryConfig, { METRICS_PORT: "not-a-port" }))
      assert.include(String(badPort), "METRICS_PORT")
      const badRunnerPort = yield* Effect.flip(load({ RUNNER_PORT: "x" }))
      assert.include(String(badRunnerPort), "RUNNER_PORT")
      const badTimeout = yield* Effect.flip(build(Effect.provide(ToolsConfig, ToolsConfig.Default), { MCP_TOOL_TIMEOUT_MS: "soon" }))
      assert.include(String(badTimeout), "MCP_TOOL_TIMEOUT_MS")
    }))

  it.effect("a key set to the empty string is refused, naming it (unset, it is none)", () =>
    Effect.gen(function*() {
      for (const name of ["JWT_SECRET", "INTERNAL_TOKEN", "SMS_HTTP_TOKEN"]) {
        const refused = yield* Effect.flip(load({ [name]: "" }))
        assert.include(String(refused), `${name} is set but empty`)
      }
      // The login challenge's key moved to identity's config module with the rule.
      const refused = yield* Effect.flip(build(Effect.provide(ChallengeConfig, ChallengeConfig.Default), { SMS_CHALLENGE_KEY: "" }))
      assert.include(String(refused), "SMS_CHALLENGE_KEY is set but empty")
      const config = yield* load({})
      assert.isTrue(Option.isNone(config.jwtSecret), "JWT_SECRET")
      assert.isTrue(Option.isNone(config.internalToken), "INTERNAL_TOKEN")
      assert.isTrue(Option.isNone(config.sms.httpToken), "SMS_HTTP_TOKEN")
    }))

  it.effect("a set value is kept as given", () =>
    Effect.gen(function*() {
      const config = yield* load({ JWT_SECRET: "s3cret", REDIS_URL: "redis://127.0.0.1:6379", PUBLIC_URL: "https://x" })
      assert.strictEqual(Option.map(config.jwtSecret, Redacted.value).pipe(Option.getOrNull), "s3cret")
      assert.strictEqual(Option.map(config.redisUrl, Redacted.value).pipe(Option.getOrNull), "redis://127.0.0.1:6379")
      assert.strictEqual(Option.getOrNull(config.publicUrl), "https://x")
    }))

  it.effect("defaults: port 8080, a 1 MiB body limit, no trusted proxy", () =>
    Effect.gen(function*() {
      const config = yield* load({})
      assert.strictEqual(config.port, 8080)
      assert.strictEqual(config.maxBodyBytes, 1024 * 1024)
      assert.isFalse(config.trustProxy)
      assert.isTrue(Option.isNone(config.jwtSecret))
    }))
})
