import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Layer, Option } from "effect"
import { LedgerRepo, type WalletCommit } from "../../src/billing/Repo.js"
import { SessionId, UserId } from "../../src/platform/Ids.js"
import { DatabaseLive } from "../../src/platform/Database.js"
import { RunnersRepo } from "../../src/platform/cluster/Repo.js"
import { SessionsRepo } from "../../src/sessions/Repo.js"
import { makeMigratedStorage } from "../support/TestServer.js"

/**
 * Fencing tokens (issue 33 item 1, migration 0017), at the repository: a wallet's commit and a session's log write
 * carry their owner's shard generation, and the statement itself refuses one that is not the shard's current
 * generation (nothing of it written, nothing notified), while a current one and an unfenced one (embedded mode)
 * are written. Both modes: PGlite, and PostgreSQL with DATABASE_URL.
 */
const Repos = Layer.unwrapScoped(Effect.gen(function*() {
  const storage = yield* makeMigratedStorage
  return Layer.mergeAll(LedgerRepo.Default, SessionsRepo.Default, RunnersRepo.Default).pipe(
    Layer.provideMerge(DatabaseLive),
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(storage.env)))))
  )
}))

const SHARD = "default:7"

describe("fencing tokens", () => {
  it.layer(Repos, { timeout: 120_000 })((it) => {
    it.effect("a wallet commit under a stale generation writes nothing; the current one and an unfenced one write", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const repo = yield* LedgerRepo
        const userId = UserId.make(`usr_fence_${Date.now()}`)
        yield* sql`INSERT INTO users (id, phone) VALUES (${userId}, ${`+1555${Date.now() % 10_000_000}`})`
        yield* sql`INSERT INTO shard_generations (shard, generation, runner) VALUES (${SHARD}, 2, 'test')
          ON CONFLICT (shard) DO UPDATE SET generation = 2`
        const state = yield* repo.load(userId, 0n)
        const commit = (generation: string | null, seq: bigint, key: string): WalletCommit => ({
          userId,
          fence: generation === null ? null : { shard: SHARD, generation },
          fromSeq: seq,
          entries: [{
            seq: seq + 1n,
            amount: 5n,
            balanceAfter: 5n * (seq + 1n),
            kind: "grant",
            scope: "grant",
            key,
            appId: null,
            event: null,
            metadata: null,
            description: null,
            createdAt: new Date()
          }],
          next: { balance: 5n * (seq + 1n), seq: seq + 1n }
        })
        const stale = yield* repo.commitWallets([commit("1", state.seq, `${userId}:stale`)])
        assert.deepStrictEqual(stale, [{ _tag: "Fenced" }])
        // A shard nobody acquired has no generation: a fence on it is stale too.
        const unknown = yield* repo.commitWallets([{ ...commit("1", state.seq, `${userId}:unknown`), fence: { shard: "default:99999", generation: "1" } }])
        assert.deepStrictEqual(unknown, [{ _tag: "Fenced" }])
        const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM ledger_entries WHERE user_id = ${userId}`
        assert.strictEqual(rows[0]!.n, 0)
        const current = yield* repo.commitWallets([commit("2", state.seq, `${userId}:current`)])
        assert.deepStrictEqual(current, [{ _tag: "Committed" }])
        const unfenced = yield* repo.commitWallets([commit(null, state.seq + 1n, `${userId}:unfenced`)])
        assert.deepStrictEqual(unfenced, [{ _tag: "Committed" }])
        const after = yield* sql<{ n: number; balance: string }>`
          SELECT (SELECT count(*)::int FROM ledger_entries WHERE user_id = ${userId}) AS n,
                 (SELECT balance::text FROM wallets WHERE user_id = ${userId}) AS balance`
        assert.deepStrictEqual([after[0]!.n, after[0]!.balance], [2, "10"])
        // In one shared statement, the stale wallet is refused and the other written.
        const otherId = UserId.make(`${userId}_b`)
        yield* sql`INSERT INTO users (id, phone) VALUES (${otherId}, ${`+1556${Date.now() % 10_000_000}`})`
        const other = yield* repo.load(otherId, 0n)
        const mixed = yield* repo.commitWallets([
          commit("1", 2n, `${userId}:mixed`),
          { ...commit("2", other.seq, `${otherId}:mixed`), userId: otherId }
        ])
        assert.deepStrictEqual(mixed, [{ _tag: "Fenced" }, { _tag: "Committed" }])
      }))

    it.effect("a session log write under a stale generation writes nothing and is named; the others in its statement are written", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const repo = yield* SessionsRepo
        const id = `fence${Date.now()}`
        yield* sql`INSERT INTO users (id, phone) VALUES (${`usr_${id}`}, ${`+1557${Date.now() % 10_000_000}`})`
        yield* sql`INSERT INTO agents (id, identifier, owner_id, draft) VALUES (${`agt_${id}`}, ${id}, ${`usr_${id}`}, '{}'::jsonb)`
        for (const s of ["a", "b"]) {
          yield* sql`INSERT INTO sessions (id, agent_id, account_id, end_user_id) VALUES (${`ses_${id}_${s}`}, ${`agt_${id}`}, ${`usr_${id}`}, 'u')`
        }
        yield* sql`INSERT INTO shard_generations (shard, generation, runner) VALUES (${SHARD}, 5, 'test')
          ON CONFLICT (shard) DO UPDATE SET generation = 5`
        const event = (session: string, seq: number) => ({
          sessionId: SessionId.make(`ses_${id}_${session}`),
          events: [{ seq, turn: 1, payload: { type: "text", delta: "x", seq } as any }],
          enqueue: { turn: seq, message: "m", budget: Option.none() }
        })
        const refused = yield* repo.commitLog([
          { ...event("a", 1), fence: { shard: SHARD, generation: "4" } },
          { ...event("b", 1), fence: { shard: SHARD, generation: "5" } },
          { ...event("b", 2), fence: null }
        ], "atrium_test_fences", [["a1"], ["b1"], ["b2"]])
        assert.deepStrictEqual(refused, [0])
        const logged = yield* sql<{ session: string; n: number; queued: number }>`
          SELECT s.id AS session,
            (SELECT count(*)::int FROM session_events e WHERE e.session_id = s.id) AS n,
            (SELECT count(*)::int FROM session_queue q WHERE q.session_id = s.id) AS queued
          FROM sessions s WHERE s.agent_id = ${`agt_${id}`} ORDER BY s.id`
        assert.deepStrictEqual(logged.map((r) => [r.n, r.queued]), [[0, 0], [2, 2]])
        // One terminal event per turn (migration 0015's `session_events_one_end`): an end of turn 1 is taken, a
        // second end of the same turn (a woken owner's, of another kind) is refused by the database.
        const end = (seq: number, type: "complete" | "error") => ({
          sessionId: SessionId.make(`ses_${id}_b`),
          fence: { shard: SHARD, generation: "5" },
          events: [{ seq, turn: 1, payload: { type, seq, ...(type === "error" ? { code: "interrupted", message: "x" } : {}) } as any }]
        })
        yield* repo.commitLog([end(3, "complete")], "atrium_test_fences", [["b3"]])
        const second = yield* Effect.exit(repo.commitLog([end(4, "error")], "atrium_test_fences", [["b4"]]))
        assert.isTrue(Exit.isFailure(second), "a second terminal event of one turn was written")
        const ends = yield* sql<{ n: number }>`
          SELECT count(*)::int AS n FROM session_events
          WHERE session_id = ${`ses_${id}_b`} AND turn = 1 AND payload->>'type' IN ('complete', 'error')`
        assert.strictEqual(ends[0]!.n, 1)
      }))

    it.effect("a runner that takes a shard back under the generation it knew keeps it and its time; another runner raises both", () =>
      Effect.gen(function*() {
        const repo = yield* RunnersRepo
        const sql = yield* SqlClient.SqlClient
        const shard = `default:raise-${Date.now()}`
        const stored = Effect.map(
          sql<{ generation: string; runner: string; acquiredAt: string }>`
            SELECT generation::text, runner, acquired_at::text FROM shard_generations WHERE shard = ${shard}`,
          (rows) => rows[0]!
        ).pipe(Effect.orDie)
        const raise = (runner: string, known: string | null) => repo.raiseGenerations(runner, [{ shard, known }])
        assert.deepStrictEqual(yield* raise("a:1", null), [{ shard, generation: "1" }])
        const first = yield* stored
        // Its locks came back to it (a database restart) and nobody took the shard meanwhile: no move, no new time,
        // so ShardMoves does not cut the calls in flight to it.
        assert.deepStrictEqual(yield* raise("a:1", "1"), [{ shard, generation: "1" }])
        assert.deepStrictEqual(yield* stored, first)
        // Another runner's acquisition is a move: a new generation, a new time.
        assert.deepStrictEqual(yield* raise("b:1", null), [{ shard, generation: "2" }])
        const moved = yield* stored
        assert.strictEqual(moved.runner, "b:1")
        assert.notStrictEqual(moved.acquiredAt, first.acquiredAt)
        // The first runner back under the generation it knew: raised again, since it was not the last owner.
        assert.deepStrictEqual(yield* raise("a:1", "1"), [{ shard, generation: "3" }])
        assert.notStrictEqual((yield* stored).acquiredAt, moved.acquiredAt)
      }))
  })
})
