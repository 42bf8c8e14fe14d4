import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import { authorizeApp, registerApp } from "../support/Billing.js"
import { request } from "../support/Client.js"
import { textOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import {
  agentWith,
  apiKeyOf,
  assertCompleted,
  assertError,
  balanceOf,
  ENV,
  LIVE,
  micros,
  newUser,
  only,
  parseChatStream,
  runAgent
} from "./runs-support.js"

/**
 * `POST /v1/chat/completions` (issue 5 item 11) through the official `openai` client, unchanged; `/history`; and who
 * may run (OAuth access tokens need `agents:write`).
 */

const clientFor = (apiKey: string, endUser: string | null = "u1") =>
  Effect.map(TestServer, (server) =>
    new OpenAI({
      baseURL: `${server.url}/v1`,
      apiKey,
      maxRetries: 0,
      ...(endUser === null ? {} : { defaultHeaders: { "X-End-User-Id": endUser } })
    }))

/** The error a promise rejects with (a test fails if it resolves). */
const rejection = <A>(promise: () => Promise<A>) =>
  Effect.promise(() =>
    promise().then(
      (value) => {
        throw new Error(`expected a rejection, got ${JSON.stringify(value).slice(0, 300)}`)
      },
      (error: unknown) => error
    )
  )

const THINKING = "Reading the message. Choosing what to do."

describe("chat completions", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("the openai client streams chunks whose content joins to the answer, then a usage chunk", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const agent = yield* agentWith(user.token)
        const client = yield* clientFor(key)
        const before = yield* balanceOf(user.token)
        const chunks = yield* Effect.promise(async () => {
          const stream = await client.chat.completions.create({
            model: agent,
            messages: [{ role: "user", content: "stream me a reply, please" }],
            stream: true,
            stream_options: { include_usage: true }
          })
          const seen: Array<OpenAI.Chat.Completions.ChatCompletionChunk> = []
          for await (const chunk of stream) seen.push(chunk)
          return seen
        })
        const content = chunks.flatMap((c) => c.choices.map((choice) => choice.delta.content ?? "")).join("")
        assert.strictEqual(content, "You said: stream me a reply, please")
        assert.isAbove(chunks.filter((c) => (c.choices[0]?.delta.content ?? "").length > 0).length, 1, "several increments")
        const reasoning = chunks.flatMap((c) => c.choices.map((choice) => (choice.delta as any).reasoning_content ?? "")).join("")
        assert.strictEqual(reasoning, THINKING)
        for (const chunk of chunks) {
          assert.strictEqual(chunk.object, "chat.completion.chunk")
          assert.strictEqual(chunk.model, agent)
          assert.strictEqual(chunk.id, chunks[0]!.id)
          assert.match(chunk.id, /^chatcmpl-/)
        }
        assert.strictEqual(chunks[0]!.choices[0]!.delta.role, "assistant")
        assert.strictEqual(chunks.filter((c) => c.choices[0]?.finish_reason === "stop").length, 1)
        const usage = chunks[chunks.length - 1]!
        assert.deepStrictEqual(usage.choices, [])
        assert.isAbove(usage.usage!.prompt_tokens, 0)
        assert.isAbove(usage.usage!.completion_tokens, 0)
        assert.strictEqual(usage.usage!.total_tokens, usage.usage!.prompt_tokens + usage.usage!.completion_tokens)
        assert.isBelow(yield* balanceOf(user.token), before, "the key's owner paid")

        // Without include_usage there is no usage chunk; the raw stream keeps OpenAI's grammar.
        const server = yield* TestServer
        const raw = yield* Effect.promise(() =>
          fetch(`${server.url}/v1/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${key}`, "x-end-user-id": "u1", "content-type": "application/json" },
            body: JSON.stringify({ model: agent, messages: [{ role: "user", content: "hi" }], stream: true })
          }).then(async (r) => ({ status: r.status, type: r.headers.get("content-type"), text: await r.text() }))
        )
        assert.strictEqual(raw.status, 200)
        assert.match(raw.type ?? "", /^text\/event-stream/)
        const parsed = parseChatStream(raw.text)
        assert.isFalse(parsed.chunks.some((c) => c.usage !== undefined))
        assert.strictEqual(parsed.chunks.map((c) => c.choices[0]?.delta.content ?? "").join(""), "You said: hi")
      }))

    it.effect("non-streaming: a chat.completion with usage and reasoning_content", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const agent = yield* agentWith(user.token)
        const client = yield* clientFor(key)
        const completion = yield* Effect.promise(() =>
          client.chat.completions.create({ model: agent, messages: [{ role: "user", content: "all at once" }] })
        )
        assert.strictEqual(completion.object, "chat.completion")
        assert.strictEqual(completion.model, agent)
        assert.strictEqual(completion.choices.length, 1)
        const choice = completion.choices[0]!
        assert.strictEqual(choice.finish_reason, "stop")
        assert.strictEqual(choice.message.role, "assistant")
        assert.strictEqual(choice.message.content, "You said: all at once")
        assert.strictEqual((choice.message as any).reasoning_content, THINKING)
        assert.isAbove(completion.usage!.prompt_tokens, 0)
        assert.isAbove(completion.usage!.completion_tokens, 0)
        assert.strictEqual(completion.usage!.total_tokens, completion.usage!.prompt_tokens + completion.usage!.completion_tokens)
      }))

    it.effect("a bare model id from /v1/models works; an unknown model is a 404 APIError", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const client = yield* clientFor(yield* apiKeyOf(user))
        const models = yield* request("GET", "/v1/models", { token: user.token })
        assert.include(JSON.stringify(models.body), "builtin")
        const completion = yield* Effect.promise(() =>
          client.chat.completions.create({ model: "builtin", messages: [{ role: "system", content: "Be terse." }, { role: "user", content: "bare model" }] })
        )
        assert.strictEqual(completion.choices[0]!.message.content, "You said: bare model")
        assert.strictEqual(completion.model, "builtin")
        const streamed = yield* Effect.promise(async () => {
          let text = ""
          for await (const chunk of await client.chat.completions.create({ model: "builtin", messages: [{ role: "user", content: "bare stream" }], stream: true })) {
            text += chunk.choices[0]?.delta.content ?? ""
          }
          return text
        })
        assert.strictEqual(streamed, "You said: bare stream")

        const error = yield* rejection(() => client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "hi" }] }))
        assert.instanceOf(error, OpenAI.NotFoundError)
        assert.strictEqual((error as InstanceType<typeof OpenAI.APIError>).status, 404)
        assert.strictEqual((error as any).error.type, "not_found")
        const streamError = yield* rejection(() =>
          client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "hi" }], stream: true })
        )
        assert.instanceOf(streamError, OpenAI.NotFoundError)
      }))

    it.effect("an API key without X-End-User-Id: 400, the message starts with 'Missing required header: X-End-User-Id'", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const client = yield* clientFor(yield* apiKeyOf(user), null)
        const error = yield* rejection(() => client.chat.completions.create({ model: agent, messages: [{ role: "user", content: "hi" }] }))
        assert.instanceOf(error, OpenAI.BadRequestError)
        assert.strictEqual((error as InstanceType<typeof OpenAI.APIError>).status, 400)
        assert.isTrue((error as any).error.message.startsWith("Missing required header: X-End-User-Id"), (error as any).error.message)
        assert.strictEqual((error as any).error.type, "invalid_request")
        // The same rule on /v1/agents/run.
        const run = yield* request("POST", "/v1/agents/run", { token: (yield* apiKeyOf(user)), body: { agent, message: "hi" } })
        assertError(run, 400, "invalid_request")
        assert.isTrue(run.body.error.message.startsWith("Missing required header: X-End-User-Id"))
      }))

    it.effect("/fail: the streaming client throws; non-streaming answers an error status", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const client = yield* clientFor(yield* apiKeyOf(user))
        const error = yield* rejection(async () => {
          const text: Array<string> = []
          for await (const chunk of await client.chat.completions.create({ model: agent, messages: [{ role: "user", content: "/fail upstream melted" }], stream: true })) {
            text.push(chunk.choices[0]?.delta.content ?? "")
          }
          return text
        })
        assert.instanceOf(error, OpenAI.APIError)
        assert.match((error as Error).message, /upstream melted/i)
        assert.strictEqual((error as any).code, "model_error")

        const whole = yield* rejection(() => client.chat.completions.create({ model: agent, messages: [{ role: "user", content: "/fail again" }] }))
        assert.instanceOf(whole, OpenAI.APIError)
        assert.strictEqual((whole as InstanceType<typeof OpenAI.APIError>).status, 400)
        assert.strictEqual((whole as any).error.type, "invalid_request_error")
        assert.strictEqual((whole as any).error.code, "model_error")
        assert.match((whole as any).error.message, /again/i)
      }))

    it.effect("/history: a stateless run sees 0 earlier messages; chat completions count the prior messages", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const run = yield* runAgent(user, agent, "/history")
        assert.strictEqual(textOf(run), "I see 0 earlier messages.")
        assertCompleted(run)

        const client = yield* clientFor(yield* apiKeyOf(user))
        const history = (messages: Array<OpenAI.Chat.Completions.ChatCompletionMessageParam>) =>
          Effect.map(
            Effect.promise(() => client.chat.completions.create({ model: agent, messages })),
            (completion) => completion.choices[0]!.message.content
          )
        assert.strictEqual(yield* history([{ role: "user", content: "/history" }]), "I see 0 earlier messages.")
        assert.strictEqual(
          yield* history([
            { role: "system", content: "You are terse." },
            { role: "user", content: "What is 2 + 2?" },
            { role: "assistant", content: "4." },
            { role: "user", content: [{ type: "text", text: "And 3 + 3?" }] },
            { role: "assistant", content: "6." },
            { role: "user", content: "/history" }
          ]),
          "I see 4 earlier messages."
        )
        // The last message must be the user's.
        const bad = yield* request("POST", "/v1/chat/completions", {
          token: user.token,
          body: { model: agent, messages: [{ role: "user", content: "hi" }, { role: "assistant", content: "hello" }] }
        })
        assertError(bad, 400, "invalid_request")
      }))

    it.effect("an OAuth access token with agents:write runs for its user; with only the events scope it is 401", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const app = yield* registerApp(owner.token)
        const writer = yield* authorizeApp(user.token, app, "agents:write")
        const before = yield* balanceOf(user.token)
        // No X-End-User-Id needed: an app acts for its user.
        const stream = yield* runAgent({ token: writer.access_token }, agent, "through an app")
        assert.strictEqual(textOf(stream), "You said: through an app")
        const end = assertCompleted(stream)
        assert.strictEqual(micros(before) - micros(yield* balanceOf(user.token)), micros(end.credits_charged), "the user paid")
        assert.strictEqual(only(stream, "run.created").agent, agent)
        const client = new OpenAI({ baseURL: `${(yield* TestServer).url}/v1`, apiKey: writer.access_token, maxRetries: 0 })
        const completion = yield* Effect.promise(() => client.chat.completions.create({ model: agent, messages: [{ role: "user", content: "app chat" }] }))
        assert.strictEqual(completion.choices[0]!.message.content, "You said: app chat")

        const events = yield* authorizeApp(user.token, app, "events")
        const refused = yield* request("POST", "/v1/agents/run", { token: events.access_token, body: { agent, message: "hi" } })
        assertError(refused, 401, "unauthorized")
        assert.include(refused.body.error.message, "agents:write")
        assertError(
          yield* request("POST", "/v1/chat/completions", { token: events.access_token, body: { model: agent, messages: [{ role: "user", content: "hi" }] } }),
          401,
          "unauthorized"
        )
        assertError(yield* request("POST", "/v1/agents/run", { body: { agent, message: "hi" } }), 401, "unauthorized")
      }))
  })
})
