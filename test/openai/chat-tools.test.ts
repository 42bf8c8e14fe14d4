import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import { CATEGORIES } from "../../src/agents/Agent.js"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, LIVE, newUser } from "../runs/runs-support.js"
import { openAiClient, rejection, WEATHER } from "./support.js"

/**
 * Issue 16 item 1 and 3 through the official `openai` SDK: the caller's function tools (the builtin model calls one
 * by the `/tool NAME {json}` directive), `tool_calls` streamed and not, `role: "tool"` messages continuing the
 * exchange, parameters the platform cannot honour refused with `param`, and a failed run that the SDK does not retry.
 */

const ASK = `/tool get_weather {"city":"Paris"}`

describe("openai: chat completions with tools", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("a tool call comes back with finish_reason tool_calls; the tool's result continues the exchange", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const { client } = yield* openAiClient(yield* apiKeyOf(user))
        const messages: Array<OpenAI.Chat.Completions.ChatCompletionMessageParam> = [
          { role: "system", content: "Use the tools." },
          { role: "user", content: ASK }
        ]
        const first = yield* Effect.promise(() =>
          client.chat.completions.create({ model: agent, messages, tools: [WEATHER], tool_choice: "required" })
        )
        const choice = first.choices[0]!
        assert.strictEqual(choice.finish_reason, "tool_calls")
        const calls = choice.message.tool_calls ?? []
        assert.strictEqual(calls.length, 1)
        const call = calls[0]! as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall
        assert.strictEqual(call.type, "function")
        assert.strictEqual(call.function.name, "get_weather")
        assert.deepStrictEqual(JSON.parse(call.function.arguments), { city: "Paris" })

        const second = yield* Effect.promise(() =>
          client.chat.completions.create({
            model: agent,
            tools: [WEATHER],
            messages: [...messages, choice.message, { role: "tool", tool_call_id: call.id, content: "sunny, 21 C" }]
          })
        )
        assert.strictEqual(second.choices[0]!.finish_reason, "stop")
        assert.strictEqual(second.choices[0]!.message.content, "get_weather returned: sunny, 21 C")
        assert.isUndefined(second.choices[0]!.message.tool_calls)

        // Without the tool offered, the same directive is plain text: the model only calls what it is given.
        const without = yield* Effect.promise(() => client.chat.completions.create({ model: agent, messages }))
        assert.strictEqual(without.choices[0]!.finish_reason, "stop")
        assert.isUndefined(without.choices[0]!.message.tool_calls)
      }))

    it.effect("streamed: tool_calls arrive as deltas the SDK's stream helper assembles", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const { client } = yield* openAiClient(yield* apiKeyOf(user))
        const { chunks, final } = yield* Effect.promise(async () => {
          const stream = client.chat.completions.stream({
            model: "builtin",
            messages: [{ role: "user", content: ASK }],
            tools: [WEATHER],
            stream_options: { include_usage: true }
          })
          const chunks: Array<OpenAI.Chat.Completions.ChatCompletionChunk> = []
          for await (const chunk of stream) chunks.push(chunk)
          return { chunks, final: await stream.finalChatCompletion() }
        })
        const deltas = chunks.flatMap((chunk) => chunk.choices.flatMap((c) => c.delta.tool_calls ?? []))
        assert.isAbove(deltas.length, 1, "the arguments come in several deltas")
        assert.strictEqual(deltas[0]!.function?.name, "get_weather")
        assert.isTrue(deltas.every((delta) => delta.index === 0))
        assert.strictEqual(chunks.filter((c) => c.choices[0]?.finish_reason === "tool_calls").length, 1)
        const call = final.choices[0]!.message.tool_calls![0]! as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall
        assert.strictEqual(final.choices[0]!.finish_reason, "tool_calls")
        assert.strictEqual(call.id, deltas[0]!.id)
        assert.deepStrictEqual(JSON.parse(call.function.arguments), { city: "Paris" })

        const text = yield* Effect.promise(async () => {
          let text = ""
          const stream = await client.chat.completions.create({
            model: "builtin",
            stream: true,
            tools: [WEATHER],
            messages: [
              { role: "user", content: ASK },
              final.choices[0]!.message as OpenAI.Chat.Completions.ChatCompletionAssistantMessageParam,
              { role: "tool", tool_call_id: call.id, content: [{ type: "text", text: "rain" }] }
            ]
          })
          for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ""
          return text
        })
        assert.strictEqual(text, "get_weather returned: rain")
      }))

    it.effect("what cannot be honoured is a 400 naming param, with OpenAI's error fields beside the envelope", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const { client } = yield* openAiClient(yield* apiKeyOf(user))
        const base = { model: "builtin", messages: [{ role: "user" as const, content: "hi" }] }
        const cases: Array<[string, Record<string, unknown>]> = [
          ["n", { n: 2 }],
          ["response_format.type", { response_format: { type: "xml" } }],
          ["logprobs", { logprobs: true }],
          ["tool_choice", { tool_choice: "required" }],
          ["tool_choice", { tools: [WEATHER], tool_choice: { type: "function", function: { name: "other" } } }],
          ["tools[1].function.name", { tools: [WEATHER, WEATHER] }],
          ["messages[0].content[1]", {
            messages: [{ role: "user", content: [{ type: "text", text: "what is this?" }, { type: "image_url", image_url: { url: "https://example.com/a.png" } }] }]
          }],
          ["messages[1].tool_call_id", { messages: [{ role: "user", content: "hi" }, { role: "tool", tool_call_id: "call_unknown", content: "x" }] }]
        ]
        for (const [param, extra] of cases) {
          const error = yield* rejection(() => client.chat.completions.create({ ...base, ...extra } as any))
          assert.instanceOf(error, OpenAI.BadRequestError, param)
          const apiError = error as InstanceType<typeof OpenAI.APIError>
          assert.strictEqual(apiError.param, param, JSON.stringify(apiError.error))
          assert.strictEqual(apiError.code, "invalid_request")
          assert.strictEqual(apiError.type, "invalid_request")
          assert.include(apiError.message, param)
        }
        // A body the schema refuses names the field too.
        const server = yield* TestServer
        const raw = yield* Effect.promise(() =>
          fetch(`${server.url}/v1/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${user.token}`, "content-type": "application/json" },
            body: JSON.stringify({ model: "builtin", messages: [{ role: "robot", content: "hi" }] })
          }).then(async (r) => ({ status: r.status, body: await r.json() as any }))
        )
        assert.strictEqual(raw.status, 400)
        assert.strictEqual(raw.body.error.type, "invalid_request")
        assert.strictEqual(raw.body.error.param, "messages[0].role")
        assert.strictEqual(raw.body.error.code, "invalid_request")
        // An enum error lists every allowed value.
        for (const role of ["system", "developer", "user", "assistant", "tool"]) assert.include(raw.body.error.message, `"${role}"`)
        const category = yield* request("POST", "/v1/agents", { token: user.token, body: { name: "Enum check", category: "nope" } })
        assert.strictEqual(category.status, 400)
        for (const name of CATEGORIES) assert.include(category.body.error.message, name)
      }))

    it.effect("a 401 says WWW-Authenticate: Bearer", () =>
      Effect.gen(function*() {
        const denied = yield* request("GET", "/v1/models", { token: "not-a-key" })
        assert.strictEqual(denied.status, 401)
        assert.match(denied.headers.get("www-authenticate") ?? "", /^Bearer/)
        assert.strictEqual(denied.body.error.type, "unauthorized")
      }))

    it.effect("a run that fails after it started is one HTTP call: x-should-retry false, or an error in the stream", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const { calls, client } = yield* openAiClient(yield* apiKeyOf(user), { maxRetries: 2 })
        const whole = yield* rejection(() =>
          client.chat.completions.create({ model: agent, messages: [{ role: "user", content: "/fail the model broke" }] })
        )
        assert.instanceOf(whole, OpenAI.BadRequestError)
        assert.strictEqual((whole as any).status, 400)
        assert.strictEqual((whole as any).headers.get("x-should-retry"), "false")
        assert.strictEqual((whole as any).code, "model_error")
        assert.deepStrictEqual(calls.length, 1, calls.join(", "))

        const streamed = yield* rejection(async () => {
          for await (const _ of await client.chat.completions.create({ model: agent, messages: [{ role: "user", content: "/fail again" }], stream: true })) {
            // read to the error
          }
        })
        assert.instanceOf(streamed, OpenAI.APIError)
        assert.strictEqual((streamed as any).code, "model_error")
        assert.strictEqual(calls.length, 2, calls.join(", "))
      }))
  })
})
