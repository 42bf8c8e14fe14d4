import { Config, ConfigError, Duration, Effect, Either, Option, Redacted } from "effect"
import { parseOrigins } from "./http/Guards.js"

/**
 * Every setting of the platform, read once through `Config` (never `process.env`), so tests can hand the whole
 * program a `ConfigProvider` of their own. The README's settings table mirrors this file.
 */

export const duration = (name: string, fallback: Duration.DurationInput) =>
  Config.duration(name).pipe(Config.withDefault(Duration.decode(fallback)))

/**
 * An optional setting. Set to the empty string it counts as unset: `JWT_SECRET=` in an env file or
 * `JWT_SECRET: ${JWT_SECRET}` in a compose file means "not given", never "the empty key" or "the empty URL".
 */
export const optionalString = (name: string) =>
  Config.option(Config.string(name)).pipe(Config.map(Option.filter((value) => value.trim().length > 0)))

export const optionalRedacted = (name: string) =>
  Config.option(Config.redacted(name)).pipe(
    Config.map(Option.filter((value) => Redacted.value(value).trim().length > 0))
  )

/**
 * A key the platform signs, verifies or encrypts with. Unset, the feature it guards falls back as documented
 * (generated, or closed); set but empty (`PAYMENT_WEBHOOK_SECRET=` in an env file), start-up stops and names it,
 * because reading it as unset would hide a deployment mistake and reading it as given would make the empty
 * string a key anyone can sign with.
 */
export const optionalSecret = (name: string) =>
  Config.option(Config.redacted(name)).pipe(
    Config.mapOrFail((value) =>
      Option.isSome(value) && Redacted.value(value.value).trim().length === 0
        ? Either.left(ConfigError.InvalidData([name], `${name} is set but empty: give it a value, or unset it`))
        : Either.right(value)
    )
  )

/** `+8613800000000=123456,+15550001111=000000`: numbers that send nothing and always accept their fixed code. */
const testOtp = Config.string("SMS_TEST_OTP").pipe(
  Config.withDefault(""),
  Config.mapOrFail((raw) => {
    const entries = new Map<string, string>()
    for (const pair of raw.split(",").map((s) => s.trim()).filter((s) => s.length > 0)) {
      const [phone, code] = pair.split("=").map((s) => s.trim())
      if (!phone || !code || !/^\+[1-9]\d{6,14}$/.test(phone) || !/^\d{6}$/.test(code)) {
        return Either.left(
          ConfigError.InvalidData(["SMS_TEST_OTP"], `expected "+E164=6digits" pairs, got "${pair}"`)
        )
      }
      entries.set(phone, code)
    }
    return Either.right(entries as ReadonlyMap<string, string>)
  })
)

/**
 * Which worker of `WORKERS=N` this process is (`Workers.ts` sets it for each one it forks); none for a process
 * started on its own. The runner port and the metrics port of a worker derive from it.
 */
export const WorkerIndex = Config.option(Config.integer("WORKER_INDEX"))

export const PlatformConfig = Config.all({
  port: Config.integer("PORT").pipe(Config.withDefault(8080)),
  host: Config.string("HOST").pipe(Config.withDefault("0.0.0.0")),
  dataDir: Config.string("DATA_DIR").pipe(Config.withDefault("./data")),
  databaseUrl: optionalRedacted("DATABASE_URL"),
  redisUrl: optionalRedacted("REDIS_URL"),
  /** Prefix of every key this instance writes to the key-value store, so several instances can share one Redis. */
  keyPrefix: Config.string("KEY_PREFIX").pipe(Config.withDefault("atrium:")),
  jwtSecret: optionalSecret("JWT_SECRET"),
  publicUrl: optionalString("PUBLIC_URL"),
  mcpPath: Config.string("MCP_PATH").pipe(Config.withDefault("/mcp")),
  maxBodyBytes: Config.integer("MAX_BODY_BYTES").pipe(Config.withDefault(1024 * 1024)),
  /** How long an SSE stream may stay quiet before a `: ping` comment (tests shorten it to see one). */
  sseHeartbeat: duration("SSE_HEARTBEAT", "15 seconds"),
  /** How long shutdown waits for open requests and streams before it closes their connections. */
  shutdownGrace: duration("SHUTDOWN_GRACE", "10 seconds"),
  /** Whether `X-Forwarded-For` from the connecting proxy names the real client (set behind a reverse proxy). */
  trustProxy: Config.boolean("TRUST_PROXY").pipe(Config.withDefault(false)),
  /**
   * The operator's bearer for `/internal/*` (grants, reviews). Unset, those routes are closed: behind a reverse
   * proxy on the same host every internet client is a loopback peer, so the address alone proves nothing.
   */
  internalToken: optionalSecret("INTERNAL_TOKEN"),
  /** Web apps on other origins allowed to call the API with a bearer (comma-separated; empty: none). */
  corsOrigins: Config.string("CORS_ORIGINS").pipe(
    Config.withDefault(""),
    Config.mapOrFail((raw) => {
      const parsed = parseOrigins(raw)
      return typeof parsed === "string"
        ? Either.left(ConfigError.InvalidData(["CORS_ORIGINS"], parsed))
        : Either.right(parsed)
    })
  ),
  sms: Config.all({
    provider: Config.literal("console", "http")("SMS_PROVIDER").pipe(Config.withDefault("console" as const)),
    httpUrl: optionalString("SMS_HTTP_URL"),
    httpToken: optionalSecret("SMS_HTTP_TOKEN"),
    testOtp,
    codeTtl: duration("SMS_CODE_TTL", "5 minutes"),
    cooldown: duration("SMS_COOLDOWN", "60 seconds"),
    maxAttempts: Config.integer("SMS_MAX_ATTEMPTS").pipe(Config.withDefault(5)),
    /**
     * Tries of a code from all sources together past which only the source that asked for it may still try it (each
     * source alone gets `SMS_MAX_ATTEMPTS`; guesses never void a code: docs/identity.md).
     */
    maxAttemptsTotal: Config.integer("SMS_MAX_ATTEMPTS_TOTAL").pipe(Config.withDefault(50)),
    /** Codes a phone got today, or a client asked for this hour, after which `sendCode` needs a solved challenge. */
    challengeAfter: Config.integer("SMS_CHALLENGE_AFTER").pipe(Config.withDefault(3)),
    dailyLimitPerPhone: Config.integer("SMS_DAILY_LIMIT").pipe(Config.withDefault(10)),
    hourlyLimitPerIp: Config.integer("SMS_IP_HOURLY_LIMIT").pipe(Config.withDefault(30))
  }),
  login: Config.all({
    tokenTtl: duration("JWT_TTL", "7 days"),
    sessionTtl: duration("LOGIN_SESSION_TTL", "24 hours")
  })
})

export type PlatformConfig = Config.Config.Success<typeof PlatformConfig>

export class AppConfig extends Effect.Service<AppConfig>()("atrium/platform/AppConfig", {
  effect: Effect.map(PlatformConfig, (config) => ({
    ...config,
    /** The address people reach us at: links, cookies and the MCP URL derive from it. */
    baseUrl: Option.getOrElse(config.publicUrl, () => `http://localhost:${config.port}`).replace(/\/+$/, ""),
    secureCookies: Option.exists(config.publicUrl, (url) => url.startsWith("https://"))
  }))
}) {}
