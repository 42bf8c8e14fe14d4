import { RateLimiter } from "@effect/experimental"
import { Clock, Context, Duration, Effect, Layer, Option, Redacted } from "effect"
import { Redis } from "ioredis"
import { AppConfig } from "./Config.js"

/**
 * The key-value port: what may expire or be lost (login sessions, SMS codes, cooldowns). Redis when `REDIS_URL` is
 * set, an in-process map otherwise. Counters with a limit are `@effect/experimental`'s `RateLimiter`, whose store
 * lives on the same backend (`KeyValueLive` provides both). A store failure is a defect at this edge (the request becomes a
 * 500 `internal_error`); only `ping` reports it as a value, for the health check.
 */
export interface KeyValueStore {
  readonly get: (key: string) => Effect.Effect<Option.Option<string>>
  readonly set: (key: string, value: string, ttl: Duration.DurationInput) => Effect.Effect<void>
  /** Sets only when the key is absent; true when it was set (a cooldown that was free). */
  readonly setIfAbsent: (key: string, value: string, ttl: Duration.DurationInput) => Effect.Effect<boolean>
  /** Reads and removes in one step, so a single-use value is used once even under concurrency. */
  readonly take: (key: string) => Effect.Effect<Option.Option<string>>
  readonly delete: (...keys: ReadonlyArray<string>) => Effect.Effect<void>
  /** Renews the lifetime of an existing key; false when the key is gone. */
  readonly touch: (key: string, ttl: Duration.DurationInput) => Effect.Effect<boolean>
  /** `get` and, when the key exists, `touch`, in one step (one round trip to Redis: `GETEX`). */
  readonly getAndTouch: (key: string, ttl: Duration.DurationInput) => Effect.Effect<Option.Option<string>>
  /** Milliseconds until the key expires, or none when it does not exist. */
  readonly ttl: (key: string) => Effect.Effect<Option.Option<number>>
  readonly ping: Effect.Effect<void, Error>
}

export class KeyValue extends Context.Tag("atrium/platform/KeyValue")<KeyValue, KeyValueStore>() {}

const millis = (ttl: Duration.DurationInput) => Math.max(1, Math.ceil(Duration.toMillis(ttl)))

/** An in-process store with the same TTL semantics as Redis; expired entries vanish on read. */
export const makeMemory = (prefix: string): Effect.Effect<KeyValueStore> =>
  Effect.sync(() => {
    const entries = new Map<string, { value: string; expiresAt: number }>()
    const live = (key: string, now: number) => {
      const entry = entries.get(prefix + key)
      if (entry === undefined) return undefined
      if (entry.expiresAt <= now) {
        entries.delete(prefix + key)
        return undefined
      }
      return entry
    }
    const withNow = <A>(f: (now: number) => A) => Effect.map(Clock.currentTimeMillis, f)
    return {
      get: (key) => withNow((now) => Option.fromNullable(live(key, now)?.value)),
      set: (key, value, ttl) =>
        withNow((now) => {
          entries.set(prefix + key, { value, expiresAt: now + millis(ttl) })
        }),
      setIfAbsent: (key, value, ttl) =>
        withNow((now) => {
          if (live(key, now) !== undefined) return false
          entries.set(prefix + key, { value, expiresAt: now + millis(ttl) })
          return true
        }),
      take: (key) =>
        withNow((now) => {
          const entry = live(key, now)
          entries.delete(prefix + key)
          return Option.fromNullable(entry?.value)
        }),
      delete: (...keys) =>
        Effect.sync(() => {
          for (const key of keys) entries.delete(prefix + key)
        }),
      touch: (key, ttl) =>
        withNow((now) => {
          const entry = live(key, now)
          if (entry === undefined) return false
          entry.expiresAt = now + millis(ttl)
          return true
        }),
      getAndTouch: (key, ttl) =>
        withNow((now) => {
          const entry = live(key, now)
          if (entry !== undefined) entry.expiresAt = now + millis(ttl)
          return Option.fromNullable(entry?.value)
        }),
      ttl: (key) => withNow((now) => Option.map(Option.fromNullable(live(key, now)), (e) => e.expiresAt - now)),
      ping: Effect.void
    }
  })

/** A connection with the platform's failure policy: commands fail at once while Redis is unreachable. */
export const connectRedis = (url: Redacted.Redacted, prefix: string) =>
  Effect.gen(function*() {
    const client = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const client = new Redis(Redacted.value(url), {
          keyPrefix: prefix,
          lazyConnect: false,
          // Fail commands at once while Redis is unreachable instead of queueing them behind a retry loop:
          // a request must not hang, and the health check must see the outage.
          enableOfflineQueue: false,
          maxRetriesPerRequest: 1,
          retryStrategy: (times) => Math.min(times * 200, 2000)
        })
        // ioredis emits "error" on every failed reconnect; without a listener Node treats it as unhandled.
        client.on("error", () => {})
        return client
      }),
      (client) => Effect.promise(() => client.quit().catch(() => client.disconnect()))
    )
    // Without an offline queue, a command sent before the connection is ready fails: wait for the first attempt
    // to settle, so the first requests after start do not fail. An unreachable Redis does not stop the start
    // (the health check reports it, and commands fail at once until it is back).
    yield* Effect.async<void>((resume) => {
      const settled = () => {
        client.off("ready", settled)
        client.off("error", settled)
        client.off("end", settled)
        resume(Effect.void)
      }
      if (client.status !== "connecting" && client.status !== "connect" && client.status !== "wait") return settled()
      client.once("ready", settled)
      client.once("error", settled)
      client.once("end", settled)
      return Effect.sync(() => {
        client.off("ready", settled)
        client.off("error", settled)
        client.off("end", settled)
      })
    }).pipe(Effect.timeout("5 seconds"), Effect.ignore)
    return client
  })

export const redisStore = (client: Redis): KeyValueStore => {
  const run = <A>(f: () => Promise<A>) => Effect.orDie(Effect.tryPromise(f))
  return {
    get: (key) => Effect.map(run(() => client.get(key)), Option.fromNullable),
    set: (key, value, ttl) => Effect.asVoid(run(() => client.set(key, value, "PX", millis(ttl)))),
    setIfAbsent: (key, value, ttl) =>
      Effect.map(run(() => client.set(key, value, "PX", millis(ttl), "NX")), (reply) => reply === "OK"),
    take: (key) => Effect.map(run(() => client.getdel(key)), Option.fromNullable),
    delete: (...keys) => keys.length === 0 ? Effect.void : Effect.asVoid(run(() => client.del(...keys))),
    touch: (key, ttl) => Effect.map(run(() => client.pexpire(key, millis(ttl))), (n) => n === 1),
    getAndTouch: (key, ttl) => Effect.map(run(() => client.getex(key, "PX", millis(ttl))), Option.fromNullable),
    ttl: (key) => Effect.map(run(() => client.pttl(key)), (ms) => (ms >= 0 ? Option.some(ms) : Option.none())),
    ping: Effect.tryPromise({
      try: () => client.ping(),
      catch: (cause) => new Error(`redis: ${String(cause)}`)
    }).pipe(Effect.timeoutFail({ duration: "2 seconds", onTimeout: () => new Error("redis: ping timed out") }))
  }
}

export const makeRedis = (url: Redacted.Redacted, prefix: string) => Effect.map(connectRedis(url, prefix), redisStore)

/**
 * The scripts of `@effect/experimental`'s Redis rate-limiter store, on our own connection. Its `RateLimiter/Redis`
 * opens a second connection without our failure policy (above) and from options, not `REDIS_URL`; and its script
 * cannot be asked for a count without taking one (`tokens: 0` on a missing key sets `PX 0`, which Redis refuses),
 * which the login limits need: a request refused for a missing challenge must move no counter. TTLs are rounded up
 * to whole milliseconds (a window that does not divide by its limit gives a fraction, which `PX` refuses).
 */
const fixedWindowScript = `
local tokens = tonumber(ARGV[1])
local refill = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local current = tonumber(redis.call("GET", KEYS[1]))
if not current then
  if tokens == 0 then return { 0, 0 } end
  local ttl = math.ceil(refill * tokens)
  redis.call("SET", KEYS[1], tokens, "PX", ttl)
  return { tokens, ttl }
end
local ttl = redis.call("PTTL", KEYS[1])
local count = current + tokens
if tokens == 0 or (limit and count > limit) then return { count, ttl } end
ttl = math.ceil(ttl + refill * tokens)
redis.call("SET", KEYS[1], count, "PX", ttl)
return { count, ttl }
`

/** The library's token bucket, with both keys expiring once the bucket would be full again (as good as absent). */
const tokenBucketScript = `
local refill_key = KEYS[1] .. ":refill"
local tokens = tonumber(ARGV[1])
local refill = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local overflow = ARGV[5] == "1"
local current = tonumber(redis.call("GET", KEYS[1]))
local last_refill = tonumber(redis.call("GET", refill_key))
if not current or not last_refill then
  current = limit
  last_refill = now
end
local added = math.floor((now - last_refill) / refill)
if added > 0 then
  current = math.min(current + added, limit)
  last_refill = last_refill + added * refill
end
local left = current - tokens
local kept = left
if left < 0 and not overflow then kept = current end
local ttl = math.max(1, math.ceil((limit - kept) * refill + (now - last_refill)))
redis.call("SET", KEYS[1], kept, "PX", ttl)
redis.call("SET", refill_key, last_refill, "PX", ttl)
return left
`

interface LimiterCommands {
  atriumFixedWindow(key: string, tokens: number, refillMillis: number, limit: number | ""): Promise<[number, number]>
  atriumTokenBucket(key: string, tokens: number, refillMillis: number, limit: number, now: number, overflow: 0 | 1): Promise<number>
}

const limiterPrefix = "ratelimit:"

/** The rate limiter's store over a connection from `connectRedis`; its keys are under `ratelimit:`. */
export const redisLimiterStore = (client: Redis): RateLimiter.RateLimiterStore["Type"] => {
  client.defineCommand("atriumFixedWindow", { numberOfKeys: 1, lua: fixedWindowScript })
  client.defineCommand("atriumTokenBucket", { numberOfKeys: 1, lua: tokenBucketScript })
  const commands = client as unknown as LimiterCommands
  const run = <A>(command: string, f: () => Promise<A>) =>
    Effect.tryPromise({
      try: f,
      catch: (cause) => new RateLimiter.RateLimitStoreError({ message: `redis: ${command} failed`, cause })
    })
  return RateLimiter.RateLimiterStore.of({
    fixedWindow: (options) =>
      run("fixedWindow", () =>
        commands.atriumFixedWindow(
          limiterPrefix + options.key,
          options.tokens,
          Duration.toMillis(options.refillRate),
          options.limit ?? ""
        )),
    tokenBucket: (options) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        run("tokenBucket", () =>
          commands.atriumTokenBucket(
            limiterPrefix + options.key,
            options.tokens,
            Duration.toMillis(options.refillRate),
            options.limit,
            now,
            options.allowOverflow ? 1 : 0
          )))
  })
}

/** The key-value store and the rate limiter's store, on Redis when `REDIS_URL` is set, in process otherwise. */
export const KeyValueLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    Option.match(config.redisUrl, {
      onNone: () => Layer.merge(Layer.effect(KeyValue, makeMemory(config.keyPrefix)), RateLimiter.layerStoreMemory),
      onSome: (url) =>
        Layer.scopedContext(Effect.map(connectRedis(url, config.keyPrefix), (client) =>
          Context.make(KeyValue, redisStore(client)).pipe(
            Context.add(RateLimiter.RateLimiterStore, redisLimiterStore(client))
          )))
    }))
).pipe(Layer.provide(AppConfig.Default))
