import { assert, describe, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import { registerApp } from "../support/Billing.js"
import { loginWithSms, request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"

/**
 * Issue 15 items 4, 5 and 8, replayed: a form another site posts with the login cookie changes nothing; a replayed
 * authorization code revokes what it issued (RFC 6749 4.1.2); cross-origin access only for `CORS_ORIGINS`.
 */

const FORM = "application/x-www-form-urlencoded"
const ALLOWED = "https://app.example.com"

const form = (path: string, token: string, body: string, extra: Record<string, string> = {}) =>
  request("POST", path, { raw: body, headers: { cookie: `token=${token}`, "content-type": FORM, ...extra } })

const tokenRequest = (body: Record<string, string>) =>
  request("POST", "/oauth/token", { raw: new URLSearchParams(body).toString(), headers: { "content-type": FORM } })

describe("security: requests", () => {
  it.layer(TestServer.layer({ CORS_ORIGINS: `${ALLOWED}, https://other.example.com:8443` }))((it) => {
    it.effect("a cookie-only form post to a JSON route is refused with 415 and changes nothing", () =>
      Effect.gen(function*() {
        const user = yield* loginWithSms()
        const before = yield* request("POST", "/api/user/apiKey/list", { token: user.token })
        for (
          const [path, body] of [
            ["/api/user/apiKey/create", "name=evil"],
            ["/api/purchases", "agent=x"],
            ["/v1/agents/run", "agent=x&input=hi"],
            ["/api/payment/orders", "amount=5"],
            ["/v1/agents", "name=evil"],
            ["/v1/environments", "name=evil"]
          ] as const
        ) {
          const reply = yield* form(path, user.token, body)
          assert.strictEqual(reply.status, 415, `${path}: ${reply.text}`)
          assert.strictEqual(reply.body.error.type, "unsupported_media_type")
          const plain = yield* request("POST", path, { raw: body, headers: { cookie: `token=${user.token}`, "content-type": "text/plain" } })
          assert.strictEqual(plain.status, 415, `${path}: ${plain.text}`)
        }
        const after = yield* request("POST", "/api/user/apiKey/list", { token: user.token })
        assert.deepStrictEqual(after.body, before.body)
        // JSON with the cookie still works; a form is 415 with a bearer too (issue 26 item 4: JSON routes take JSON).
        const json = yield* request("POST", "/api/user/apiKey/create", { body: { name: "mine" }, headers: { cookie: `token=${user.token}` } })
        assert.strictEqual(json.status, 200, json.text)
        const bearer = yield* request("POST", "/api/user/apiKey/create", { raw: "name=bearer", token: user.token, headers: { "content-type": FORM } })
        assert.strictEqual(bearer.status, 415, bearer.text)
      }))

    it.effect("a cookie-authenticated change from another origin is 403, even JSON, even an allowed CORS origin", () =>
      Effect.gen(function*() {
        const user = yield* loginWithSms()
        for (const origin of ["https://evil.example", ALLOWED]) {
          const reply = yield* request("POST", "/api/user/apiKey/create", {
            body: { name: "x" },
            headers: { cookie: `token=${user.token}`, origin }
          })
          assert.strictEqual(reply.status, 403, reply.text)
          assert.strictEqual(reply.body.error.type, "forbidden")
        }
        const server = yield* TestServer
        const own = yield* request("POST", "/api/user/apiKey/create", {
          body: { name: "x" },
          headers: { cookie: `token=${user.token}`, origin: server.url }
        })
        assert.strictEqual(own.status, 200, own.text)
      }))

    it.effect("CORS: a preflight from an allowed origin is answered with that origin and no credentials; others are 403", () =>
      Effect.gen(function*() {
        const preflight = (origin: string) =>
          request("OPTIONS", "/v1/agents/run", {
            headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type" }
          })
        const ok = yield* preflight(ALLOWED)
        assert.strictEqual(ok.status, 204, ok.text)
        assert.strictEqual(ok.headers.get("access-control-allow-origin"), ALLOWED)
        assert.isNull(ok.headers.get("access-control-allow-credentials"))
        assert.match(ok.headers.get("access-control-allow-headers") ?? "", /authorization/)
        assert.match(ok.headers.get("vary") ?? "", /Origin/)
        assert.strictEqual((yield* preflight("https://other.example.com:8443")).status, 204)
        for (const origin of ["https://evil.example", "null", "https://app.example.com.evil.example", "http://app.example.com"]) {
          const refused = yield* preflight(origin)
          assert.strictEqual(refused.status, 403, `${origin}: ${refused.text}`)
          assert.isNull(refused.headers.get("access-control-allow-origin"))
        }
        const health = yield* request("GET", "/api/health", { headers: { origin: ALLOWED } })
        assert.strictEqual(health.headers.get("access-control-allow-origin"), ALLOWED)
        assert.isNull(health.headers.get("access-control-allow-credentials"))
        const other = yield* request("GET", "/api/health", { headers: { origin: "https://evil.example" } })
        assert.isNull(other.headers.get("access-control-allow-origin"))
      }))

    it.effect("replaying an authorization code revokes the refresh token its first exchange issued", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const app = yield* registerApp(owner.token)
        const verifier = Crypto.randomBytes(32).toString("base64url")
        const server = yield* TestServer
        const consent = yield* Effect.promise(() =>
          fetch(`${server.url}/oauth/authorize`, {
            method: "POST",
            redirect: "manual",
            headers: { authorization: `Bearer ${owner.token}`, "content-type": FORM },
            body: new URLSearchParams({
              response_type: "code",
              client_id: app.clientId,
              redirect_uri: app.redirectUri,
              scope: "events",
              code_challenge: Crypto.createHash("sha256").update(verifier).digest("base64url"),
              code_challenge_method: "S256",
              decision: "approve"
            })
          })
        )
        assert.strictEqual(consent.status, 302)
        const location = consent.headers.get("location")
        const code = new URL(location!).searchParams.get("code")!
        const exchange = {
          grant_type: "authorization_code",
          code,
          redirect_uri: app.redirectUri,
          code_verifier: verifier,
          client_id: app.clientId,
          client_secret: app.clientSecret
        }
        const first = yield* tokenRequest(exchange)
        assert.strictEqual(first.status, 200, first.text)
        const replay = yield* tokenRequest(exchange)
        assert.strictEqual(replay.status, 400, replay.text)
        assert.strictEqual(replay.body.error, "invalid_grant")
        const refreshed = yield* tokenRequest({
          grant_type: "refresh_token",
          refresh_token: first.body.refresh_token,
          client_id: app.clientId,
          client_secret: app.clientSecret
        })
        assert.strictEqual(refreshed.status, 400, refreshed.text)
        assert.strictEqual(refreshed.body.error, "invalid_grant")
      }))
  })

  // `layer`, not `it.layer`: after the block above vitest's shared `it` carries its nested `layer`, which would start
  // that server again (test/support/setupFile.ts).
  layer(TestServer.layer())((it) => {
    it.effect("CORS_ORIGINS empty (the default): no preflight succeeds and no response names an origin", () =>
      Effect.gen(function*() {
        const reply = yield* request("OPTIONS", "/v1/agents/run", {
          headers: { origin: ALLOWED, "access-control-request-method": "POST" }
        })
        assert.strictEqual(reply.status, 403, reply.text)
        assert.isNull(reply.headers.get("access-control-allow-origin"))
        const health = yield* request("GET", "/api/health", { headers: { origin: ALLOWED } })
        assert.isNull(health.headers.get("access-control-allow-origin"))
      }))
  })
})
