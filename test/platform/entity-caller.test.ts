import { assert, describe, it } from "@effect/vitest"
import { SqlError } from "@effect/sql/SqlError"
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Option, TestClock, TestContext } from "effect"
import { makeEntityCaller, makeEntityCallerWith } from "../../src/platform/Cluster.js"
import { EntityCut, EntityDeadline, isOutage } from "../../src/platform/Outage.js"

/**
 * A message the cluster cuts (its shard moved mid-call) ends interrupted though its caller was not. Idempotent
 * messages (wallet charges, grants, balance reads) are sent again; the others, and a caller that gave up, are not: a
 * cut one fails as an outage (`EntityCut`, 503 with Retry-After).
 */
describe("entity caller", () => {
  /** A call the cluster cuts `cuts` times, then answers; counts how often it was sent. */
  const cutThenAnswered = (cuts: number) => {
    let sent = 0
    const call = Effect.suspend(() => ++sent <= cuts ? Effect.interrupt : Effect.succeed("answered"))
    return { call, sent: () => sent }
  }

  it.scopedLive("an idempotent message cut by a hand-over is sent again until it is answered", () =>
    Effect.gen(function*() {
      const toEntity = yield* makeEntityCaller
      const message = cutThenAnswered(2)
      assert.strictEqual(yield* toEntity(message.call, { resendWhenCut: true }), "answered")
      assert.strictEqual(message.sent(), 3)
    }))

  it.scopedLive("any other message cut by a hand-over is not sent again", () =>
    Effect.gen(function*() {
      const toEntity = yield* makeEntityCaller
      const message = cutThenAnswered(1)
      const exit = yield* Effect.exit(toEntity(message.call))
      // Told as an outage (503 with Retry-After), not as an interruption of the caller (a 503 without it).
      assert.isTrue(Exit.isFailure(exit) && !Exit.isInterrupted(exit))
      if (Exit.isFailure(exit)) {
        assert.instanceOf(Cause.squash(exit.cause), EntityCut)
        assert.isTrue(isOutage(exit.cause))
      }
      assert.strictEqual(message.sent(), 1)
    }))

  it.scoped("a caller that gives up stops the message and does not send it again", () =>
    Effect.gen(function*() {
      const toEntity = yield* makeEntityCaller
      let sent = 0
      const reached = yield* Deferred.make<void>()
      const call = Effect.suspend(() => {
        sent++
        return Effect.zipRight(Deferred.succeed(reached, undefined), Effect.never)
      })
      const caller = yield* Effect.fork(toEntity(call, { resendWhenCut: true }))
      yield* Deferred.await(reached)
      yield* Fiber.interrupt(caller)
      // Far past any pause before a resend, and past the deadline: nothing was sent again.
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(sent, 1)
    }).pipe(Effect.provide(TestContext.TestContext)))

  it.scoped("an idempotent message its owner never answers (a paused runner) is sent once more before its deadline, and answered", () =>
    Effect.gen(function*() {
      const toEntity = yield* makeEntityCallerWith(Duration.millis(300))
      let sent = 0
      const first = yield* Deferred.make<void>()
      // The first delivery went to a runner that stopped: it never answers, and the cluster does not cut it. The
      // next one reaches the shard's new owner.
      const call = Effect.suspend(() => ++sent === 1 ? Effect.zipRight(Deferred.succeed(first, undefined), Effect.never) : Effect.succeed("answered"))
      const caller = yield* Effect.fork(toEntity(call, { resendWhenCut: true }))
      yield* Deferred.await(first)
      // A sixth of the deadline before it (50 ms of 300): sent again.
      yield* TestClock.adjust("249 millis")
      assert.strictEqual(sent, 1, "not sent again while there is time")
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(yield* Fiber.join(caller), "answered")
      assert.strictEqual(sent, 2)
    }).pipe(Effect.provide(TestContext.TestContext)))

  it.scoped("a message nobody answers ends at its deadline as an outage (503), not a wait without end", () =>
    Effect.gen(function*() {
      const toEntity = yield* makeEntityCallerWith(Duration.millis(300))
      const reached = yield* Deferred.make<void>()
      const caller = yield* Effect.fork(toEntity(Effect.zipRight(Deferred.succeed(reached, undefined), Effect.never)))
      yield* Deferred.await(reached)
      yield* TestClock.adjust("299 millis")
      assert.isTrue(Option.isNone(yield* Fiber.poll(caller)), "not before its deadline")
      yield* TestClock.adjust("1 millis")
      const exit = yield* Fiber.await(caller)
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) {
        assert.instanceOf(Cause.squash(exit.cause), EntityDeadline)
        assert.isTrue(isOutage(exit.cause))
      }
    }).pipe(Effect.provide(TestContext.TestContext)))

  it.scoped("an idempotent message nobody answers, sent once more, still ends at its deadline", () =>
    Effect.gen(function*() {
      const toEntity = yield* makeEntityCallerWith(Duration.millis(300))
      let sent = 0
      const reached = yield* Deferred.make<void>()
      const caller = yield* Effect.fork(toEntity(Effect.suspend(() => {
        sent++
        return Effect.zipRight(Deferred.succeed(reached, undefined), Effect.never)
      }), { resendWhenCut: true }))
      yield* Deferred.await(reached)
      yield* TestClock.adjust("299 millis")
      assert.isTrue(Option.isNone(yield* Fiber.poll(caller)), "not before its deadline")
      assert.strictEqual(sent, 2)
      yield* TestClock.adjust("1 millis")
      const exit = yield* Fiber.await(caller)
      assert.isTrue(Exit.isFailure(exit) && Cause.squash(exit.cause) instanceof EntityDeadline)
      assert.strictEqual(sent, 2, "once more, not again and again")
    }).pipe(Effect.provide(TestContext.TestContext)))
})

/** Issue 33: an outage answers 503 with Retry-After; a bug stays a 500. */
describe("outages told from bugs", () => {
  const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" })
  const cases: Array<[string, unknown, boolean]> = [
    ["a database that refuses connections", new SqlError({ cause: refused, message: "Failed to execute statement" }), true],
    ["a database shutting down (57P01)", new SqlError({ cause: Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" }) }), true],
    ["Redis offline", Object.assign(new Error("Stream isn't writeable and enableOfflineQueue options is false"), {}), true],
    ["a wallet that could not commit", { _tag: "WalletFailure", message: "x" }, true],
    ["a duplicate key (23505)", new SqlError({ cause: Object.assign(new Error("duplicate key value violates unique constraint"), { code: "23505" }) }), false],
    ["a plain bug", new TypeError("undefined is not a function"), false]
  ]
  for (const [name, error, outage] of cases) {
    it(`${name}: ${outage ? "an outage" : "a bug"}`, () => {
      assert.strictEqual(isOutage(Cause.die(error)), outage)
      assert.strictEqual(isOutage(Cause.fail(error)), outage)
    })
  }
})
