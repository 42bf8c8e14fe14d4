import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import * as Mock from "../support/MockUpstream.js"
import * as Fake from "../support/ProviderFakes.js"
import { parseStream } from "../support/Sse.js"
import { makeMigratedStorage, makeSmsInbox, type RunningServer, startServer, TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, newUser } from "./runs-support.js"
import { pollUntil } from "../support/Poll.js"

/**
 * Issue 43 item 2, retry backoff (docs/runs.md, "Waits of a background run"): a step of a background run whose every
 * provider rests (a 429 with `Retry-After`) does not sleep in its runner's memory. Its first attempt is recorded with
 * the time to try again, the workflow waits on a persisted `DurableClock` (no fiber), and the step is tried once more
 * after it. The runner that made the first attempt is stopped during the wait; another on the same database fires the
 * clock and finishes the step: told once, billed once.
 */

const U1 = { "x-end-user-id": "u1" }
const KEY = "sk-provider-secret-0123456789"
const MODEL = { input_per_1k: "1", output_per_1k: "2", capabilities: ["tools"] }

const poll = <A, R>(what: string, read: Effect.Effect<A, never, R>, until: (value: A) => boolean) => pollUntil(read, until, what)

describe("durable backoff", () => {
  it.scopedLive("a background run waiting out a provider's Retry-After holds no fiber: another server finishes its step after a restart", () =>
    Effect.gen(function*() {
      const storage = yield* makeMigratedStorage
      const inbox = yield* makeSmsInbox
      const upstream = yield* Mock.make
      const env = {
        ...ENV,
        MODEL_PROVIDERS: JSON.stringify({
          providers: [{ id: "openai", kind: "openai-chat", base_url: upstream.baseUrl, api_key: KEY, models: [{ id: "gpt-4o-mini", ...MODEL }] }]
        })
      }
      // The provider asks to be left alone for 5 s (within MAX_CHAIN_WAIT_MS), then answers.
      yield* upstream.script(
        Mock.status(429, Fake.errorBody("openai", 429), undefined, { "retry-after": "5" }),
        Mock.stream(Fake.openrouter({ text: "after the rest", usage: { input: 10, output: 10 } }))
      )
      /** Clocks the cluster keeps for later (`deliver_at`): a persisted wait, not a sleep in a runner. */
      const clocks = (server: RunningServer) =>
        Effect.map(server.query(`SELECT count(*)::int AS n FROM cluster_messages WHERE deliver_at IS NOT NULL`), (rows) => Number(rows[0]!.n))

      const first = yield* Effect.scoped(Effect.gen(function*() {
        const server = yield* startServer(storage, inbox, env)
        return yield* Effect.gen(function*() {
          const user = yield* newUser
          const key = yield* apiKeyOf(user)
          const agent = yield* agentWith(user.token, {}, { model: "openai/gpt-4o-mini" })
          const started = yield* request("POST", "/v1/agents/run", { token: key, headers: U1, body: { agent, message: "hi", background: true } })
          assert.strictEqual(started.status, 202, started.text)
          yield* poll("the provider was asked", upstream.requests, (requests) => requests.length >= 1)
          // The step's first attempt is recorded and its wait is a clock in the cluster's storage: the run waits there.
          yield* poll("a persisted clock", clocks(server), (n) => n > 0)
          return { key, id: started.body.id as string }
        }).pipe(Effect.provideService(TestServer, server))
      }))

      const server = yield* startServer(storage, inbox, env)
      yield* Effect.gen(function*() {
        const read = Effect.map(request("GET", `/v1/runs/${first.id}`, { token: first.key, headers: U1 }), (reply) => reply.body as Record<string, any>)
        const done = yield* poll("the run ended", read, (run) => run.status !== "queued" && run.status !== "in_progress")
        assert.strictEqual(done.status, "completed", JSON.stringify(done))
        assert.strictEqual(done.output, "after the rest")
        // Asked twice in all: the 429, then once after the rest; nothing was asked again by the restart.
        assert.strictEqual((yield* upstream.requests).length, 2)
        const told = parseStream(yield* Effect.promise(() =>
          fetch(`${server.url}/v1/runs/${first.id}/events`, { headers: { authorization: `Bearer ${first.key}`, ...U1 } }).then((r) => r.text())
        ))
        // The step is one turn, told once, though tried twice on two servers.
        assert.deepStrictEqual(told.events.filter((e) => e.event === "run.in_progress").map((e) => e.data.turn), [1])
        const entries = yield* server.query(
          `SELECT idempotency_key, amount::text AS amount FROM ledger_entries WHERE scope = 'run' AND idempotency_key LIKE '${first.id}:%'`
        )
        assert.deepStrictEqual(entries.map((e) => e.idempotency_key), [`${first.id}:1`])
        assert.strictEqual(-Number(entries[0]!.amount) / 1e6, done.credits_charged)
      }).pipe(Effect.provideService(TestServer, server))
    }), { timeout: 120_000 })
})
