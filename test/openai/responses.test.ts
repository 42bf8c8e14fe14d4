import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import { TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, LIVE, newUser } from "../runs/runs-support.js"
import { openAiClient, rejection } from "./support.js"

/**
 * Issue 16 item 2 through the official `openai` SDK: `/v1/responses` created streamed and not, continued with
 * `previous_response_id` (an agent's conversation is a session), retrieved, listed (input items), cancelled; the
 * caller's function tools over Responses; `models.retrieve`; a failing response is one HTTP call.
 */

const WEATHER: OpenAI.Responses.FunctionTool = {
  type: "function",
  name: "get_weather",
  description: "The weather in a city.",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
  strict: true
}

describe("openai: responses", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("create, continue with previous_response_id in the agent's session, retrieve, input items", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const { client } = yield* openAiClient(yield* apiKeyOf(user))
        const first = yield* Effect.promise(() => client.responses.create({ model: agent, input: "hello there" }))
        assert.strictEqual(first.object, "response")
        assert.strictEqual(first.status, "completed")
        assert.strictEqual(first.output_text, "You said: hello there")
        assert.match(first.id, /^resp_/)
        const conversation = (first as any).conversation?.id as string
        assert.match(conversation, /^ses_/, "an agent's conversation is a session")
        assert.isAbove(first.usage!.output_tokens, 0)
        assert.strictEqual(first.usage!.total_tokens, first.usage!.input_tokens + first.usage!.output_tokens)

        const second = yield* Effect.promise(() => client.responses.create({ model: agent, input: "/history", previous_response_id: first.id }))
        assert.strictEqual(second.output_text, "I see 2 earlier messages.")
        assert.strictEqual((second as any).conversation.id, conversation)
        assert.strictEqual(second.previous_response_id, first.id)

        // The session is the platform's own: its history has both turns, user and assistant each.
        const server = yield* TestServer
        const key = yield* apiKeyOf(user)
        const session = yield* Effect.promise(() =>
          fetch(`${server.url}/v1/sessions/${conversation}`, { headers: { authorization: `Bearer ${key}`, "x-end-user-id": "u1" } })
            .then(async (r) => ({ status: r.status, body: await r.json() as any }))
        )
        assert.strictEqual(session.status, 200)
        assert.deepStrictEqual(session.body.messages.map((m: any) => m.role), ["user", "assistant", "user", "assistant"])

        const third = yield* Effect.promise(() => client.responses.create({ model: agent, input: "/history", conversation }))
        assert.strictEqual(third.output_text, "I see 4 earlier messages.")

        const retrieved = yield* Effect.promise(() => client.responses.retrieve(second.id))
        assert.strictEqual(retrieved.id, second.id)
        assert.strictEqual(retrieved.status, "completed")
        assert.strictEqual(retrieved.output_text, "I see 2 earlier messages.")
        // A chained response's input items are the conversation on its branch before it, then its own input.
        const items = yield* Effect.promise(() => client.responses.inputItems.list(second.id))
        assert.deepStrictEqual(items.data.map((i: any) => [i.role, i.content[0].text]), [
          ["user", "hello there"],
          ["assistant", "You said: hello there"],
          ["user", "/history"]
        ])
        const item = items.data[2] as OpenAI.Responses.ResponseInputMessageItem
        assert.strictEqual(item.type, "message")
        assert.strictEqual(item.role, "user")
        assert.deepStrictEqual(item.content, [{ type: "input_text", text: "/history" }])

        const missing = yield* rejection(() => client.responses.retrieve("resp_nothing"))
        assert.instanceOf(missing, OpenAI.NotFoundError)
        // Someone else's response is as missing as one that never was.
        const other = yield* openAiClient(yield* apiKeyOf(yield* newUser))
        assert.instanceOf(yield* rejection(() => other.client.responses.retrieve(first.id)), OpenAI.NotFoundError)
        const badPrevious = yield* rejection(() => other.client.responses.create({ model: agent, input: "hi", previous_response_id: first.id }))
        assert.instanceOf(badPrevious, OpenAI.BadRequestError)
        assert.strictEqual((badPrevious as any).param, "previous_response_id")
      }))

    it.effect("streamed: the SDK's stream helper reads the response.* events to the final response", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const { client } = yield* openAiClient(yield* apiKeyOf(user))
        const run = (body: OpenAI.Responses.ResponseCreateParamsStreaming) =>
          Effect.promise(async () => {
            const stream = client.responses.stream(body)
            const types: Array<string> = []
            let text = ""
            for await (const event of stream) {
              types.push(event.type)
              if (event.type === "response.output_text.delta") text += event.delta
            }
            return { types, text, final: await stream.finalResponse() }
          })
        const first = yield* run({ model: agent, input: "stream a reply please", stream: true })
        assert.strictEqual(first.text, "You said: stream a reply please")
        assert.strictEqual(first.final.output_text, first.text)
        assert.strictEqual(first.final.status, "completed")
        assert.strictEqual(first.types[0], "response.created")
        assert.strictEqual(first.types[first.types.length - 1], "response.completed")
        assert.isAbove(first.types.filter((type) => type === "response.output_text.delta").length, 1)
        for (const type of ["response.in_progress", "response.output_item.added", "response.content_part.added", "response.output_text.done", "response.output_item.done"]) {
          assert.include(first.types, type)
        }
        const second = yield* run({ model: agent, input: "/history", previous_response_id: first.final.id, stream: true })
        assert.strictEqual(second.text, "I see 2 earlier messages.")
      }))

    it.effect("the caller's function tools: a function_call item, then function_call_output continues", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const { client } = yield* openAiClient(yield* apiKeyOf(user))
        const first = yield* Effect.promise(() =>
          client.responses.create({ model: "builtin", input: `/tool get_weather {"city":"Oslo"}`, tools: [WEATHER], tool_choice: "required" })
        )
        const call = first.output.find((item): item is OpenAI.Responses.ResponseFunctionToolCall => item.type === "function_call")
        assert.isDefined(call, JSON.stringify(first.output))
        assert.strictEqual(call!.name, "get_weather")
        assert.deepStrictEqual(JSON.parse(call!.arguments), { city: "Oslo" })
        assert.strictEqual((first as any).conversation, null, "a bare model's conversation is kept with the response")

        const second = yield* Effect.promise(() =>
          client.responses.create({
            model: "builtin",
            tools: [WEATHER],
            previous_response_id: first.id,
            input: [{ type: "function_call_output", call_id: call!.call_id, output: "snow" }]
          })
        )
        assert.strictEqual(second.output_text, "get_weather returned: snow")

        // Streamed: the call's arguments arrive as deltas.
        const streamed = yield* Effect.promise(async () => {
          const stream = client.responses.stream({ model: "builtin", input: `/tool get_weather {"city":"Rome"}`, tools: [WEATHER] })
          const deltas: Array<string> = []
          for await (const event of stream) if (event.type === "response.function_call_arguments.delta") deltas.push(event.delta)
          return { deltas, final: await stream.finalResponse() }
        })
        assert.strictEqual(streamed.deltas.join(""), `{"city":"Rome"}`)
        const fc = streamed.final.output.find((item) => item.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall
        assert.strictEqual(fc.arguments, `{"city":"Rome"}`)

        const refused = yield* rejection(() => client.responses.create({ model: "builtin", input: "hi", tools: [{ type: "web_search" } as any] }))
        assert.instanceOf(refused, OpenAI.BadRequestError)
        assert.strictEqual((refused as any).param, "tools[0].type")
        const image = yield* rejection(() =>
          client.responses.create({
            model: "builtin",
            input: [{ role: "user", content: [{ type: "input_image", image_url: "https://example.com/a.png", detail: "auto" }] }]
          })
        )
        assert.strictEqual((image as any).param, "input[0].content[0]")
      }))

    it.effect("models.retrieve; a failing response is one HTTP call, told as status failed", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const { calls, client } = yield* openAiClient(yield* apiKeyOf(user), { maxRetries: 2 })
        const model = yield* Effect.promise(() => client.models.retrieve("builtin"))
        assert.strictEqual(model.id, "builtin")
        assert.strictEqual(model.object, "model")
        assert.instanceOf(yield* rejection(() => client.models.retrieve("no-such-model")), OpenAI.NotFoundError)

        calls.length = 0
        const failed = yield* Effect.promise(() => client.responses.create({ model: agent, input: "/fail the model broke" }))
        assert.strictEqual(failed.status, "failed")
        assert.strictEqual(failed.error?.code as string, "model_error")
        assert.strictEqual(calls.length, 1, calls.join(", "))
        // The stream tells an `error` event (then `response.failed`): the SDK raises the first.
        const types: Array<string> = []
        const raised = yield* rejection(async () => {
          for await (const event of await client.responses.create({ model: agent, input: "/fail again", stream: true })) types.push(event.type)
        })
        assert.strictEqual(types[0], "response.created")
        assert.notInclude(types, "response.completed")
        assert.instanceOf(raised, OpenAI.APIError)
        assert.strictEqual((raised as any).code, "model_error")
        assert.strictEqual(calls.length, 2, calls.join(", "))
      }))

    it.effect("cancel stops a response in progress in a session", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const { client } = yield* openAiClient(yield* apiKeyOf(user))
        const outcome = yield* Effect.promise(async () => {
          const stream = await client.responses.create({ model: agent, input: "/slow 200", stream: true })
          let id = ""
          let cancelled: OpenAI.Responses.Response | undefined
          let last = ""
          for await (const event of stream) {
            last = event.type
            if (event.type === "response.created") id = event.response.id
            if (event.type === "response.output_text.delta" && cancelled === undefined) cancelled = await client.responses.cancel(id)
          }
          return { id, cancelled: cancelled!, last }
        })
        assert.strictEqual(outcome.cancelled.status, "cancelled")
        assert.strictEqual(outcome.last, "response.failed", "the stream ends when the turn is interrupted")
        const retrieved = yield* Effect.promise(() => client.responses.retrieve(outcome.id))
        assert.strictEqual(retrieved.status, "cancelled")
      }))
  })
})
