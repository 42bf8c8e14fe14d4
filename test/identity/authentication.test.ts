import {
  HttpApi,
  HttpApiBuilder,
  HttpApiEndpoint,
  HttpApiGroup,
  HttpLayerRouter
} from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema } from "effect"
import { AuthenticationLive } from "../../src/identity/Authentication.js"
import { createApiKey, loginWithSms, request, type Reply } from "../support/Client.js"
import { TEST_CODE, TEST_PHONE, TestServer } from "../support/TestServer.js"
import { ApiKeyAuthentication, Caller, PlatformAuthentication } from "../../src/identity/Domain.js"

/**
 * Authentication of `/v1` and `/openapi` (issue 2 item 8; spec 4.6, 5.1, 5.3, 7.2) over real HTTP.
 *
 * There are no `/openapi/*` routes yet (they arrive with billing), so this file's server is the real platform
 * (`Routes` with its global middleware, real database and store) plus two probe routes that exist only here: one
 * behind the real `ApiKeyAuthentication`, one behind the real `PlatformAuthentication` inside the end-user route
 * family. Each answers with the `Caller` the middleware resolved.
 */

const CallerView = Schema.Struct({
  userId: Schema.String,
  via: Schema.String,
  apiKeyId: Schema.NullOr(Schema.String),
  endUserId: Schema.NullOr(Schema.String)
})

const OPENAPI_PROBE = "/openapi/probe/whoami"
const FAMILY_PROBE = "/v1/sessions/probe/whoami"

class OpenApiProbe extends HttpApiGroup.make("openapiProbe")
  .add(HttpApiEndpoint.get("whoami", OPENAPI_PROBE).addSuccess(CallerView))
  .middleware(ApiKeyAuthentication)
{}

class PlatformProbe extends HttpApiGroup.make("platformProbe")
  .add(HttpApiEndpoint.get("whoami", FAMILY_PROBE).addSuccess(CallerView))
  .middleware(PlatformAuthentication)
{}

class ProbeApi extends HttpApi.make("probe").add(OpenApiProbe).add(PlatformProbe) {}

const whoami = Effect.map(Caller, (caller) => ({
  userId: caller.userId,
  via: caller.via,
  apiKeyId: Option.getOrNull(caller.apiKeyId),
  endUserId: Option.getOrNull(caller.endUserId)
}))

const ProbeRoutes = HttpLayerRouter.addHttpApi(ProbeApi).pipe(
  Layer.provide([
    HttpApiBuilder.group(ProbeApi, "openapiProbe", (handlers) => handlers.handle("whoami", () => whoami)),
    HttpApiBuilder.group(ProbeApi, "platformProbe", (handlers) => handlers.handle("whoami", () => whoami))
  ]),
  Layer.provide(AuthenticationLive)
)

const ServerWithProbes = TestServer.layer({}, ProbeRoutes)

const assertError = (reply: Reply, status: number, type: string) => {
  assert.strictEqual(reply.status, status, reply.text)
  assert.deepStrictEqual(Object.keys(reply.body), ["error"], reply.text)
  assert.strictEqual(reply.body.error.type, type, reply.text)
  assert.isString(reply.body.error.message)
}

/** A logged-in user with a login token and one API key. */
const account = Effect.gen(function*() {
  const { token } = yield* loginWithSms()
  const apiKey = yield* createApiKey(token, "auth test")
  return { token, key: apiKey.key, keyId: apiKey.id }
})

const revoke = (token: string, id: string) =>
  Effect.gen(function*() {
    const reply = yield* request("POST", "/api/user/apiKey/delete", { token, body: { id } })
    assert.strictEqual(reply.status, 200, reply.text)
  })

/**
 * The route family of spec 5.1 rule 4, one request each, and what the route itself answers once past the end-user
 * check: `[status, error type]` (an error type of null: a success). These bodies are deliberately incomplete for the
 * routes that take one, so the route's own refusal names a field, never the header.
 */
const END_USER_FAMILY = [
  ["POST", "/v1/agents/run", { agent: "x", input: "hi" }, [400, "invalid_request", /message: is missing/]],
  ["POST", "/v1/chat/completions", { model: "builtin", messages: [{ role: "user", content: "hi" }] }, [200, null]],
  ["GET", "/v1/sessions", undefined, [200, null]],
  ["GET", "/v1/sessions?limit=1", undefined, [200, null]],
  ["GET", "/v1/sessions/x/events", undefined, [404, "not_found", /No session x/]],
  ["POST", "/v1/files/upload-url", { filename: "a.txt" }, [400, "invalid_request", /content_type: is missing/]],
  ["POST", "/v1/files", { id: "x" }, [400, "invalid_request", /upload_id: is missing/]]
] as const

const assertMissingEndUser = (reply: Reply) => {
  assertError(reply, 400, "invalid_request")
  const message: string = reply.body.error.message
  assert.isTrue(message.startsWith("Missing required header: X-End-User-Id"), message)
  assert.match(message, /stable/i)
  assert.match(message, /end.user/i)
}

/** Past the end-user check, a request gets the route's own answer, exactly (never the missing-header refusal). */
const assertPastCheck = (
  path: string,
  reply: Reply,
  expected: readonly [number, null] | readonly [number, string, RegExp]
) => {
  assert.strictEqual(reply.status, expected[0], `${path}: ${reply.text}`)
  if (expected[1] === null) {
    assert.notProperty(reply.body, "error", path)
    return
  }
  assertError(reply, expected[0], expected[1])
  assert.match(reply.body.error.message, expected[2], path)
  assert.notMatch(reply.body.error.message, /X-End-User-Id/, path)
}

const assertModels = (reply: Reply) => {
  assert.strictEqual(reply.status, 200, reply.text)
  assert.strictEqual(reply.body.object, "list")
  assert.isArray(reply.body.data)
  const builtin = reply.body.data.find((model: { id: string }) => model.id === "builtin")
  assert.isDefined(builtin, reply.text)
  assert.strictEqual(builtin.object, "model")
}

describe("authentication of /v1 and /openapi", () => {
  it.layer(ServerWithProbes)((it) => {
    it.effect("GET /v1/models answers an API key and a login token (bearer or cookie) with the model list", () =>
      Effect.gen(function*() {
        const { key, token } = yield* account
        assertModels(yield* request("GET", "/v1/models", { token: key }))
        assertModels(yield* request("GET", "/v1/models", { token }))
        assertModels(yield* request("GET", "/v1/models", { headers: { cookie: `token=${token}` } }))
      }))

    it.effect("GET /v1/models without valid credentials is 401 unauthorized", () =>
      Effect.gen(function*() {
        const { key, keyId, token } = yield* account
        assertError(yield* request("GET", "/v1/models"), 401, "unauthorized")
        assertError(yield* request("GET", "/v1/models", { token: "" }), 401, "unauthorized")
        assertError(yield* request("GET", "/v1/models", { token: "garbage" }), 401, "unauthorized")
        assertError(yield* request("GET", "/v1/models", { token: `sk_${"A".repeat(40)}` }), 401, "unauthorized")
        // One character off a real key.
        const altered = key.slice(0, -1) + (key.endsWith("A") ? "B" : "A")
        assertError(yield* request("GET", "/v1/models", { token: altered }), 401, "unauthorized")
        assertError(yield* request("GET", "/v1/models", { headers: { authorization: key } }), 401, "unauthorized")
        assertError(yield* request("GET", "/v1/models", { token: `${key}${"x".repeat(300)}` }), 401, "unauthorized")
        yield* revoke(token, keyId)
        const revoked = yield* request("GET", "/v1/models", { token: key })
        assertError(revoked, 401, "unauthorized")
        assert.match(revoked.body.error.message, /revoked|invalid/i)
      }))

    it.effect("a previous device's login token is refused on /v1", () =>
      Effect.gen(function*() {
        const login = () => request("POST", "/api/auth/login", { body: { phone: TEST_PHONE, code: TEST_CODE } })
        const first = yield* login()
        assert.strictEqual(first.status, 200, first.text)
        assertModels(yield* request("GET", "/v1/models", { token: first.body.token }))
        const second = yield* login()
        assert.strictEqual(second.status, 200, second.text)
        assertError(yield* request("GET", "/v1/models", { token: first.body.token }), 401, "unauthorized")
        assertModels(yield* request("GET", "/v1/models", { token: second.body.token }))
      }))

    it.effect("GET /v1/meters needs no credentials", () =>
      Effect.gen(function*() {
        for (const options of [{}, { token: "garbage" }, { token: "sk_garbage" }]) {
          const reply = yield* request("GET", "/v1/meters", options)
          assert.strictEqual(reply.status, 200, reply.text)
          assert.isArray(reply.body.data)
          assert.isTrue(reply.body.data.length > 0)
          assert.isTrue(reply.body.data.some((meter: { model: string }) => meter.model === "builtin"), reply.text)
        }
      }))

    it.effect("an API key without X-End-User-Id on the end-user routes is 400 Missing required header", () =>
      Effect.gen(function*() {
        const { key } = yield* account
        for (const [method, path, body] of END_USER_FAMILY) {
          assertMissingEndUser(yield* request(method, path, { token: key, body }))
          assertMissingEndUser(yield* request(method, path, { token: key, body, headers: { "x-end-user-id": "" } }))
        }
        assertMissingEndUser(yield* request("GET", FAMILY_PROBE, { token: key }))
      }))

    it.effect("with X-End-User-Id the same requests pass the check", () =>
      Effect.gen(function*() {
        const { key } = yield* account
        for (const [method, path, body, expected] of END_USER_FAMILY) {
          const reply = yield* request(method, path, { token: key, body, headers: { "x-end-user-id": "user-42" } })
          assertPastCheck(path, reply, expected)
        }
      }))

    it.effect("a login token needs no X-End-User-Id on the end-user routes", () =>
      Effect.gen(function*() {
        const { token } = yield* account
        for (const [method, path, body, expected] of END_USER_FAMILY) {
          assertPastCheck(path, yield* request(method, path, { token, body }), expected)
        }
        const probe = yield* request("GET", FAMILY_PROBE, { token })
        assert.strictEqual(probe.status, 200, probe.text)
        assert.strictEqual(probe.body.via, "login")
        assert.strictEqual(probe.body.apiKeyId, null)
        assert.strictEqual(probe.body.endUserId, null)
      }))

    it.effect("the end user reaches the caller; the key's account stays the payer", () =>
      Effect.gen(function*() {
        const { key, keyId, token } = yield* account
        const viaKey = yield* request("GET", FAMILY_PROBE, { token: key, headers: { "x-end-user-id": "eu:42@app.example" } })
        assert.strictEqual(viaKey.status, 200, viaKey.text)
        assert.strictEqual(viaKey.body.via, "api_key")
        assert.strictEqual(viaKey.body.apiKeyId, keyId)
        assert.strictEqual(viaKey.body.endUserId, "eu:42@app.example")
        const viaLogin = yield* request("GET", FAMILY_PROBE, { token })
        assert.strictEqual(viaLogin.body.userId, viaKey.body.userId)
        const stranger = yield* account
        const other = yield* request("GET", FAMILY_PROBE, { token: stranger.key, headers: { "x-end-user-id": "eu:42@app.example" } })
        assert.notStrictEqual(other.body.userId, viaKey.body.userId)
      }))

    it.effect("an API key in the login cookie or under another scheme does not slip past the X-End-User-Id rule", () =>
      Effect.gen(function*() {
        const { key } = yield* account
        const reply = yield* request("GET", FAMILY_PROBE, { headers: { cookie: `token=${key}` } })
        assert.include([400, 401], reply.status, reply.text)
        assert.notStrictEqual(reply.body?.via, "api_key")
        // Nor in an Authorization header of another scheme (HttpApi's bearer decoder ignores the scheme).
        for (const authorization of [`Token: ${key}`, `Basic  ${key}`]) {
          const other = yield* request("GET", FAMILY_PROBE, { headers: { authorization } })
          assert.include([400, 401], other.status, other.text)
          assert.notStrictEqual(other.body?.via, "api_key")
          assertError(yield* request("GET", "/v1/models", { headers: { authorization } }), 401, "unauthorized")
          assertError(yield* request("GET", OPENAPI_PROBE, { headers: { authorization } }), 401, "unauthorized")
        }
        // The cookie carries login tokens only; API keys travel as `Authorization: Bearer` (spec 5.1 rule 1).
        assertError(yield* request("GET", "/v1/models", { headers: { cookie: `token=${key}` } }), 401, "unauthorized")
      }))

    it.effect("outside the family an API key needs no X-End-User-Id", () =>
      Effect.gen(function*() {
        const { key } = yield* account
        assertModels(yield* request("GET", "/v1/models", { token: key }))
        assertModels(yield* request("GET", "/v1/models?x=/v1/chat/", { token: key }))
      }))

    it.effect("an X-End-User-Id that is not 1-128 of [A-Za-z0-9._:@-] is 400 invalid_request", () =>
      Effect.gen(function*() {
        const { key, token } = yield* account
        for (const bad of ["a".repeat(129), "a b", "a/b", "ü", "a,b", "<x>"]) {
          for (const credential of [key, token]) {
            const reply = yield* request("GET", "/v1/models", { token: credential, headers: { "x-end-user-id": bad } })
            assertError(reply, 400, "invalid_request")
            assert.include(reply.body.error.message, "X-End-User-Id")
          }
          const family = yield* request("GET", FAMILY_PROBE, { token: key, headers: { "x-end-user-id": bad } })
          assert.strictEqual(family.status, 400, `${bad}: ${family.text}`)
          assert.notInclude(family.body.error.message, "Missing required header", bad)
        }
        for (const good of ["a", "a".repeat(128), "AZaz09._:@-", "user@example.com", "tenant:42"]) {
          assertModels(yield* request("GET", "/v1/models", { token: key, headers: { "x-end-user-id": good } }))
        }
      }))

    it.effect("/openapi takes an API key and nothing else", () =>
      Effect.gen(function*() {
        const { key, keyId, token } = yield* account
        const ok = yield* request("GET", OPENAPI_PROBE, { token: key })
        assert.strictEqual(ok.status, 200, ok.text)
        assert.strictEqual(ok.body.via, "api_key")
        assert.strictEqual(ok.body.apiKeyId, keyId)
        const viaLogin = yield* request("GET", FAMILY_PROBE, { token })
        assert.strictEqual(ok.body.userId, viaLogin.body.userId)

        assertError(yield* request("GET", OPENAPI_PROBE), 401, "unauthorized")
        assertError(yield* request("GET", OPENAPI_PROBE, { token }), 401, "unauthorized")
        assertError(yield* request("GET", OPENAPI_PROBE, { headers: { cookie: `token=${token}` } }), 401, "unauthorized")
        assertError(yield* request("GET", OPENAPI_PROBE, { headers: { cookie: `token=${key}` } }), 401, "unauthorized")
        assertError(yield* request("GET", OPENAPI_PROBE, { token: `sk_${"A".repeat(40)}` }), 401, "unauthorized")
        yield* revoke(token, keyId)
        assertError(yield* request("GET", OPENAPI_PROBE, { token: key }), 401, "unauthorized")
      }))
  })
})
