import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { IDEMPOTENT_CREATES } from "../../src/platform/http/Idempotency.js"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { apiKeyOf, ENV, LIVE, newUser } from "../runs/runs-support.js"

/**
 * Issue 16 item 4: `Idempotency-Key` on the POSTs that create something. Before, two `POST /v1/agents` with the same
 * key made two agents.
 */
describe("Idempotency-Key on creates", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    const agentsOf = (token: string) =>
      Effect.map(request("GET", "/v1/agents", { token }), (reply) => reply.body.data.map((agent: any) => agent.identifier) as Array<string>)

    it.effect("the same key and body answer the first response again; the thing is made once", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const body = { name: "Once only", category: "coding" }
        const headers = { "idempotency-key": "create-agent-1" }
        const first = yield* request("POST", "/v1/agents", { token: user.token, body, headers })
        assert.strictEqual(first.status, 201, first.text)
        assert.isNull(first.headers.get("idempotent-replayed"))
        const again = yield* request("POST", "/v1/agents", { token: user.token, body, headers })
        assert.strictEqual(again.status, 201)
        assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
        assert.deepStrictEqual(again.body, first.body)
        assert.deepStrictEqual(yield* agentsOf(user.token), [first.body.identifier])

        // Without a key, each POST is a new agent, as before.
        yield* request("POST", "/v1/agents", { token: user.token, body })
        assert.strictEqual((yield* agentsOf(user.token)).length, 2)
      }))

    it.effect("the same key with another body is a 409 that changes nothing; a refused request leaves the key free", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const headers = { "idempotency-key": "create-agent-2" }
        const refused = yield* request("POST", "/v1/agents", { token: user.token, body: { name: "Bad", category: "astrology" }, headers })
        assert.strictEqual(refused.status, 400)
        const made = yield* request("POST", "/v1/agents", { token: user.token, body: { name: "Good", category: "coding" }, headers })
        assert.strictEqual(made.status, 201, made.text)
        const other = yield* request("POST", "/v1/agents", { token: user.token, body: { name: "Other", category: "coding" }, headers })
        assert.strictEqual(other.status, 409)
        assert.strictEqual(other.body.error.type, "idempotency_conflict")
        assert.deepStrictEqual(yield* agentsOf(user.token), [made.body.identifier])

        const malformed = yield* request("POST", "/v1/agents", {
          token: user.token,
          body: { name: "Good", category: "coding" },
          headers: { "idempotency-key": "x".repeat(256) }
        })
        assert.strictEqual(malformed.status, 400)
        assert.strictEqual(malformed.body.error.type, "invalid_request")
      }))

    it.effect("concurrent requests with one key make one thing; keys are the account's, per end user", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const body = { name: "Raced", category: "coding" }
        const headers = { "idempotency-key": "raced-key" }
        const replies = yield* Effect.all(
          Array.from({ length: 8 }, () => request("POST", "/v1/agents", { token: user.token, body, headers })),
          { concurrency: "unbounded" }
        )
        // Each is the one creation, its replay, or "still being answered" (409) while the first runs.
        for (const reply of replies) assert.include([201, 409], reply.status, reply.text)
        const created = replies.filter((reply) => reply.status === 201)
        assert.isAbove(created.length, 0)
        assert.strictEqual(new Set(created.map((reply) => reply.body.identifier)).size, 1)
        assert.deepStrictEqual(yield* agentsOf(user.token), [created[0]!.body.identifier])

        // Keys are the account's, partitioned by end user: another end user's same key makes its own session, and
        // the account's other API key meets the stored answer.
        const agent = created[0]!.body.identifier as string
        const [firstKey, secondKey] = [yield* apiKeyOf(user), yield* apiKeyOf(user)]
        const session = (apiKey: string, endUser: string) =>
          request("POST", "/v1/sessions", {
            token: apiKey,
            body: { agent },
            headers: { "idempotency-key": "raced-key", "x-end-user-id": endUser }
          })
        const a = yield* session(firstKey, "alice")
        const b = yield* session(firstKey, "bob")
        const aAgain = yield* session(secondKey, "alice")
        assert.strictEqual(a.status, 201, a.text)
        assert.strictEqual(b.status, 201, b.text)
        assert.notStrictEqual(a.body.id, b.body.id)
        assert.strictEqual(aAgain.body.id, a.body.id)
        assert.strictEqual(aAgain.headers.get("idempotent-replayed"), "true")

        // Another account's same key is its own.
        const other = yield* newUser
        const theirs = yield* request("POST", "/v1/agents", { token: other.token, body, headers })
        assert.strictEqual(theirs.status, 201, theirs.text)
        assert.isNull(theirs.headers.get("idempotent-replayed"))
        assert.deepStrictEqual(yield* agentsOf(other.token), [theirs.body.identifier])
      }))

    it.effect("every POST that answers 201 Created honours the key, but those whose answer holds a secret shown once", () =>
      Effect.gen(function*() {
        const spec = (yield* request("GET", "/openapi.json")).body as Record<string, any>
        const creates = Object.entries<Record<string, any>>(spec.paths)
          .filter(([, operations]) => operations.post?.responses?.["201"] !== undefined)
          .map(([path]) => path.replace(/\{(\w+)\}/g, ":$1"))
        // /api/apps answers the app's client secret, once; /v1/webhooks keeps its own key beside the endpoint, so a
        // retried create answers its secret again without the answer being stored in clear (src/webhooks/Webhooks.ts).
        assert.sameMembers([...IDEMPOTENT_CREATES, "/api/apps", "/v1/webhooks"], creates)
        yield* TestServer
      }))
  })
})
