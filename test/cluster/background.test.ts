import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { requestAt } from "../support/Client.js"
import { pollUntil, realWait } from "../support/Poll.js"
import { parseStream } from "../support/Sse.js"
import { adminQuery } from "../support/Templates.js"
import { agentOf, grant, makeClusterShared, newUser, runner } from "./runners.js"
import { settled } from "./support.js"

/**
 * Issue 43, "Done when" 1: background runs started on one runner survive the kill -9 of that runner and complete on
 * the other, billed once. Eight runs spread over both runners' shards; the runner they were sent to is killed while
 * every one is mid-step. The survivor takes the dead runner's shards, executes their workflows again from their
 * records, and each run ends `completed` with its whole answer, one ledger entry per step (its key the step's
 * identity) and credits equal to what the ledger took.
 */

const RUNS = 8
const SLOW = 40
const ANSWER = Array.from({ length: SLOW }, (_, i) => `chunk ${i + 1} `).join("")

describe("cluster: background runs (issue 43)", () => {
  it.scopedLive("a background run survives kill -9 of its runner and completes on another, billed once", () =>
    Effect.gen(function*() {
      const shared = yield* makeClusterShared
      const [a, b] = yield* Effect.all([runner(shared), runner(shared)], { concurrency: 2 })
      yield* settled(shared, 2)
      const user = yield* newUser(a)
      yield* grant(a, user, "100")
      const agent = yield* agentOf(a, user)

      const body = { agent, message: `/slow ${SLOW}`, background: true }
      const keyed = { "idempotency-key": "background-once" }
      const ids = yield* Effect.all(Array.from({ length: RUNS }, (_, i) =>
        Effect.map(
          requestAt(a.url, "POST", "/v1/agents/run", { token: user.token, body, headers: i === 0 ? keyed : {} }),
          (reply) => {
            assert.strictEqual(reply.status, 202, reply.text)
            return reply.body.id as string
          }
        )), { concurrency: RUNS })
      // The first one's retry reaches the other runner (a client whose first answer was lost): the same run, not a
      // ninth (its id is its key's: docs/http.md, "Idempotency-Key").
      const retried = yield* requestAt(b.url, "POST", "/v1/agents/run", { token: user.token, body, headers: keyed })
      assert.strictEqual(retried.status, 202, retried.text)
      assert.strictEqual(retried.body.id, ids[0])
      const read = (at: typeof a, id: string) => Effect.map(requestAt(at.url, "GET", `/v1/runs/${id}`, { token: user.token }), (reply) => {
        assert.strictEqual(reply.status, 200, reply.text)
        return reply.body as Record<string, any>
      })
      // Every run started and streaming before the kill: polled, as only the runs' records say how far they got.
      yield* pollUntil(Effect.all(ids.map((id) => read(b, id))), (runs) => runs.every((run) => run.status === "in_progress"), "every run in progress", {
        within: 10_000
      })
      // Real wait: the runs on A must be streaming their step when it is killed (tried without it: none of them had
      // begun, and none was resumed); only their logs say so, and the log of a run still going is a stream that does
      // not end.
      yield* realWait(500)
      yield* Effect.promise(() => a.kill())

      const ended = yield* pollUntil(
        Effect.all(ids.map((id) => read(b, id))),
        (runs) => runs.every((run) => run.status !== "queued" && run.status !== "in_progress"),
        "every run ended on B",
        { within: 60_000 }
      )
      assert.deepStrictEqual(ended.map((run) => run.status), ids.map(() => "completed"), b.output().slice(-3000))
      for (const run of ended) assert.strictEqual(run.output, ANSWER)

      // Billed once: one ledger entry per run, keyed by its one step, equal to what the run says it charged.
      const rows = yield* Effect.promise(() =>
        adminQuery(shared.databaseUrl, `SELECT idempotency_key, amount::text FROM ledger_entries WHERE scope = 'run' AND idempotency_key LIKE 'run_%'`)
      )
      for (const run of ended) {
        const mine = rows.filter((row) => (row.idempotency_key as string).startsWith(`${run.id}:`))
        assert.deepStrictEqual(mine.map((row) => row.idempotency_key), [`${run.id}:1`])
        assert.strictEqual(-Number(mine[0]!.amount) / 1e6, run.credits_charged)
      }

      // Some runs were on the killed runner: their step was cut and told again from its start on the survivor, as its
      // second attempt; the log reads as one run, the cut attempt's events superseded (docs/runs.md).
      const logs = yield* Effect.all(ended.map((run) =>
        Effect.promise(() =>
          fetch(`${b.url}/v1/runs/${run.id}/events`, { headers: { authorization: `Bearer ${user.token}` } }).then(async (r) => r.text())
        )))
      for (const text of logs) assert.strictEqual(parseStream(text).events.filter((e) => e.event === "run.in_progress").length, 1, text)
      const resumed = logs.filter((text) => parseStream(text).events.some((e) => e.event === "run.in_progress" && e.data.attempt === 2))
      assert.isAbove(resumed.length, 0, "no run was on the killed runner")
    }), { timeout: 180_000 })
})
