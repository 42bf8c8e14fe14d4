import { createOpenAI } from "@ai-sdk/openai"
import { createOpenAICompatible } from "@ai-sdk/openai-compatible"
import { assert, describe, layer } from "@effect/vitest"
import { ChatOpenAI } from "@langchain/openai"
import { generateText, streamText } from "ai"
import { Effect } from "effect"
import OpenAI from "openai"
import { TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, LIVE, newUser } from "../runs/runs-support.js"
import { rejection } from "./support.js"

/**
 * Issue 30 item 2: a run that fails deterministically (the builtin model's `/fail`) reaches every client as an error
 * it raises, and every client sends exactly one HTTP request for it, with the client's own default retry settings
 * (the `openai` SDK 2 retries, the AI SDK 2, LangChain 6): the answer is a status they all treat as final
 * (docs/runs.md "Retries").
 */

/** A `fetch` that counts the requests it makes. */
const counting = () => {
  const calls: Array<string> = []
  const fetcher = (input: any, init?: any) => {
    calls.push(`${init?.method ?? "GET"} ${String(input instanceof Request ? input.url : input)}`)
    return fetch(input, init)
  }
  return { calls, fetch: fetcher as typeof fetch }
}

/** Runs `attempt` with a fresh counter; it must reject after exactly one request. The rejection is returned. */
const once = (label: string, attempt: (f: typeof fetch) => Promise<unknown>) =>
  Effect.gen(function*() {
    const { calls, fetch } = counting()
    const error = yield* rejection(() => attempt(fetch))
    assert.strictEqual(calls.length, 1, `${label}: ${calls.join(", ")}`)
    assert.match(String((error as Error)?.message ?? error), /boom/, label)
    return error
  })

const drain = async (iterable: AsyncIterable<unknown>) => {
  for await (const _ of iterable) void _
}

describe("a failed run reaches every client once", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("openai SDK: chat and responses, streamed and not", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const apiKey = yield* apiKeyOf(user)
        const server = yield* TestServer
        const client = (f: typeof fetch) => new OpenAI({ apiKey, baseURL: `${server.url}/v1`, defaultHeaders: { "X-End-User-Id": "u1" }, fetch: f })
        const message = [{ role: "user" as const, content: "/fail boom" }]
        const chat = yield* once("chat", (f) => client(f).chat.completions.create({ model: agent, messages: message }))
        assert.instanceOf(chat, OpenAI.BadRequestError)
        assert.deepInclude((chat as any).error, { type: "invalid_request_error", code: "model_error", param: null })
        yield* once("chat stream", async (f) => drain(await client(f).chat.completions.create({ model: agent, messages: message, stream: true })))
        yield* once("responses stream", async (f) => drain(await client(f).responses.create({ model: agent, input: "/fail boom", stream: true })))
        // Not streamed, a failed response is a response (as OpenAI's): one request, read as `status: "failed"`.
        const counter = counting()
        const failed: OpenAI.Responses.Response = yield* Effect.promise(() => client(counter.fetch).responses.create({ model: agent, input: "/fail boom" }))
        assert.strictEqual(failed.status, "failed")
        assert.deepInclude(failed.error as object, { type: "invalid_request_error", code: "model_error", message: "boom", param: null })
        assert.strictEqual(counter.calls.length, 1)
      }))

    it.effect("AI SDK: Responses, Chat, and openai-compatible, generate and stream", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const apiKey = yield* apiKeyOf(user)
        const server = yield* TestServer
        const options = (f: typeof fetch) => ({ baseURL: `${server.url}/v1`, apiKey, headers: { "X-End-User-Id": "u1" }, fetch: f })
        const models = {
          responses: (f: typeof fetch) => createOpenAI(options(f))(agent),
          chat: (f: typeof fetch) => createOpenAI(options(f)).chat(agent),
          compatible: (f: typeof fetch) => createOpenAICompatible({ name: "atrium", ...options(f) })(agent)
        }
        for (const [name, model] of Object.entries(models)) {
          yield* once(`${name} generate`, (f) => generateText({ model: model(f), prompt: "/fail boom" }))
          yield* once(`${name} stream`, (f) => {
            let failure: unknown
            const result = streamText({ model: model(f), prompt: "/fail boom", onError: ({ error }) => void (failure = error) })
            return Promise.resolve(result.consumeStream()).then(() => {
              throw failure ?? new Error("the stream ended without an error")
            })
          })
        }
      }))

    it.effect("LangChain ChatOpenAI: Chat Completions and Responses, invoke and stream", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const apiKey = yield* apiKeyOf(user)
        const server = yield* TestServer
        const model = (f: typeof fetch, useResponsesApi: boolean) =>
          new ChatOpenAI({
            model: agent,
            apiKey,
            useResponsesApi,
            configuration: { baseURL: `${server.url}/v1`, defaultHeaders: { "X-End-User-Id": "u1" }, fetch: f }
          })
        for (const responses of [false, true]) {
          yield* once(`langchain invoke responses=${responses}`, (f) => model(f, responses).invoke("/fail boom"))
          yield* once(`langchain stream responses=${responses}`, async (f) => drain(await model(f, responses).stream("/fail boom")))
        }
      }))
  })
})
