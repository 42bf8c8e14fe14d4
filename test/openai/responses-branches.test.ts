import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, LIVE, newUser } from "../runs/runs-support.js"
import { openAiClient } from "./support.js"

/**
 * Issue 44 item 2 through the official `openai` SDK: `previous_response_id` is a branch point, as OpenAI has it. A
 * `responses.create` that times out and is retried by the SDK (no `Idempotency-Key`: the SDK sends none by default)
 * makes sibling responses under the one it continues, so the chain a client goes on with holds that step once.
 */

const SLOW = "/slow 15"

describe("openai: responses branch at previous_response_id", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("timed-out retries make siblings; the chain continued from the final response has one turn for that step", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const apiKey = yield* apiKeyOf(user)
        const server = yield* TestServer
        const { client } = yield* openAiClient(apiKey)
        const first = yield* Effect.promise(() => client.responses.create({ model: agent, input: "hello" }))
        const session = first.conversation!.id

        // 15 increments of 100 ms: every attempt (1 s) times out and the SDK retries it, twice, with no key.
        const attempts: Array<string> = []
        const impatient = new OpenAI({
          apiKey,
          baseURL: `${server.url}/v1`,
          timeout: 1000,
          maxRetries: 2,
          defaultHeaders: { "X-End-User-Id": "u1" },
          fetch: (input: any, init?: any) => {
            attempts.push(new Headers(init?.headers).get("idempotency-key") ?? "none")
            return fetch(input, init)
          }
        })
        const body = { model: agent, input: SLOW, previous_response_id: first.id }
        const outcome = yield* Effect.promise(() => impatient.responses.create(body).then((r) => r, (e: unknown) => e))
        assert.instanceOf(outcome, OpenAI.APIConnectionTimeoutError)
        assert.deepStrictEqual(attempts, ["none", "none", "none"], "three attempts, none with a key")

        // The client tries once more, patiently: a fourth sibling, which it gets.
        const final = yield* Effect.promise(() => client.responses.create(body, { timeout: 60_000 }))
        assert.strictEqual(final.status, "completed")
        assert.strictEqual(final.previous_response_id, first.id)
        const next = yield* Effect.promise(() => client.responses.create({ model: agent, input: "/history", previous_response_id: final.id }))
        assert.strictEqual(next.output_text, "I see 4 earlier messages.", "the model saw hello, its answer, one slow step and its answer")

        // The chain as input_items lists it: the slow step once.
        const items = yield* Effect.promise(() => client.responses.inputItems.list(next.id, { limit: 100 }))
        const texts = items.data.map((item: any) => item.content?.[0]?.text)
        assert.deepStrictEqual(texts.filter((text) => text === SLOW), [SLOW], JSON.stringify(texts))
        assert.deepStrictEqual(texts, ["hello", "You said: hello", SLOW, final.output_text, "/history"])

        // The session holds all four attempts, as siblings under the first turn; its leaf is the chain's end.
        const tree = yield* request("GET", `/v1/sessions/${session}/tree`, { token: apiKey, headers: { "x-end-user-id": "u1" } })
        assert.strictEqual(tree.status, 200, tree.text)
        const turns = tree.body.turns as Array<any>
        const slowTurns = turns.filter((turn) => turn.message_preview === SLOW)
        // Each attempt the server received is a turn; under load an attempt cut at 1 s can be cut before its request
        // reached a session (seen with three test workers on two cores: 3 turns), so the patient one and at least one
        // cut one, at most all four.
        assert.isAtLeast(slowTurns.length, 2, JSON.stringify(turns))
        assert.isAtMost(slowTurns.length, 4, JSON.stringify(turns))
        assert.isTrue(slowTurns.every((turn) => turn.parent_turn === 1), JSON.stringify(turns))
        const view = yield* request("GET", `/v1/sessions/${session}`, { token: apiKey, headers: { "x-end-user-id": "u1" } })
        assert.deepStrictEqual(view.body.messages.filter((m: any) => m.role === "user").map((m: any) => m.content), ["hello", SLOW, "/history"])
        assert.strictEqual(tree.body.leaf, view.body.leaf)

        // `conversation` continues the current leaf.
        const more = yield* Effect.promise(() => client.responses.create({ model: agent, input: "/history", conversation: session }))
        assert.strictEqual(more.output_text, "I see 6 earlier messages.")
        // A response earlier in the chain is a branch point too: continuing from `first` skips the rest.
        const fromFirst = yield* Effect.promise(() => client.responses.create({ model: agent, input: "/history", previous_response_id: first.id }))
        assert.strictEqual(fromFirst.output_text, "I see 2 earlier messages.")
      }))
  })
})
