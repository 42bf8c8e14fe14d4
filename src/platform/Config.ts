import { Config, ConfigError, ConfigProvider, Duration, Effect, Either, LogLevel, Option, Redacted } from "effect"
import { parseOrigins } from "./http/Guards.js"

/**
 * Every setting of the platform, read once through `Config` (never `process.env`), so tests can hand the whole
 * program a `ConfigProvider` of their own. The README's settings table mirrors this file.
 */

export const duration = (name: string, fallback: Duration.DurationInput) =>
  setting(name, Config.duration, Duration.decode(fallback))

/**
 * An optional setting. Set to the empty string it counts as unset: `JWT_SECRET=` in an env file or
 * `JWT_SECRET: ${JWT_SECRET}` in a compose file means "not given", never "the empty key" or "the empty URL".
 */
export const optionalString = (name: string) =>
  Config.option(Config.string(name)).pipe(Config.map(Option.filter((value) => value.trim().length > 0)))

/**
 * An optional setting of any type (`Config.integer`, `Config.literal(...)`, ...), with the same rule: the empty
 * string counts as unset (`METRICS_PORT=` is "no metrics", not "an invalid port").
 */
export const optional = <A>(name: string, read: (name: string) => Config.Config<A>): Config.Config<Option.Option<A>> =>
  optionalString(name).pipe(
    Config.mapOrFail((raw) =>
      Option.isNone(raw)
        ? Either.right(Option.none<A>())
        // The text given, parsed as `read` parses it (so a bad value fails with its own message, naming the
        // setting): `Config` has no flatMap, and this provider of one value is pure and synchronous.
        : Either.map(
          Effect.runSync(Effect.either(ConfigProvider.fromMap(new Map([[name, raw.value]])).load(read(name)))),
          Option.some
        )
    )
  )

/** A setting with a default, the empty string counting as unset: `DATA_DIR=` keeps `./data`, not the current folder. */
export const setting = <A>(name: string, read: (name: string) => Config.Config<A>, fallback: A): Config.Config<A> =>
  Config.map(optional(name, read), Option.getOrElse(() => fallback))

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
export const WorkerIndex = optional("WORKER_INDEX", Config.integer)

/**
 * What the process tells its operator (platform/telemetry): read once, by `withTelemetry` around the whole program
 * (before any layer exists, so a plain `Config` rather than a service).
 */
export const TelemetryConfig = Config.all({
  logFormat: optional("LOG_FORMAT", Config.literal("json", "pretty")),
  logLevel: setting("LOG_LEVEL", Config.logLevel, LogLevel.Info),
  /** The Prometheus listener: off unless a port is given; loopback unless told otherwise (it has no auth). */
  metricsPort: optional("METRICS_PORT", Config.port),
  metricsHost: setting("METRICS_HOST", Config.string, "127.0.0.1"),
  /** OTLP/HTTP per the OpenTelemetry spec: the base endpoint gets `/v1/traces`; the traces endpoint is used as is. */
  otlpEndpoint: optionalString("OTEL_EXPORTER_OTLP_ENDPOINT"),
  otlpTracesEndpoint: optionalString("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
  otlpHeaders: optionalRedacted("OTEL_EXPORTER_OTLP_HEADERS"),
  serviceName: setting("OTEL_SERVICE_NAME", Config.string, "atrium"),
  worker: WorkerIndex
})
export type TelemetryConfig = Config.Config.Success<typeof TelemetryConfig>

export const PlatformConfig = Config.all({
  port: setting("PORT", Config.integer, 8080),
  host: setting("HOST", Config.string, "0.0.0.0"),
  dataDir: setting("DATA_DIR", Config.string, "./data"),
  databaseUrl: optionalRedacted("DATABASE_URL"),
  redisUrl: optionalRedacted("REDIS_URL"),
  /** Prefix of every key this instance writes to the key-value store, so several instances can share one Redis. */
  keyPrefix: setting("KEY_PREFIX", Config.string, "atrium:"),
  jwtSecret: optionalSecret("JWT_SECRET"),
  publicUrl: optionalString("PUBLIC_URL"),
  /**
   * Where the MCP tool server is mounted (read here once: the edge and the tool server both need it). A path the
   * router cannot mount (no leading `/`, a trailing `/`, a query) stops the start instead of silently serving the
   * tools somewhere else.
   */
  mcpPath: setting("MCP_PATH", Config.string, "/mcp").pipe(
    Config.validate({
      message: "MCP_PATH must be a path such as /mcp: a leading '/', no trailing '/', no query, no spaces",
      validation: (path) => /^\/[A-Za-z0-9._~\-/]*[A-Za-z0-9._~-]$/.test(path) && !path.includes("//")
    }),
    Config.map((path) => path as `/${string}`)
  ),
  maxBodyBytes: setting("MAX_BODY_BYTES", Config.integer, 1024 * 1024),
  /**
   * How long a request's body may take to arrive whole (on the storage route, which takes large files: how long it
   * may stop moving) before it is answered 408 and its connection closed (platform/http/Body.ts).
   */
  bodyTimeout: duration("REQUEST_BODY_TIMEOUT", "10 seconds").pipe(
    Config.validate({ message: "REQUEST_BODY_TIMEOUT must be longer than 0", validation: (d) => Duration.toMillis(d) > 0 })
  ),
  /** How long an SSE stream may stay quiet before a `: ping` comment (tests shorten it to see one). */
  sseHeartbeat: duration("SSE_HEARTBEAT", "15 seconds"),
  /** How long shutdown waits for open requests and streams before it closes their connections. */
  shutdownGrace: duration("SHUTDOWN_GRACE", "10 seconds"),
  /** Whether `X-Forwarded-For` from the connecting proxy names the real client (set behind a reverse proxy). */
  trustProxy: setting("TRUST_PROXY", Config.boolean, false),
  /**
   * The built web app the platform serves (platform/WebApp.ts); a relative path is the package's, wherever the
   * process was started from.
   */
  webDist: setting("WEB_DIST", Config.string, "web/dist"),
  /** `WORKERS=N|auto`: how many processes `npm start` runs (platform/Workers.ts); anything else is one. */
  workers: setting("WORKERS", Config.string, "1"),
  /** This process as a runner of the cluster (platform/Cluster.ts; cluster mode only). */
  runner: Config.all({
    /** The address other runners dial to reach this one. */
    host: setting("RUNNER_HOST", Config.string, "127.0.0.1"),
    /** The runner-to-runner port; unset, one derived from `PORT` (Cluster.ts `runnerPortOf`). */
    port: optional("RUNNER_PORT", Config.integer),
    /** Set by the primary process of `WORKERS=N` for each worker it starts (0 for the first). */
    worker: Config.map(WorkerIndex, Option.getOrElse(() => 0))
  }),
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
    provider: setting("SMS_PROVIDER", Config.literal("console", "http"), "console" as const),
    httpUrl: optionalString("SMS_HTTP_URL"),
    httpToken: optionalSecret("SMS_HTTP_TOKEN"),
    testOtp,
    codeTtl: duration("SMS_CODE_TTL", "5 minutes"),
    cooldown: duration("SMS_COOLDOWN", "60 seconds"),
    maxAttempts: setting("SMS_MAX_ATTEMPTS", Config.integer, 5),
    /**
     * Tries of a code from all sources together past which only the source that asked for it may still try it (each
     * source alone gets `SMS_MAX_ATTEMPTS`; guesses never void a code: docs/identity.md).
     */
    maxAttemptsTotal: setting("SMS_MAX_ATTEMPTS_TOTAL", Config.integer, 50),
    /** Codes a phone got in a day, or a client asked for in an hour, after which `sendCode` needs a solved challenge. */
    challengeAfter: setting("SMS_CHALLENGE_AFTER", Config.integer, 3),
    dailyLimitPerPhone: setting("SMS_DAILY_LIMIT", Config.integer, 10),
    hourlyLimitPerIp: setting("SMS_IP_HOURLY_LIMIT", Config.integer, 30)
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
