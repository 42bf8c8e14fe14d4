import { RunnerAddress, RunnerStorage, ShardId, ShardingConfig } from "@effect/cluster"
import * as SqlClient from "@effect/sql/SqlClient"
import { afterEach, assert, describe, it, vi } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Either, Layer } from "effect"
import pg from "pg"
import * as Locks from "../../src/platform/cluster/Locks.js"
import { DatabaseLive } from "../../src/platform/Database.js"
import { pollUntil } from "../support/Poll.js"
import { makeMigratedStorage } from "../support/Templates.js"

/**
 * The runner storage's shard locks on PostgreSQL (`src/platform/cluster/Locks.ts`, issue 42): the releases the
 * cluster asks for at once (one per shard, as each shard's entities end) reach PostgreSQL as one batch, and each
 * shard's advisory lock is really free afterwards: another database session can take it. A lock connection given up
 * (an operation past its deadline) is closed, not kept in a pool with whatever locks it still holds.
 */

const address = RunnerAddress.make("127.0.0.1", 1)
const shards = Array.from({ length: 40 }, (_, i) => ShardId.make("default", i + 1))
/** The lock number of a shard of the first (only) group, as @effect/cluster's `SqlRunnerStorage` numbers them. */
const lockOf = (shard: ShardId.ShardId) => 1_000_000 + shard.id
/** An advisory lock held in this test's database (`pg_locks` shows every database's; other tests run meanwhile). */
const ours = "locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"

const database = Layer.unwrapScoped(Effect.map(makeMigratedStorage, (storage) =>
  Layer.provideMerge(
    DatabaseLive,
    Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(storage.env))))
  ))).pipe(Layer.orDie)

const storageWith = (shardLockRefreshInterval: Duration.DurationInput) =>
  Locks.layer({ prefix: "cluster" }).pipe(
    Layer.provide(ShardingConfig.layer({ shardLockRefreshInterval, shardLockExpiration: "12 seconds" })),
    Layer.provideMerge(database)
  )
const storageLayer = storageWith("4 seconds")

/** Every statement any `pg` client sends from now on (the lock connection's pool is the storage's own). */
const statements = () => {
  const sent: Array<string> = []
  const query = pg.Client.prototype.query
  vi.spyOn(pg.Client.prototype, "query").mockImplementation(function(this: pg.Client, ...args: Array<unknown>) {
    const text = args[0]
    sent.push(typeof text === "string" ? text : String((text as { text?: string } | undefined)?.text))
    return (query as (...a: Array<unknown>) => unknown).apply(this, args)
  } as typeof query)
  return sent
}

afterEach(() => {
  vi.restoreAllMocks()
})

describe("the runner storage's shard locks (PostgreSQL)", () => {
  it.effect("releases asked at once go out as one batch, and every lock is free for another session afterwards", () =>
    Effect.gen(function*() {
      const storage = yield* RunnerStorage.RunnerStorage
      const sql = yield* SqlClient.SqlClient
      const acquired = yield* storage.acquire(address, shards)
      assert.strictEqual(acquired.length, shards.length)
      // Held: another session cannot take them.
      const [before] = yield* sql.unsafe(`SELECT ${shards.map((s) => `pg_try_advisory_lock(${lockOf(s)})`).join(", ")}`).values
      assert.deepStrictEqual(before, shards.map(() => false))

      const sent = statements()
      // As the cluster asks: one release per shard, all at once.
      yield* Effect.all(shards.map((shard) => storage.release(address, shard)), { concurrency: "unbounded" })
      const unlocks = sent.filter((text) => /pg_advisory_unlock\(/.test(text))
      // One unlock statement and one check per batch; the first release may leave alone, the rest together after it.
      assert.isAtMost(unlocks.length, 2, unlocks.join("\n"))
      assert.strictEqual(unlocks.flatMap((text) => text.match(/pg_advisory_unlock\(/g) ?? []).length, shards.length)
      assert.isAtMost(sent.filter((text) => /FROM pg_locks/.test(text)).length, 2)
      vi.restoreAllMocks()

      // Free: another session takes every one of them (and lets them go again).
      const conn = yield* sql.reserve
      const [after] = yield* conn.executeValues(`SELECT ${shards.map((s) => `pg_try_advisory_lock(${lockOf(s)})`).join(", ")}`, [])
      assert.deepStrictEqual(after, shards.map(() => true))
      // The storage's connection no longer holds them: while the other session does, it acquires none.
      assert.deepStrictEqual(yield* storage.acquire(address, shards), [])
      yield* conn.executeRaw("SELECT pg_advisory_unlock_all()", [])
    }).pipe(Effect.scoped, Effect.provide(storageLayer)))

  // Live: the deadline is 1 s of real time here (the refresh interval's), waited once by the refresh itself.
  it.live("a lock connection given up past its deadline is closed at once: its successor takes every shard", () =>
    Effect.gen(function*() {
      const storage = yield* RunnerStorage.RunnerStorage
      const sql = yield* SqlClient.SqlClient
      assert.strictEqual((yield* storage.acquire(address, shards)).length, shards.length)
      const holder = (yield* sql.unsafe<{ pid: number }>(
        `SELECT pid FROM pg_locks WHERE ${ours} AND objid = ${lockOf(shards[0]!)}`
      ))[0]!.pid
      const backend = sql.unsafe<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ${holder}`)

      // The refresh's heartbeat waits on a table lock held elsewhere, past its 1 s deadline.
      const blocker = yield* sql.reserve
      yield* blocker.executeRaw("BEGIN", [])
      yield* blocker.executeRaw("LOCK TABLE cluster_runners IN EXCLUSIVE MODE", [])
      assert.isTrue(Either.isLeft(yield* Effect.either(storage.refresh(address, shards))), "the refresh missed its deadline")
      yield* blocker.executeRaw("ROLLBACK", [])

      // Given up: its database session ends (kept idle in a pool, it lived 10 s more, and any lock its unlock missed
      // with it), and the next lock connection takes every shard.
      yield* pollUntil(backend, (rows) => rows[0]!.n === 0, "the given-up lock connection closed", { within: 3_000 })
      assert.strictEqual((yield* storage.acquire(address, shards)).length, shards.length)
      const holders = yield* sql.unsafe<{ pid: number }>(
        `SELECT DISTINCT pid FROM pg_locks WHERE ${ours} AND objid IN (${shards.map(lockOf).join(", ")})`
      )
      assert.strictEqual(holders.length, 1)
      assert.notStrictEqual(holders[0]!.pid, holder)
    }).pipe(Effect.scoped, Effect.provide(storageWith("1 second"))))
})
