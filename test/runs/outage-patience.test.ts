import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Logger, TestClock, TestContext } from "effect"
import { outagePatience, outlastingOf } from "../../src/runs/Background.js"

/**
 * A background run's patience with an outage (docs/runs.md, "Patience with an outage"): its `outlasting` waits nest
 * (the execution, a step's record, the step's activity), and share one minute per outage rather than a minute each.
 * Each test brings its own `TestContext`: a file run before this one in the same worker (`isolate: false`) can leave
 * the default services without a test clock (test/runtime/admission.test.ts).
 */

/** What a database restart looks like to a repository: a defect naming a refused connection. */
const refused = Effect.die(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }))

/** Moves the test clock a second at a time until `fiber` is done, answering how many seconds that took. */
const secondsUntilDone = <A, E>(fiber: Fiber.RuntimeFiber<A, E>) =>
  Effect.gen(function*() {
    for (let seconds = 1; seconds <= 600; seconds++) {
      yield* TestClock.adjust("1 second")
      if ((yield* fiber.poll)._tag === "Some") return seconds
    }
    return Infinity
  })

describe("a background run's patience with an outage", () => {
  it.effect("nested waits give up together after one minute, and no level tries again once one gave up", () =>
    Effect.gen(function*() {
      const patience = outagePatience()
      const outlasting = outlastingOf(patience)
      let tries = 0
      const inner = outlasting(Effect.zipRight(Effect.sync(() => void tries++), refused))
      // Three levels, as the execution around a step's record around the step's activity.
      const fiber = yield* Effect.fork(outlasting(outlasting(inner)))
      const seconds = yield* secondsUntilDone(fiber)
      assert.isTrue(Exit.isFailure(yield* Fiber.await(fiber)))
      // One minute for the outage (and the schedule's last pause), not a minute per level.
      assert.isAtLeast(seconds, 60)
      assert.isAtMost(seconds, 63, `gave up after ${seconds} s`)
      assert.isDefined(patience.spentAt)
      const triesWhenSpent = tries
      // Spent: a later wait of the same execution gives up at once.
      const again = yield* Effect.fork(outlasting(Effect.zipRight(Effect.sync(() => void tries++), refused)))
      assert.isTrue(Exit.isFailure(yield* Fiber.await(again)))
      assert.strictEqual(tries, triesWhenSpent + 1)
      // The storage answers again (work begun after the give-up succeeds): a later outage gets its own minute.
      assert.strictEqual(yield* outlasting(Effect.succeed("up")), "up")
      assert.isUndefined(patience.spentAt)
      const later = yield* Effect.fork(outlasting(refused))
      assert.isAtLeast(yield* secondsUntilDone(later), 60)
    }).pipe(Effect.provide(TestContext.TestContext)))

  it.effect("a success of work begun before the outage (a flush already in flight) does not start its minute again", () =>
    Effect.gen(function*() {
      const patience = outagePatience()
      const outlasting = outlastingOf(patience)
      // Begun now, done in 50 s: it succeeds in the middle of the outage below.
      const slow = yield* Effect.fork(outlasting(Effect.as(Effect.sleep("50 seconds"), "done")))
      yield* TestClock.adjust("10 seconds")
      const failing = yield* Effect.fork(outlasting(refused))
      const seconds = yield* secondsUntilDone(failing)
      assert.strictEqual(yield* Fiber.join(slow), "done")
      // Counted from 10 s: given up at about 70 s, so about 60 s after it began, not 60 s after the slow success.
      assert.isAtMost(seconds, 63, `gave up after ${seconds} s`)
    }).pipe(Effect.provide(TestContext.TestContext)))

  it.effect("a success between two outages starts the count again; a bug is not waited out", () =>
    Effect.gen(function*() {
      const patience = outagePatience()
      const outlasting = outlastingOf(patience)
      let down = true
      const flaky = Effect.suspend(() => down ? refused : Effect.succeed("up"))
      // 40 s of outage, then up: a success.
      const first = yield* Effect.fork(outlasting(flaky))
      yield* TestClock.adjust("40 seconds")
      down = false
      yield* TestClock.adjust("3 seconds")
      assert.strictEqual(yield* Fiber.join(first), "up")
      // A second outage of 40 s is within its own minute, not the 20 s left of the first's.
      down = true
      const second = yield* Effect.fork(outlasting(flaky))
      yield* TestClock.adjust("40 seconds")
      down = false
      yield* TestClock.adjust("3 seconds")
      assert.strictEqual(yield* Fiber.join(second), "up")
      // A defect that is not an outage fails at once.
      let bugs = 0
      const bug = yield* Effect.exit(outlasting(Effect.zipRight(Effect.sync(() => void bugs++), Effect.die(new Error("a bug")))))
      assert.isTrue(Exit.isFailure(bug))
      assert.strictEqual(bugs, 1)
    }).pipe(Effect.provide(TestContext.TestContext)))

  it.effect("an attempt made again is told as an outage; an end that is not one (a workflow suspending) is not", () =>
    Effect.gen(function*() {
      const told: Array<string> = []
      const logger = Logger.make(({ message }) => void told.push(String(Array.isArray(message) ? message[0] : message)))
      const outlasting = outlastingOf(outagePatience())
      let tries = 0
      // One refused connection, then an answer: told once.
      const flaky = outlasting(Effect.suspend(() => tries++ === 0 ? refused : Effect.succeed("ok")), "the step")
      const fiber = yield* Effect.fork(flaky.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger))))
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* Fiber.join(fiber), "ok")
      assert.deepStrictEqual(told, ["the step met an outage; asked again"])
      // Suspended (an interrupt), and a plain failure: nothing told, nothing tried again.
      told.length = 0
      const suspended = yield* Effect.exit(outlasting(Effect.interrupt, "the approval").pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger))))
      const failed = yield* Effect.exit(outlasting(Effect.fail("denied"), "the approval").pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger))))
      assert.isTrue(Exit.isInterrupted(suspended))
      assert.isTrue(Exit.isFailure(failed))
      assert.deepStrictEqual(told, [])
    }).pipe(Effect.provide(TestContext.TestContext)))
})
