import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { createApiKey, request } from "../support/Client.js"
import { authorizeApp, grantCredits, registerApp } from "../support/Billing.js"
import { internalAuth, makeSmsInbox, makeMigratedStorage, startServer, TestServer } from "../support/TestServer.js"
import {
  assertError,
  assertLedgerAddsUp,
  authorizeAnother,
  balanceOf,
  BILLING_ENV,
  billedUser,
  consume,
  freshKey,
  fullLedger,
  LIVE,
  micros,
  reportEvent,
  secondsToMidnight,
  signature,
  walletOf
} from "./billing-support.js"

/**
 * `POST /v1/events` (spec 2.2, 2.3, 4.1, 7.1, 8; issue 3 item 6) over real HTTP: an app, authorized by a user
 * through OAuth, charges that user the price of one of its meters, once per idempotency key.
 */

const PRICE = 3

describe("POST /v1/events", () => {
  layer(TestServer.layer(BILLING_ENV), LIVE)((it) => {
    it.effect("a first charge answers 200 {charged, balance_remaining} without idempotent_replay and deducts the price", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { "image.generate": PRICE } })
        assert.strictEqual(yield* balanceOf(billed.user.token), 100)
        const reply = yield* reportEvent(billed.accessToken, {
          event: "image.generate",
          idempotency_key: freshKey(),
          metadata: { prompt_id: "p-1", size: "1024" }
        })
        assert.strictEqual(reply.status, 200, reply.text)
        assert.deepStrictEqual(reply.body, { charged: PRICE, balance_remaining: 100 - PRICE })
        assert.notInclude(reply.text, "idempotent_replay")
        assert.strictEqual(yield* balanceOf(billed.user.token), 100 - PRICE)
        // The ledger records it: the amount, the app, the event and the metadata.
        const [newest] = yield* fullLedger(billed.user.token)
        assert.strictEqual(newest!.amount, -PRICE)
        assert.strictEqual(newest!.kind, "event")
        assert.strictEqual(newest!.app, billed.app.id)
        assert.strictEqual(newest!.event, "image.generate")
        assert.deepStrictEqual(newest!.metadata, { prompt_id: "p-1", size: "1024" })
        assert.strictEqual(newest!.balance_after, 100 - PRICE)
        // The app's owner paid nothing.
        assert.strictEqual(yield* balanceOf(billed.owner.token), 100)
        yield* assertLedgerAddsUp(billed.user.token)
      }))

    it.effect("a repeated (app, idempotency_key) answers the original numbers with idempotent_replay true and deducts nothing", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { search: 2, translate: 5 } })
        const key = freshKey()
        const first = yield* reportEvent(billed.accessToken, { event: "search", idempotency_key: key })
        assert.deepStrictEqual(first.body, { charged: 2, balance_remaining: 98 })
        // Other charges move the balance in between: the replay still shows the original numbers.
        const other = yield* reportEvent(billed.accessToken, { event: "translate", idempotency_key: freshKey() })
        assert.deepStrictEqual(other.body, { charged: 5, balance_remaining: 93 })
        for (let i = 0; i < 3; i++) {
          const again = yield* reportEvent(billed.accessToken, { event: "search", idempotency_key: key })
          assert.strictEqual(again.status, 200, again.text)
          assert.deepStrictEqual(again.body, { charged: 2, balance_remaining: 98, idempotent_replay: true })
        }
        // The key is the app's, whatever the event or metadata of the retry say.
        const otherEvent = yield* reportEvent(billed.accessToken, {
          event: "translate",
          idempotency_key: key,
          metadata: { retry: "yes" }
        })
        assert.deepStrictEqual(otherEvent.body, { charged: 2, balance_remaining: 98, idempotent_replay: true })
        assert.strictEqual(yield* balanceOf(billed.user.token), 93)
        const { lines } = yield* assertLedgerAddsUp(billed.user.token)
        assert.strictEqual(lines.filter((line) => line.kind === "event").length, 2)
      }))

    it.effect("prices and balances are exact decimals: ten charges of 0.1 leave exactly 99, one of 0.000001 is seen", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { tick: 0.1, micro: 0.000001 } })
        let last: any
        for (let i = 0; i < 10; i++) {
          last = (yield* reportEvent(billed.accessToken, { event: "tick", idempotency_key: freshKey() })).body
          assert.strictEqual(last.charged, 0.1)
        }
        assert.deepStrictEqual(last, { charged: 0.1, balance_remaining: 99 })
        const micro = yield* reportEvent(billed.accessToken, { event: "micro", idempotency_key: freshKey() })
        assert.deepStrictEqual(micro.body, { charged: 0.000001, balance_remaining: 98.999999 })
        assert.deepStrictEqual(yield* walletOf(billed.user.token), { balance: 98.999999, held: 0, available: 98.999999, today_spent: 1.000001 })
        yield* assertLedgerAddsUp(billed.user.token)
      }))

    it.effect("a meter of price 0 records the event and replays it", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { free: 0 } })
        const key = freshKey()
        const first = yield* reportEvent(billed.accessToken, { event: "free", idempotency_key: key })
        assert.deepStrictEqual(first.body, { charged: 0, balance_remaining: 100 })
        const again = yield* reportEvent(billed.accessToken, { event: "free", idempotency_key: key })
        assert.deepStrictEqual(again.body, { charged: 0, balance_remaining: 100, idempotent_replay: true })
        const lines = yield* fullLedger(billed.user.token)
        assert.deepStrictEqual(lines.map((line) => [line.kind, line.amount]), [["event", 0], ["signup", 100]])
      }))

    it.effect("400 invalid_request for a missing field, an over-long event or key, or non-string metadata values", () =>
      Effect.gen(function*() {
        const longEvent = "e".repeat(100)
        const billed = yield* billedUser({ meters: { ok: 1, [longEvent]: 1 } })
        const bad: Array<[string, unknown]> = [
          ["no event", { idempotency_key: freshKey() }],
          ["no idempotency_key", { event: "ok" }],
          ["empty body", {}],
          ["event is not a string", { event: 7, idempotency_key: freshKey() }],
          ["idempotency_key is not a string", { event: "ok", idempotency_key: 7 }],
          ["event over 100 characters", { event: "e".repeat(101), idempotency_key: freshKey() }],
          ["idempotency_key over 128 characters", { event: "ok", idempotency_key: "k".repeat(129) }],
          ["a number in metadata", { event: "ok", idempotency_key: freshKey(), metadata: { n: 1 } }],
          ["a boolean in metadata", { event: "ok", idempotency_key: freshKey(), metadata: { b: true } }],
          ["null in metadata", { event: "ok", idempotency_key: freshKey(), metadata: { x: null } }],
          ["an object in metadata", { event: "ok", idempotency_key: freshKey(), metadata: { o: { a: "b" } } }],
          ["metadata that is an array", { event: "ok", idempotency_key: freshKey(), metadata: ["a"] }],
          ["metadata that is a string", { event: "ok", idempotency_key: freshKey(), metadata: "a=b" }],
          // PostgreSQL text cannot hold NUL: bad input, not a failure of the server.
          ["NUL in idempotency_key", { event: "ok", idempotency_key: `${freshKey()}\u0000` }],
          ["NUL in event", { event: "o\u0000k", idempotency_key: freshKey() }],
          ["NUL in a metadata value", { event: "ok", idempotency_key: freshKey(), metadata: { a: "\u0000" } }],
          ["NUL in a metadata key", { event: "ok", idempotency_key: freshKey(), metadata: { "\u0000": "a" } }],
          // A lone surrogate would reach the database as U+FFFD: "x\ud800" and "x\udfff" would be one key.
          ["a lone surrogate in idempotency_key", { event: "ok", idempotency_key: `${freshKey()}\ud800` }],
          ["a lone surrogate in event", { event: "ok\udfff", idempotency_key: freshKey() }],
          ["a lone surrogate in metadata", { event: "ok", idempotency_key: freshKey(), metadata: { a: "\ud800" } }]
        ]
        for (const [what, body] of bad) {
          const reply = yield* reportEvent(billed.accessToken, body)
          assert.strictEqual(reply.status, 400, `${what}: ${reply.text}`)
          assertError(reply, 400, "invalid_request")
        }
        const notJson = yield* request("POST", "/v1/events", { token: billed.accessToken, raw: "{not json" })
        assertError(notJson, 400, "invalid_request")
        // Nothing was charged by any of them.
        assert.strictEqual(yield* balanceOf(billed.user.token), 100)
        assert.strictEqual((yield* fullLedger(billed.user.token)).length, 1)

        // Exactly 100 and 128 characters are accepted.
        const atLimits = yield* reportEvent(billed.accessToken, { event: longEvent, idempotency_key: "k".repeat(128) })
        assert.strictEqual(atLimits.status, 200, atLimits.text)
        assert.deepStrictEqual(atLimits.body, { charged: 1, balance_remaining: 99 })
        const replay = yield* reportEvent(billed.accessToken, { event: longEvent, idempotency_key: "k".repeat(128) })
        assert.deepStrictEqual(replay.body, { charged: 1, balance_remaining: 99, idempotent_replay: true })
        // String metadata, and none at all, are fine.
        const withMetadata = yield* reportEvent(billed.accessToken, {
          event: "ok",
          idempotency_key: freshKey(),
          metadata: { a: "1", empty: "" }
        })
        assert.strictEqual(withMetadata.status, 200, withMetadata.text)
        const emptyMetadata = yield* reportEvent(billed.accessToken, { event: "ok", idempotency_key: freshKey(), metadata: {} })
        assert.strictEqual(emptyMetadata.status, 200, emptyMetadata.text)
        // Keys in any script, emoji included (a surrogate pair is one character, not a lone half), are fine.
        const unicode = yield* reportEvent(billed.accessToken, {
          event: "ok",
          idempotency_key: `ключ-鍵-\ud83d\ude00-${freshKey()}`,
          metadata: { "名前": "😀" }
        })
        assert.strictEqual(unicode.status, 200, unicode.text)
        assert.strictEqual(yield* balanceOf(billed.user.token), 96)
      }))

    it.effect("400 unknown_event when no meter of the app has the name; another app's meter does not count", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { known: 1 } })
        const elsewhere = yield* registerApp(billed.owner.token, { meters: { "other.event": 1 } })
        assert.isString(elsewhere.id)
        for (const event of ["unknown", "Known", "known ", "other.event"]) {
          assertError(yield* reportEvent(billed.accessToken, { event, idempotency_key: freshKey() }), 400, "unknown_event")
        }
        // The key of a refused event is unused: it charges once the event is right.
        const key = freshKey()
        assertError(yield* reportEvent(billed.accessToken, { event: "nope", idempotency_key: key }), 400, "unknown_event")
        const ok = yield* reportEvent(billed.accessToken, { event: "known", idempotency_key: key })
        assert.deepStrictEqual(ok.body, { charged: 1, balance_remaining: 99 })
        assert.strictEqual(yield* balanceOf(billed.user.token), 99)
      }))

    it.effect("400 meter_disabled for a disabled meter; an event charged before it was disabled still replays", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { render: 4 } })
        const meters = yield* request("GET", `/api/apps/${billed.app.id}/meters`, { token: billed.owner.token })
        const meterId = meters.body.data[0].id as string
        const before = freshKey()
        const charged = yield* reportEvent(billed.accessToken, { event: "render", idempotency_key: before })
        assert.deepStrictEqual(charged.body, { charged: 4, balance_remaining: 96 })

        const disabled = yield* request("PATCH", `/api/apps/${billed.app.id}/meters/${meterId}`, {
          token: billed.owner.token,
          body: { disabled: true }
        })
        assert.strictEqual(disabled.status, 200, disabled.text)
        const key = freshKey()
        assertError(yield* reportEvent(billed.accessToken, { event: "render", idempotency_key: key }), 400, "meter_disabled")
        const retry = yield* reportEvent(billed.accessToken, { event: "render", idempotency_key: before })
        assert.deepStrictEqual(retry.body, { charged: 4, balance_remaining: 96, idempotent_replay: true })
        assert.strictEqual(yield* balanceOf(billed.user.token), 96)

        // Enabled again, the refused key was never used.
        const enabled = yield* request("PATCH", `/api/apps/${billed.app.id}/meters/${meterId}`, {
          token: billed.owner.token,
          body: { disabled: false }
        })
        assert.strictEqual(enabled.status, 200, enabled.text)
        const ok = yield* reportEvent(billed.accessToken, { event: "render", idempotency_key: key })
        assert.deepStrictEqual(ok.body, { charged: 4, balance_remaining: 92 })
      }))

    it.effect("a price change applies to new events; replays keep the price they were charged", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { call: 2 } })
        const meters = yield* request("GET", `/api/apps/${billed.app.id}/meters`, { token: billed.owner.token })
        const key = freshKey()
        assert.deepStrictEqual((yield* reportEvent(billed.accessToken, { event: "call", idempotency_key: key })).body, {
          charged: 2,
          balance_remaining: 98
        })
        const patched = yield* request("PATCH", `/api/apps/${billed.app.id}/meters/${meters.body.data[0].id}`, {
          token: billed.owner.token,
          body: { credits_per_use: 7.5 }
        })
        assert.strictEqual(patched.status, 200, patched.text)
        assert.deepStrictEqual((yield* reportEvent(billed.accessToken, { event: "call", idempotency_key: key })).body, {
          charged: 2,
          balance_remaining: 98,
          idempotent_replay: true
        })
        assert.deepStrictEqual(
          (yield* reportEvent(billed.accessToken, { event: "call", idempotency_key: freshKey() })).body,
          { charged: 7.5, balance_remaining: 90.5 }
        )
      }))

    it.effect("402 insufficient_credits when the balance cannot cover the price; the failed key charges after a grant", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { big: 150, exact: 100 } })
        const key = freshKey()
        assertError(yield* reportEvent(billed.accessToken, { event: "big", idempotency_key: key }), 402, "insufficient_credits")
        // A retry is refused the same way (the refusal was not stored as an answer) and nothing moved.
        assertError(yield* reportEvent(billed.accessToken, { event: "big", idempotency_key: key }), 402, "insufficient_credits")
        assert.deepStrictEqual(yield* walletOf(billed.user.token), { balance: 100, held: 0, available: 100, today_spent: 0 })
        assert.strictEqual((yield* fullLedger(billed.user.token)).length, 1)

        const granted = yield* grantCredits(billed.user.userId, 60)
        assert.strictEqual(granted.balance, 160)
        const after = yield* reportEvent(billed.accessToken, { event: "big", idempotency_key: key })
        assert.strictEqual(after.status, 200, after.text)
        assert.deepStrictEqual(after.body, { charged: 150, balance_remaining: 10 })
        // A price equal to the balance is covered; then nothing is left.
        yield* grantCredits(billed.user.userId, 90)
        const exact = yield* reportEvent(billed.accessToken, { event: "exact", idempotency_key: freshKey() })
        assert.deepStrictEqual(exact.body, { charged: 100, balance_remaining: 0 })
        assertError(yield* reportEvent(billed.accessToken, { event: "exact", idempotency_key: freshKey() }), 402, "insufficient_credits")
        assert.strictEqual(yield* balanceOf(billed.user.token), 0)
        // With nothing left, a repeat of a charged key is still answered, as a replay.
        assert.deepStrictEqual((yield* reportEvent(billed.accessToken, { event: "big", idempotency_key: key })).body, {
          charged: 150,
          balance_remaining: 10,
          idempotent_replay: true
        })
        yield* assertLedgerAddsUp(billed.user.token)
      }))

    it.effect("429 daily_cap_exceeded with Retry-After until the next 00:00 UTC; the refused key charges once the cap allows", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { unit: 4 }, dailyCap: 10 })
        assert.deepStrictEqual((yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: freshKey() })).body, {
          charged: 4,
          balance_remaining: 96
        })
        assert.deepStrictEqual((yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: freshKey() })).body, {
          charged: 4,
          balance_remaining: 92
        })
        // 8 of 10 spent: another 4 would pass the cap.
        const key = freshKey()
        const sentAt = Date.now()
        const capped = yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: key })
        const answeredAt = Date.now()
        assertError(capped, 429, "daily_cap_exceeded")
        const retryAfter = Number(capped.headers.get("retry-after"))
        assert.isTrue(Number.isInteger(retryAfter), `Retry-After is whole seconds: ${capped.headers.get("retry-after")}`)
        assert.isAtLeast(retryAfter, Math.floor(secondsToMidnight(answeredAt)))
        assert.isAtMost(retryAfter, Math.ceil(secondsToMidnight(sentAt)))
        assert.strictEqual(yield* balanceOf(billed.user.token), 92)
        assert.strictEqual((yield* walletOf(billed.user.token)).today_spent, 8)

        // The cap is per user: another user of the same app is not capped by the first one's spending.
        const other = yield* authorizeAnother(billed)
        assert.deepStrictEqual((yield* reportEvent(other.accessToken, { event: "unit", idempotency_key: freshKey() })).body, {
          charged: 4,
          balance_remaining: 96
        })
        // Raising the cap lets the same key through: the refusal did not use it.
        const raised = yield* request("PATCH", `/api/apps/${billed.app.id}`, {
          token: billed.owner.token,
          body: { daily_cap_per_user: 12 }
        })
        assert.strictEqual(raised.status, 200, raised.text)
        assert.deepStrictEqual((yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: key })).body, {
          charged: 4,
          balance_remaining: 88
        })
        assertError(yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: freshKey() }), 429, "daily_cap_exceeded")
        // Replays are answered even with the cap reached.
        assert.deepStrictEqual((yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: key })).body, {
          charged: 4,
          balance_remaining: 88,
          idempotent_replay: true
        })
      }))

    it.effect("the daily cap counts only this app's charges: other apps and /openapi consumes do not use it up", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { unit: 5 }, dailyCap: 5 })
        const otherApp = yield* registerApp(billed.owner.token, { meters: { unit: 20 } })
        const otherTokens = yield* authorizeApp(billed.user.token, otherApp)
        assert.strictEqual((yield* reportEvent(otherTokens.access_token, { event: "unit", idempotency_key: freshKey() })).status, 200)
        const key = yield* createApiKey(billed.user.token)
        assert.strictEqual((yield* consume(key.key, { amount: 30, idempotency_key: freshKey() })).status, 200)
        const capped = yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: freshKey() })
        assert.deepStrictEqual(capped.body, { charged: 5, balance_remaining: 45 })
        assertError(yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: freshKey() }), 429, "daily_cap_exceeded")
      }))

    it.effect("a daily cap of 0 refuses every charge", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { unit: 1, free: 0 }, dailyCap: 0 })
        assertError(yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: freshKey() }), 429, "daily_cap_exceeded")
        assert.strictEqual(yield* balanceOf(billed.user.token), 100)
      }))

    it.effect("401 unauthorized for an API key, a login token, a forged or missing token; 403 insufficient_scope without `events`", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { unit: 1 } })
        const apiKey = yield* createApiKey(billed.user.token)
        const body = { event: "unit", idempotency_key: freshKey() }
        assertError(yield* reportEvent(apiKey.key, body), 401, "unauthorized")
        assertError(yield* reportEvent(billed.user.token, body), 401, "unauthorized")
        assertError(yield* request("POST", "/v1/events", { headers: { cookie: `token=${billed.user.token}` }, body }), 401, "unauthorized")
        assertError(yield* request("POST", "/v1/events", { body }), 401, "unauthorized")
        const [header, payload] = billed.accessToken.split(".")
        assertError(yield* reportEvent(`${header}.${payload}.forged`, body), 401, "unauthorized")
        // A token of the app without the events scope: authenticated, not allowed.
        const agentsOnly = yield* authorizeApp(billed.user.token, billed.app, "agents:write")
        assertError(yield* reportEvent(agentsOnly.access_token, body), 403, "insufficient_scope")
        assert.strictEqual(yield* balanceOf(billed.user.token), 100)
        // None of them used the key.
        const ok = yield* reportEvent(billed.accessToken, body)
        assert.deepStrictEqual(ok.body, { charged: 1, balance_remaining: 99 })
      }))

    it.effect("the same idempotency key in two apps charges twice", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { unit: 3 } })
        const second = yield* registerApp(billed.owner.token, { meters: { unit: 4 } })
        const secondToken = (yield* authorizeApp(billed.user.token, second)).access_token
        const key = freshKey()
        assert.deepStrictEqual((yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: key })).body, {
          charged: 3,
          balance_remaining: 97
        })
        assert.deepStrictEqual((yield* reportEvent(secondToken, { event: "unit", idempotency_key: key })).body, {
          charged: 4,
          balance_remaining: 93
        })
        assert.strictEqual(yield* balanceOf(billed.user.token), 93)
        // Each replays its own answer.
        assert.deepStrictEqual((yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: key })).body, {
          charged: 3,
          balance_remaining: 97,
          idempotent_replay: true
        })
        assert.deepStrictEqual((yield* reportEvent(secondToken, { event: "unit", idempotency_key: key })).body, {
          charged: 4,
          balance_remaining: 93,
          idempotent_replay: true
        })
        // The same key on /openapi/credit/consume is a scope of its own too.
        const apiKey = yield* createApiKey(billed.user.token)
        assert.deepStrictEqual((yield* consume(apiKey.key, { amount: 1, idempotency_key: key })).body, {
          charged: 1,
          balance_remaining: 92
        })
        yield* assertLedgerAddsUp(billed.user.token)
      }))

    it.effect("the same (app, key) for another user is 409 idempotency_conflict and charges nobody", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { unit: 3 } })
        const other = yield* authorizeAnother(billed)
        const key = freshKey()
        assert.deepStrictEqual((yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: key })).body, {
          charged: 3,
          balance_remaining: 97
        })
        const conflict = yield* reportEvent(other.accessToken, { event: "unit", idempotency_key: key })
        assertError(conflict, 409, "idempotency_conflict")
        // The message may quote the key (a random UUID, which can itself contain "97"): judge what is left.
        assert.deepStrictEqual(Object.keys(conflict.body), ["error"])
        assert.notInclude(conflict.text.replace(key, ""), "97", "the other user's balance is not shown")
        assert.strictEqual(yield* balanceOf(other.user.token), 100)
        assert.strictEqual((yield* fullLedger(other.user.token)).length, 1)
        // The first user's replay is untouched.
        assert.deepStrictEqual((yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: key })).body, {
          charged: 3,
          balance_remaining: 97,
          idempotent_replay: true
        })
        // Even once the meter is disabled, the other user gets no replay of it.
        const meters = yield* request("GET", `/api/apps/${billed.app.id}/meters`, { token: billed.owner.token })
        yield* request("PATCH", `/api/apps/${billed.app.id}/meters/${meters.body.data[0].id}`, {
          token: billed.owner.token,
          body: { disabled: true }
        })
        const whileDisabled = yield* reportEvent(other.accessToken, { event: "unit", idempotency_key: key })
        assert.notStrictEqual(whileDisabled.status, 200, whileDisabled.text)
        assert.notInclude(whileDisabled.text.replace(key, ""), "97")
      }))

    it.effect("a charge appears in the wallet: today_spent and the ledger", () =>
      Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { a: 1.25, b: 2 } })
        yield* reportEvent(billed.accessToken, { event: "a", idempotency_key: freshKey() })
        yield* reportEvent(billed.accessToken, { event: "b", idempotency_key: freshKey(), metadata: { k: "v" } })
        assert.deepStrictEqual(yield* walletOf(billed.user.token), { balance: 96.75, held: 0, available: 96.75, today_spent: 3.25 })
        const lines = yield* fullLedger(billed.user.token)
        assert.deepStrictEqual(
          lines.map((line) => [line.kind, line.app, line.event, line.metadata, line.amount, line.balance_after]),
          [
            ["event", billed.app.id, "b", { k: "v" }, -2, 96.75],
            ["event", billed.app.id, "a", null, -1.25, 98.75],
            ["signup", null, null, null, 100, 100]
          ]
        )
      }))
  })

  it.scopedLive("after a restart the daily cap still counts what the app charged earlier today", () =>
    Effect.gen(function*() {
      const storage = yield* makeMigratedStorage
      const inbox = yield* makeSmsInbox
      const first = yield* Scope.make()
      const server = yield* startServer(storage, inbox, BILLING_ENV).pipe(Scope.extend(first))
      // No cap yet: the app charges 8 today.
      const billed = yield* Effect.gen(function*() {
        const billed = yield* billedUser({ meters: { unit: 1, eight: 8, five: 5 } })
        const charged = yield* reportEvent(billed.accessToken, { event: "eight", idempotency_key: freshKey() })
        assert.deepStrictEqual(charged.body, { charged: 8, balance_remaining: 92 })
        return billed
      }).pipe(Effect.provideService(TestServer, server))
      yield* Scope.close(first, Exit.void)

      const restarted = yield* startServer(storage, inbox, BILLING_ENV)
      yield* Effect.gen(function*() {
        // Another uncapped charge wakes the wallet; then the owner sets a cap of 10 (9 already spent today).
        assert.deepStrictEqual((yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: freshKey() })).body, {
          charged: 1,
          balance_remaining: 91
        })
        const capped = yield* request("PATCH", `/api/apps/${billed.app.id}`, {
          token: billed.owner.token,
          body: { daily_cap_per_user: 10 }
        })
        assert.strictEqual(capped.status, 200, capped.text)
        assertError(yield* reportEvent(billed.accessToken, { event: "five", idempotency_key: freshKey() }), 429, "daily_cap_exceeded")
        assert.deepStrictEqual((yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: freshKey() })).body, {
          charged: 1,
          balance_remaining: 90
        })
        assertError(yield* reportEvent(billed.accessToken, { event: "unit", idempotency_key: freshKey() }), 429, "daily_cap_exceeded")
        assert.strictEqual((yield* walletOf(billed.user.token)).today_spent, 10)
      }).pipe(Effect.provideService(TestServer, restarted))
    }))

  // Servers of its own: one is stopped and another started on the same storage.
  it.scopedLive("a restart keeps every replay answer: events, consumes, grants and top-ups", () =>
      Effect.gen(function*() {
        const storage = yield* makeMigratedStorage
        const inbox = yield* makeSmsInbox
        const secret = "restart-webhook-secret"
        const env = { ...BILLING_ENV, PAYMENT_WEBHOOK_SECRET: secret }
        const first = yield* Scope.make()
        const server = yield* startServer(storage, inbox, env).pipe(Scope.extend(first))
        const onServer = <A, E, R>(effect: Effect.Effect<A, E, R>, running: typeof server) =>
          Effect.provideService(effect, TestServer, running)

        const before = yield* onServer(
          Effect.gen(function*() {
            const billed = yield* billedUser({ meters: { unit: 2.5, other: 1 } })
            const second = yield* authorizeAnother(billed)
            const apiKey = (yield* createApiKey(billed.user.token)).key
            const answers: Array<{ readonly send: () => Effect.Effect<any, never, TestServer>; readonly body: unknown }> = []
            const remember = (send: () => Effect.Effect<any, never, TestServer>) =>
              Effect.gen(function*() {
                const reply = yield* send()
                assert.strictEqual(reply.status, 200, reply.text)
                answers.push({ send, body: reply.body })
              })
            for (let i = 0; i < 5; i++) {
              const key = freshKey()
              yield* remember(() => reportEvent(billed.accessToken, { event: i % 2 === 0 ? "unit" : "other", idempotency_key: key }))
            }
            const secondKey = freshKey()
            yield* remember(() => reportEvent(second.accessToken, { event: "unit", idempotency_key: secondKey }))
            for (let i = 0; i < 3; i++) {
              const key = freshKey()
              yield* remember(() => consume(apiKey, { amount: "0.333333", idempotency_key: key }))
            }
            const grantKey = freshKey()
            yield* remember(() =>
              request("POST", `/internal/wallets/${billed.user.userId}/grants`, {
                body: { amount: 12, idempotency_key: grantKey, reason: "restart" },
                headers: internalAuth
              })
            )
            const order = yield* request("POST", "/api/payment/orders", { token: billed.user.token, body: { amount: 7 } })
            assert.strictEqual(order.status, 201, order.text)
            const notify = JSON.stringify({ order_id: order.body.id, status: "paid", amount: 7 })
            const paid = yield* request("POST", "/api/payment/notify/test", {
              raw: notify,
              headers: { "x-signature": signature(notify, secret) }
            })
            assert.strictEqual(paid.status, 200, paid.text)
            const balance = yield* balanceOf(billed.user.token)
            return { billed, second, answers, balance, notify }
          }),
          server
        )
        assert.strictEqual(micros(before.balance), micros(108.500001))

        yield* Scope.close(first, Exit.void)
        const restarted = yield* startServer(storage, inbox, env)
        yield* onServer(
          Effect.gen(function*() {
            for (const { body, send } of before.answers) {
              const again = yield* send()
              assert.strictEqual(again.status, 200, again.text)
              if ("charged" in (body as object)) {
                assert.deepStrictEqual(again.body, { ...(body as object), idempotent_replay: true })
              } else {
                assert.deepStrictEqual(again.body, { balance: (body as { balance: number }).balance, idempotent_replay: true })
              }
            }
            const repaid = yield* request("POST", "/api/payment/notify/test", {
              raw: before.notify,
              headers: { "x-signature": signature(before.notify, secret) }
            })
            assert.strictEqual(repaid.status, 200, repaid.text)
            assert.strictEqual(yield* balanceOf(before.billed.user.token), before.balance)
            yield* assertLedgerAddsUp(before.billed.user.token)
            yield* assertLedgerAddsUp(before.second.user.token)
            // And the wallet goes on from where it was.
            const next = yield* reportEvent(before.billed.accessToken, { event: "other", idempotency_key: freshKey() })
            assert.strictEqual(next.status, 200, next.text)
            assert.strictEqual(micros(next.body.balance_remaining), micros(before.balance) - micros(1))
          }),
          restarted
        )
      }))
})
