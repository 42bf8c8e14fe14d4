import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option, TestContext } from "effect"
import { makeEntityCaller } from "../../src/platform/Cluster.js"
import { type Acquisition, movedSince, ShardMoves } from "../../src/platform/cluster/Moves.js"

/**
 * Issue 42 item 7: a keyed call in flight to a runner that lost the call's shard (a paused owner, whose shards the
 * others took) is cut and sent again at once, to the new owner, not after its last try 2 s before its 12 s deadline.
 * The fault checker (test/cluster/faults.test.ts, its pauses) shows it on three runners from `dist/`; here, how a
 * call is judged and what the caller does with the verdict.
 */
describe("calls in flight to a moved shard", () => {
  const shard = { group: "default", id: 7 }
  const acquisition = (runner: string, acquiredAt: string, ageMs: number): Acquisition => ({
    shard: "default:7",
    runner,
    acquiredAt,
    ageMs
  })

  it("a shard acquired after the call was sent, by another runner, cuts the call; one acquired before does not", () => {
    const sentAt = 10_000
    // Answered at 13 000: acquired 500 ms before, at 12 500, after the send.
    assert.strictEqual(movedSince({ sentAt, known: undefined }, acquisition("b", "t2", 500), 13_000), "cut")
    // Acquired 4 s before, at 9 000: the owner the call went to.
    assert.strictEqual(movedSince({ sentAt, known: undefined }, acquisition("a", "t1", 4_000), 13_000), "known")
    // Sent again 0.3 s after the acquisition it was cut for: routed, perhaps, by an assignment not yet refreshed.
    // Unanswered too, it is cut once more; sent 2 s after it, the acquisition is the owner it went to.
    assert.strictEqual(movedSince({ sentAt: 12_800, known: acquisition("b", "t2", 0) }, acquisition("b", "t2", 1_500), 14_000), "cut")
    assert.strictEqual(movedSince({ sentAt: 14_500, known: acquisition("b", "t2", 0) }, acquisition("b", "t2", 3_500), 16_000), "known")
    // Acquired again by the runner that held it when the call was sent (its locks back after a database restart).
    assert.strictEqual(movedSince({ sentAt, known: acquisition("a", "t1", 0) }, acquisition("a", "t3", 500), 13_000), "known")
    // By another runner than the one it went to.
    assert.strictEqual(movedSince({ sentAt, known: acquisition("a", "t1", 0) }, acquisition("b", "t3", 500), 13_000), "cut")
  })

  // On the test clock, which never moves here: answered without waiting for the last try 2 s before the deadline.
  it.scoped("a keyed call to a runner that lost its shard is cut and sent again at once, and answered by the new owner", () =>
    Effect.gen(function*() {
      const moves = yield* ShardMoves
      moves.watch()
      const toEntity = yield* makeEntityCaller
      let sent = 0
      const first = yield* Deferred.make<void>()
      const firstCut = yield* Deferred.make<void>()
      // The first delivery went to a runner that stopped: never answered, never cut by the cluster. The next one
      // reaches the shard's new owner.
      const call = Effect.suspend(() =>
        ++sent === 1
          ? Effect.zipRight(Deferred.succeed(first, undefined), Effect.never).pipe(Effect.onInterrupt(() => Deferred.succeed(firstCut, undefined)))
          : Effect.succeed("answered by the new owner")
      )
      const caller = yield* Effect.fork(toEntity(call, { resendWhenCut: true, shard }))
      yield* Deferred.await(first)
      const now = Date.now()
      // Looked at as if a second had passed: the owner it went to, seen before any move, is not a reason to resend.
      assert.strictEqual(moves.judge([acquisition("a", "t1", 60_000)], now + 1_500), 0)
      assert.strictEqual(sent, 1)
      // Its shard acquired by another runner since: cut, sent again, answered.
      assert.strictEqual(moves.judge([acquisition("b", "t2", 200)], now + 1_500), 1)
      for (let i = 0; i < 100 && Option.isNone(yield* Fiber.poll(caller)); i++) yield* Effect.yieldNow()
      assert.isTrue(Option.isSome(yield* Fiber.poll(caller)), "answered at once, no time passing")
      assert.strictEqual(yield* Fiber.join(caller), "answered by the new owner")
      yield* Deferred.await(firstCut)
      assert.strictEqual(sent, 2)
      // Answered: no longer followed.
      assert.deepStrictEqual(moves.suspectShards(now + 60_000), [])
    }).pipe(Effect.provide(ShardMoves.Default), Effect.provide(TestContext.TestContext)))

  it.scopedLive("a call without its shard, or one not resendable, is not followed", () =>
    Effect.gen(function*() {
      const moves = yield* ShardMoves
      moves.watch()
      const toEntity = yield* makeEntityCaller
      const reached = yield* Deferred.make<void>()
      const hang = Effect.zipRight(Deferred.succeed(reached, undefined), Effect.never)
      const a = yield* Effect.fork(toEntity(hang, { resendWhenCut: true }))
      const b = yield* Effect.fork(toEntity(hang, { shard }))
      yield* Deferred.await(reached)
      yield* Effect.yieldNow()
      assert.deepStrictEqual(moves.suspectShards(Date.now() + 60_000), [])
      yield* Fiber.interrupt(a)
      yield* Fiber.interrupt(b)
    }).pipe(Effect.provide(ShardMoves.Default)))
})
