import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { authorizeApp, grantCredits, registerApp } from "../support/Billing.js"
import { internalAuth, TestServer } from "../support/TestServer.js"
import {
  apiKeyOf,
  assertError,
  assertLedgerAddsUp,
  authorizeAnother,
  balanceOf,
  BILLING_ENV,
  billedUser,
  concurrently,
  consume,
  freshKey,
  fullLedger,
  LIVE,
  micros,
  newUser,
  reportEvent,
  signature
} from "./billing-support.js"

/**
 * The promise of the wallet under load (issue 3 item 9): a charge is never lost, never applied twice, and a balance
 * never goes below zero, when one user is charged by many callers at once. Every request is a real fetch, all of
 * them in flight together.
 */

const SECRET = "concurrency-webhook-secret"

/** The answers of one burst, by kind. */
const tally = (replies: ReadonlyArray<{ status: number }>) => {
  const counts = new Map<number, number>()
  for (const reply of replies) counts.set(reply.status, (counts.get(reply.status) ?? 0) + 1)
  return Object.fromEntries(counts) as Record<number, number>
}

describe("billing under concurrency", () => {
  layer(TestServer.layer({ ...BILLING_ENV, PAYMENT_WEBHOOK_SECRET: SECRET }), LIVE)((it) => {
    it.effect("64 concurrent events with one (app, key): one debit, identical numbers, exactly one without idempotent_replay", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { unit: 7 } })
        const key = freshKey()
        const replies = yield* concurrently(64, () => reportEvent(billed.accessToken, { event: "unit", idempotency_key: key }))
        for (const reply of replies) {
          assert.strictEqual(reply.status, 200, reply.text)
          assert.strictEqual(reply.body.charged, 7)
          assert.strictEqual(reply.body.balance_remaining, 93)
        }
        const first = replies.filter((reply) => !("idempotent_replay" in reply.body))
        assert.strictEqual(first.length, 1, "exactly one response is the first charge")
        assert.deepStrictEqual(first[0]!.body, { charged: 7, balance_remaining: 93 })
        for (const reply of replies.filter((reply) => "idempotent_replay" in reply.body)) {
          assert.deepStrictEqual(reply.body, { charged: 7, balance_remaining: 93, idempotent_replay: true })
        }
        const { balance, lines } = yield* assertLedgerAddsUp(billed.user.token)
        assert.strictEqual(balance, 93)
        assert.strictEqual(lines.filter((line) => line.kind === "event").length, 1)
      }))

    it.effect("balance 100, price 1, 300 concurrent distinct keys: exactly 100 succeed, 200 get 402, balance 0", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { unit: 1 } })
        assert.strictEqual(yield* balanceOf(billed.user.token), 100)
        const replies = yield* concurrently(300, () => reportEvent(billed.accessToken, { event: "unit", idempotency_key: freshKey() }))
        assert.deepStrictEqual(tally(replies), { 200: 100, 402: 200 })
        for (const reply of replies.filter((reply) => reply.status === 402)) assertError(reply, 402, "insufficient_credits")
        const succeeded = replies.filter((reply) => reply.status === 200)
        for (const reply of succeeded) assert.deepStrictEqual(Object.keys(reply.body).sort(), ["balance_remaining", "charged"])
        // Each success saw its own balance: 99, 98, ..., 0, each once.
        assert.deepStrictEqual(
          succeeded.map((reply) => reply.body.balance_remaining).sort((a, b) => a - b),
          Array.from({ length: 100 }, (_, i) => i)
        )
        const { balance, lines } = yield* assertLedgerAddsUp(billed.user.token)
        assert.strictEqual(balance, 0)
        assert.strictEqual(lines.length, 101)
        // And the 402s really used no key: retried after a grant, 5 of them succeed.
        yield* grantCredits(billed.user.userId, 5)
        const retried = yield* concurrently(20, () => reportEvent(billed.accessToken, { event: "unit", idempotency_key: freshKey() }))
        assert.deepStrictEqual(tally(retried), { 200: 5, 402: 15 })
        assert.strictEqual(yield* balanceOf(billed.user.token), 0)
      }))

    it.effect("a balance of 100.5 and 300 concurrent charges of 1: 100 succeed and 0.5 is left", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { unit: 1 } })
        yield* grantCredits(billed.user.userId, 0.5)
        const replies = yield* concurrently(300, () => reportEvent(billed.accessToken, { event: "unit", idempotency_key: freshKey() }))
        assert.deepStrictEqual(tally(replies), { 200: 100, 402: 200 })
        const { balance } = yield* assertLedgerAddsUp(billed.user.token)
        assert.strictEqual(balance, 0.5)
      }))

    it.effect("daily cap 10 with a large balance: of 40 concurrent charges of 1, exactly 10 succeed and 30 get 429", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { unit: 1 }, dailyCap: 10 })
        yield* grantCredits(billed.user.userId, 10_000)
        const replies = yield* concurrently(40, () => reportEvent(billed.accessToken, { event: "unit", idempotency_key: freshKey() }))
        assert.deepStrictEqual(tally(replies), { 200: 10, 429: 30 })
        for (const reply of replies.filter((reply) => reply.status === 429)) {
          assertError(reply, 429, "daily_cap_exceeded")
          assert.match(reply.headers.get("retry-after") ?? "", /^\d+$/)
        }
        const { balance } = yield* assertLedgerAddsUp(billed.user.token)
        assert.strictEqual(balance, 10_090)
        // A second burst after the first: the cap holds across batches, not only within one.
        const more = yield* concurrently(20, () => reportEvent(billed.accessToken, { event: "unit", idempotency_key: freshKey() }))
        assert.deepStrictEqual(tally(more), { 429: 20 })
        assert.strictEqual(yield* balanceOf(billed.user.token), 10_090)
      }))

    it.effect("daily cap 10 shared by two concurrent price levels: the sum charged never passes it", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { one: 1, three: 3 }, dailyCap: 10 })
        yield* grantCredits(billed.user.userId, 10_000)
        const replies = yield* concurrently(60, (i) =>
          reportEvent(billed.accessToken, { event: i % 2 === 0 ? "one" : "three", idempotency_key: freshKey() }))
        const charged = replies.filter((reply) => reply.status === 200).reduce((sum, reply) => sum + reply.body.charged, 0)
        assert.isAtMost(charged, 10)
        // Whatever the order, the cap is reached: 1s keep fitting until exactly 10 is spent.
        assert.strictEqual(charged, 10)
        for (const reply of replies.filter((reply) => reply.status !== 200)) assertError(reply, 429, "daily_cap_exceeded")
        assert.strictEqual(yield* balanceOf(billed.user.token), 10_090)
        yield* assertLedgerAddsUp(billed.user.token)
      }))

    it.effect("concurrent /openapi/credit/consume: one key 64 times is one debit; 300 distinct keys of 1 are 100 successes", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const idempotencyKey = freshKey()
        const same = yield* concurrently(64, () => consume(key, { amount: 2.5, idempotency_key: idempotencyKey }))
        for (const reply of same) {
          assert.strictEqual(reply.status, 200, reply.text)
          assert.strictEqual(reply.body.charged, 2.5)
          assert.strictEqual(reply.body.balance_remaining, 97.5)
        }
        assert.strictEqual(same.filter((reply) => !("idempotent_replay" in reply.body)).length, 1)
        assert.strictEqual(same.filter((reply) => reply.body.idempotent_replay === true).length, 63)
        assert.strictEqual(yield* balanceOf(user.token), 97.5)

        const spender = yield* newUser
        const spenderKey = yield* apiKeyOf(spender)
        const distinct = yield* concurrently(300, () => consume(spenderKey, { amount: 1, idempotency_key: freshKey() }))
        assert.deepStrictEqual(tally(distinct), { 200: 100, 402: 200 })
        for (const reply of distinct.filter((reply) => reply.status === 402)) assertError(reply, 402, "insufficient_credits")
        assert.deepStrictEqual(
          distinct.filter((reply) => reply.status === 200).map((reply) => reply.body.balance_remaining).sort((a, b) => a - b),
          Array.from({ length: 100 }, (_, i) => i)
        )
        const { balance } = yield* assertLedgerAddsUp(spender.token)
        assert.strictEqual(balance, 0)
      }))

    it.effect("events, consumes, grants and top-ups on one wallet at once: nothing lost, nothing doubled", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { unit: 0.5 } })
        const second = yield* registerApp(billed.owner.token, { meters: { unit: 0.25 } })
        const secondToken = (yield* authorizeApp(billed.user.token, second)).access_token
        const key = yield* apiKeyOf(billed.user)
        const grantKeys = Array.from({ length: 10 }, () => freshKey())
        const orders: Array<string> = []
        for (let i = 0; i < 4; i++) {
          const order = yield* request("POST", "/api/payment/orders", { token: billed.user.token, body: { amount: 2 } })
          assert.strictEqual(order.status, 201, order.text)
          orders.push(order.body.id)
        }
        const replies = yield* concurrently(200, (i) => {
          switch (i % 5) {
            case 0:
              return reportEvent(billed.accessToken, { event: "unit", idempotency_key: `e-${i}` })
            case 1:
              return reportEvent(secondToken, { event: "unit", idempotency_key: `e-${i - 1}` })
            case 2:
              return consume(key, { amount: "0.125", idempotency_key: `c-${i}` })
            case 3:
              // 40 grants over 10 keys: each key sent 4 times in the burst.
              return request("POST", `/internal/wallets/${billed.user.userId}/grants`, {
                body: { amount: 1, idempotency_key: grantKeys[Math.floor(i / 5) % 10], reason: "burst" },
                headers: internalAuth
              })
            default: {
              if (Math.floor(i / 5) % 2 === 1) return request("GET", "/openapi/credit/balance", { token: key })
              // 20 callbacks over 4 paid orders: each order notified 5 times in the burst.
              const raw = JSON.stringify({ order_id: orders[Math.floor(i / 10) % 4], status: "paid", amount: 2 })
              return request("POST", "/api/payment/notify/test", { raw, headers: { "x-signature": signature(raw, SECRET) } })
            }
          }
        })
        for (const reply of replies) assert.strictEqual(reply.status, 200, reply.text)
        // 40 events at 0.5, 40 at 0.25, 40 consumes at 0.125, 10 distinct grants of 1, 4 top-ups of 2.
        const expected = micros(100) - 40 * micros(0.5) - 40 * micros(0.25) - 40 * micros(0.125) + 10 * micros(1) +
          4 * micros(2)
        const { balance, lines } = yield* assertLedgerAddsUp(billed.user.token)
        assert.strictEqual(micros(balance), expected)
        assert.strictEqual(lines.length, 1 + 40 + 40 + 40 + 10 + 4)
        assert.strictEqual(lines.filter((line) => line.kind === "topup").length, 4)
        const grants = replies.filter((_, i) => i % 5 === 3)
        assert.strictEqual(grants.filter((reply) => reply.body.idempotent_replay === undefined).length, 10)
      }))

    it.effect("one (app, key) sent for two users at once: one user is charged once, the other gets 409 and pays nothing", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { unit: 6 } })
        const other = yield* authorizeAnother(billed)
        const key = freshKey()
        const replies = yield* concurrently(64, (i) =>
          reportEvent(i % 2 === 0 ? billed.accessToken : other.accessToken, { event: "unit", idempotency_key: key }))
        const mine = replies.filter((_, i) => i % 2 === 0)
        const theirs = replies.filter((_, i) => i % 2 === 1)
        // Whoever's wallet took the key first owns it: all of that user's answers are 200, all of the other's 409.
        const [winner, loser] = mine.some((reply) => reply.status === 200) ? [mine, theirs] : [theirs, mine]
        for (const reply of winner) {
          assert.strictEqual(reply.status, 200, reply.text)
          assert.strictEqual(reply.body.charged, 6)
          assert.strictEqual(reply.body.balance_remaining, 94)
        }
        assert.strictEqual(winner.filter((reply) => !("idempotent_replay" in reply.body)).length, 1)
        for (const reply of loser) assertError(reply, 409, "idempotency_conflict")
        const balances = [yield* balanceOf(billed.user.token), yield* balanceOf(other.user.token)].sort()
        assert.deepStrictEqual(balances, [100, 94])
        yield* assertLedgerAddsUp(billed.user.token)
        yield* assertLedgerAddsUp(other.user.token)
      }))

    it.effect("many users charged at once by one app: each wallet is right on its own", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { unit: 1 } })
        const others = yield* concurrently(7, () => authorizeAnother(billed))
        const callers = [{ user: billed.user, accessToken: billed.accessToken }, ...others]
        const replies = yield* concurrently(callers.length * 30, (i) =>
          reportEvent(callers[i % callers.length]!.accessToken, { event: "unit", idempotency_key: `u-${i}` }))
        for (const reply of replies) assert.strictEqual(reply.status, 200, reply.text)
        for (const caller of callers) {
          const { balance } = yield* assertLedgerAddsUp(caller.user.token)
          assert.strictEqual(balance, 70)
        }
      }))

    // The batches of wallets that are ready together share one statement. A request refused among them (a grant past
    // the largest balance a wallet holds; before that cap, the database refused it) fails that statement; it must then fail only itself, not the other wallets'
    // charges that happened to ride with it, nor its own wallet's other charges.
    it.effect("a refused request fails alone: other wallets' charges sent with it all succeed", () =>
      Effect.gen(function*() {
        const grant = (userId: string, amount: string) =>
          request("POST", `/internal/wallets/${userId}/grants`, { body: { amount, idempotency_key: freshKey(), reason: "huge" }, headers: internalAuth })
        // 9 * 10^15 micro-credits: a second one passes the largest balance a wallet holds (2^53 - 1 micro-credits).
        const huge = "9000000000"
        const rich = yield* newUser
        assert.strictEqual((yield* grant(rich.userId, huge)).status, 200)
        const users = [rich, ...(yield* concurrently(5, () => newUser))]
        const keys = yield* Effect.forEach(users, apiKeyOf, { concurrency: "unbounded" })
        const rounds = 6
        // Refused grants spread among the charges, so some of them ride in a statement with other wallets' batches.
        const replies = yield* concurrently(users.length * rounds + rounds, (i) =>
          i % (users.length + 1) === 3
            ? Effect.map(grant(rich.userId, huge), (reply) => ({ refused: true, reply }))
            : Effect.map(consume(keys[i % users.length]!, { amount: 1, idempotency_key: freshKey() }), (reply) => ({ refused: false, reply })))
        const charged = (who: number) =>
          replies.filter((r, i) => !r.refused && i % users.length === who).length
        for (const { refused, reply } of replies) {
          if (refused) assert.strictEqual(reply.status, 400, reply.text)
          else assert.strictEqual(reply.status, 200, reply.text)
        }
        for (const [who, user] of users.entries()) {
          if (who === 0) continue
          const { balance, lines } = yield* assertLedgerAddsUp(user.token)
          assert.strictEqual(balance, 100 - charged(who))
          assert.strictEqual(lines.length, 1 + charged(who))
        }
        // (A balance this large is past what a JSON number holds exactly, so its ledger is counted, not summed.)
        const lines = yield* fullLedger(rich.token)
        assert.deepStrictEqual(
          lines.map((line) => line.kind).sort(),
          ["signup", "grant", ...Array(charged(0)).fill("consume")].sort()
        )
      }))
  })
})
