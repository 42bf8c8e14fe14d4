import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { makeEntityCaller } from "../../src/platform/Cluster.js"

/**
 * A message the cluster cuts (its shard moved mid-call) ends interrupted though its caller was not. Idempotent
 * messages (wallet charges, grants, balance reads) are sent again; the others, and a caller that gave up, are not.
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
      assert.isTrue(Exit.isInterrupted(exit))
      assert.strictEqual(message.sent(), 1)
    }))

  it.scopedLive("a caller that gives up stops the message and does not send it again", () =>
    Effect.gen(function*() {
      const toEntity = yield* makeEntityCaller
      let sent = 0
      const call = Effect.suspend(() => {
        sent++
        return Effect.never
      })
      const caller = yield* Effect.fork(toEntity(call, { resendWhenCut: true }))
      yield* Effect.sleep("50 millis")
      yield* Fiber.interrupt(caller)
      yield* Effect.sleep("600 millis")
      assert.strictEqual(sent, 1)
    }))
})
