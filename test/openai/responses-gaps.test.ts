import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import { TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, LIVE, newUser } from "../runs/runs-support.js"
import { openAiClient, rejection } from "./support.js"

/** Issue 30 item 4: what OpenAI's clients expect of the Responses API and of `/v1/models`, offline. */

describe("Responses API gaps", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("responses.delete, then a 404; a conversation goes on with new tools and instructions", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const { client } = yield* openAiClient(yield* apiKeyOf(user))
        const first = yield* Effect.promise(() => client.responses.create({ model: agent, input: "hello" }))
        assert.match(first.conversation!.id, /^ses_/)

        // New instructions and the caller's tool: the session's history goes on statelessly, from this turn.
        const second = yield* Effect.promise(() =>
          client.responses.create({
            model: agent,
            previous_response_id: first.id,
            instructions: "Be brief.",
            input: `/tool get_weather {"city":"Oslo"}`,
            tools: [{ type: "function", name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } }, strict: false }]
          })
        )
        const call = second.output.find((item) => item.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall
        assert.strictEqual(call.name, "get_weather")
        const third = yield* Effect.promise(() =>
          client.responses.create({
            model: agent,
            previous_response_id: second.id,
            input: [{ type: "function_call_output", call_id: call.call_id, output: "sunny" }]
          })
        )
        assert.strictEqual(third.output_text, "get_weather returned: sunny")
        const history = yield* Effect.promise(() => client.responses.create({ model: agent, previous_response_id: third.id, input: "/history" }))
        // hello, its answer, the tool turn's user message and call, and the answer from the tool's result.
        assert.strictEqual(history.output_text, "I see 5 earlier messages.")

        const deleted = yield* Effect.promise(() => client.responses.delete(first.id))
        assert.deepInclude(deleted as unknown as object, { id: first.id, deleted: true })
        assert.instanceOf(yield* rejection(() => client.responses.retrieve(first.id)), OpenAI.NotFoundError)
        assert.instanceOf(yield* rejection(() => client.responses.delete(first.id)), OpenAI.NotFoundError)
      }))

    it.effect("/v1/models lists the agents the caller can run; models.retrieve answers models and agents", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const { client } = yield* openAiClient(yield* apiKeyOf(user))
        const ids = yield* Effect.promise(async () => {
          const found: Array<string> = []
          for await (const model of client.models.list()) found.push(model.id)
          return found
        })
        assert.include(ids, "builtin")
        assert.include(ids, agent)
        const retrieved = yield* Effect.promise(() => client.models.retrieve(agent))
        assert.strictEqual(retrieved.id, agent)
        assert.strictEqual(retrieved.object, "model")
        assert.strictEqual((yield* Effect.promise(() => client.models.retrieve("builtin"))).id, "builtin")
        assert.instanceOf(yield* rejection(() => client.models.retrieve("nothing-by-this-name")), OpenAI.NotFoundError)
      }))
  })
})
