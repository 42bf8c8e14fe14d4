import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { requestAt } from "../support/Client.js"
import { adminQuery } from "../support/Templates.js"
import { agentOf, grant, makeClusterShared, newUser, runner } from "./runners.js"
import { databaseUrl, settled } from "./support.js"

/**
 * Issue 45 item 2, "Done when": a hold whose run died is released or resumed, after kill -9, on `dist/`. Background
 * runs (durable) are sent to runner A and a foreground run is streaming from it when A is killed mid-step. The
 * survivor executes the background runs again from their records: each asks for its hold again (the same hold, by
 * the run's id), finishes, and posts each step once. The foreground run is gone with A: nothing runs it again, so its
 * hold is voided when it expires (`HOLD_TTL_SECONDS`, short here). In the end the wallet holds nothing, its balance
 * is its ledger's sum, and every run's steps are in the ledger once.
 */

const RUNS = 6
const SLOW = 100
const TTL_SECONDS = 20

describe.skipIf(databaseUrl === undefined)("cluster: holds after kill -9 (issue 45)", () => {
  it.scopedLive("a dead runner's holds are resumed by the runs' next owner or voided when they expire", () =>
    Effect.gen(function*() {
      const shared = yield* makeClusterShared
      const env = { HOLD_TTL_SECONDS: String(TTL_SECONDS) }
      const [a, b] = yield* Effect.all([runner(shared, env), runner(shared, env)], { concurrency: 2 })
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
      for (let i = 0; i < 100; i++) {
        const runs = yield* Effect.all(ids.map((id) => read(b, id)))
        if (runs.every((run) => run.status === "in_progress")) break
        yield* Effect.sleep("100 millis")
      }
      // Every run holds credits before the kill, the foreground one too (polled: the runs start as the runners can).
      const holdsNow = Effect.promise(() =>
        adminQuery(shared.databaseUrl, `SELECT hold_id FROM wallet_holds WHERE user_id = '${user.userId}'`)
      )
      let holdsBefore = yield* holdsNow
      for (let i = 0; i < 300 && holdsBefore.length < RUNS + 1; i++) {
        yield* Effect.sleep("100 millis")
        holdsBefore = yield* holdsNow
      }
      assert.strictEqual(holdsBefore.length, RUNS + 1, JSON.stringify(holdsBefore))
      const before = yield* wallet(b)
      assert.isAbove(before.held, 0)
      yield* Effect.promise(() => a.kill())
      yield* Effect.promise(() => foreground)

      let ended: Array<Record<string, any>> = []
      for (let i = 0; i < 600; i++) {
        ended = yield* Effect.all(ids.map((id) => read(b, id)))
        if (ended.every((run) => run.status !== "queued" && run.status !== "in_progress")) break
        yield* Effect.sleep("100 millis")
      }
      assert.deepStrictEqual(ended.map((run) => run.status), ids.map(() => "completed"), b.output().slice(-3000))

      // The foreground run's hold is voided once it expires: the wallet's next request finds it void.
      let after = yield* wallet(b)
      for (let i = 0; i < (TTL_SECONDS + 30) * 2 && after.held !== 0; i++) {
        yield* Effect.sleep("500 millis")
        after = yield* wallet(b)
      }
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
