import { ClusterError, RunnerStorage, ShardId, ShardingConfig } from "@effect/cluster"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { Duration, Effect, ExecutionStrategy, Exit, Fiber, FiberSet, Layer, Scope } from "effect"

const untraced = Effect.withTracerEnabled(false)

/**
 * The cluster's runner storage on PostgreSQL, ours for one reason: releases go out in batches (issue 42).
 *
 * @effect/cluster's `SqlRunnerStorage` releases one shard per call, with two statements on its one lock connection
 * (`pg_advisory_unlock`, then a `pg_locks` check that it is gone), and the cluster asks for one release per shard as
 * each shard's entities end. Handing about 100 shards back to a runner woken after a pause took 10-14 s under load
 * that way, one round trip after another, while the woken runner's callers were answered 503. Here the releases
 * asked while one batch is on its way leave together when it is done: one statement unlocks them all and one checks
 * them all. One batch at a time, so a lock refresh on the same connection waits behind two statements at most (it
 * once queued behind 300 and missed its deadline: every shard given up).
 *
 * Otherwise it is that storage's advisory-lock mode for PostgreSQL, pg only: the same tables and lock numbers (runners
 * of either can share a database), a heartbeat row per runner in `<prefix>_runners`, a shard held by the advisory lock
 * `(index of its group + 1) * 1,000,000 + its id` on a connection of the runner's own (so a runner that dies lets its
 * shards go the moment PostgreSQL sees its connection close), every lock operation with a deadline
 * (`min(shardLockRefreshInterval, shardLockExpiration / 3)`), and a lock connection that failed replaced by a new one.
 */
export const make = (options: { readonly prefix: string }) =>
  Effect.gen(function*() {
    const config = yield* ShardingConfig.ShardingConfig
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    /**
     * The lock connection's own pool (under the runner's `application_name`, so the others can cut it with the rest):
     * a runner woken after a pause finds every connection cut, and a new lock connection from the shared pool waited
     * behind everything else reconnecting (3 s at load 11), past the refresh's deadline: every shard given up.
     *
     * A connection back in this pool is closed at once (`idleTimeout`): the lock connection is reserved for as long as
     * it serves, so one that comes back was given up, and it may still hold locks: its `pg_advisory_unlock_all()` can
     * miss its deadline, or be cancelled by the cancel of the operation that missed its own (`pg_cancel_backend` lands
     * on whatever the session runs then). Kept idle, it held them for the pool's 10 s idle time while its successor
     * could take none of them (test/cluster/locks.test.ts): the one way we found for CI's services suite to see a runner
     * alone in its cluster answer no wallet for over 30 s.
     */
    const locks = yield* PgClient.make({
      ...(yield* PgClient.PgClient).config,
      maxConnections: 2,
      minConnections: 0,
      idleTimeout: Duration.millis(1)
    }).pipe(
      Effect.provide(Reactivity.layer),
      Effect.orDie
    )
    const layerScope = yield* Effect.scope
    const runFork = yield* FiberSet.makeRuntime<never>()
    const deadline = Duration.min(config.shardLockRefreshInterval, Duration.unsafeDivide(config.shardLockExpiration, 3))
    const runners = sql(`${options.prefix}_runners`)
    const expired = sql.literal(`NOW() - INTERVAL '${Math.ceil(Duration.toSeconds(config.shardLockExpiration))} seconds'`)

    const lockNumbers = new Map<string, number>()
    Array.from(ShardingConfig.shardGroupConfig(config).available).forEach((group, i) => {
      for (let shard = 1; shard <= config.shardsPerGroup; shard++) lockNumbers.set(ShardId.make(group, shard).toString(), (i + 1) * 1_000_000 + shard)
    })
    const lockOf = (shardId: string) => lockNumbers.get(shardId)!

    yield* sql`
      CREATE TABLE IF NOT EXISTS ${runners} (
        machine_id SERIAL PRIMARY KEY,
        address VARCHAR(255) NOT NULL,
        runner TEXT NOT NULL,
        healthy BOOLEAN NOT NULL DEFAULT TRUE,
        last_heartbeat TIMESTAMP NOT NULL DEFAULT NOW(),
        UNIQUE(address)
      )`

    /**
     * The lock connection: opened on first use, and after a failure (or a missed deadline) given up and opened again
     * on the next use; giving it up unlocks what it held, or PostgreSQL does as it closes.
     */
    let current: { readonly conn: Connection; readonly scope: Scope.CloseableScope } | undefined
    const opening = yield* Effect.makeSemaphore(1)
    const lockConnection = opening.withPermits(1)(Effect.suspend(() => {
      if (current !== undefined) return Effect.succeed(current.conn)
      return Effect.gen(function*() {
        const scope = yield* Scope.fork(layerScope, ExecutionStrategy.sequential)
        const conn = yield* Scope.extend(locks.reserve, scope).pipe(Effect.onError(() => Scope.close(scope, Exit.void)))
        yield* Scope.addFinalizer(
          scope,
          conn.executeRaw("SELECT pg_advisory_unlock_all()", []).pipe(Effect.timeout(deadline), Effect.interruptible, Effect.ignore)
        )
        current = { conn, scope }
        return conn
      })
    }))
    const giveUp = (conn: Connection) =>
      Effect.suspend(() => {
        if (current?.conn !== conn) return Effect.void
        const { scope } = current
        current = undefined
        return Effect.asVoid(Effect.forkIn(Scope.close(scope, Exit.void), layerScope))
      })
    /**
     * `operation` on the lock connection (opened first if need be) within the deadline; on a failure or the deadline
     * missed, the connection is replaced. The wait is what times out: the operation ends apart, in the layer's scope.
     */
    const onLockConnection = <A, E>(operation: (conn: Connection) => Effect.Effect<A, E>) =>
      Effect.suspend(() => {
        let used: Connection | undefined
        const attempt = Effect.flatMap(lockConnection, (conn) => {
          used = conn
          return operation(conn)
        })
        return Effect.flatMap(Effect.forkIn(attempt, layerScope), (fiber) =>
          Fiber.join(fiber).pipe(
            Effect.timeout(deadline),
            Effect.ensuring(Effect.suspend(() => fiber.unsafePoll() !== null ? Effect.void : Effect.forkIn(Fiber.interrupt(fiber), layerScope))),
            Effect.onError(() => used === undefined ? Effect.void : giveUp(used))
          ))
      }).pipe(ClusterError.PersistenceError.refail)

    /** The shards of `shardIds` this connection holds the lock of, locking those it can. */
    const lock = (conn: Connection, shardIds: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const held = new Set((yield* conn.executeValues(
          "SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND granted = true AND pid = pg_backend_pid()",
          []
        )).map((row) => Number(row[0])))
        const acquired = shardIds.filter((shardId) => held.has(lockOf(shardId)))
        const toLock = shardIds.filter((shardId) => !held.has(lockOf(shardId)))
        if (toLock.length === 0) return acquired
        const [taken] = yield* conn.executeValues(`SELECT ${toLock.map((shardId) => `pg_try_advisory_lock(${lockOf(shardId)})`).join(", ")}`, [])
        toLock.forEach((shardId, i) => taken![i] === true && acquired.push(shardId))
        return acquired
      })

    /**
     * Unlocks every lock of `locks` this connection holds, checked: a refresh between the unlock and the check may have
     * locked one again (it takes every lock it does not hold), which is then unlocked again. After five tries, every
     * lock of the connection goes, as the library does.
     */
    const unlock = (conn: Connection, locks: ReadonlyArray<number>) =>
      Effect.gen(function*() {
        let left = locks
        for (let i = 0; i < 5 && left.length > 0; i++) {
          yield* conn.executeRaw(`SELECT ${left.map((n) => `pg_advisory_unlock(${n})`).join(", ")}`, [])
          const still = new Set((yield* conn.executeValues(
            `SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND granted = true AND pid = pg_backend_pid() AND objid IN (${left.join(", ")})`,
            []
          )).map((row) => Number(row[0])))
          left = left.filter((n) => still.has(n))
        }
        if (left.length > 0) yield* conn.executeRaw("SELECT pg_advisory_unlock_all()", [])
      })

    /** The releases asked and not yet sent, each with its caller; `sending` while a batch is on its way. */
    type Waiting = { readonly lock: number; readonly resume: (exit: Effect.Effect<void, ClusterError.PersistenceError>) => void; cancelled: boolean }
    let waiting: Array<Waiting> = []
    let sending = false
    const sendBatch = (): void => {
      const batch = waiting.filter((w) => !w.cancelled)
      waiting = []
      if (batch.length === 0) {
        sending = false
        return
      }
      sending = true
      runFork(
        onLockConnection((conn) => unlock(conn, Array.from(new Set(batch.map((w) => w.lock))))).pipe(
          // On any exit, interruption included: every caller of the batch is answered and the next batch leaves.
          Effect.onExit((exit) =>
            Effect.sync(() => {
              const answer = Exit.isSuccess(exit) ? Effect.void : Effect.failCause(exit.cause)
              for (const w of batch) w.resume(answer)
              sendBatch()
            })
          )
        )
      )
    }
    const release = (shardId: string): Effect.Effect<void, ClusterError.PersistenceError> =>
      Effect.async((resume) => {
        const w: Waiting = { lock: lockOf(shardId), resume, cancelled: false }
        waiting.push(w)
        if (!sending) sendBatch()
        return Effect.sync(() => {
          w.cancelled = true
        })
      })

    const encoded: RunnerStorage.Encoded = {
      getRunners: sql`SELECT runner, healthy FROM ${runners} WHERE last_heartbeat > ${expired}`.values.pipe(
        Effect.map((rows) => rows.map(([runner, healthy]) => [String(runner), Boolean(healthy)] as const)),
        ClusterError.PersistenceError.refail
      ),
      register: (address, runner, healthy) =>
        sql`
          INSERT INTO ${runners} (address, runner, last_heartbeat, healthy) VALUES (${address}, ${runner}, NOW(), ${healthy})
          ON CONFLICT (address) DO UPDATE
          SET runner = EXCLUDED.runner, last_heartbeat = EXCLUDED.last_heartbeat, healthy = EXCLUDED.healthy
          RETURNING machine_id`.values.pipe(Effect.map((rows) => Number(rows[0]![0])), ClusterError.PersistenceError.refail),
      unregister: (address) =>
        sql`DELETE FROM ${runners} WHERE address = ${address} OR last_heartbeat < ${expired}`.pipe(Effect.asVoid, ClusterError.PersistenceError.refail),
      setRunnerHealth: (address, healthy) =>
        sql`UPDATE ${runners} SET healthy = ${healthy} WHERE address = ${address}`.pipe(Effect.asVoid, ClusterError.PersistenceError.refail),
      acquire: (_address, shardIds) => onLockConnection((conn) => lock(conn, shardIds)),
      refresh: (address, shardIds) =>
        onLockConnection((conn) =>
          Effect.zipRight(
            conn.executeRaw(`UPDATE ${options.prefix}_runners SET last_heartbeat = NOW() WHERE address = $1`, [address]),
            shardIds.length > 0 ? lock(conn, shardIds) : Effect.succeed([])
          )
        ),
      release: (_address, shardId) => release(shardId),
      releaseAll: () => onLockConnection((conn) => Effect.asVoid(conn.executeRaw("SELECT pg_advisory_unlock_all()", [])))
    }
    // Untraced, as the library's: a heartbeat every half second and a refresh every few would fill the traces.
    return RunnerStorage.makeEncoded({
      getRunners: untraced(encoded.getRunners),
      register: (address, runner, healthy) => untraced(encoded.register(address, runner, healthy)),
      unregister: (address) => untraced(encoded.unregister(address)),
      setRunnerHealth: (address, healthy) => untraced(encoded.setRunnerHealth(address, healthy)),
      acquire: (address, shardIds) => untraced(encoded.acquire(address, shardIds)),
      refresh: (address, shardIds) => untraced(encoded.refresh(address, shardIds)),
      release: (address, shardId) => untraced(encoded.release(address, shardId)),
      releaseAll: (address) => untraced(encoded.releaseAll(address))
    })
  }).pipe(untraced)

/** The runner storage of a clustered runner (`Cluster.ts`). */
export const layer = (options: { readonly prefix: string }) => Layer.scoped(RunnerStorage.RunnerStorage, make(options))
