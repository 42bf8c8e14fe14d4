import { assert, describe, layer } from "@effect/vitest"
import { type AIMessage, HumanMessage, ToolMessage, type UsageMetadata } from "@langchain/core/messages"
import { tool } from "@langchain/core/tools"
import { ChatOpenAI } from "@langchain/openai"
import { Effect } from "effect"
import * as z from "zod"
import { TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, LIVE, newUser } from "../runs/runs-support.js"

/**
 * Issue 16: LangChain's `ChatOpenAI`, unchanged, against the platform: Chat Completions (invoke, stream, `bindTools`
 * with the tool's result sent back as a `ToolMessage`) and the Responses API (`useResponsesApi`, with the
 * conversation kept on the server through `previous_response_id`). The builtin model calls a tool by the `/tool`
 * directive, so this runs offline.
 */

const weather = tool(async ({ city }: { city: string }) => `sunny in ${city}`, {
  name: "get_weather",
  description: "The weather in a city.",
  schema: z.object({ city: z.string() })
})

const chatModel = (apiKey: string, model: string, options: { readonly useResponsesApi?: boolean } = {}) =>
  Effect.map(TestServer, (server) =>
    new ChatOpenAI({
      model,
      apiKey,
      maxRetries: 0,
      ...options,
      configuration: { baseURL: `${server.url}/v1`, defaultHeaders: { "X-End-User-Id": "u1" } }
    }))

describe("LangChain ChatOpenAI", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("Chat Completions: invoke, stream, and a bound tool whose result continues the exchange", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const apiKey = yield* apiKeyOf(user)
        const model = yield* chatModel(apiKey, agent)

        const answer = yield* Effect.promise(() => model.invoke("hello from LangChain"))
        assert.strictEqual(answer.content, "You said: hello from LangChain")
        const usage = answer.usage_metadata as UsageMetadata | undefined
        assert.isAbove(usage?.output_tokens ?? 0, 0)

        const streamed = yield* Effect.promise(async () => {
          let text = ""
          let chunks = 0
          for await (const chunk of await model.stream("stream from LangChain")) {
            text += typeof chunk.content === "string" ? chunk.content : ""
            chunks++
          }
          return { text, chunks }
        })
        assert.strictEqual(streamed.text, "You said: stream from LangChain")
        assert.isAbove(streamed.chunks, 1)

        const withTools = (yield* chatModel(apiKey, "builtin")).bindTools([weather], { tool_choice: "required" })
        const question = new HumanMessage(`/tool get_weather {"city":"Oslo"}`)
        const call = yield* Effect.promise(() => withTools.invoke([question]))
        assert.deepStrictEqual(call.tool_calls?.map((c) => [c.name, c.args]), [["get_weather", { city: "Oslo" }]])
        const toolCall = call.tool_calls![0]!
        const result = yield* Effect.promise(() => weather.invoke(toolCall))
        assert.instanceOf(result, ToolMessage)
        // `tool_choice: "required"` is honoured exactly (issue 30): asked again with it, the model calls a tool again,
        // as OpenAI's would; the answer from the result comes with the tools bound without it, LangChain's usual loop.
        const again = yield* Effect.promise(() => withTools.invoke([question, call, result]))
        assert.strictEqual(again.tool_calls?.[0]?.name, "get_weather")
        const answering = (yield* chatModel(apiKey, "builtin")).bindTools([weather])
        const final = yield* Effect.promise(() => answering.invoke([question, call, result]))
        assert.strictEqual(final.content, "get_weather returned: sunny in Oslo")

        // Streamed, the tool call arrives as chunks LangChain assembles into the same call.
        const streamedCall = yield* Effect.promise(async () => {
          let merged: AIMessage | undefined
          for await (const chunk of await withTools.stream([new HumanMessage(`/tool get_weather {"city":"Quito"}`)])) {
            merged = merged === undefined ? chunk : (merged as any).concat(chunk)
          }
          return merged
        })
        assert.deepStrictEqual(streamedCall?.tool_calls?.map((c) => [c.name, c.args]), [["get_weather", { city: "Quito" }]])
      }))

    it.effect("Responses API (useResponsesApi): text, a tool, and a conversation kept on the server", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const apiKey = yield* apiKeyOf(user)
        const model = yield* chatModel(apiKey, agent, { useResponsesApi: true })

        const first = yield* Effect.promise(() => model.invoke("hello through responses"))
        assert.strictEqual(first.text, "You said: hello through responses")
        const responseId = first.response_metadata?.id as string | undefined
        assert.match(responseId ?? "", /^resp_/)

        // The next turn sends only the new message; the platform's session holds the earlier two (`/history` counts).
        const second = yield* Effect.promise(() => model.invoke("/history", { previous_response_id: responseId! }))
        assert.strictEqual(second.text, "I see 2 earlier messages.")
        assert.notStrictEqual(second.response_metadata?.id, responseId)

        const withTools = (yield* chatModel(apiKey, "builtin", { useResponsesApi: true })).bindTools([weather])
        const question = new HumanMessage(`/tool get_weather {"city":"Lagos"}`)
        const call = yield* Effect.promise(() => withTools.invoke([question]))
        assert.deepStrictEqual(call.tool_calls?.map((c) => [c.name, c.args]), [["get_weather", { city: "Lagos" }]])
        const result = yield* Effect.promise(() => weather.invoke(call.tool_calls![0]!))
        const final = yield* Effect.promise(() => withTools.invoke([question, call, result]))
        assert.strictEqual(final.text, "get_weather returned: sunny in Lagos")
      }))
  })
})
