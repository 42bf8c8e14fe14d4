import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { textOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import {
  agentWith,
  apiKeyOf,
  assertCompleted,
  assertError,
  assertInOrder,
  assertLedgerAddsUp,
  balanceOf,
  consume,
  ENV,
  freshKey,
  fullLedger,
  last,
  liveAgent,
  LIVE,
  micros,
  names,
  newUser,
  only,
  payloads,
  runAgent,
  tokenMicros,
  toolDirective
} from "./runs-support.js"

/**
 * Usage and money (issue 5 items 9, 10): `usage.token` after each model call, charged to the payer's wallet; the
 * run's `budget` and the wallet stop a run with `usage.budget_exhausted` + `run.failed` (budget_exhausted); an
 * UNLOCK agent's free trials end with `usage.trial_exhausted` + `run.completed` without calling the model.
 */

const CALC = toolDirective("calculator", { expression: "1 + 1" })

/** A stopped run: budget_exhausted, then run.failed with that code, then [DONE]; the payload of the first. */
const assertExhausted = (stream: Parameters<typeof names>[0]) => {
  const seen = names(stream)
  assert.deepStrictEqual(seen.slice(-2), ["usage.budget_exhausted", "run.failed"], seen.join(", "))
  assert.isTrue(stream.done)
  const failed = last(stream).data
  assert.strictEqual(failed.code, "budget_exhausted")
  assert.isString(failed.message)
  return only(stream, "usage.budget_exhausted")
}

const purchase = (token: string, agent: string) => request("POST", "/api/purchases", { token, body: { agent } })

/** The stream of a run stopped by a used-up trial: nothing but created, trial_exhausted, completed, [DONE]. */
const assertTrialExhausted = (stream: Parameters<typeof names>[0], agent: string, used: number, price: number) => {
  assert.deepStrictEqual(names(stream), ["run.created", "usage.trial_exhausted", "run.completed"])
  assert.isTrue(stream.done)
  const trial = only(stream, "usage.trial_exhausted")
  assert.deepStrictEqual(trial, { type: "usage.trial_exhausted", event_id: 2, agent, trials_used: used, price })
  assert.deepStrictEqual(last(stream).data.usage, { input_tokens: 0, output_tokens: 0 })
  assert.strictEqual(last(stream).data.credits_charged, 0)
}

describe("usage and budgets", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("usage.token credits add up to run.completed credits_charged, to the wallet's decrease, and to the ledger", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "allow" })
        const before = yield* balanceOf(user.token)
        const ledgerBefore = (yield* fullLedger(user.token)).length
        const stream = yield* runAgent(user, agent, CALC)
        const usages = payloads(stream, "usage.token")
        assert.strictEqual(usages.length, 2, "one usage.token per model call")
        for (const usage of usages) {
          assert.strictEqual(usage.model, "builtin")
          assert.isAbove(usage.input_tokens, 0)
          assert.isAbove(usage.output_tokens, 0)
          // builtin: 0.01 credits per 1k input tokens, 0.02 per 1k output tokens, rounded up to the micro-credit.
          assert.strictEqual(micros(usage.credits), Math.ceil((usage.input_tokens * 10_000 + usage.output_tokens * 20_000) / 1000))
        }
        const end = assertCompleted(stream)
        assert.strictEqual(micros(end.credits_charged), tokenMicros(stream))
        assert.deepStrictEqual(end.usage, {
          input_tokens: usages[0]!.input_tokens + usages[1]!.input_tokens,
          output_tokens: usages[0]!.output_tokens + usages[1]!.output_tokens
        })
        assert.strictEqual(micros(before) - micros(yield* balanceOf(user.token)), micros(end.credits_charged))
        // One ledger entry per step, newest first, each the step's credits.
        const entries = (yield* fullLedger(user.token)).slice(0, -ledgerBefore || undefined)
        assert.deepStrictEqual(entries.map((line) => micros(-line.amount)), usages.map((u) => micros(u.credits)).reverse())
        for (const line of entries) assert.strictEqual(line.kind, "usage")
        yield* assertLedgerAddsUp(user.token)
      }))

    it.effect("a tiny budget: usage.budget_exhausted, then run.failed (budget_exhausted), then [DONE]; the model is never called", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const before = yield* balanceOf(user.token)
        for (const budget of [0.000001, "0.000001"]) {
          const stream = yield* runAgent(user, agent, "hello there", { budget })
          assert.deepStrictEqual(names(stream), ["run.created", "run.in_progress", "usage.budget_exhausted", "run.failed"])
          const exhausted = assertExhausted(stream)
          assert.deepStrictEqual(exhausted, {
            type: "usage.budget_exhausted",
            event_id: 3,
            budget: 0.000001,
            spent: 0,
            reason: "budget"
          })
        }
        assert.strictEqual(yield* balanceOf(user.token), before)

        // stream: false says the same in one JSON answer.
        const reply = yield* request("POST", "/v1/agents/run", { token: user.token, body: { agent, message: "hi", budget: 0.000001, stream: false } })
        assert.strictEqual(reply.status, 200, reply.text)
        assert.strictEqual(reply.body.status, "failed")
        assert.strictEqual(reply.body.error.code, "budget_exhausted")
        assert.strictEqual(reply.body.credits_charged, 0)
        assert.include(reply.body.events.map((e: any) => e.type), "usage.budget_exhausted")

        // A budget must be a positive amount of credits with at most 6 decimals.
        for (const budget of [0, -1, "abc", "0.0000001", "1e3"]) {
          const bad = yield* request("POST", "/v1/agents/run", { token: user.token, body: { agent, message: "hi", budget } })
          assertError(bad, 400, "invalid_request")
          assert.include(bad.body.error.message, "budget")
        }
        // A generous budget changes nothing.
        assertCompleted(yield* runAgent(user, agent, "hello", { budget: "5" }))
      }))

    it.effect("the second step of a run that exceeds the budget stops the run; the caller pays no more than the budget", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "allow" })
        // What each step costs without a budget (the builtin model is deterministic).
        const free = yield* runAgent(user, agent, CALC)
        const [first] = payloads(free, "usage.token").map((u) => u.credits)
        const budget = first!

        const before = yield* balanceOf(user.token)
        const stream = yield* runAgent(user, agent, CALC, { budget })
        assertInOrder(stream, ["run.in_progress", "usage.token", "tool_call.in_progress", "tool_call.result", "run.in_progress", "usage.budget_exhausted", "run.failed"])
        assert.deepStrictEqual(payloads(stream, "run.in_progress").map((p) => p.turn), [1, 2])
        assert.strictEqual(payloads(stream, "usage.token").length, 1, "the second model call never happened")
        const exhausted = assertExhausted(stream)
        assert.strictEqual(exhausted.reason, "budget")
        assert.strictEqual(micros(exhausted.budget), micros(budget))
        assert.strictEqual(micros(exhausted.spent), micros(first!))
        assert.strictEqual(micros(before) - micros(yield* balanceOf(user.token)), micros(first!))
      }))

    it.effect("an empty wallet: usage.budget_exhausted (reason wallet), run.failed (budget_exhausted), nothing charged", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const agent = yield* agentWith(user.token, { calculator: "allow" })
        const drained = yield* consume(key, { amount: yield* balanceOf(user.token), idempotency_key: freshKey() })
        assert.strictEqual(drained.status, 200, drained.text)
        assert.strictEqual(yield* balanceOf(user.token), 0)

        for (const as of [user, { token: key, endUser: "someone" }]) {
          const stream = yield* runAgent(as, agent, "hello")
          assert.deepStrictEqual(names(stream), ["run.created", "run.in_progress", "usage.budget_exhausted", "run.failed"])
          assert.deepStrictEqual(assertExhausted(stream), {
            type: "usage.budget_exhausted",
            event_id: 3,
            budget: 0,
            spent: 0,
            reason: "wallet"
          })
        }
        assert.strictEqual(yield* balanceOf(user.token), 0)
        yield* assertLedgerAddsUp(user.token)
      }))
  })
})

describe("free trials", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("free_trial_per_user: 2 -> two normal runs, then usage.trial_exhausted and run.completed without the model", () =>
      Effect.gen(function*() {
        const creator = yield* newUser
        const buyer = yield* newUser
        const agent = yield* liveAgent(creator.token, {
          name: "Paid expert",
          billing: { type: "UNLOCK", price: 7.5, free_trial_per_user: 2 }
        })
        for (let i = 0; i < 2; i++) {
          const stream = yield* runAgent(buyer, agent, `trial ${i}`)
          assert.strictEqual(textOf(stream), `You said: trial ${i}`)
          assert.notInclude(names(stream), "usage.trial_exhausted")
          assertCompleted(stream)
        }
        const before = yield* balanceOf(buyer.token)
        for (let i = 0; i < 2; i++) {
          const stream = yield* runAgent(buyer, agent, "once more")
          assertTrialExhausted(stream, agent, 2, 7.5)
        }
        assert.strictEqual(yield* balanceOf(buyer.token), before, "nothing charged: the model was not called")

        // The creator never needs a trial.
        for (let i = 0; i < 4; i++) assertCompleted(yield* runAgent(creator, agent, "mine"))

        // After the purchase, runs work again.
        const bought = yield* purchase(buyer.token, agent)
        assert.strictEqual(bought.status, 200, bought.text)
        const after = yield* runAgent(buyer, agent, "unlocked now")
        assert.strictEqual(textOf(after), "You said: unlocked now")
        assert.strictEqual(payloads(after, "usage.token").length, 1)
        assertCompleted(after)

        // Chat completions say it as content, not as an error.
        const other = yield* newUser
        const agent2 = yield* liveAgent(creator.token, { name: "No trial", billing: { type: "UNLOCK", price: 3, allow_trial: false } })
        const chat = yield* request("POST", "/v1/chat/completions", {
          token: other.token,
          body: { model: agent2, messages: [{ role: "user", content: "hi" }] }
        })
        assert.strictEqual(chat.status, 200, chat.text)
        assert.include(chat.body.choices[0].message.content, "Unlock it for 3 credits")
      }))

    it.effect("allow_trial: false -> usage.trial_exhausted at once", () =>
      Effect.gen(function*() {
        const creator = yield* newUser
        const user = yield* newUser
        const agent = yield* liveAgent(creator.token, {
          name: "Strict",
          billing: { type: "UNLOCK", price: 2, free_trial_per_user: 5, allow_trial: false }
        })
        assertTrialExhausted(yield* runAgent(user, agent, "hi"), agent, 0, 2)
        // A FREE agent has no trials to count.
        const free = yield* liveAgent(creator.token, { name: "Free", billing: { type: "FREE" } })
        for (let i = 0; i < 4; i++) assertCompleted(yield* runAgent(user, free, "hi"))
      }))

    // Issue 15 item 2 changed this on purpose: trials bind the paying account, not each X-End-User-Id.
    it.effect("trials bind the paying account: its end users and its own login share one allowance", () =>
      Effect.gen(function*() {
        const creator = yield* newUser
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const agent = yield* liveAgent(creator.token, {
          name: "Per account",
          billing: { type: "UNLOCK", price: 1, free_trial_per_user: 2 }
        })
        const alice = { token: key, endUser: "alice" }
        const bob = { token: key, endUser: "bob" }
        assertCompleted(yield* runAgent(alice, agent, "a1"))
        assertCompleted(yield* runAgent(bob, agent, "b1"))
        assertTrialExhausted(yield* runAgent(bob, agent, "b2"), agent, 2, 1)
        assertTrialExhausted(yield* runAgent(alice, agent, "a2"), agent, 2, 1)
        // Rotating the header, or the account's own login, gets no more.
        for (let i = 0; i < 3; i++) assertTrialExhausted(yield* runAgent({ token: key, endUser: `rot-${i}` }, agent, "r"), agent, 2, 1)
        assertTrialExhausted(yield* runAgent(user, agent, "me"), agent, 2, 1)

        // Trials taken at once never exceed the limit, whichever end users take them.
        const other = yield* newUser
        const otherKey = yield* apiKeyOf(other)
        const streams = yield* Effect.all(
          Array.from({ length: 6 }, (_, i) => runAgent({ token: otherKey, endUser: `c${i}` }, agent, `c${i}`)),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(streams.filter((s) => names(s).includes("usage.trial_exhausted")).length, 4)
        // One purchase by the account unlocks it for every end user.
        assert.strictEqual((yield* purchase(user.token, agent)).status, 200)
        assert.strictEqual(textOf(yield* runAgent(alice, agent, "paid")), "You said: paid")
      }))
  })
})
