import { assert, describe, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { BearerCache } from "../../src/identity/BearerCache.js"
import { authorizeApp, registerApp } from "../support/Billing.js"
import { createApiKey, loginWithSms, request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"

/**
 * Verified bearers are kept in the process (issue 45 item 3, docs/http.md "Caches"): a repeated login token, API key
 * or OAuth access token is not verified or looked up again. What revokes a credential still revokes it at once: each
 * case below uses the credential first (so it is cached), revokes it, and expects the very next request refused.
 */

describe("BearerCache", () => {
  it("keeps an entry until its own deadline, no longer", () => {
    const cache = new BearerCache<string>(10)
    cache.set("a", "A", 1_000)
    assert.strictEqual(cache.get("a", 999), "A")
    assert.isUndefined(cache.get("a", 1_000))
    assert.strictEqual(cache.size, 0)
  })

  it("holds at most its capacity, dropping the least recently used", () => {
    const cache = new BearerCache<number>(3)
    for (const [key, value] of [["a", 1], ["b", 2], ["c", 3]] as const) cache.set(key, value, 10)
    assert.strictEqual(cache.get("a", 0), 1) // a is now the most recently used
    cache.set("d", 4, 10)
    assert.strictEqual(cache.size, 3)
    assert.isUndefined(cache.get("b", 0))
    assert.deepStrictEqual([cache.get("a", 0), cache.get("c", 0), cache.get("d", 0)], [1, 3, 4])
  })

  it("drops what a revocation names", () => {
    const cache = new BearerCache<{ userId: string }>(10)
    cache.set("t1", { userId: "u1" }, 10)
    cache.set("t2", { userId: "u2" }, 10)
    cache.deleteWhere((v) => v.userId === "u1")
    assert.isUndefined(cache.get("t1", 0))
    assert.deepStrictEqual(cache.get("t2", 0), { userId: "u2" })
  })
})

describe("bearer caches and revocation", () => {
  layer(TestServer.layer())((it) => {
    it.effect("a login token used many times stops the moment a new token replaces it (single device)", () =>
      Effect.gen(function*() {
        const { token: first } = yield* loginWithSms()
        for (let i = 0; i < 3; i++) assert.strictEqual((yield* request("POST", "/api/user/apiKey/list", { token: first })).status, 200)
        // A refresh issues the user's next token, as a second login does (test/identity/login-token.test.ts).
        const refreshed = yield* request("GET", "/api/token/refresh", { token: first })
        assert.strictEqual(refreshed.status, 200, refreshed.text)
        assert.strictEqual((yield* request("POST", "/api/user/apiKey/list", { token: first })).status, 401)
        assert.strictEqual((yield* request("POST", "/api/user/apiKey/list", { token: refreshed.body.token })).status, 200)
      }))

    it.effect("an API key used many times stops the moment it is deleted", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const key = yield* createApiKey(token, "cached")
        for (let i = 0; i < 3; i++) assert.strictEqual((yield* request("GET", "/v1/models", { token: key.key })).status, 200)
        const deleted = yield* request("POST", "/api/user/apiKey/delete", { token, body: { id: key.id } })
        assert.strictEqual(deleted.status, 200, deleted.text)
        assert.strictEqual((yield* request("GET", "/v1/models", { token: key.key })).status, 401)
        assert.strictEqual((yield* request("GET", "/openapi/credit/balance", { token: key.key })).status, 401)
      }))

    it.effect("an OAuth access token is verified once and keeps its scopes: without agents:write it is refused on /v1 every time", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const user = yield* loginWithSms()
        const app = yield* registerApp(owner.token, { meters: { call: 0.01 } })
        const events = yield* authorizeApp(user.token, app, "events")
        const writer = yield* authorizeApp(user.token, app, "agents:write")
        for (let i = 0; i < 3; i++) {
          // Known to the cache after the first event: still not a caller of /v1 without agents:write.
          const reported = yield* request("POST", "/v1/events", {
            token: events.access_token,
            body: { event: "call", idempotency_key: `k-${i}-${Math.random()}` }
          })
          assert.strictEqual(reported.status, 200, reported.text)
          assert.strictEqual((yield* request("GET", "/v1/models", { token: events.access_token })).status, 401)
          assert.strictEqual((yield* request("GET", "/v1/models", { token: writer.access_token })).status, 200)
        }
      }))
  })
})
