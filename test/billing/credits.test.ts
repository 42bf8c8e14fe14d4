import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { createApiKey, request } from "../support/Client.js"
import { grantCredits } from "../support/Billing.js"
import { internalAuth, TestServer } from "../support/TestServer.js"
import {
  apiKeyOf,
  assertError,
  assertLedgerAddsUp,
  balanceOf,
  BILLING_ENV,
  billedUser,
  consume,
  freshKey,
  fullLedger,
  LIVE,
  newUser,
  reportEvent,
  walletOf
} from "./billing-support.js"

/**
 * `/openapi/credit/*` (spec 4.8, 5.3; issue 3 item 7): an API key spends its owner's credits.
 */

const balance = (apiKey: string) => request("GET", "/openapi/credit/balance", { token: apiKey })
const preCheck = (apiKey: string, body: unknown) => request("POST", "/openapi/credit/preCheck", { token: apiKey, body })

describe("/openapi/credit", () => {
  layer(TestServer.layer(BILLING_ENV), LIVE)((it) => {
    it.effect("GET balance answers {balance} of the key's owner", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const reply = yield* balance(key)
        assert.strictEqual(reply.status, 200, reply.text)
        assert.deepStrictEqual(reply.body, { balance: 100 })
        yield* grantCredits(user.userId, 0.5)
        assert.deepStrictEqual((yield* balance(key)).body, { balance: 100.5 })
        // Each key sees its own owner's wallet.
        const other = yield* newUser
        yield* grantCredits(other.userId, 7)
        assert.deepStrictEqual((yield* balance(yield* apiKeyOf(other))).body, { balance: 107 })
        assert.deepStrictEqual((yield* balance(key)).body, { balance: 100.5 })
      }))

    it.effect("POST preCheck {amount} answers {sufficient, balance} and changes nothing", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const cases: Array<[unknown, boolean]> = [
          [1, true],
          [100, true],
          ["100", true],
          ["100.000000", true],
          [100.000001, false],
          ["100.000001", false],
          [1000, false],
          ["0.000001", true]
        ]
        for (const [amount, sufficient] of cases) {
          const reply = yield* preCheck(key, { amount })
          assert.strictEqual(reply.status, 200, reply.text)
          assert.deepStrictEqual(reply.body, { sufficient, balance: 100 }, `amount ${JSON.stringify(amount)}`)
        }
        assert.deepStrictEqual(yield* walletOf(user.token), { balance: 100, held: 0, available: 100, today_spent: 0 })
        assert.strictEqual((yield* fullLedger(user.token)).length, 1)
      }))

    it.effect("POST consume {amount, idempotency_key, description?} charges once; a repeat replays the original numbers", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const idempotencyKey = freshKey()
        const first = yield* consume(key, { amount: 12.5, idempotency_key: idempotencyKey, description: "report #7" })
        assert.strictEqual(first.status, 200, first.text)
        assert.deepStrictEqual(first.body, { charged: 12.5, balance_remaining: 87.5 })
        assert.notInclude(first.text, "idempotent_replay")
        const other = yield* consume(key, { amount: "0.000001", idempotency_key: freshKey() })
        assert.deepStrictEqual(other.body, { charged: 0.000001, balance_remaining: 87.499999 })
        for (let i = 0; i < 3; i++) {
          const again = yield* consume(key, { amount: 12.5, idempotency_key: idempotencyKey, description: "report #7" })
          assert.strictEqual(again.status, 200, again.text)
          assert.deepStrictEqual(again.body, { charged: 12.5, balance_remaining: 87.5, idempotent_replay: true })
        }
        // The key decides, whatever the amount of the repeat.
        const otherAmount = yield* consume(key, { amount: 99, idempotency_key: idempotencyKey })
        assert.deepStrictEqual(otherAmount.body, { charged: 12.5, balance_remaining: 87.5, idempotent_replay: true })
        // Another API key of the same user is the same wallet: still a replay.
        const second = yield* apiKeyOf(user)
        const viaSecond = yield* consume(second, { amount: 12.5, idempotency_key: idempotencyKey })
        assert.deepStrictEqual(viaSecond.body, { charged: 12.5, balance_remaining: 87.5, idempotent_replay: true })

        assert.strictEqual(yield* balanceOf(user.token), 87.499999)
        const lines = yield* fullLedger(user.token)
        assert.deepStrictEqual(lines.map((line) => [line.kind, line.amount, line.description]), [
          ["consume", -0.000001, null],
          ["consume", -12.5, "report #7"],
          ["signup", 100, "Welcome credits"]
        ])
        assert.strictEqual((yield* walletOf(user.token)).today_spent, 12.500001)
        yield* assertLedgerAddsUp(user.token)
      }))

    it.effect("consume keys are per user: two users with one key are both charged", () =>
      Effect.gen(function*() {
        const alice = yield* newUser
        const bob = yield* newUser
        const idempotencyKey = freshKey()
        assert.deepStrictEqual((yield* consume(yield* apiKeyOf(alice), { amount: 3, idempotency_key: idempotencyKey })).body, {
          charged: 3,
          balance_remaining: 97
        })
        assert.deepStrictEqual((yield* consume(yield* apiKeyOf(bob), { amount: 4, idempotency_key: idempotencyKey })).body, {
          charged: 4,
          balance_remaining: 96
        })
      }))

    it.effect("402 insufficient_credits when short; nothing moves and the key charges after a grant", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const idempotencyKey = freshKey()
        assertError(yield* consume(key, { amount: 100.000001, idempotency_key: idempotencyKey }), 402, "insufficient_credits")
        assertError(yield* consume(key, { amount: 100.000001, idempotency_key: idempotencyKey }), 402, "insufficient_credits")
        assert.strictEqual(yield* balanceOf(user.token), 100)
        assert.strictEqual((yield* fullLedger(user.token)).length, 1)
        const granted = yield* request("POST", `/internal/wallets/${user.userId}/grants`, {
          body: { amount: "0.000001", idempotency_key: freshKey(), reason: "the missing micro-credit" },
          headers: internalAuth
        })
        assert.deepStrictEqual(granted.body, { balance: 100.000001 })
        const ok = yield* consume(key, { amount: 100.000001, idempotency_key: idempotencyKey })
        assert.strictEqual(ok.status, 200, ok.text)
        assert.deepStrictEqual(ok.body, { charged: 100.000001, balance_remaining: 0 })
        assertError(yield* consume(key, { amount: "0.000001", idempotency_key: freshKey() }), 402, "insufficient_credits")
        assert.deepStrictEqual((yield* preCheck(key, { amount: "0.000001" })).body, { sufficient: false, balance: 0 })
        yield* assertLedgerAddsUp(user.token)
      }))

    it.effect("amounts: more than 6 decimals, zero, negative or not a number are 400 invalid_request", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const amounts: Array<unknown> = [1.0000001, "0.0000001", "1.1234567", 0, "0", -1, "-1", "abc", "1e2", "", null, true, {}]
        for (const amount of amounts) {
          const consumed = yield* consume(key, { amount, idempotency_key: freshKey() })
          assert.strictEqual(consumed.status, 400, `consume ${JSON.stringify(amount)}: ${consumed.text}`)
          assertError(consumed, 400, "invalid_request")
          const checked = yield* preCheck(key, { amount })
          assert.strictEqual(checked.status, 400, `preCheck ${JSON.stringify(amount)}: ${checked.text}`)
          assertError(checked, 400, "invalid_request")
        }
        for (
          const body of [
            {},
            { amount: 1 },
            { idempotency_key: freshKey() },
            { amount: 1, idempotency_key: "k".repeat(129) },
            { amount: 1, idempotency_key: "" },
            { amount: 1, idempotency_key: `${freshKey()}\u0000` },
            { amount: 1, idempotency_key: freshKey(), description: "d".repeat(501) },
            { amount: 1, idempotency_key: freshKey(), description: "nul \u0000" }
          ]
        ) {
          assertError(yield* consume(key, body), 400, "invalid_request")
        }
        assertError(yield* preCheck(key, {}), 400, "invalid_request")
        // 6 decimals and 128-character keys are fine.
        const ok = yield* consume(key, { amount: 1.123456, idempotency_key: "k".repeat(128) })
        assert.deepStrictEqual(ok.body, { charged: 1.123456, balance_remaining: 98.876544 })
        assert.strictEqual(yield* balanceOf(user.token), 98.876544)
      }))

    it.effect("only an API key: a login token, an OAuth access token, a revoked or missing key are 401", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { unit: 1 } })
        const user = billed.user
        const created = yield* createApiKey(user.token)
        const body = { amount: 1, idempotency_key: freshKey() }
        for (const token of [user.token, billed.accessToken, "sk_notAKey0000000000000000000000000000", undefined]) {
          const options = token === undefined ? {} : { token }
          assertError(yield* request("GET", "/openapi/credit/balance", options), 401, "unauthorized")
          assertError(yield* request("POST", "/openapi/credit/preCheck", { ...options, body: { amount: 1 } }), 401, "unauthorized")
          assertError(yield* request("POST", "/openapi/credit/consume", { ...options, body }), 401, "unauthorized")
        }
        assertError(
          yield* request("POST", "/openapi/credit/consume", { headers: { cookie: `token=${user.token}` }, body }),
          401,
          "unauthorized"
        )
        const deleted = yield* request("POST", "/api/user/apiKey/delete", { token: user.token, body: { id: created.id } })
        assert.strictEqual(deleted.status, 200, deleted.text)
        assertError(yield* consume(created.key, body), 401, "unauthorized")
        assert.strictEqual(yield* balanceOf(user.token), 100)
        // The unused key works with a live key.
        const live = yield* apiKeyOf(user)
        assert.deepStrictEqual((yield* consume(live, body)).body, { charged: 1, balance_remaining: 99 })
      }))

    it.effect("consumes and events share one wallet and one ledger", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { unit: 30 } })
        const key = yield* apiKeyOf(billed.user)
        assert.deepStrictEqual((yield* consume(key, { amount: 60, idempotency_key: freshKey() })).body, {
          charged: 60,
          balance_remaining: 40
        })
        assert.deepStrictEqual((yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: freshKey() })).body, {
          charged: 30,
          balance_remaining: 10
        })
        assertError(yield* consume(key, { amount: 11, idempotency_key: freshKey() }), 402, "insufficient_credits")
        assertError(yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: freshKey() }), 402, "insufficient_credits")
        assert.deepStrictEqual((yield* balance(key)).body, { balance: 10 })
        yield* assertLedgerAddsUp(billed.user.token)
      }))
  })
})
