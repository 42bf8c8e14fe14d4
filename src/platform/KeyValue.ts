import { Clock, Context, Duration, Effect, Layer, Option, Redacted } from "effect"
import { Redis } from "ioredis"
import { AppConfig } from "./Config.js"

/**
 * The key-value port: what may expire or be lost (login sessions, SMS codes, cooldowns, counters). Redis when
 * `REDIS_URL` is set, an in-process map otherwise. A store failure is a defect at this edge (the request becomes a
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
  /** Adds one and returns the new count; the TTL starts with the first increment of a window. */
  readonly increment: (key: string, ttl: Duration.DurationInput) => Effect.Effect<number>
  /** Renews the lifetime of an existing key; false when the key is gone. */
  readonly touch: (key: string, ttl: Duration.DurationInput) => Effect.Effect<boolean>
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
      increment: (key, ttl) =>
        withNow((now) => {
          const entry = live(key, now)
          const count = entry === undefined ? 1 : Number(entry.value) + 1
          entries.set(prefix + key, { value: String(count), expiresAt: entry?.expiresAt ?? now + millis(ttl) })
          return count
        }),
      touch: (key, ttl) =>
        withNow((now) => {
          const entry = live(key, now)
          if (entry === undefined) return false
          entry.expiresAt = now + millis(ttl)
          return true
        }),
      ttl: (key) => withNow((now) => Option.map(Option.fromNullable(live(key, now)), (e) => e.expiresAt - now)),
      ping: Effect.void
    }
  })

export const makeRedis = (url: Redacted.Redacted, prefix: string) =>
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
    const run = <A>(f: () => Promise<A>) => Effect.orDie(Effect.tryPromise(f))
    const store: KeyValueStore = {
      get: (key) => Effect.map(run(() => client.get(key)), Option.fromNullable),
      set: (key, value, ttl) => Effect.asVoid(run(() => client.set(key, value, "PX", millis(ttl)))),
      setIfAbsent: (key, value, ttl) =>
        Effect.map(run(() => client.set(key, value, "PX", millis(ttl), "NX")), (reply) => reply === "OK"),
      take: (key) => Effect.map(run(() => client.getdel(key)), Option.fromNullable),
      delete: (...keys) => keys.length === 0 ? Effect.void : Effect.asVoid(run(() => client.del(...keys))),
      increment: (key, ttl) =>
        Effect.map(
          run(() =>
            client.multi().incr(key).pexpire(key, millis(ttl), "NX").exec()
          ),
          (replies) => Number(replies?.[0]?.[1] ?? 0)
        ),
      touch: (key, ttl) => Effect.map(run(() => client.pexpire(key, millis(ttl))), (n) => n === 1),
      ttl: (key) => Effect.map(run(() => client.pttl(key)), (ms) => (ms >= 0 ? Option.some(ms) : Option.none())),
      ping: Effect.tryPromise({
        try: () => client.ping(),
        catch: (cause) => new Error(`redis: ${String(cause)}`)
      }).pipe(Effect.timeoutFail({ duration: "2 seconds", onTimeout: () => new Error("redis: ping timed out") }))
    }
    return store
  })

export const KeyValueLive = Layer.scoped(
  KeyValue,
  Effect.gen(function*() {
    const config = yield* AppConfig
    return yield* Option.match(config.redisUrl, {
      onNone: () => makeMemory(config.keyPrefix),
      onSome: (url) => makeRedis(url, config.keyPrefix)
    })
  })
).pipe(Layer.provide(AppConfig.Default))
