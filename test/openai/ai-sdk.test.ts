import { createOpenAI } from "@ai-sdk/openai"
import { createOpenAICompatible } from "@ai-sdk/openai-compatible"
import { assert, describe, layer } from "@effect/vitest"
import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai"
import { Effect } from "effect"
import { TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, LIVE, newUser } from "../runs/runs-support.js"

/**
 * Issue 16 item 7: the Vercel AI SDK, unchanged, against the platform: its default OpenAI provider (the Responses
 * API) and `@ai-sdk/openai-compatible` (Chat Completions), with a tool the SDK runs itself. The builtin model calls
 * the tool by the `/tool` directive; the SDK runs it and sends the result back in the next step.
 */

const weather = tool({
  description: "The weather in a city.",
  inputSchema: jsonSchema<{ city: string }>({
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
    additionalProperties: false
  }),
  execute: async ({ city }) => `sunny in ${city}`
})

const providers = (apiKey: string) =>
  Effect.map(TestServer, (server) => ({
    responses: createOpenAI({ baseURL: `${server.url}/v1`, apiKey, headers: { "X-End-User-Id": "u1" } }),
    compatible: createOpenAICompatible({ name: "atrium", baseURL: `${server.url}/v1`, apiKey, headers: { "X-End-User-Id": "u1" } })
  }))

describe("Vercel AI SDK", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("the default provider (Responses): text, streamed text, and a tool the SDK runs", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const { responses } = yield* providers(yield* apiKeyOf(user))
        const plain = yield* Effect.promise(() => generateText({ model: responses(agent), prompt: "hello from the AI SDK", maxRetries: 0 }))
        assert.strictEqual(plain.text, "You said: hello from the AI SDK")
        assert.isAbove(plain.usage.outputTokens ?? 0, 0)

        const streamed = yield* Effect.promise(async () => {
          const result = streamText({ model: responses(agent), prompt: "stream from the AI SDK", maxRetries: 0 })
          let text = ""
          for await (const delta of result.textStream) text += delta
          return text
        })
        assert.strictEqual(streamed, "You said: stream from the AI SDK")

        const withTool = yield* Effect.promise(() =>
          generateText({
            model: responses("builtin"),
            prompt: `/tool get_weather {"city":"Paris"}`,
            tools: { get_weather: weather },
            stopWhen: stepCountIs(3),
            maxRetries: 0
          })
        )
        assert.strictEqual(withTool.steps.length, 2)
        assert.deepStrictEqual(withTool.steps[0]!.toolCalls.map((call) => [call.toolName, call.input]), [["get_weather", { city: "Paris" }]])
        assert.strictEqual(withTool.text, "get_weather returned: sunny in Paris")

        const streamedTool = yield* Effect.promise(async () => {
          const result = streamText({
            model: responses("builtin"),
            prompt: `/tool get_weather {"city":"Lima"}`,
            tools: { get_weather: weather },
            stopWhen: stepCountIs(3),
            maxRetries: 0
          })
          let text = ""
          for await (const delta of result.textStream) text += delta
          return { text, steps: (await result.steps).length }
        })
        assert.strictEqual(streamedTool.steps, 2)
        assert.include(streamedTool.text, "get_weather returned: sunny in Lima")
      }))

    it.effect("openai-compatible (Chat Completions): a tool the SDK runs, generated and streamed", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const { compatible } = yield* providers(yield* apiKeyOf(user))
        const generated = yield* Effect.promise(() =>
          generateText({
            model: compatible.chatModel(agent),
            prompt: `/tool get_weather {"city":"Oslo"}`,
            tools: { get_weather: weather },
            stopWhen: stepCountIs(3),
            maxRetries: 0
          })
        )
        assert.strictEqual(generated.steps.length, 2)
        assert.strictEqual(generated.steps[0]!.finishReason, "tool-calls")
        assert.deepStrictEqual(generated.steps[0]!.toolCalls.map((call) => [call.toolName, call.input]), [["get_weather", { city: "Oslo" }]])
        assert.strictEqual(generated.text, "get_weather returned: sunny in Oslo")

        const streamed = yield* Effect.promise(async () => {
          const result = streamText({
            model: compatible.chatModel("builtin"),
            prompt: `/tool get_weather {"city":"Kyiv"}`,
            tools: { get_weather: weather },
            stopWhen: stepCountIs(3),
            maxRetries: 0
          })
          let text = ""
          for await (const delta of result.textStream) text += delta
          const steps = await result.steps
          return { text, steps: steps.length, calls: steps[0]!.toolCalls.map((call) => call.input) }
        })
        assert.strictEqual(streamed.steps, 2)
        assert.deepStrictEqual(streamed.calls, [{ city: "Kyiv" }])
        assert.include(streamed.text, "get_weather returned: sunny in Kyiv")
      }))
  })
})
