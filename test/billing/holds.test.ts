import { assert, describe, layer } from "@effect/vitest"
import { Effect, Metric } from "effect"
import { walletRequests } from "../../src/platform/telemetry/Metrics.js"
import { request } from "../support/Client.js"
import { openStream, streamOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import {
  agentWith,
  apiKeyOf,
  assertLedgerAddsUp,
  consume,
  ENV,
  freshKey,
  fullLedger,
  LIVE,
  micros,
  newUser,
  payloads,
  runAgent,
  toolDirective,
  walletOf
} from "../runs/runs-support.js"

/**
 * A turn pays once (issue 45 item 2, docs/billing.md "Holds"): a run or a session turn holds credits when it starts,
 * pays its model steps against the hold without asking the wallet, and posts its steps and voids the rest when it
 * ends. Counted here: the wallet requests a multi-step turn makes; checked: what the wallet shows as held while a run
 * goes on, and that concurrent runs and charges on a small balance never overdraw it and post each step once.
 */

const CALC = toolDirective("calculator", { expression: "1 + 1" })
/** Three calculator calls, one per model step, then the answer: four model steps in one run or turn. */
const CALC_THRICE = `/tools 3 calculator ${JSON.stringify({ expression: "1 + 1" })}`
const KINDS = ["charge", "balance", "credit", "hold", "settle"] as const

/** The wallet requests this process has made so far, by kind (`wallet_requests_total`). */
const requestsMade = Effect.gen(function*() {
  const counts: Record<string, number> = {}
  for (const kind of KINDS) counts[kind] = (yield* Metric.value(walletRequests.pipe(Metric.tagged("kind", kind)))).count as number
  return counts
})
const since = (before: Record<string, number>, after: Record<string, number>) =>
  Object.fromEntries(KINDS.map((kind) => [kind, after[kind]! - before[kind]!]).filter(([, n]) => n !== 0))

const createSession = (token: string, agent: string) =>
  Effect.map(request("POST", "/v1/sessions", { token, body: { agent, title: "holds" } }), (reply) => {
    assert.strictEqual(reply.status, 201, reply.text)
    return reply.body.id as string
  })

describe("holds", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("a multi-step run and a multi-step session turn (tools, four model steps) each make two wallet round trips: one hold, one settle", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "allow" })
        const session = yield* createSession(user.token, agent)
        yield* walletOf(user.token) // the wallet exists before counting
        const ledgerBefore = (yield* fullLedger(user.token)).length

        const before = yield* requestsMade
        const run = yield* runAgent(user, agent, CALC_THRICE)
        const afterRun = yield* requestsMade
        const turn = yield* streamOf(`/v1/sessions/${session}/events`, { token: user.token, body: { type: "message", message: CALC_THRICE } })
        const afterTurn = yield* requestsMade

        // Four model steps each (three tool calls, then the answer to the last result): before holds, eight requests.
        assert.lengthOf(payloads(run, "usage.token"), 4)
        assert.lengthOf(payloads(turn, "usage.token"), 4)
        assert.lengthOf(payloads(run, "tool_call.result"), 3)
        assert.deepStrictEqual(since(before, afterRun), { hold: 1, settle: 1 }, "the run's wallet requests")
        assert.deepStrictEqual(since(afterRun, afterTurn), { hold: 1, settle: 1 }, "the turn's wallet requests")

        // The ledger still shows what each step posted, under its step's key, once.
        const entries = (yield* fullLedger(user.token)).slice(0, -ledgerBefore)
        const told = [...payloads(run, "usage.token"), ...payloads(turn, "usage.token")].map((u) => micros(u.credits))
        assert.deepStrictEqual(entries.map((line) => micros(-line.amount)).reverse(), told)
        assert.deepStrictEqual(entries.map((line) => line.kind), Array.from({ length: 8 }, () => "usage"))
        const wallet = yield* walletOf(user.token)
        assert.strictEqual(wallet.held, 0)
        assert.strictEqual(wallet.available, wallet.balance)
        yield* assertLedgerAddsUp(user.token)
      }))

    it.effect("GET /api/wallet shows what a run in progress holds; the balance moves when it ends, by what it used", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const start = yield* walletOf(user.token)
        assert.strictEqual(start.held, 0)
        const live = yield* openStream("/v1/agents/run", { token: user.token, body: { agent, message: "/slow 30", budget: "2" } })
        yield* live.until("output.text.delta")
        const during = yield* walletOf(user.token)
        // The run's budget is what it holds (the wallet has more); nothing is posted yet, and no one else may take it.
        assert.strictEqual(during.held, 2)
        assert.strictEqual(during.balance, start.balance)
        assert.strictEqual(micros(during.available), micros(start.balance) - 2_000_000)
        // An API-key caller's pre-check judges a consume against what is available, as the consume itself does.
        const key = yield* apiKeyOf(user)
        const over = { amount: (micros(during.available) + 1) / 1e6 }
        const check = yield* request("POST", "/openapi/credit/preCheck", { token: key, body: over })
        assert.deepStrictEqual(check.body, { sufficient: false, balance: start.balance }, check.text)
        const refused = yield* consume(key, { ...over, idempotency_key: freshKey() })
        assert.strictEqual(refused.status, 402, refused.text)
        const stream = yield* live.rest
        const charged = micros(payloads(stream, "run.completed")[0]!.credits_charged)
        assert.isAbove(charged, 0)
        const after = yield* walletOf(user.token)
        assert.strictEqual(after.held, 0)
        assert.strictEqual(micros(start.balance) - micros(after.balance), charged)
      }))

    it.effect("concurrent runs and charges on a small balance: no overdraft, each step posted once, the ledger adds up", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const agent = yield* agentWith(user.token, { calculator: "allow" })
        // What one run costs (the builtin model is deterministic for the same agent and message).
        const probe = yield* runAgent(user, agent, CALC)
        const cost = micros(payloads(probe, "run.completed")[0]!.credits_charged)
        assert.isAbove(cost, 0)
        // Leave about four runs' worth, then run 16 at once (half of them with a budget), with consumes in between.
        const start = micros((yield* walletOf(user.token)).balance)
        const keep = cost * 4 + Math.floor(cost / 2)
        const drained = yield* consume(key, { amount: (start - keep) / 1e6, idempotency_key: freshKey() })
        assert.strictEqual(drained.status, 200, drained.text)
        const ledgerBefore = (yield* fullLedger(user.token)).length

        const RUNS = 16
        const CONSUMES = 8
        const [runs, consumes] = yield* Effect.all([
          Effect.all(
            Array.from({ length: RUNS }, (_, i) => runAgent(user, agent, CALC, i % 2 === 0 ? { budget: (cost * 2) / 1e6 } : {})),
            { concurrency: "unbounded" }
          ),
          Effect.all(
            Array.from({ length: CONSUMES }, () => consume(key, { amount: Math.max(1, Math.floor(cost / 4)) / 1e6, idempotency_key: freshKey() })),
            { concurrency: "unbounded" }
          )
        ], { concurrency: 2 })

        let runsCharged = 0
        let completed = 0
        let exhausted = 0
        for (const stream of runs) {
          const end = stream.events[stream.events.length - 1]!
          if (end.event === "run.completed") {
            completed += 1
            runsCharged += micros(end.data.credits_charged)
            // Everything a run told it used was posted: its usage.token credits are its charge.
            assert.strictEqual(payloads(stream, "usage.token").reduce((sum, u) => sum + micros(u.credits), 0), micros(end.data.credits_charged))
          } else {
            assert.strictEqual(end.event, "run.failed")
            assert.strictEqual(end.data.code, "budget_exhausted", JSON.stringify(end.data))
            exhausted += 1
            runsCharged += payloads(stream, "usage.token").reduce((sum, u) => sum + micros(u.credits), 0)
          }
        }
        let consumed = 0
        for (const reply of consumes) {
          assert.include([200, 402], reply.status, reply.text)
          if (reply.status === 200) consumed += micros(reply.body.charged)
        }
        // The balance was too small for all of them: some stopped, some finished.
        assert.isAbove(completed, 0)
        assert.isAbove(exhausted, 0)

        const wallet = yield* walletOf(user.token)
        assert.strictEqual(wallet.held, 0, "every hold was settled")
        assert.isAtLeast(wallet.balance, 0)
        assert.strictEqual(keep - micros(wallet.balance), runsCharged + consumed, "the balance moved by what was told")
        const entries = (yield* fullLedger(user.token)).slice(0, -ledgerBefore)
        assert.strictEqual(-entries.reduce((sum, line) => sum + micros(line.amount), 0), runsCharged + consumed, "the ledger took the same")
        // One entry per step that said it was paid, no more (a step posted twice would be two).
        const steps = runs.reduce((sum, stream) => sum + payloads(stream, "usage.token").filter((u) => u.credits > 0).length, 0)
        assert.strictEqual(entries.filter((line) => line.kind === "usage").length, steps)
        yield* assertLedgerAddsUp(user.token)
      }))
  })

  // Holds that live 2 s unless asked for again: a run still going past half its hold's life asks again.
  layer(TestServer.layer({ ...ENV, HOLD_TTL_SECONDS: "2" }), LIVE)((it) => {
    it.effect("a run that goes on past half its hold's life renews it at its next step: one more round trip, nothing charged twice", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const quick = yield* requestsMade
        yield* runAgent(user, agent, "hello")
        // A quick run asks once and settles once, as with any hold's life.
        assert.deepStrictEqual(since(quick, yield* requestsMade), { hold: 1, settle: 1 })

        const start = yield* walletOf(user.token)
        const before = yield* requestsMade
        // One model step of 1.5 s: the hold placed before it is past half its 2 s when the step is charged.
        const slow = yield* runAgent(user, agent, "/slow 15")
        assert.deepStrictEqual(since(before, yield* requestsMade), { hold: 2, settle: 1 })
        assert.strictEqual(payloads(slow, "run.completed").length, 1, JSON.stringify(slow.events.slice(-2)))
        const after = yield* walletOf(user.token)
        assert.strictEqual(after.held, 0)
        const charged = [...payloads(slow, "usage.token")].reduce((sum, u) => sum + micros(u.credits), 0)
        assert.isAbove(charged, 0)
        assert.strictEqual(micros(start.balance) - micros(after.balance), charged)
        yield* assertLedgerAddsUp(user.token)
      }))
  })
})
