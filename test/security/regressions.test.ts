import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Jose from "jose"
import * as Crypto from "node:crypto"
import { registerApp, userIdOf } from "../support/Billing.js"
import { request } from "../support/Client.js"
import { internalAuth, JWT_SECRET, TestServer } from "../support/TestServer.js"
import { agentWith, assertError, balanceOf, ENV, LIVE, newUser } from "../runs/runs-support.js"

/**
 * Issue 15 item 9: the attack categories that held on main, kept as regression cases next to the seven replays:
 * forged tokens, cross-tenant ids, PKCE, and idempotency under concurrency.
 */

const FORM = "application/x-www-form-urlencoded"

const sign = (claims: Record<string, unknown>, key: Uint8Array, alg = "HS256") =>
  Effect.promise(() => new Jose.SignJWT(claims).setProtectedHeader({ alg, typ: "JWT" }).setIssuedAt().setExpirationTime("1h").sign(key))

describe("security: what held", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("forged login tokens are 401: another key, alg none, a tampered payload, a forged internal bearer", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const claims = { userId: userIdOf(user.token), phone: "+15550000000" }
        const otherKey = yield* sign(claims, new TextEncoder().encode("another-secret-another-secret-0123456789"))
        const [header, payload] = user.token.split(".")
        const none = `${Buffer.from(JSON.stringify({ alg: "none", typ: "JWT" })).toString("base64url")}.${payload}.`
        const tampered = `${header}.${Buffer.from(JSON.stringify({ ...Jose.decodeJwt(user.token), userId: "usr_other" })).toString("base64url")}.${user.token.split(".")[2]}`
        // Right key, but never issued: single device means only the current token of the user counts.
        const unissued = yield* sign(claims, new TextEncoder().encode(JWT_SECRET))
        for (const token of [otherKey, none, tampered, unissued, "", "x.y.z"]) {
          assertError(yield* request("POST", "/api/user/apiKey/list", { token }), 401, "unauthorized")
        }
        const grant = { amount: 5, idempotency_key: Crypto.randomUUID(), reason: "forged" }
        assertError(yield* request("POST", `/internal/wallets/${userIdOf(user.token)}/grants`, { body: grant, token: user.token }), 401, "unauthorized")
      }))

    it.effect("another account's ids are 404: agents, sessions and files reveal nothing across tenants", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const stranger = yield* newUser
        const agent = yield* agentWith(owner.token)
        const session = yield* request("POST", "/v1/sessions", { token: owner.token, body: { agent } })
        assert.strictEqual(session.status, 201, session.text)
        assertError(yield* request("GET", `/v1/agents/${agent}`, { token: stranger.token }), 404, "not_found")
        assertError(yield* request("GET", `/v1/sessions/${session.body.id}`, { token: stranger.token }), 404, "not_found")
        assertError(yield* request("DELETE", `/v1/sessions/${session.body.id}`, { token: stranger.token }), 404, "not_found")
        const still = yield* request("GET", `/v1/sessions/${session.body.id}`, { token: owner.token })
        assert.strictEqual(still.status, 200, still.text)
      }))

    it.effect("PKCE: a code exchanged with the wrong verifier is invalid_grant and is used up", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const app = yield* registerApp(owner.token)
        const server = yield* TestServer
        const verifier = Crypto.randomBytes(32).toString("base64url")
        const consent = yield* Effect.promise(() =>
          fetch(`${server.url}/oauth/authorize`, {
            method: "POST",
            redirect: "manual",
            headers: { authorization: `Bearer ${owner.token}`, "content-type": FORM },
            body: new URLSearchParams({
              response_type: "code",
              client_id: app.clientId,
              redirect_uri: app.redirectUri,
              code_challenge: Crypto.createHash("sha256").update(verifier).digest("base64url"),
              code_challenge_method: "S256",
              decision: "approve"
            })
          })
        )
        const code = new URL(consent.headers.get("location")!).searchParams.get("code")!
        const exchange = (codeVerifier: string) =>
          request("POST", "/oauth/token", {
            raw: new URLSearchParams({
              grant_type: "authorization_code",
              code,
              redirect_uri: app.redirectUri,
              code_verifier: codeVerifier,
              client_id: app.clientId,
              client_secret: app.clientSecret
            }).toString(),
            headers: { "content-type": FORM }
          })
        const wrong = yield* exchange(Crypto.randomBytes(32).toString("base64url"))
        assert.strictEqual(wrong.status, 400, wrong.text)
        assert.strictEqual(wrong.body.error, "invalid_grant")
        const late = yield* exchange(verifier)
        assert.strictEqual(late.body.error, "invalid_grant", late.text)
      }))

    it.effect("idempotency under concurrency: 30 grants with one key credit once", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const before = yield* balanceOf(user.token)
        const body = { amount: 7, idempotency_key: Crypto.randomUUID(), reason: "burst" }
        const replies = yield* Effect.all(
          Array.from({ length: 30 }, () =>
            request("POST", `/internal/wallets/${userIdOf(user.token)}/grants`, { body, headers: internalAuth })),
          { concurrency: "unbounded" }
        )
        for (const reply of replies) assert.strictEqual(reply.status, 200, reply.text)
        assert.strictEqual(yield* balanceOf(user.token), before + 7)
      }))
  })
})
