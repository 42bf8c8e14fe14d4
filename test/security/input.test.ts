import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import { registerApp, userIdOf } from "../support/Billing.js"
import { request } from "../support/Client.js"
import { internalAuth, TestServer } from "../support/TestServer.js"
import { assertError, ENV, LIVE, newUser } from "../runs/runs-support.js"

/**
 * Issue 26 item 4: every media type is accepted (`+json` as JSON) or refused with 415 at once; NUL, lone
 * surrogates and out-of-range numbers are 400 on every route (form-encoded OAuth and MCP included); JSON routes
 * refuse form and multipart bodies whatever the credential; `/api/token/refresh` changes nothing on a GET a
 * cross-site link can send.
 */

const FORM = "application/x-www-form-urlencoded"

const assertInvalid = (reply: { status: number; text: string; body: any }) => {
  assert.strictEqual(reply.status, 400, reply.text)
  assert.strictEqual(reply.body?.error?.type ?? reply.body?.error, "invalid_request", reply.text)
}

describe("security: input at the edge", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("application/<x>+json is read as JSON, with or without a credential, and answered at once", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        for (const type of ["application/vnd.api+json", "application/merge-patch+json", "application/ld+json; charset=utf-8"]) {
          const created = yield* request("POST", "/v1/agents", {
            token: user.token,
            raw: JSON.stringify({ name: `plus ${type}` }),
            headers: { "content-type": type }
          })
          assert.strictEqual(created.status, 201, `${type}: ${created.text}`)
          assert.strictEqual(created.body.name, `plus ${type}`)
          // Unauthenticated: the login route reads it as JSON too (a wrong code, not a hang).
          const login = yield* request("POST", "/api/auth/login", {
            raw: JSON.stringify({ phone: "+15550001111", code: "000000" }),
            headers: { "content-type": type }
          })
          assertError(login, 401, "invalid_code")
          // And the edge's text check applies to it.
          assertInvalid(
            yield* request("POST", "/v1/agents", { token: user.token, raw: JSON.stringify({ name: "a\u0000b" }), headers: { "content-type": type } })
          )
        }
      }))

    it.effect("form, multipart and other bodies on JSON routes are 415 whatever the credential; nothing is created", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const multipart = "--b\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nx\r\n--b--\r\n"
        const bodies: ReadonlyArray<readonly [string, string]> = [
          [FORM, "name=x"],
          ["multipart/form-data; boundary=b", multipart],
          ["text/plain", "{\"name\":\"x\"}"],
          ["application/xml", "<name>x</name>"],
          ["application/octet-stream", "name=x"],
          ["application/jsonx", "{\"name\":\"x\"}"]
        ]
        for (const [type, body] of bodies) {
          for (const headers of [{ authorization: `Bearer ${user.token}` }, { cookie: `token=${user.token}` }, {}]) {
            const reply = yield* request("POST", "/v1/agents", { raw: body, headers: { ...headers, "content-type": type } })
            assertError(reply, 415, "unsupported_media_type")
          }
          assertError(yield* request("POST", "/api/auth/login", { raw: body, headers: { "content-type": type } }), 415, "unsupported_media_type")
        }
        const agents = yield* request("GET", "/v1/agents", { token: user.token })
        assert.deepStrictEqual(agents.body.data, [])
      }))

    it.effect("NUL in a form field (a lone surrogate cannot be percent-encoded) of /oauth/token or /oauth/authorize is 400, never a 500", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const app = yield* registerApp(owner.token)
        const server = yield* TestServer
        for (const field of ["client_id", "grant_type", "code", "redirect_uri", "client_secret"]) {
          const body = new URLSearchParams({
            grant_type: "authorization_code",
            code: "abc",
            redirect_uri: app.redirectUri,
            client_id: app.clientId,
            client_secret: app.clientSecret
          })
          body.set(field, `a\u0000b`)
          const reply = yield* request("POST", "/oauth/token", { raw: body.toString(), headers: { "content-type": FORM } })
          assert.strictEqual(reply.status, 400, `${field}: ${reply.text}`)
          assert.strictEqual(reply.body.error, "invalid_request", reply.text)
        }
        const consent = yield* Effect.promise(() =>
          fetch(`${server.url}/oauth/authorize`, {
            method: "POST",
            redirect: "manual",
            headers: { authorization: `Bearer ${owner.token}`, "content-type": FORM },
            body: `response_type=code&client_id=a%00b&redirect_uri=${encodeURIComponent(app.redirectUri)}&decision=approve`
          })
        )
        assert.strictEqual(consent.status, 400, await_(consent))
        const query = yield* request("GET", `/oauth/authorize?response_type=code&client_id=a%00b&redirect_uri=x`, { token: owner.token })
        assert.strictEqual(query.status, 400, query.text)
      }))

    it.effect("out-of-range numbers are 400: beyond 2^53, and an operator grant past the balance's range", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const userId = userIdOf(user.token)
        assertInvalid(yield* request("POST", "/v1/agents", { token: user.token, raw: "{\"name\":\"x\",\"temperature\":1e400}" }))
        assertInvalid(yield* request("POST", "/v1/sessions", { token: user.token, raw: "{\"agent\":\"x\",\"metadata\":{\"n\":123456789012345678901234567890}}" }))
        assertInvalid(yield* request("GET", "/v1/agents?limit=1e400", { token: user.token }))
        for (const before of ["1e300", "99999999999999999999", "1e400"]) {
          assertInvalid(yield* request("GET", `/api/wallet/ledger?before=${before}`, { token: user.token }))
        }
        // Ten of the largest grants overflow a bigint of micro-credits: the one that would is refused, not a 500.
        const statuses: Array<number> = []
        for (let i = 0; i < 10; i++) {
          const reply = yield* request("POST", `/internal/wallets/${userId}/grants`, {
            headers: internalAuth,
            body: { amount: "999999999999.999999", idempotency_key: Crypto.randomUUID(), reason: "big" }
          })
          statuses.push(reply.status)
          if (reply.status !== 200) assertInvalid(reply)
        }
        assert.include(statuses, 400)
        assert.notInclude(statuses, 500)
        const wallet = yield* request("GET", "/api/wallet", { token: user.token })
        assert.strictEqual(wallet.status, 200, wallet.text)
        assert.isAtMost(wallet.body.balance, Number.MAX_SAFE_INTEGER / 1e6)
      }))

    it.effect("NUL or a lone surrogate in MCP tool arguments is 400 invalid_request, and nothing is created", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        for (const name of ["a\u0000b", "x\ud800"]) {
          const reply = yield* request("POST", "/mcp", {
            token: user.token,
            headers: { accept: "application/json, text/event-stream", "content-type": "application/json" },
            raw: JSON.stringify({
              jsonrpc: "2.0",
              id: 7,
              method: "tools/call",
              params: { name: "create_expert", arguments: { name, description: "d", category: "other" } }
            })
          })
          assert.strictEqual(reply.status, 400, reply.text)
          assert.strictEqual(reply.body.error.type, "invalid_request", reply.text)
          assert.strictEqual(reply.body.id, 7, reply.text)
        }
        const agents = yield* request("GET", "/v1/agents", { token: user.token })
        assert.deepStrictEqual(agents.body.data, [])
      }))

    it.effect("GET /api/token/refresh with the cookie is 405 and changes nothing; POST refreshes", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const link = yield* request("GET", "/api/token/refresh", { headers: { cookie: `token=${user.token}` } })
        assertError(link, 405, "method_not_allowed")
        assert.include(link.headers.get("allow") ?? "", "POST")
        // The cookie token still works: the link logged nobody out.
        assert.strictEqual((yield* request("POST", "/api/user/apiKey/list", { token: user.token })).status, 200)
        const posted = yield* request("POST", "/api/token/refresh", { headers: { cookie: `token=${user.token}` } })
        assert.strictEqual(posted.status, 200, posted.text)
        assert.isString(posted.body.token)
        assert.match(posted.headers.get("set-cookie") ?? "", /token=/)
        assert.strictEqual((yield* request("POST", "/api/user/apiKey/list", { token: posted.body.token })).status, 200)
        // A cross-site form POST is refused as every other cookie change is.
        const crossSite = yield* request("POST", "/api/token/refresh", {
          raw: "",
          headers: { cookie: `token=${posted.body.token}`, origin: "https://evil.example", "content-type": FORM }
        })
        assert.strictEqual(crossSite.status, 403, crossSite.text)
        assert.strictEqual((yield* request("POST", "/api/user/apiKey/list", { token: posted.body.token })).status, 200)
      }))
  })
})

const await_ = (response: Response) => `${response.status} ${response.headers.get("location") ?? ""}`
