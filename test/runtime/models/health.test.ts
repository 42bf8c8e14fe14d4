import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option, TestClock, TestContext } from "effect"
import { FAILURE_THRESHOLD, OPEN_FOR, parseRetryAfter, ProviderHealth } from "../../../src/runtime/models/Health.js"

/**
 * The test services given explicitly: with `isolate: false`, a file that ran before in the same worker (the Responses
 * provider's test is one) can leave the default services without a `TestClock`.
 */
const Health = Layer.merge(ProviderHealth.Default, TestContext.TestContext)

/** The circuit breaker per provider on `TestClock` (docs/models.md, "Fallbacks and the circuit breaker"). */
describe("provider health", () => {
  it.effect("opens after the threshold of failures in a row, skips the provider, probes once after OPEN_FOR, closes on success", () =>
    Effect.gen(function*() {
      const health = yield* ProviderHealth
      const none = Option.none<Duration.Duration>()
      for (let i = 1; i < FAILURE_THRESHOLD; i++) {
        yield* health.failed("anthropic", none)
        assert.strictEqual(yield* health.state("anthropic"), "closed", `still closed after ${i}`)
        assert.isTrue(yield* health.admit("anthropic"))
      }
      // A success in between starts the count again.
      yield* health.succeeded("anthropic")
      for (let i = 0; i < FAILURE_THRESHOLD; i++) yield* health.failed("anthropic", none)
      assert.strictEqual(yield* health.state("anthropic"), "open")
      assert.isFalse(yield* health.admit("anthropic"))
      assert.isTrue(yield* health.admit("gemini"), "other providers are not affected")
      assert.strictEqual(yield* health.waitFor("anthropic"), Duration.toMillis(OPEN_FOR))

      yield* TestClock.adjust(Duration.subtract(OPEN_FOR, Duration.millis(1)))
      assert.isFalse(yield* health.admit("anthropic"), "still open a millisecond before OPEN_FOR")
      yield* TestClock.adjust(Duration.millis(1))
      assert.strictEqual(yield* health.state("anthropic"), "half_open")
      assert.isTrue(yield* health.admit("anthropic"), "the probe goes through")
      assert.isFalse(yield* health.admit("anthropic"), "only one probe at a time")

      // The probe fails: open again for OPEN_FOR.
      yield* health.failed("anthropic", none)
      assert.strictEqual(yield* health.state("anthropic"), "open")
      yield* TestClock.adjust(OPEN_FOR)
      assert.isTrue(yield* health.admit("anthropic"))
      // This probe succeeds: closed.
      yield* health.succeeded("anthropic")
      assert.strictEqual(yield* health.state("anthropic"), "closed")
      assert.isTrue(yield* health.admit("anthropic"))
      assert.isTrue(yield* health.admit("anthropic"))
    }).pipe(Effect.provide(Health)))

  it.effect("a probe that never reports is given up after OPEN_FOR", () =>
    Effect.gen(function*() {
      const health = yield* ProviderHealth
      for (let i = 0; i < FAILURE_THRESHOLD; i++) yield* health.failed("p", Option.none())
      yield* TestClock.adjust(OPEN_FOR)
      assert.isTrue(yield* health.admit("p"))
      assert.isFalse(yield* health.admit("p"))
      yield* TestClock.adjust(OPEN_FOR)
      assert.isTrue(yield* health.admit("p"), "a new probe")
    }).pipe(Effect.provide(Health)))

  it.effect("Retry-After rests the provider until then, even with the breaker closed", () =>
    Effect.gen(function*() {
      const health = yield* ProviderHealth
      yield* health.failed("openai", parseRetryAfter("7", 0))
      assert.strictEqual(yield* health.state("openai"), "closed")
      assert.isFalse(yield* health.admit("openai"))
      assert.strictEqual(yield* health.waitFor("openai"), 7000)
      yield* TestClock.adjust(Duration.seconds(7))
      assert.isTrue(yield* health.admit("openai"))
    }).pipe(Effect.provide(Health)))

  it("Retry-After: seconds or an HTTP date, capped at 5 minutes; nonsense is ignored", () => {
    assert.deepStrictEqual(Option.map(parseRetryAfter("2", 0), Duration.toMillis), Option.some(2000))
    const now = Date.parse("2026-01-01T00:00:00Z")
    assert.deepStrictEqual(Option.map(parseRetryAfter("Thu, 01 Jan 2026 00:00:30 GMT", now), Duration.toMillis), Option.some(30_000))
    assert.deepStrictEqual(Option.map(parseRetryAfter("86400", 0), Duration.toMillis), Option.some(300_000))
    assert.isTrue(Option.isNone(parseRetryAfter("soon", 0)))
    assert.isTrue(Option.isNone(parseRetryAfter(undefined, 0)))
  })
})
