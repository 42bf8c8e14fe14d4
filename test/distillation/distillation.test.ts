import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { assertError, balanceOf, ENV, getAgent, LIVE, newUser } from "../agents/agents-support.js"
import { micros } from "../billing/billing-support.js"
import { createApiKey, request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"

/**
 * Distillation over HTTP (`/v1/distillations`): the same conversations the MCP tools hold (test/mcp/engine.test.ts),
 * started, continued, read back and listed; the caller's own only; each message one billed run.
 */

const materials = [
  { filename: "style.md", content: "# House style\n\nWrite short sentences. Prefer active verbs to passive ones.\n\n## Headlines\n\nHeadlines use sentence case." }
]

const start = (token: string, body: unknown) => request("POST", "/v1/distillations", { token, body })
const say = (token: string, id: string, message: string) =>
  request("POST", `/v1/distillations/${id}/messages`, { token, body: { message } })

describe("distillation over HTTP", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.scoped("start, continue, create, read back and list", () =>
      Effect.gen(function*() {
        const me = yield* newUser
        const before = yield* balanceOf(me.token)
        const started = yield* start(me.token, { topic: "house style for editors", materials })
        assert.strictEqual(started.status, 201, started.text)
        const id: string = started.body.sessionId
        assert.match(id, /^dst_/)
        assert.strictEqual(started.body.draft.category, "writing")
        assert.include(started.body.draft.instructions, "- Write short sentences. (style.md)")
        assert.include(started.body.draft.instructions, "Sections: House style; Headlines")
        assert.strictEqual(started.body.turns, 1)
        const charged = started.body.run.credits_charged
        assert.isAbove(charged, 0)
        assert.strictEqual(micros(yield* balanceOf(me.token)), micros(before) - micros(charged))

        const named = yield* say(me.token, id, "name: Style Desk\nQuote the house style when you correct something.")
        assert.strictEqual(named.status, 200, named.text)
        assert.strictEqual(named.body.draft.name, "Style Desk")
        const created = yield* say(me.token, id, "create")
        assert.strictEqual(created.status, 200, created.text)
        const identifier = created.body.agent.identifier
        assert.isTrue(created.body.agent.created)
        const agent = (yield* getAgent(me.token, identifier)).body
        assert.strictEqual(agent.name, "Style Desk")
        assert.include(agent.instructions, "Quote the house style when you correct something.")

        const transcript = yield* request("GET", `/v1/distillations/${id}`, { token: me.token })
        assert.strictEqual(transcript.status, 200, transcript.text)
        assert.deepStrictEqual(transcript.body.agent, { identifier })
        assert.strictEqual(transcript.body.turns, 3)
        assert.deepStrictEqual(transcript.body.messages.map((m: any) => m.role), ["user", "assistant", "user", "assistant", "user", "assistant"])
        assert.strictEqual(transcript.body.messages[2].content, "name: Style Desk\nQuote the house style when you correct something.")
        assert.match(transcript.body.messages[1].run_id, /^run_/)
        assert.deepStrictEqual(transcript.body.materials, [{ filename: "style.md", bytes: Buffer.byteLength(materials[0]!.content) }])
        assert.notProperty(transcript.body.materials[0], "content")

        const list = yield* request("GET", "/v1/distillations", { token: me.token })
        assert.strictEqual(list.status, 200, list.text)
        assert.deepStrictEqual(list.body.data.map((d: any) => d.sessionId), [id])

        // An API key of the same account sees the same conversations.
        const key = yield* createApiKey(me.token)
        assert.strictEqual((yield* request("GET", `/v1/distillations/${id}`, { token: key.key })).status, 200)
      }))

    it.scoped("someone else's distillation is not found; bad input is 400 and runs nothing", () =>
      Effect.gen(function*() {
        const me = yield* newUser
        const other = yield* newUser
        const started = yield* start(me.token, { topic: "style", materials })
        const id: string = started.body.sessionId
        assertError(yield* say(other.token, id, "name: Mine"), 404, "not_found")
        assertError(yield* request("GET", `/v1/distillations/${id}`, { token: other.token }), 404, "not_found")
        // An id of another kind is a distillation that is not there: 404, not 400.
        assertError(yield* request("GET", "/v1/distillations/sug_nope", { token: me.token }), 404, "not_found")
        assert.deepStrictEqual((yield* request("GET", "/v1/distillations", { token: other.token })).body.data, [])
        assertError(yield* request("GET", `/v1/distillations/${id}`), 401, "unauthorized")

        const balance = yield* balanceOf(me.token)
        const tooMany = yield* start(me.token, { topic: "style", materials: Array(21).fill(materials[0]) })
        assertError(tooMany, 400, "invalid_request")
        assert.include(tooMany.body.error.message, "at most 20 files")
        assertError(yield* start(me.token, { topic: "   ", materials }), 400, "invalid_request")
        assertError(yield* start(me.token, { topic: "style" }), 400, "invalid_request")
        assertError(yield* say(me.token, id, ""), 400, "invalid_request")
        assert.strictEqual(yield* balanceOf(me.token), balance)
      }))

    it.scoped("a run that cannot be paid fails the message and leaves the conversation as it was", () =>
      Effect.gen(function*() {
        const me = yield* newUser
        const started = yield* start(me.token, { topic: "style", materials })
        const id: string = started.body.sessionId
        // Spend the wallet down to nothing through the platform's own credit API, then try again.
        const balance = yield* balanceOf(me.token)
        const key = yield* createApiKey(me.token)
        const spent = yield* request("POST", "/openapi/credit/consume", {
          token: key.key,
          body: { amount: balance, idempotency_key: `drain-${id}`, description: "drain" }
        })
        assert.strictEqual(spent.status, 200, spent.text)
        assert.strictEqual(yield* balanceOf(me.token), 0)
        const refused = yield* say(me.token, id, "name: Broke")
        assertError(refused, 502, "distillation_failed")
        assert.include(refused.body.error.message, "budget_exhausted")
        const after = (yield* request("GET", `/v1/distillations/${id}`, { token: me.token })).body
        assert.strictEqual(after.turns, 1)
        assert.notStrictEqual(after.draft.name, "Broke")
      }))
  })
})
