import { createOpenAI } from "@ai-sdk/openai"
import { createOpenAICompatible } from "@ai-sdk/openai-compatible"
import { assert, describe, layer } from "@effect/vitest"
import { ChatOpenAI } from "@langchain/openai"
import { generateObject, generateText, jsonSchema, Output } from "ai"
import { Effect } from "effect"
import OpenAI from "openai"
import { zodResponseFormat, zodTextFormat } from "openai/helpers/zod"
import * as z from "zod"
import { TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, LIVE, newUser } from "../runs/runs-support.js"
import { openAiClient, rejection, WEATHER } from "./support.js"

/**
 * Issue 30 item 1: structured output through every client, offline. The builtin model answers a `json_schema` with
 * the deterministic instance of the schema (docs/models.md), so the values are known: a string is its property's
 * name, a number 0 (or its minimum), a boolean true, an enum its first value, an array one item. `/say` makes the
 * model answer a text that breaks the schema: the run fails `model_output_invalid`, never completes wrongly.
 */

const Person = z.object({
  name: z.string(),
  age: z.number().int().min(18),
  role: z.enum(["admin", "member"]),
  tags: z.array(z.string()),
  verified: z.boolean()
})
const PERSON = { name: "name", age: 18, role: "admin", tags: ["tags"], verified: true }

const chatModel = (apiKey: string, model: string) =>
  Effect.map(TestServer, (server) =>
    new ChatOpenAI({
      model,
      apiKey,
      maxRetries: 0,
      configuration: { baseURL: `${server.url}/v1`, defaultHeaders: { "X-End-User-Id": "u1" } }
    }))

describe("structured output", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("openai: chat.completions.parse and responses.parse with a zod schema, streamed and not", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const { calls, client } = yield* openAiClient(yield* apiKeyOf(user))

        const chat = yield* Effect.promise(() =>
          client.chat.completions.parse({
            model: agent,
            messages: [{ role: "user", content: "Who is the admin?" }],
            response_format: zodResponseFormat(Person, "person")
          })
        )
        assert.deepStrictEqual(chat.choices[0]!.message.parsed, PERSON)

        const streamed = yield* Effect.promise(async () => {
          const stream = client.chat.completions.stream({
            model: "builtin",
            messages: [{ role: "user", content: "Who?" }],
            response_format: zodResponseFormat(Person, "person")
          })
          return (await stream.finalChatCompletion()).choices[0]!.message.parsed
        })
        assert.deepStrictEqual(streamed, PERSON)

        const response = yield* Effect.promise(() =>
          client.responses.parse({ model: agent, input: "Who is the admin?", text: { format: zodTextFormat(Person, "person") } })
        )
        assert.deepStrictEqual(response.output_parsed, PERSON)
        assert.strictEqual((response.text?.format as { type: string }).type, "json_schema")

        const json = yield* Effect.promise(() =>
          client.chat.completions.create({
            model: "builtin",
            messages: [{ role: "user", content: "Answer in JSON: hi" }],
            response_format: { type: "json_object" }
          })
        )
        assert.deepStrictEqual(JSON.parse(json.choices[0]!.message.content!), { answer: "You said: Answer in JSON: hi" })
        assert.strictEqual(calls.length, 4)
      }))

    it.effect("a schema outside OpenAI's strict subset is a 400 naming it; an answer that breaks the schema fails the run", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const { calls, client } = yield* openAiClient(yield* apiKeyOf(user))
        const loose = {
          type: "json_schema" as const,
          json_schema: { name: "loose", strict: true, schema: { type: "object", properties: { a: { type: "string" } } } }
        }
        const refused = (yield* rejection(() =>
          client.chat.completions.create({ model: "builtin", messages: [{ role: "user", content: "x" }], response_format: loose })
        )) as InstanceType<typeof OpenAI.BadRequestError>
        assert.instanceOf(refused, OpenAI.BadRequestError)
        assert.strictEqual(refused.param, "response_format.json_schema.schema")
        assert.include(refused.message, "additionalProperties")

        const badName = (yield* rejection(() =>
          client.responses.create({ model: "builtin", input: "x", text: { format: { type: "json_schema", name: "no spaces", schema: {} } } })
        )) as InstanceType<typeof OpenAI.BadRequestError>
        assert.strictEqual(badName.param, "text.format.name")

        const format = zodResponseFormat(Person, "person")
        const broken = (yield* rejection(() =>
          client.chat.completions.create({
            model: "builtin",
            messages: [{ role: "user", content: `/say {"name":"Ada"}` }],
            response_format: format
          })
        )) as InstanceType<typeof OpenAI.APIError>
        assert.instanceOf(broken, OpenAI.APIError)
        assert.strictEqual(broken.code, "model_output_invalid")
        assert.include(broken.message, "$.age is required")

        const streamed = yield* rejection(async () => {
          const stream = await client.chat.completions.create({
            model: "builtin",
            messages: [{ role: "user", content: "/say not json" }],
            response_format: format,
            stream: true
          })
          for await (const _ of stream) void _
        })
        assert.include(String(streamed), "not JSON")

        const failed = yield* Effect.promise(() =>
          client.responses.create({ model: "builtin", input: "/say [1]", text: { format: zodTextFormat(Person, "person") } })
        )
        assert.strictEqual(failed.status, "failed")
        assert.strictEqual(failed.error?.code, "model_output_invalid" as never)
        // One HTTP call each: a failed run is not retried (the refusals are 400s before any run).
        assert.strictEqual(calls.length, 5)
      }))

    it.effect("tool_choice is honoured exactly: none, required, a named function", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const { client } = yield* openAiClient(yield* apiKeyOf(user))
        const ask = (content: string, tool_choice: OpenAI.Chat.Completions.ChatCompletionToolChoiceOption) =>
          Effect.promise(() =>
            client.chat.completions.create({ model: "builtin", messages: [{ role: "user", content }], tools: [WEATHER], tool_choice })
          )
        const none = yield* ask(`/tool get_weather {"city":"Oslo"}`, "none")
        assert.strictEqual(none.choices[0]!.finish_reason, "stop")
        assert.isUndefined(none.choices[0]!.message.tool_calls)

        const required = yield* ask("just talk", "required")
        assert.strictEqual(required.choices[0]!.finish_reason, "tool_calls")
        const forced = required.choices[0]!.message.tool_calls![0]! as { function: { name: string; arguments: string } }
        assert.strictEqual(forced.function.name, "get_weather")
        assert.deepStrictEqual(JSON.parse(forced.function.arguments), { city: "city" })

        const named = yield* ask(`/tool get_weather {"city":"Rome"}`, { type: "function", function: { name: "get_weather" } })
        const call = named.choices[0]!.message.tool_calls![0]! as { function: { name: string; arguments: string } }
        assert.deepStrictEqual(JSON.parse(call.function.arguments), { city: "Rome" })

        const auto = yield* ask("just talk", "auto")
        assert.strictEqual(auto.choices[0]!.message.content, "You said: just talk")
      }))

    it.effect("AI SDK: generateObject and Output.object, on Chat Completions and on Responses", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const apiKey = yield* apiKeyOf(user)
        const server = yield* TestServer
        const responses = createOpenAI({ baseURL: `${server.url}/v1`, apiKey, headers: { "X-End-User-Id": "u1" } })
        const compatible = createOpenAICompatible({
          name: "atrium",
          baseURL: `${server.url}/v1`,
          apiKey,
          headers: { "X-End-User-Id": "u1" },
          supportsStructuredOutputs: true
        })
        for (const model of [responses(agent), responses.chat(agent), compatible(agent)]) {
          const { object } = yield* Effect.promise(() => generateObject({ model, schema: Person, prompt: "Who?", maxRetries: 0 }))
          assert.deepStrictEqual(object, PERSON)
          const { output } = yield* Effect.promise(() =>
            generateText({
              model,
              prompt: "Who?",
              maxRetries: 0,
              output: Output.object({
                schema: jsonSchema<{ city: string; days: number }>({
                  type: "object",
                  properties: { city: { type: "string" }, days: { type: "integer", minimum: 1 } },
                  required: ["city", "days"],
                  additionalProperties: false
                })
              })
            })
          )
          assert.deepStrictEqual(output, { city: "city", days: 1 })
        }
      }))

    it.effect("LangChain withStructuredOutput: jsonSchema and functionCalling", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const model = yield* chatModel(yield* apiKeyOf(user), agent)
        for (const method of ["jsonSchema", "functionCalling"] as const) {
          const structured = model.withStructuredOutput(Person, { name: "person", method })
          const person = yield* Effect.promise(() => structured.invoke("Who is the admin?"))
          assert.deepStrictEqual(person, PERSON, method)
        }
      }))
  })
})

describe("OpenAI Agents SDK", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("an agent's outputType, on Responses and on Chat Completions", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agentId = yield* agentWith(user.token)
        const apiKey = yield* apiKeyOf(user)
        const server = yield* TestServer
        const { Agent, OpenAIProvider, Runner, setTracingDisabled } = yield* Effect.promise(() => import("@openai/agents"))
        setTracingDisabled(true)
        for (const useResponses of [true, false]) {
          const runner = new Runner({
            modelProvider: new OpenAIProvider({
              // The SDK's client is `openai` 7 (its own dependency); ours (6) speaks the same API.
              openAIClient: new OpenAI({ apiKey, baseURL: `${server.url}/v1`, defaultHeaders: { "X-End-User-Id": "u1" }, maxRetries: 0 }) as never,
              useResponses
            }),
            tracingDisabled: true
          })
          const agent = new Agent({ name: "people", model: agentId, outputType: Person })
          const result = yield* Effect.promise(() => runner.run(agent, "Who is the admin?"))
          assert.deepStrictEqual(result.finalOutput, PERSON, `useResponses ${useResponses}`)
        }
      }))
  })
})
