import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { grantCredits } from "../support/Billing.js"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { assertLedgerAddsUp, fullLedger, micros } from "../billing/billing-support.js"
import {
  approved,
  assertError,
  balanceOf,
  createAgent,
  ENV,
  liveAgent,
  LIVE,
  newUser,
  patchAgent,
  publish
} from "./agents-support.js"

/**
 * Unlocking agents (issue 4 item 3) and the creator's earnings (item 5): `POST /api/purchases {agent}` charges the
 * buyer through the Wallet entity once per user and agent, and pays the creator the price minus the platform share.
 */

const purchase = (token: string, agent: string) => request("POST", "/api/purchases", { token, body: { agent } })

const earningsOf = (token: string) =>
  Effect.gen(function*() {
    const reply = yield* request("GET", "/api/creator/earnings", { token })
    assert.strictEqual(reply.status, 200, reply.text)
    assert.deepStrictEqual(Object.keys(reply.body).sort(), ["agents", "total"])
    return reply.body as { total: number; agents: Array<{ identifier: string; unlocks: number; gross: number; net: number }> }
  })

/** The creator's part of one sale in micro-credits: (100 - share) % of the price, rounded down. */
const creatorPart = (priceMicros: number, sharePercent: number) => Math.floor((priceMicros * (100 - sharePercent)) / 100)

describe("purchases", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("an unlock is charged through the wallet; a second purchase charges nothing", () =>
      Effect.gen(function*() {
        const creator = yield* newUser
        const buyer = yield* newUser
        const agent = yield* liveAgent(creator.token, { name: "Paid", billing: { type: "UNLOCK", price: 12.5 } })
        const first = yield* purchase(buyer.token, agent)
        assert.strictEqual(first.status, 200, first.text)
        assert.deepStrictEqual(first.body, { agent, charged: 12.5, balance_remaining: 87.5 })
        assert.strictEqual(yield* balanceOf(buyer.token), 87.5)
        const entries = (yield* fullLedger(buyer.token)).filter((line) => line.kind === "purchase")
        assert.deepStrictEqual(entries.map((line) => line.amount), [-12.5])

        const second = yield* purchase(buyer.token, agent)
        assert.strictEqual(second.status, 200, second.text)
        assert.deepStrictEqual(second.body, { agent, charged: 0, balance_remaining: 87.5 })
        assert.strictEqual(yield* balanceOf(buyer.token), 87.5)
        assert.strictEqual((yield* fullLedger(buyer.token)).filter((line) => line.kind === "purchase").length, 1)
        yield* assertLedgerAddsUp(buyer.token)

        // A price rise later does not charge an earlier buyer again.
        yield* patchAgent(creator.token, agent, { billing: { type: "UNLOCK", price: 20 } })
        yield* approved((yield* publish(creator.token, agent)).id)
        assert.deepStrictEqual((yield* purchase(buyer.token, agent)).body, { agent, charged: 0, balance_remaining: 87.5 })
      }))

    it.effect("purchases sent at once charge exactly once", () =>
      Effect.gen(function*() {
        const creator = yield* newUser
        const buyer = yield* newUser
        const agent = yield* liveAgent(creator.token, { name: "Raced", billing: { type: "UNLOCK", price: 10 } })
        const replies = yield* Effect.all(Array.from({ length: 6 }, () => purchase(buyer.token, agent)), {
          concurrency: "unbounded"
        })
        for (const reply of replies) assert.strictEqual(reply.status, 200, reply.text)
        assert.strictEqual(replies.reduce((sum, reply) => sum + micros(reply.body.charged), 0), micros(10))
        assert.strictEqual(yield* balanceOf(buyer.token), 90)
        const earnings = yield* earningsOf(creator.token)
        assert.deepStrictEqual(earnings.agents, [{ identifier: agent, unlocks: 1, gross: 10, net: 7 }])
        assert.strictEqual(yield* balanceOf(creator.token), 107)
      }))

    it.effect("buying a FREE agent is 400 and charges nothing; drafts, pending and missing agents are 404", () =>
      Effect.gen(function*() {
        const creator = yield* newUser
        const buyer = yield* newUser
        const free = yield* liveAgent(creator.token, { name: "Free", billing: { type: "FREE" } })
        assertError(yield* purchase(buyer.token, free), 400, "invalid_request")

        const draft = yield* createAgent(creator.token, { name: "Draft", billing: { type: "UNLOCK", price: 5 } })
        assertError(yield* purchase(buyer.token, draft.identifier), 404, "not_found")
        yield* publish(creator.token, draft.identifier)
        assertError(yield* purchase(buyer.token, draft.identifier), 404, "not_found")
        assertError(yield* purchase(buyer.token, "no-such-agent"), 404, "not_found")

        // An agent whose pending version turns it FREE is still sold at its published price meanwhile...
        const paid = yield* liveAgent(creator.token, { name: "Becoming free", billing: { type: "UNLOCK", price: 4 } })
        yield* patchAgent(creator.token, paid, { billing: { type: "FREE" } })
        const submission = yield* publish(creator.token, paid)
        const meanwhile = yield* purchase(buyer.token, paid)
        assert.deepStrictEqual(meanwhile.body, { agent: paid, charged: 4, balance_remaining: 96 })
        // ...and once that version is live there is nothing to buy.
        yield* approved(submission.id)
        const other = yield* newUser
        assertError(yield* purchase(other.token, paid), 400, "invalid_request")

        // The creator cannot buy their own agent.
        const own = yield* liveAgent(creator.token, { name: "Own", billing: { type: "UNLOCK", price: 1 } })
        assertError(yield* purchase(creator.token, own), 400, "invalid_request")

        assert.strictEqual(yield* balanceOf(buyer.token), 96)
        assert.strictEqual(yield* balanceOf(other.token), 100)
        assertError(yield* request("POST", "/api/purchases", { body: { agent: paid } }), 401, "unauthorized")
        assertError(yield* request("POST", "/api/purchases", { token: buyer.token, body: {} }), 400, "invalid_request")
      }))

    it.effect("insufficient credits: 402 and nothing recorded; after a top-up the unlock goes through", () =>
      Effect.gen(function*() {
        const creator = yield* newUser
        const buyer = yield* newUser
        const agent = yield* liveAgent(creator.token, { name: "Pricey", billing: { type: "UNLOCK", price: 150 } })
        assertError(yield* purchase(buyer.token, agent), 402, "insufficient_credits")
        assert.strictEqual(yield* balanceOf(buyer.token), 100)
        assert.strictEqual((yield* fullLedger(buyer.token)).filter((line) => line.kind === "purchase").length, 0)
        assert.deepStrictEqual((yield* earningsOf(creator.token)).agents, [{ identifier: agent, unlocks: 0, gross: 0, net: 0 }])
        assert.strictEqual(yield* balanceOf(creator.token), 100)

        yield* grantCredits(buyer.userId, 60)
        const reply = yield* purchase(buyer.token, agent)
        assert.deepStrictEqual(reply.body, { agent, charged: 150, balance_remaining: 10 })
        assert.deepStrictEqual((yield* earningsOf(creator.token)).agents, [{ identifier: agent, unlocks: 1, gross: 150, net: 105 }])
      }))

    it.effect("earnings add up to sales minus the platform share (30 %), and the creator's wallet receives the net", () =>
      Effect.gen(function*() {
        const creator = yield* newUser
        const prices = { a: 10, b: 3.333333, c: 0.000001 }
        const a = yield* liveAgent(creator.token, { name: "A", billing: { type: "UNLOCK", price: prices.a } })
        const b = yield* liveAgent(creator.token, { name: "B", billing: { type: "UNLOCK", price: prices.b } })
        const c = yield* liveAgent(creator.token, { name: "C", billing: { type: "UNLOCK", price: prices.c } })
        const unsold = yield* createAgent(creator.token, { name: "Unsold" })
        assert.deepStrictEqual(yield* earningsOf(creator.token), {
          total: 0,
          agents: [a, b, c, unsold.identifier].map((identifier) => ({ identifier, unlocks: 0, gross: 0, net: 0 }))
        })

        const sales = { [a]: 3, [b]: 2, [c]: 1 }
        const buyers = yield* Effect.all(Array.from({ length: 3 }, () => newUser))
        for (const [identifier, count] of Object.entries(sales)) {
          for (const buyer of buyers.slice(0, count)) {
            const reply = yield* purchase(buyer.token, identifier)
            assert.strictEqual(reply.status, 200, reply.text)
          }
        }

        const earnings = yield* earningsOf(creator.token)
        const byId = new Map(earnings.agents.map((row) => [row.identifier, row]))
        let expectedTotal = 0
        for (const [identifier, price] of [[a, prices.a], [b, prices.b], [c, prices.c]] as const) {
          const row = byId.get(identifier)!
          const count = sales[identifier]!
          assert.strictEqual(row.unlocks, count, identifier)
          assert.strictEqual(micros(row.gross), micros(price) * count, `gross of ${identifier}`)
          assert.strictEqual(micros(row.net), creatorPart(micros(price), 30) * count, `net of ${identifier}`)
          // The platform keeps its share and never less: net is 70 % of gross, rounded down by < 1 µcredit per sale.
          const shortfall = micros(row.gross) * 70 - micros(row.net) * 100
          assert.isAtLeast(shortfall, 0)
          assert.isBelow(shortfall, 100 * count)
          expectedTotal += micros(row.net)
        }
        assert.deepStrictEqual(byId.get(unsold.identifier), { identifier: unsold.identifier, unlocks: 0, gross: 0, net: 0 })
        assert.strictEqual(micros(earnings.total), expectedTotal)
        assert.strictEqual(micros(earnings.total), earnings.agents.reduce((sum, row) => sum + micros(row.net), 0))
        // 3 x 7 + 2 x 2.333333 + 0: the c sale's 0.7 µcredit rounds down to nothing.
        assert.strictEqual(earnings.total, 25.666666)

        // The creator's wallet: the welcome credits plus exactly the net, entry by entry.
        assert.strictEqual(micros(yield* balanceOf(creator.token)), micros(100) + expectedTotal)
        const { lines } = yield* assertLedgerAddsUp(creator.token)
        assert.strictEqual(
          lines.filter((line) => line.kind === "earning").reduce((sum, line) => sum + micros(line.amount), 0),
          expectedTotal
        )
        // The buyers paid the gross.
        assert.strictEqual(micros(yield* balanceOf(buyers[0]!.token)), micros(100) - micros(10) - micros(3.333333) - 1)

        // Others' earnings are their own.
        const stranger = yield* newUser
        assert.deepStrictEqual(yield* earningsOf(stranger.token), { total: 0, agents: [] })
        assertError(yield* request("GET", "/api/creator/earnings"), 401, "unauthorized")
      }))
  })

  layer(TestServer.layer({ ...ENV, PLATFORM_SHARE_PERCENT: "20" }), LIVE)((it) => {
    it.effect("PLATFORM_SHARE_PERCENT sets the platform's share", () =>
      Effect.gen(function*() {
        const creator = yield* newUser
        const buyer = yield* newUser
        const agent = yield* liveAgent(creator.token, { name: "Shared", billing: { type: "UNLOCK", price: 10 } })
        assert.strictEqual((yield* purchase(buyer.token, agent)).status, 200)
        assert.deepStrictEqual(yield* earningsOf(creator.token), {
          total: 8,
          agents: [{ identifier: agent, unlocks: 1, gross: 10, net: 8 }]
        })
        assert.strictEqual(yield* balanceOf(creator.token), 108)
      }))
  })
})
