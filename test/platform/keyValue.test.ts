import { RateLimiter } from "@effect/experimental"
import { assert, describe, layer } from "@effect/vitest"
import { Context, Duration, Effect, Either, Layer, Option, Redacted, type Scope, TestClock } from "effect"
import { Redis } from "ioredis"
import {
  connectRedis,
  KeyValue,
  type KeyValueStore,
  makeMemory,
  makeRedis,
  redisLimiterStore
} from "../../src/platform/KeyValue.js"
import { realWait } from "../support/Poll.js"

/**
 * The key-value port's contract, run against both implementations: the in-memory store always, Redis when
 * `REDIS_URL` is set (with a key prefix of its own, removed afterwards). The memory store reads Effect's `Clock`, so
 * its tests run on the `TestClock` and move it by hand: its TTLs are checked to the millisecond. Redis expires keys
 * by its own clock, which no test can move: there time really passes (`pass`), and the checks are bounds.
 */

const randomName = () => Math.random().toString(36).slice(2, 10)

/** Every key a Redis-backed test wrote, deleted when the suite ends (they all carry TTLs anyway). */
const removeKeys = (url: string, prefix: string) =>
  Effect.promise(async () => {
    const client = new Redis(url, { lazyConnect: true })
    try {
      await client.connect()
      const keys = await client.keys(`${prefix}*`)
      if (keys.length > 0) await client.del(...keys)
    } finally {
      client.disconnect()
    }
  }).pipe(Effect.ignore)

interface Implementation {
  readonly name: string
  /** A store whose keys carry `prefix`. */
  readonly make: (prefix: string) => Effect.Effect<KeyValueStore, never, Scope.Scope>
  /** The rate limiter's store on the same backend. */
  readonly limiter: (prefix: string) => Effect.Effect<RateLimiter.RateLimiterStore["Type"], never, Scope.Scope>
  /** Whether the store keeps time by Effect's `Clock` (then the tests move the `TestClock`). */
  readonly effectClock: boolean
}

const redisUrl = process.env.REDIS_URL
const implementations: Array<Implementation> = [
  {
    name: "memory",
    make: makeMemory,
    limiter: () => Effect.map(Layer.build(RateLimiter.layerStoreMemory), Context.get(RateLimiter.RateLimiterStore)),
    effectClock: true
  },
  ...(redisUrl
    ? [{
      name: "redis",
      effectClock: false,
      make: (prefix: string) =>
        Effect.tap(
          makeRedis(Redacted.make(redisUrl), prefix),
          () => Effect.addFinalizer(() => removeKeys(redisUrl, prefix))
        ),
      limiter: (prefix: string) =>
        Effect.tap(
          Effect.map(connectRedis(Redacted.make(redisUrl), prefix), redisLimiterStore),
          () => Effect.addFinalizer(() => removeKeys(redisUrl, prefix))
        )
    }]
    : [])
]

for (const implementation of implementations) {
  const prefix = `atrium-test:kv:${randomName()}:`
  const StoreLive = Layer.scoped(KeyValue, implementation.make(prefix))
  const exact = implementation.effectClock
  /**
   * Lets `millis` pass for the store: the TestClock moved for the memory store; for Redis (services mode only), a
   * real wait: Redis expires keys by its own clock, and a key it expires says nothing. 100 ms of slack past the TTL.
   */
  const pass = (millis: number) =>
    exact ? TestClock.adjust(`${millis} millis`) : realWait(millis + 100)

  describe(`key-value store (${implementation.name})`, () => {
    layer(StoreLive, { excludeTestServices: !exact })((it) => {
      it.scoped("a store answers its first command as soon as it is made", () =>
        Effect.gen(function*() {
          const fresh = yield* implementation.make(`atrium-test:kv:${randomName()}:`)
          yield* fresh.set("first", "v", "1 minute")
          assert.deepStrictEqual(yield* fresh.get("first"), Option.some("v"))
          yield* fresh.ping
        }))

      it.effect("get of a missing key is none; set then get returns the value; set overwrites", () =>
        Effect.gen(function*() {
          const kv = yield* KeyValue
          assert.isTrue(Option.isNone(yield* kv.get("get:missing")))
          yield* kv.set("get:a", "one", "1 minute")
          assert.deepStrictEqual(yield* kv.get("get:a"), Option.some("one"))
          yield* kv.set("get:a", "two", "1 minute")
          assert.deepStrictEqual(yield* kv.get("get:a"), Option.some("two"))
          // Values are strings kept exactly, JSON included.
          const json = JSON.stringify({ userId: "usr_x", phone: "+8613800000000", note: "ünïcødé ✓" })
          yield* kv.set("get:json", json, "1 minute")
          assert.deepStrictEqual(yield* kv.get("get:json"), Option.some(json))
        }))

      it.effect("a value set with a TTL is gone after it", () =>
        Effect.gen(function*() {
          const kv = yield* KeyValue
          yield* kv.set("ttl:short", "v", "200 millis")
          yield* kv.set("ttl:long", "v", "1 minute")
          assert.deepStrictEqual(yield* kv.get("ttl:short"), Option.some("v"))
          if (exact) {
            yield* pass(199)
            assert.deepStrictEqual(yield* kv.get("ttl:short"), Option.some("v"), "still there 1 ms before its TTL")
            yield* pass(1)
          } else {
            yield* pass(200)
          }
          assert.isTrue(Option.isNone(yield* kv.get("ttl:short")))
          assert.isTrue(Option.isNone(yield* kv.ttl("ttl:short")))
          assert.isTrue(Option.isNone(yield* kv.take("ttl:short")))
          assert.isFalse(yield* kv.touch("ttl:short", "1 minute"))
          assert.deepStrictEqual(yield* kv.get("ttl:long"), Option.some("v"))
        }))

      it.effect("ttl is the time left in milliseconds, none for a missing key", () =>
        Effect.gen(function*() {
          const kv = yield* KeyValue
          yield* kv.set("ttl:ten", "v", "10 seconds")
          const left = Option.getOrThrow(yield* kv.ttl("ttl:ten"))
          if (exact) {
            assert.strictEqual(left, 10_000)
            yield* pass(2_500)
            assert.deepStrictEqual(yield* kv.ttl("ttl:ten"), Option.some(7_500))
          } else {
            // Redis counts from when it received the command: a little of the 10 s may be gone.
            assert.isAbove(left, 8_000)
            assert.isAtMost(left, 10_000)
          }
          assert.isTrue(Option.isNone(yield* kv.ttl("ttl:missing")))
        }))

      it.effect("setIfAbsent sets only a missing key, and again once it expired", () =>
        Effect.gen(function*() {
          const kv = yield* KeyValue
          assert.isTrue(yield* kv.setIfAbsent("nx:a", "first", "200 millis"))
          assert.isFalse(yield* kv.setIfAbsent("nx:a", "second", "1 minute"))
          assert.deepStrictEqual(yield* kv.get("nx:a"), Option.some("first"))
          // The refused call did not extend the key's lifetime either.
          if (exact) assert.deepStrictEqual(yield* kv.ttl("nx:a"), Option.some(200))
          else assert.isAtMost(Option.getOrThrow(yield* kv.ttl("nx:a")), 200)
          yield* pass(200)
          assert.isTrue(yield* kv.setIfAbsent("nx:a", "third", "1 minute"))
          assert.deepStrictEqual(yield* kv.get("nx:a"), Option.some("third"))
        }))

      it.effect("setIfAbsent under concurrency: exactly one caller wins", () =>
        Effect.gen(function*() {
          const kv = yield* KeyValue
          const results = yield* Effect.all(
            Array.from({ length: 20 }, (_, i) => kv.setIfAbsent("nx:race", String(i), "1 minute")),
            { concurrency: "unbounded" }
          )
          assert.strictEqual(results.filter((won) => won).length, 1)
        }))

      it.effect("take returns the value once and removes it", () =>
        Effect.gen(function*() {
          const kv = yield* KeyValue
          yield* kv.set("take:a", "code", "1 minute")
          assert.deepStrictEqual(yield* kv.take("take:a"), Option.some("code"))
          assert.isTrue(Option.isNone(yield* kv.take("take:a")))
          assert.isTrue(Option.isNone(yield* kv.get("take:a")))
          assert.isTrue(Option.isNone(yield* kv.take("take:missing")))
        }))

      it.effect("take is single-use under concurrency: 20 takes, exactly one value", () =>
        Effect.gen(function*() {
          const kv = yield* KeyValue
          yield* kv.set("take:race", "once", "1 minute")
          const results = yield* Effect.all(Array.from({ length: 20 }, () => kv.take("take:race")), {
            concurrency: "unbounded"
          })
          const got = results.filter(Option.isSome)
          assert.strictEqual(got.length, 1)
          assert.strictEqual(got[0]!.value, "once")
        }))

      it.effect("delete removes every key given; missing keys and no keys are fine", () =>
        Effect.gen(function*() {
          const kv = yield* KeyValue
          yield* kv.set("del:a", "1", "1 minute")
          yield* kv.set("del:b", "2", "1 minute")
          yield* kv.set("del:c", "3", "1 minute")
          yield* kv.delete("del:a", "del:b", "del:missing")
          yield* kv.delete()
          assert.isTrue(Option.isNone(yield* kv.get("del:a")))
          assert.isTrue(Option.isNone(yield* kv.get("del:b")))
          assert.deepStrictEqual(yield* kv.get("del:c"), Option.some("3"))
        }))

      it.effect("touch renews the lifetime of an existing key and is false for a missing one", () =>
        Effect.gen(function*() {
          const kv = yield* KeyValue
          yield* kv.set("touch:a", "v", "300 millis")
          assert.isTrue(yield* kv.touch("touch:a", "1 minute"))
          if (exact) assert.deepStrictEqual(yield* kv.ttl("touch:a"), Option.some(60_000))
          else assert.isAbove(Option.getOrThrow(yield* kv.ttl("touch:a")), 50_000)
          yield* pass(300)
          assert.deepStrictEqual(yield* kv.get("touch:a"), Option.some("v"))
          // Touch may also shorten: it sets the lifetime, it does not add to it.
          assert.isTrue(yield* kv.touch("touch:a", "200 millis"))
          yield* pass(200)
          assert.isTrue(Option.isNone(yield* kv.get("touch:a")))
          assert.isFalse(yield* kv.touch("touch:missing", "1 minute"))
          assert.isTrue(Option.isNone(yield* kv.get("touch:missing")))
        }))

      it.effect("getAndTouch reads a key and sets its lifetime in one step; a missing key stays missing", () =>
        Effect.gen(function*() {
          const kv = yield* KeyValue
          yield* kv.set("getex:a", "v", "300 millis")
          assert.deepStrictEqual(yield* kv.getAndTouch("getex:a", "1 minute"), Option.some("v"))
          if (exact) assert.deepStrictEqual(yield* kv.ttl("getex:a"), Option.some(60_000))
          else assert.isAbove(Option.getOrThrow(yield* kv.ttl("getex:a")), 50_000)
          yield* pass(300)
          assert.deepStrictEqual(yield* kv.getAndTouch("getex:a", "200 millis"), Option.some("v"))
          yield* pass(200)
          assert.isTrue(Option.isNone(yield* kv.get("getex:a")))
          assert.isTrue(Option.isNone(yield* kv.getAndTouch("getex:missing", "1 minute")))
          assert.isTrue(Option.isNone(yield* kv.ttl("getex:missing")))
        }))

      it.effect("ping answers", () =>
        Effect.gen(function*() {
          const kv = yield* KeyValue
          yield* kv.ping
        }))

      it.scoped("stores with different prefixes do not see each other's keys", () =>
        Effect.gen(function*() {
          const kv = yield* KeyValue
          const other = yield* implementation.make(`atrium-test:kv:${randomName()}:`)
          yield* kv.set("shared-name", "mine", "1 minute")
          assert.isTrue(Option.isNone(yield* other.get("shared-name")))
          yield* other.set("shared-name", "theirs", "1 minute")
          assert.deepStrictEqual(yield* kv.get("shared-name"), Option.some("mine"))
        }))
    })
  })
  /**
   * The rate limiter (`@effect/experimental`) over this backend's store, as the login limits use it: "fixed-window",
   * failing past the limit; a request holds `window / limit` of the window.
   */
  const LimiterLive = Layer.effect(RateLimiter.RateLimiter, RateLimiter.make).pipe(
    Layer.provide(Layer.scoped(RateLimiter.RateLimiterStore, implementation.limiter(`atrium-test:rl:${randomName()}:`)))
  )
  const take = (key: string, limit: number, window: Duration.DurationInput, tokens = 1) =>
    Effect.flatMap(RateLimiter.RateLimiter, (limiter) =>
      limiter.consume({ key, limit, window, tokens }).pipe(
        Effect.map(({ remaining }): Either.Either<number, number> => Either.right(limit - remaining)),
        Effect.catchIf(
          (error): error is RateLimiter.RateLimitExceeded => error.reason === "Exceeded",
          (error) => Effect.succeed(Either.left(Duration.toMillis(error.retryAfter)))
        )
      ))

  describe(`rate limiter store (${implementation.name})`, () => {
    layer(LimiterLive, { excludeTestServices: !exact })((it) => {
      it.effect("counts from 1 and refuses past the limit, taking nothing, until the key's time is up", () =>
        Effect.gen(function*() {
          assert.deepStrictEqual(yield* take("rl:a", 2, "400 millis"), Either.right(1))
          assert.deepStrictEqual(yield* take("rl:a", 2, "400 millis"), Either.right(2))
          const refused = yield* take("rl:a", 2, "400 millis")
          assert.isTrue(Either.isLeft(refused))
          // Two requests hold 2 x 200 ms: the refusal says when the limit has room again.
          if (exact) assert.deepStrictEqual(refused, Either.left(400))
          else assert.isAtMost(Either.getLeft(refused).pipe(Option.getOrThrow), 400)
          // The refusal took nothing: a read (no tokens) still counts 2.
          assert.deepStrictEqual(yield* take("rl:a", 2, "400 millis", 0), Either.right(2))
          yield* pass(400)
          assert.deepStrictEqual(yield* take("rl:a", 2, "400 millis"), Either.right(1))
        }))

      it.effect("a read takes nothing, also of a missing key", () =>
        Effect.gen(function*() {
          assert.deepStrictEqual(yield* take("rl:read", 3, "1 minute", 0), Either.right(0))
          assert.deepStrictEqual(yield* take("rl:read", 3, "1 minute", 0), Either.right(0))
          assert.deepStrictEqual(yield* take("rl:read", 3, "1 minute"), Either.right(1))
          assert.deepStrictEqual(yield* take("rl:read", 3, "1 minute", 0), Either.right(1))
          assert.deepStrictEqual(yield* take("rl:read", 3, "1 minute"), Either.right(2))
        }))

      it.effect("a window that does not divide by its limit still counts (whole milliseconds in Redis)", () =>
        Effect.gen(function*() {
          for (let i = 1; i <= 7; i++) assert.deepStrictEqual(yield* take("rl:odd", 7, "1 hour"), Either.right(i))
          const refused = yield* take("rl:odd", 7, "1 hour")
          assert.isTrue(Either.isLeft(refused))
          assert.isAbove(Either.getLeft(refused).pipe(Option.getOrThrow), 3_590_000)
        }))

      it.effect("under concurrency, exactly the limit is taken", () =>
        Effect.gen(function*() {
          const results = yield* Effect.all(Array.from({ length: 20 }, () => take("rl:race", 10, "1 minute")), {
            concurrency: "unbounded"
          })
          assert.strictEqual(results.filter(Either.isRight).length, 10)
          assert.deepStrictEqual(
            results.filter(Either.isRight).map((result) => result.right).sort((a, b) => a - b),
            Array.from({ length: 10 }, (_, i) => i + 1)
          )
        }))

      it.effect("the token bucket takes up to its limit and refills one per window / limit", () =>
        Effect.gen(function*() {
          const limiter = yield* RateLimiter.RateLimiter
          const bucket = (tokens: number) =>
            limiter.consume({ key: "rl:bucket", algorithm: "token-bucket", limit: 2, window: "400 millis", tokens }).pipe(
              Effect.map(({ remaining }) => remaining),
              Effect.catchIf(
                (error): error is RateLimiter.RateLimitExceeded => error.reason === "Exceeded",
                () => Effect.succeed(-1)
              )
            )
          assert.strictEqual(yield* bucket(1), 1)
          assert.strictEqual(yield* bucket(1), 0)
          assert.strictEqual(yield* bucket(1), -1)
          yield* pass(200)
          assert.strictEqual(yield* bucket(1), 0)
        }))
    })
  })
}

describe("key-value store (redis, unreachable)", () => {
  // Nothing listens on port 1: every command fails at once instead of queueing behind reconnects.
  layer(Layer.scoped(KeyValue, makeRedis(Redacted.make("redis://127.0.0.1:1"), "atrium-test:")), {
    excludeTestServices: true
  })((it) => {
    it.effect("ping fails promptly instead of hanging", () =>
      Effect.gen(function*() {
        const kv = yield* KeyValue
        const result = yield* kv.ping.pipe(Effect.either, Effect.timeout("10 seconds"))
        assert.strictEqual(result._tag, "Left")
      }))

    it.effect("a command is a defect, promptly", () =>
      Effect.gen(function*() {
        const kv = yield* KeyValue
        const exit = yield* kv.get("anything").pipe(Effect.exit, Effect.timeout("10 seconds"))
        assert.isTrue(exit._tag === "Failure")
      }))
  })
})
