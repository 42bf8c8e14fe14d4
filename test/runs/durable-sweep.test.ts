import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { pollUntil } from "../support/Poll.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, LIVE, newUser, pollRun } from "./runs-support.js"

/**
 * No background run stays non-terminal (issue 43; the durable bench's run left `running` after the kill), whatever was
 * lost on the way (runs/Background.ts):
 * - a run whose row was written and whose workflow start never was (its runner died in between) is started by the
 *   sweep;
 * - a run whose execution dies (a defect, which the workflow engine would keep as the workflow's end for good) is
 *   tried again and then ends `failed` (`internal_error`), told, instead of staying `running` for ever;
 * - a workflow's request read by a runner and left unanswered is read again within the sweep, not ten minutes later.
 * The faults are made in the database, as a killed runner leaves it.
 */

// The sweep and the workflow go on in the background; only the run's record says how far they got.
const poll = (key: string, id: string, until: (run: Record<string, any>) => boolean) => pollRun(key, id, until)

/**
 * A background run of `key`'s agent `agent`, completed, and a copy of its row under `id` as a runner leaves it when it
 * dies after writing the row and before sending the workflow's start: `queued`, created a while ago, no workflow.
 * `request` changes what the copy's workflow will read.
 */
const strandedCopy = (key: string, agent: string, id: string, request_ = "request", before: (payer: string) => Effect.Effect<unknown, never, TestServer> = () => Effect.void) =>
  Effect.gen(function*() {
    const server = yield* TestServer
    const started = yield* request("POST", "/v1/agents/run", { token: key, headers: { "x-end-user-id": "u1" }, body: { agent, message: "hello sweep", background: true } })
    assert.strictEqual(started.status, 202, started.text)
    yield* poll(key, started.body.id, (run) => run.status === "completed")
    const [payer] = yield* server.query(`SELECT payer_id FROM runs WHERE id = '${started.body.id}'`)
    yield* before(payer!.payer_id as string)
    yield* server.query(`
      INSERT INTO runs (id, agent_id, agent_version, payer_id, end_user_id, status, agent, background, request, deadline_at, created_at)
      SELECT '${id}', agent_id, agent_version, payer_id, end_user_id, 'queued', agent, true, ${request_}, now() + interval '1 hour',
             now() - interval '1 minute'
      FROM runs WHERE id = '${started.body.id}'`)
  })

describe("background runs: nothing lost stays open", () => {
  layer(TestServer.layer({ ...ENV, BACKGROUND_SWEEP: "300 millis", BACKGROUND_CANCEL_POLL: "100 millis" }), LIVE)((it) => {
    it.effect("a run whose workflow start was lost with its runner is started by the sweep, and completes", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const key = yield* apiKeyOf(user)
        const id = `run_sweptstart${Date.now()}`
        yield* strandedCopy(key, agent, id)
        const run = yield* poll(key, id, (run) => run.status !== "queued" && run.status !== "in_progress")
        assert.strictEqual(run.status, "completed")
        assert.strictEqual(run.output, "You said: hello sweep")
        assert.isAbove(run.credits_charged, 0)
      }))

    it.effect("a run whose execution dies ends failed (internal_error), told, and charged what the ledger holds", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const key = yield* apiKeyOf(user)
        const id = `run_sweptdefect${Date.now()}`
        // A budget the workflow cannot read: its execution dies after it marked the run running, every time.
        yield* strandedCopy(key, agent, id, `jsonb_set(request, '{budget}', '"not-a-number"')`)
        const run = yield* poll(key, id, (run) => run.status !== "queued" && run.status !== "in_progress")
        assert.strictEqual(run.status, "failed")
        assert.strictEqual(run.error.code, "internal_error")
        assert.strictEqual(run.credits_charged, 0)
        // Its log ends, so a client following its events sees the end.
        const last = yield* server.query(`SELECT payload->>'type' AS type, payload->>'code' AS code FROM run_events WHERE run_id = '${id}' ORDER BY seq DESC LIMIT 1`)
        assert.deepStrictEqual(last.map((row) => [row.type, row.code]), [["error", "internal_error"]])
      }))

    it.effect("a run records what the ledger holds for its steps: a step posted before (by a runner that died) as it was posted", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const key = yield* apiKeyOf(user)
        const id = `run_sweptledger${Date.now()}`
        // Its step 1 already in the ledger, at an amount of its own, as a runner that posted it and died leaves it;
        // the wallet answers the run's own charge of that step from this entry (one key, one entry).
        yield* strandedCopy(key, agent, id, "request", (payer) =>
          server.query(`
            WITH w AS (SELECT user_id, balance, seq FROM wallets WHERE user_id = '${payer}'),
                 e AS (INSERT INTO ledger_entries (user_id, seq, amount, kind, scope, idempotency_key, description, balance_after)
                       SELECT user_id, seq + 1, -7, 'usage', 'run', '${id}:1', 'posted by a runner that died', balance - 7 FROM w
                       RETURNING user_id)
            UPDATE wallets SET balance = balance - 7, seq = seq + 1 FROM e WHERE wallets.user_id = e.user_id`))
        const run = yield* poll(key, id, (run) => run.status !== "queued" && run.status !== "in_progress")
        assert.strictEqual(run.status, "completed")
        const entries = yield* server.query(`SELECT amount::text AS amount FROM ledger_entries WHERE scope = 'run' AND idempotency_key LIKE '${id}:%'`)
        assert.deepStrictEqual(entries.map((row) => row.amount), ["-7"])
        assert.strictEqual(run.credits_charged, 0.000007)
      }))

    it.effect("a workflow's request read and left unanswered is read again at the next sweep, not ten minutes later", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        // On a shard nobody owns, so that only the sweep touches them, both read a minute ago: one left unanswered,
        // one processed (which stays as it is).
        const base = 9_000_000_000_000 + Math.floor(Math.random() * 1_000_000) * 2
        for (const [id, processed] of [[base, false], [base + 1, true]] as const) {
          yield* server.query(`
            INSERT INTO cluster_messages (id, shard_id, entity_type, entity_id, kind, tag, payload, headers, processed, request_id, last_read)
            VALUES (${id}, 'sweep-test:1', 'Workflow/BackgroundRun', 'sweep-${id}', 0, 'run', '{}', '{}', ${processed}, ${id},
                    now() - interval '1 minute')`)
        }
        const reads = yield* pollUntil(
          server.query(`SELECT id::text AS id, last_read IS NULL AS again FROM cluster_messages WHERE id IN (${base}, ${base + 1}) ORDER BY id`),
          (rows) => rows[0]?.again === true,
          "the sweep's pass over the unanswered message",
          { within: 10_000 }
        )
        assert.deepStrictEqual(reads.map((row) => row.again), [true, false])
        yield* server.query(`DELETE FROM cluster_messages WHERE id IN (${base}, ${base + 1})`)
      }))
  })
})
