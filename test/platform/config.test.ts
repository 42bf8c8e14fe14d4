import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Option, Redacted } from "effect"
import { PlatformConfig } from "../../src/platform/Config.js"

const load = (settings: Record<string, string>) =>
  Effect.withConfigProvider(PlatformConfig, ConfigProvider.fromMap(new Map(Object.entries(settings))))

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

  it.effect("a key set to the empty string is refused, naming it (unset, it is none)", () =>
    Effect.gen(function*() {
      for (const name of ["JWT_SECRET", "INTERNAL_TOKEN", "SMS_HTTP_TOKEN"]) {
        const refused = yield* Effect.flip(load({ [name]: "" }))
        assert.include(String(refused), `${name} is set but empty`)
      }
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
