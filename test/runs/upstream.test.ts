import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { names, streamOf, textOf } from "../support/Sse.js"
import * as Mock from "../support/MockUpstream.js"
import { agentWith, ENV, LIVE, newUser } from "./runs-support.js"

/**
 * Runs through the Chat Completions provider against a mock OpenAI-compatible upstream over real HTTP (issue 5
 * item 5): what the upstream streams becomes public events, and its failures become `run.failed` with a code and
 * `[DONE]`, never a hung stream.
 */

const Servers = Mock.serverWithUpstream({ ...ENV, ...Mock.MOCK_MODEL_ENV })

const mockAgent = (token: string, tools: Record<string, "allow" | "ask" | "deny"> = {}) =>
  agentWith(token, tools, { model: "mock-model" })

/** A new user's session with the mock-model expert, and a message sent to it (its turn's stream, read to the end). */
const mockSession = Effect.gen(function*() {
  const user = yield* newUser
  const agent = yield* mockAgent(user.token)
  const session = (yield* request("POST", "/v1/sessions", { token: user.token, body: { agent, title: "t" } })).body
  const say = (message: string) => streamOf(`/v1/sessions/${session.id}/events`, { token: user.token, body: { type: "message", message } })
  return { user, session, say }
})

describe("runs through an upstream model", () => {
  layer(Servers, LIVE)((it) => {
    it.effect("streamed text, reasoning and usage become events; usage is charged at the model's rate", () =>
      Effect.gen(function*() {
        const upstream = yield* Mock.Upstream
        const user = yield* newUser
        const agent = yield* mockAgent(user.token)
        yield* upstream.script(Mock.stream([
          Mock.sse(Mock.chatChunk({ role: "assistant", reasoning_content: "Thinking " })),
          Mock.sse(Mock.chatChunk({ reasoning_content: "hard." })),
          Mock.sse(Mock.chatChunk({ content: "Hello " })),
          { pause: 20 },
          Mock.sse(Mock.chatChunk({ content: "from upstream" })),
          Mock.sse(Mock.chatChunk({}, "stop")),
          Mock.sse(Mock.usageChunk(1000, 2000)),
          Mock.DONE
        ]))
        const stream = yield* streamOf("/v1/agents/run", { token: user.token, body: { agent, message: "hi" } })
        assert.strictEqual(textOf(stream), "Hello from upstream")
        const thinking = stream.events.filter((e) => e.event === "output.thinking.delta").map((e) => e.data.delta).join("")
        assert.strictEqual(thinking, "Thinking hard.")
        const usage = stream.events.find((e) => e.event === "usage.token")!.data
        assert.deepInclude(usage, { model: "openai/mock-model", input_tokens: 1000, output_tokens: 2000, credits: 2.5 })
        assert.strictEqual(stream.events[stream.events.length - 1]!.data.credits_charged, 2.5)
        const [sent] = yield* upstream.requests
        assert.strictEqual(sent!.body.model, "mock-model")
        assert.strictEqual(sent!.headers.authorization, "Bearer sk-upstream-secret-0123456789")
      }))

    it.effect("a tool call with streamed arguments runs, and its result goes back upstream", () =>
      Effect.gen(function*() {
        const upstream = yield* Mock.Upstream
        const user = yield* newUser
        const agent = yield* mockAgent(user.token, { calculator: "allow" })
        const call = (args: string, first: boolean) =>
          Mock.sse(Mock.chatChunk({
            tool_calls: [{ index: 0, ...(first ? { id: "call_up_1", type: "function" } : {}), function: { ...(first ? { name: "calculator" } : {}), arguments: args } }]
          }))
        yield* upstream.script(
          Mock.stream([call("", true), call("{\"expression\":", false), call(" \"2 + 3\"}", false), Mock.sse(Mock.chatChunk({}, "tool_calls")), Mock.DONE]),
          Mock.stream([Mock.chatText(["The answer is 5."], [50, 5])])
        )
        const stream = yield* streamOf("/v1/agents/run", { token: user.token, body: { agent, message: "add" } })
        const seen = names(stream)
        assert.includeMembers(seen, ["tool_call.created", "tool_call.arguments.delta", "tool_call.in_progress", "tool_call.completed", "tool_call.result"])
        const deltas = stream.events.filter((e) => e.event === "tool_call.arguments.delta").map((e) => e.data.delta).join("")
        assert.strictEqual(deltas, "{\"expression\": \"2 + 3\"}")
        assert.deepInclude(stream.events.find((e) => e.event === "tool_call.result")!.data.output, { result: 5 })
        assert.strictEqual(textOf(stream), "The answer is 5.")
        const requests = yield* upstream.requests
        const second = requests[requests.length - 1]!.body.messages as Array<any>
        const toolMessage = second.find((m) => m.role === "tool")
        assert.strictEqual(toolMessage.tool_call_id, "call_up_1")
        assert.include(toolMessage.content, "5")
      }))

    it.effect("an upstream 500 is run.failed with code upstream_error, then [DONE]", () =>
      Effect.gen(function*() {
        const upstream = yield* Mock.Upstream
        const user = yield* newUser
        const agent = yield* mockAgent(user.token)
        yield* upstream.script(Mock.status(500, { error: { message: "the GPU caught fire" } }))
        const stream = yield* streamOf("/v1/agents/run", { token: user.token, body: { agent, message: "hi" } })
        const failed = stream.events[stream.events.length - 1]!.data
        assert.strictEqual(failed.code, "upstream_error")
        assert.include(failed.message, "500")
        assert.notInclude(stream.raw, "sk-upstream-secret")
      }))

    it.effect("an upstream that stalls is run.failed with code upstream_timeout, then [DONE]", () =>
      Effect.gen(function*() {
        const upstream = yield* Mock.Upstream
        const user = yield* newUser
        const agent = yield* mockAgent(user.token)
        yield* upstream.script(Mock.stream([Mock.sse(Mock.chatChunk({ content: "Hel" }))], { stallAfter: true }))
        const stream = yield* streamOf("/v1/agents/run", { token: user.token, body: { agent, message: "hi" } })
        assert.strictEqual(textOf(stream), "Hel")
        assert.strictEqual(stream.events[stream.events.length - 1]!.data.code, "upstream_timeout")
      }))
    it.effect("chat completions: an upstream 429 stays retryable (429 with Retry-After); response_format goes upstream", () =>
      Effect.gen(function*() {
        const upstream = yield* Mock.Upstream
        const user = yield* newUser
        const agent = yield* mockAgent(user.token)
        const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false }
        yield* upstream.script(Mock.stream([
          Mock.sse(Mock.chatChunk({ role: "assistant", content: "{\"city\":\"Oslo\"}" })),
          Mock.sse(Mock.chatChunk({}, "stop")),
          Mock.DONE
        ]))
        const before = (yield* upstream.requests).length
        const answer = yield* request("POST", "/v1/chat/completions", {
          token: user.token,
          body: {
            model: agent,
            messages: [{ role: "user", content: "where?" }],
            response_format: { type: "json_schema", json_schema: { name: "place", strict: true, schema } }
          }
        })
        assert.strictEqual(answer.status, 200, answer.text)
        assert.strictEqual(answer.body.choices[0].message.content, "{\"city\":\"Oslo\"}")
        const sent = (yield* upstream.requests).slice(before)[0]!.body as Record<string, any>
        assert.deepStrictEqual(sent.response_format, { type: "json_schema", json_schema: { name: "place", schema, strict: true } })

        // Last: the 429 rests the provider's breaker.
        yield* upstream.script(Mock.status(429, { error: { message: "slow down" } }))
        const limited = yield* request("POST", "/v1/chat/completions", {
          token: user.token,
          body: { model: agent, messages: [{ role: "user", content: "hi" }] }
        })
        assert.strictEqual(limited.status, 429, limited.text)
        assert.strictEqual(limited.headers.get("retry-after"), "2")
        assert.isNull(limited.headers.get("x-should-retry"))
        assert.deepInclude(limited.body.error, { type: "rate_limit_error", code: "upstream_rate_limited", param: null })
      }))

    it.effect("a NUL and a lone surrogate from the model are stored as U+FFFD: the session's turn ends, and the next one runs", () =>
      Effect.gen(function*() {
        const upstream = yield* Mock.Upstream
        const { say, session, user } = yield* mockSession
        // A pair split across two chunks is whole again; a high surrogate with no low one after it is not.
        yield* upstream.script(
          Mock.stream([Mock.chatText(["a\u0000b \uD83D", "\uDE00 c\uD800d"], [5, 5])]),
          Mock.stream([Mock.chatText(["next"], [5, 5])])
        )
        // Before: the session's log write was refused (jsonb takes no \u0000), tried again and again, and the turn
        // never ended.
        const first = yield* say("hi")
        assert.strictEqual(textOf(first), "a\uFFFDb \uD83D\uDE00 c\uFFFDd")
        const second = yield* say("again")
        assert.strictEqual(textOf(second), "next")
        const detail = yield* request("GET", `/v1/sessions/${session.id}`, { token: user.token })
        assert.deepStrictEqual(detail.body.messages.map((m: { role: string }) => m.role), ["user", "assistant", "user", "assistant"])
      }))

    it.effect("an upstream's error with a NUL in its message: the session's turn fails in words, and the next one runs", () =>
      Effect.gen(function*() {
        const upstream = yield* Mock.Upstream
        const { say } = yield* mockSession
        yield* upstream.script(Mock.status(400, { error: { message: "bad \u0000 input" } }), Mock.stream([Mock.chatText(["next"], [5, 5])]))
        const first = yield* say("hi")
        const failed = first.events.find((e) => e.event === "run.failed")!.data
        assert.include(failed.message, "bad \uFFFD input")
        const second = yield* say("again")
        assert.strictEqual(textOf(second), "next")
      }))
  })
})
