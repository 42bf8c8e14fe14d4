import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { requestAt } from "../support/Client.js"
import { pollUntil } from "../support/Poll.js"
import { shardOf } from "../support/Faults.js"
import { freePort, launchPlatform } from "../support/Process.js"
import { adminQuery } from "../support/Templates.js"
import { agentOf, grant, makeClusterShared, newUser, runner, sessionOf } from "./runners.js"
import { settled } from "./support.js"

/**
 * Issue 45 item 2, "Done when": a hold whose run died is released or resumed, after kill -9, on `dist/`. Background
 * runs (durable) are sent to runner A and a foreground run is streaming from it when A is killed mid-step. The
 * survivor executes the background runs again from their records: each asks for its hold again (the same hold, by
 * the run's id), finishes, and posts each step once. The foreground run is gone with A: nothing runs it again, so its
 * hold is voided when it expires (`HOLD_TTL_SECONDS`, short here). Two session turns of sessions A owns die with it
 * too: the sessions' next owner (B) closes each as interrupted when it starts there and voids its hold then, before
 * that hold would have expired, and bills nothing for it. In the end the wallet holds nothing, its balance is its
 * ledger's sum, and every run's steps are in the ledger once.
 */

const RUNS = 6
const SLOW = 100
/**
 * Long enough for B to take A's shards and run each session's next turn before the turns' holds would expire (B has
 * A's shards about 3-4 s after the kill: the fault checker's `shardsMovedMs`), and the test waits it out for the
 * foreground run's hold: 45 s made this the services suite's longest file but one (52 s).
 */
const TTL_SECONDS = 25

describe("cluster: holds after kill -9 (issue 45)", () => {
  it.scopedLive("a dead runner's holds are resumed by the runs' next owner or voided when they expire", () =>
    Effect.gen(function*() {
      const shared = yield* makeClusterShared
      const env = { HOLD_TTL_SECONDS: String(TTL_SECONDS) }
      // A's cluster address is known, to tell which sessions it owns (`shard_generations`).
      const portA = yield* freePort
      const [a, b] = yield* Effect.all([
        launchPlatform({ ...shared.env, ...env, RUNNER_PORT: String(portA) }),
        runner(shared, env)
      ], { concurrency: 2 })
      yield* settled(shared, 2)
      const user = yield* newUser(a)
      yield* grant(a, user, "100")
      const agent = yield* agentOf(a, user)
      const wallet = (at: typeof a) =>
        Effect.map(requestAt(at.url, "GET", "/api/wallet", { token: user.token }), (reply) => {
          assert.strictEqual(reply.status, 200, reply.text)
          return reply.body as { balance: number; held: number }
        })

      const ids = yield* Effect.all(Array.from({ length: RUNS }, () =>
        Effect.map(
          requestAt(a.url, "POST", "/v1/agents/run", { token: user.token, body: { agent, message: `/slow ${SLOW}`, background: true } }),
          (reply) => {
            assert.strictEqual(reply.status, 202, reply.text)
            return reply.body.id as string
          }
        )), { concurrency: RUNS })
      // A foreground run streaming from A: it dies with A, and nothing runs it again.
      const foreground = fetch(`${a.url}/v1/agents/run`, {
        method: "POST",
        headers: { authorization: `Bearer ${user.token}`, "content-type": "application/json" },
        body: JSON.stringify({ agent, message: "/slow 300" })
      }).then(async (r) => r.text()).catch(() => "")
      const read = (at: typeof a, id: string) => Effect.map(requestAt(at.url, "GET", `/v1/runs/${id}`, { token: user.token }), (reply) => {
        assert.strictEqual(reply.status, 200, reply.text)
        return reply.body as Record<string, any>
      })
      yield* pollUntil(Effect.all(ids.map((id) => read(b, id))), (runs) => runs.every((run) => run.status === "in_progress"), "every run in progress", {
        within: 10_000
      })
      // Every run holds credits before the kill, the foreground one too (polled: the runs start as the runners can).
      const holdsBefore = yield* pollUntil(
        Effect.promise(() => adminQuery(shared.databaseUrl, `SELECT hold_id FROM wallet_holds WHERE user_id = '${user.userId}'`)),
        (holds) => holds.length >= RUNS + 1,
        "every run's hold placed",
        { within: 30_000 }
      )
      assert.strictEqual(holdsBefore.length, RUNS + 1, JSON.stringify(holdsBefore))

      // Two sessions whose shards A holds, each with a turn running there (30 s of output) when A is killed.
      const owners = yield* Effect.promise(() => adminQuery(shared.databaseUrl, `SELECT DISTINCT runner FROM shard_generations`))
      const onA = owners.map((row) => row.runner as string).filter((runner) => runner.endsWith(`:${portA}`))
      assert.lengthOf(onA, 1, JSON.stringify(owners))
      const sessions: Array<string> = []
      for (let i = 0; i < 40 && sessions.length < 2; i++) {
        const session = yield* sessionOf(a, user, agent)
        const [row] = yield* Effect.promise(() =>
          adminQuery(shared.databaseUrl, `SELECT runner FROM shard_generations WHERE shard = $1`, [shardOf(session)])
        )
        if (row?.runner === onA[0]) sessions.push(session)
      }
      assert.lengthOf(sessions, 2, "two sessions on A")
      const turns = sessions.map((session) =>
        fetch(`${a.url}/v1/sessions/${session}/events`, {
          method: "POST",
          headers: { authorization: `Bearer ${user.token}`, "content-type": "application/json" },
          body: JSON.stringify({ type: "message", message: "/slow 300" })
        }).then(async (r) => r.text()).catch(() => "")
      )
      const turnHolds = sessions.map((session) => `session:${session}:1`)
      const turnHoldsNow = Effect.promise(() =>
        adminQuery(shared.databaseUrl, `SELECT hold_id, expires_at FROM wallet_holds WHERE hold_id = ANY($1)`, [turnHolds])
      )
      const placed = yield* pollUntil(turnHoldsNow, (holds) => holds.length >= 2, "both turns' holds placed", { within: 30_000 })
      assert.lengthOf(placed, 2, JSON.stringify(placed))
      /** When the first of the two turns' holds would expire, had no one voided it. */
      const expiresFirst = placed.map((row) => new Date(row.expires_at as string).getTime()).sort((x, y) => x - y)[0]!

      const before = yield* wallet(b)
      assert.isAbove(before.held, 0)
      yield* Effect.promise(() => a.kill())
      yield* Effect.promise(() => foreground)
      yield* Effect.promise(() => Promise.all(turns))

      // Each session's next message, on B, starts it there (as soon as B holds its shard): the cut turn is closed as
      // interrupted and its hold voided, then the new turn runs.
      for (const session of sessions) {
        // Sent again until B holds the shard and the turn completes there.
        const reply = yield* pollUntil(
          Effect.promise(() =>
            fetch(`${b.url}/v1/sessions/${session}/events`, {
              method: "POST",
              headers: { authorization: `Bearer ${user.token}`, "content-type": "application/json" },
              body: JSON.stringify({ type: "message", message: "hello again" })
            }).then(async (r) => ({ status: r.status, text: await r.text() }))
          ),
          (reply) => reply.status === 200 && reply.text.includes("run.completed"),
          `the next message of ${session} completed on B`,
          { every: 250, within: 30_000 }
        )
        assert.include(reply.text, "run.completed", `${reply.status} ${reply.text.slice(-500)}`)
      }
      const [voided] = yield* Effect.promise(() =>
        adminQuery(
          shared.databaseUrl,
          `SELECT (SELECT count(*)::int FROM wallet_holds WHERE hold_id = ANY($1)) AS left,
                  now() < $2::timestamptz AS early,
                  (SELECT count(*)::int FROM ledger_entries WHERE idempotency_key LIKE ANY($3)) AS billed`,
          [turnHolds, new Date(expiresFirst).toISOString(), turnHolds.map((id) => `${id}:%`)]
        )
      )
      // Gone before they would have expired: voided by the sessions' next owner, not by time; nothing billed.
      assert.deepStrictEqual(voided, { left: 0, early: true, billed: 0 })
      const interrupted = yield* Effect.promise(() =>
        adminQuery(
          shared.databaseUrl,
          `SELECT session_id FROM session_events WHERE session_id = ANY($1) AND turn = 1 AND payload->>'code' = 'interrupted'`,
          [sessions]
        )
      )
      assert.lengthOf(interrupted, 2, JSON.stringify(interrupted))

      const ended = yield* pollUntil(
        Effect.all(ids.map((id) => read(b, id))),
        (runs) => runs.every((run) => run.status !== "queued" && run.status !== "in_progress"),
        "every run ended on B",
        { within: 60_000 }
      )
      assert.deepStrictEqual(ended.map((run) => run.status), ids.map(() => "completed"), b.output().slice(-3000))

      // The foreground run's hold is voided once it expires: the wallet's next request finds it void.
      // Polled: the hold expires on the wallet's clock and tells no one; the next read finds it void.
      const after = yield* pollUntil(wallet(b), (after) => after.held === 0, "every hold settled or voided", { every: 500, within: (TTL_SECONDS + 30) * 1_000 })
      assert.strictEqual(after.held, 0, "every hold was settled or voided")
      const left = yield* Effect.promise(() =>
        adminQuery(shared.databaseUrl, `SELECT hold_id FROM wallet_holds WHERE user_id = '${user.userId}'`)
      )
      assert.deepStrictEqual(left, [])

      // Each background run's step posted once, as much as the run says it charged; the ledger is the balance.
      const rows = yield* Effect.promise(() =>
        adminQuery(shared.databaseUrl, `SELECT idempotency_key, amount::text FROM ledger_entries WHERE user_id = '${user.userId}' AND scope = 'run'`)
      )
      for (const run of ended) {
        const mine = rows.filter((row) => (row.idempotency_key as string).startsWith(`${run.id}:`))
        assert.deepStrictEqual(mine.map((row) => row.idempotency_key), [`${run.id}:1`])
        assert.strictEqual(-Number(mine[0]!.amount) / 1e6, run.credits_charged)
      }
      const [sums] = yield* Effect.promise(() =>
        adminQuery(
          shared.databaseUrl,
          `SELECT w.balance::text AS balance, w.held::text AS held, (SELECT SUM(amount) FROM ledger_entries l WHERE l.user_id = w.user_id)::text AS total
           FROM wallets w WHERE w.user_id = '${user.userId}'`
        )
      )
      assert.strictEqual(sums!.held, "0")
      assert.strictEqual(sums!.balance, sums!.total)
      assert.strictEqual(Number(sums!.balance) / 1e6, after.balance)
    }), { timeout: 240_000 })
})
