import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, TestClock } from "effect"
import { outagePatience, outlastingOf } from "../../src/runs/Background.js"

/**
 * A background run's patience with an outage (docs/runs.md, "Patience with an outage"): its `outlasting` waits nest
 * (the execution, a step's record, the step's activity), and share one minute per outage rather than a minute each.
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
      assert.isTrue(patience.spent)
      const triesWhenSpent = tries
      // Spent: a later wait of the same execution gives up at once.
      const again = yield* Effect.fork(outlasting(Effect.zipRight(Effect.sync(() => void tries++), refused)))
      assert.isTrue(Exit.isFailure(yield* Fiber.await(again)))
      assert.strictEqual(tries, triesWhenSpent + 1)
    }))

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
    }))
})
