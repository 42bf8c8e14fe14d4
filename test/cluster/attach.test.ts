import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import { requestAt } from "../support/Client.js"
import { pollUntil } from "../support/Poll.js"
import { adminQuery } from "../support/Templates.js"
import { agentOf, grant, makeClusterShared, newUser, runner } from "./runners.js"
import { settled } from "./support.js"

/**
 * Issue 44 item 5: a retry with the same `Idempotency-Key` attaches to the first run wherever it lands. The first
 * request goes to runner A; its retry (the `openai` SDK, the same key and body) to runner B while A's run is still
 * going: B waits for that run and answers its result, the same completion, with `Idempotent-Replayed: true`. One run,
 * one charge.
 */

const SLOW = 20
const ANSWER = Array.from({ length: SLOW }, (_, i) => `chunk ${i + 1} `).join("")

describe("cluster: a retry on another runner attaches to the first run (issue 44)", () => {
  it.scopedLive("chat completions: the retry on runner B answers runner A's run, billed once", () =>
    Effect.gen(function*() {
      const shared = yield* makeClusterShared
      const [a, b] = yield* Effect.all([runner(shared), runner(shared)], { concurrency: 2 })
      yield* settled(shared, 2)
      const user = yield* newUser(a)
      yield* grant(a, user, "100")
      const agent = yield* agentOf(a, user)
      const client = (url: string) =>
        new OpenAI({ apiKey: user.apiKey, baseURL: `${url}/v1`, maxRetries: 0, defaultHeaders: { "X-End-User-Id": "u1" } })
      const body = { model: agent, messages: [{ role: "user" as const, content: `/slow ${SLOW}` }] }
      const options = { headers: { "Idempotency-Key": `cluster-${Date.now()}` } }
      const before = yield* Effect.map(requestAt(a.url, "GET", "/openapi/credit/balance", { token: user.apiKey }), (r) => r.body.balance as number)

      const first = yield* Effect.fork(Effect.promise(() => client(a.url).chat.completions.create(body, options).withResponse()))
      // Polled: the first call is on its way once its run is recorded on A (its key claimed before).
      yield* pollUntil(
        Effect.promise(() => adminQuery(shared.databaseUrl, `SELECT id FROM runs WHERE payer_id = $1 AND status = 'running'`, [user.userId])),
        (rows) => rows.length > 0,
        "the first call's run started",
        { every: 50, within: 30_000 }
      )
      const retry = yield* Effect.promise(() => client(b.url).chat.completions.create(body, options).withResponse())
      const original = yield* Effect.flatten(first.await)

      assert.strictEqual(original.data.choices[0]!.message.content, ANSWER)
      assert.deepStrictEqual(retry.data, original.data, "the same completion, its id included")
      assert.strictEqual(retry.response.headers.get("idempotent-replayed"), "true")
      assert.isNull(original.response.headers.get("idempotent-replayed"))

      // Once more on B, now that the run has ended: replayed from the database at once.
      const late = yield* Effect.promise(() => client(b.url).chat.completions.create(body, options).withResponse())
      assert.deepStrictEqual(late.data, original.data)

      const runs = yield* requestAt(b.url, "GET", `/v1/runs?agent=${agent}`, { token: user.apiKey, headers: { "x-end-user-id": "u1" } })
      assert.strictEqual(runs.status, 200, runs.text)
      assert.strictEqual(runs.body.data.length, 1, "one run for the three requests")
      const after = yield* Effect.map(requestAt(a.url, "GET", "/openapi/credit/balance", { token: user.apiKey }), (r) => r.body.balance as number)
      assert.closeTo(before - after, runs.body.data[0].credits_charged, 1e-6, "one charge")
      // Two runner processes' starts and a 20-chunk run: 21 s alone, 55 s beside the browser suite.
    }), { timeout: 120_000 })
})
