import { Entity, ShardingConfig } from "@effect/cluster"
import { SqlClient } from "@effect/sql"
import { assert, describe, layer } from "@effect/vitest"
import { Context, Deferred, Effect, Layer, Schedule, TestServices } from "effect"
import { ShardFences } from "../../src/platform/cluster/Fences.js"
import { AppConfig } from "../../src/platform/Config.js"
import { Stopping } from "../../src/platform/Stopping.js"
import { RunnerTurns } from "../../src/sessions/Activation.js"
import { RunPayer } from "../../src/runtime/Ports.js"
import { SessionLive } from "../../src/sessions/Session.js"
import { Session } from "../../src/sessions/SessionRpc.js"
import { TestDatabase } from "../support/Database.js"
import { KnowledgeGate } from "../support/Ports.js"
import { newEntitySession } from "./entity-support.js"

/**
 * A database restart makes the cluster give every shard up (its lock storage failed) and acquire them again once the
 * release is through. A session closed so was waiting for its running turn (the hand-over's grace), and the turn for
 * its settle, from a wallet of the same runner whose shard waited behind that very release: the fault checker saw
 * wallets unanswered for 25 s after an 8 s PostgreSQL stop. Promise: a session whose shard is given up unverified
 * closes at once, its turn's settle let go (the next activation voids the hold and counts the turn from the ledger).
 */

/** A wallet that takes holds and never answers a settle; what it was asked. */
class Asked extends Context.Tag("test/GivenUpAsked")<Asked, {
  readonly settling: Deferred.Deferred<string>
  readonly voided: Deferred.Deferred<string>
}>() {}

const SilentWallet = Layer.effectContext(Effect.gen(function*() {
  const settling = yield* Deferred.make<string>()
  const voided = yield* Deferred.make<string>()
  const payer = RunPayer.of({
    charge: () => Effect.void,
    balance: () => Effect.succeed(1_000_000_000n),
    hold: (_, __, amount) => Effect.succeed({ amount, expiresAt: Number.MAX_SAFE_INTEGER }),
    settle: (_, holdId) => Effect.zipRight(Deferred.succeed(settling, holdId), Effect.never),
    voidHold: (_, holdId) => Effect.asVoid(Deferred.succeed(voided, holdId))
  })
  return Context.make(RunPayer, payer).pipe(Context.add(Asked, { settling, voided }))
}))

const Env = Layer.mergeAll(AppConfig.Default, Stopping.Default, RunnerTurns.Default, ShardingConfig.layer(), ShardFences.Default, SilentWallet, KnowledgeGate.layer).pipe(
  // A grace longer than the test waits: a close that waited for the turn would not be done in time.
  Layer.provideMerge(TestDatabase({ SHUTDOWN_GRACE: "10 seconds" }))
)

/**
 * This runner holds every shard under generation 1, as the runner storage's acquisition records it, and its lock
 * refresh confirms them every 250 ms (with the process's liveness tick) until `refreshing` is set to false.
 */
const holdEveryShard = Effect.gen(function*() {
  const fences = yield* ShardFences
  const sql = yield* SqlClient.SqlClient
  const shards = Array.from({ length: 300 }, (_, i) => ({ group: "default", id: i + 1 }))
  yield* sql`
    INSERT INTO shard_generations (shard, generation, runner)
    SELECT 'default:' || n, 1, 'test' FROM generate_series(1, 300) AS n
    ON CONFLICT (shard) DO NOTHING`.pipe(Effect.orDie)
  fences.track()
  yield* fences.record(undefined, shards, (fresh) => Effect.succeed(fresh.map(({ shard }) => ({ shard, generation: "1" }))))
  const refreshing = { on: true }
  const refresh = Effect.sync(() => {
    if (!refreshing.on) return
    fences.tick()
    fences.refreshConfirmed({ started: Date.now() + 1, suspect: false })
  })
  yield* refresh
  yield* Effect.forkScoped(Effect.repeat(refresh, Schedule.spaced("250 millis")))
  return { fences, refreshing }
})

describe("a session given up without a hand-over", () => {
  layer(Env, { timeout: "60 seconds" })("when the lock storage failed", (it) => {
    // On the live clock: the session's own waits (its shard confirmed, its grace) are real ones here.
    it.scoped("closes at once: its running turn's settle lets go of the wallet, and the next activation voids the hold", () =>
      Effect.gen(function*() {
        const { fences, refreshing } = yield* holdEveryShard
        const sessionId = yield* newEntitySession("givenup", { searches: false })
        const asked = yield* Asked
        const closed = yield* Effect.scoped(Effect.gen(function*() {
          const session = yield* (yield* Entity.makeTestClient(Session, SessionLive))(sessionId)
          yield* session.Send({ message: "hello", budget: null })
          // The turn ran its step and waits for its settle, which the wallet never answers.
          assert.strictEqual(yield* Deferred.await(asked.settling), `session:${sessionId}:1`)
          // A lock refresh failed (the database went away): the cluster now releases every shard, this one too.
          refreshing.on = false
          fences.refreshFailed()
        })).pipe(
          // Real time: the grace and the settle would wait on the TestClock, which nothing moves, for ever.
          Effect.timeout("5 seconds"),
          TestServices.provideLive,
          Effect.either
        )
        assert.isTrue(closed._tag === "Right", "the session's close waited for its turn (the hand-over's grace, or the turn's settle)")
        // The next activation closes the cut turn and voids its hold.
        refreshing.on = true
        const session = yield* (yield* Entity.makeTestClient(Session, SessionLive))(sessionId)
        yield* session.Reload()
        assert.strictEqual(yield* Deferred.await(asked.voided), `session:${sessionId}:1`)
      }).pipe(TestServices.provideLive))
  })
})
