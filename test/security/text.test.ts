import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { loginWithSms, request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"

/**
 * Issue 15 item 7, replayed: text the database refuses (NUL, lone surrogates) anywhere in a body, a path or a query,
 * and JSON nested 10,000 deep, were 500s with a stack trace in the log. Each is 400 `invalid_request` naming the
 * field, and nothing is created.
 */

const assertInvalid = (reply: { status: number; text: string; body: any }, field: string) => {
  assert.strictEqual(reply.status, 400, reply.text)
  assert.strictEqual(reply.body.error.type, "invalid_request", reply.text)
  assert.include(reply.body.error.message, field, reply.text)
}

describe("security: text the database refuses", () => {
  it.layer(TestServer.layer())((it) => {
    it.effect("NUL or a lone surrogate in a body field is 400 naming the field; nothing is created", () =>
      Effect.gen(function*() {
        const user = yield* loginWithSms()
        const cases: ReadonlyArray<readonly [string, unknown, string]> = [
          ["/v1/agents", { name: "a\u0000b" }, "name"],
          ["/v1/agents", { name: "ok", description: "x\ud800y" }, "description"],
          ["/v1/agents", { name: "ok", description: "\udc00" }, "description"],
          ["/v1/environments", { name: "env\u0000" }, "name"],
          ["/v1/environments", { name: "env", env: { "K\u0000": "v" } }, "env.K"],
          ["/v1/sessions", { agent: "x\ud800" }, "agent"],
          ["/v1/sessions", { agent: "x", metadata: { tags: ["ok", "bad\u0000"] } }, "metadata.tags.1"],
          ["/api/user/apiKey/create", { name: "k\u0000" }, "name"]
        ]
        for (const [path, body, field] of cases) assertInvalid(yield* request("POST", path, { token: user.token, body }), field)
        const agents = yield* request("GET", "/v1/agents", { token: user.token })
        assert.strictEqual(agents.status, 200, agents.text)
        assert.deepStrictEqual(agents.body.data, [])
        const keys = yield* request("POST", "/api/user/apiKey/list", { token: user.token })
        assert.deepStrictEqual(keys.body.data, [])
        // Well-formed text, astral characters (surrogate pairs) included, is fine.
        const fine = yield* request("POST", "/v1/agents", { token: user.token, body: { name: "ok 🙂", description: "é\u2028" } })
        assert.strictEqual(fine.status, 201, fine.text)
      }))

    it.effect("NUL in a path parameter or a query parameter is 400 naming it", () =>
      Effect.gen(function*() {
        const user = yield* loginWithSms()
        assertInvalid(yield* request("GET", "/v1/agents/%00", { token: user.token }), "path")
        assertInvalid(yield* request("GET", "/v1/sessions/ses_%00x", { token: user.token }), "path")
        assertInvalid(yield* request("GET", "/api/market/agents?keyword=a%00b"), "keyword")
        assertInvalid(yield* request("GET", "/api/market/skills?keyword=%00"), "keyword")
      }))

    it.effect("session metadata nested 10,000 deep is 400 naming the field, not a 500", () =>
      Effect.gen(function*() {
        const user = yield* loginWithSms()
        const deep = `{"agent":"x","metadata":{"a":${"[".repeat(10_000)}1${"]".repeat(10_000)}}}`
        assertInvalid(yield* request("POST", "/v1/sessions", { token: user.token, raw: deep }), "metadata.a")
        const sessions = yield* request("GET", "/v1/sessions", { token: user.token })
        assert.deepStrictEqual(sessions.body.data, [])
      }))
  })
})
