import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { names, streamOf, textOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, assertError, balanceOf, ENV, LIVE, newUser } from "./runs-support.js"

/** `POST /v1/agents/run` with the builtin model (issue 5 items 2, 4, 5). */
describe("runs", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("a run streams run.created, thinking, text increments, usage and run.completed, then [DONE]", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const before = yield* balanceOf(user.token)
        const stream = yield* streamOf("/v1/agents/run", { token: user.token, body: { agent, message: "hello there, world of agents" } })
        const seen = names(stream)
        assert.strictEqual(seen[0], "run.created")
        assert.strictEqual(stream.events[0]!.data.agent, agent)
        assert.match(stream.events[0]!.data.run_id, /^run_/)
        assert.strictEqual(seen[1], "run.in_progress")
        assert.includeMembers(seen, ["output.thinking.status", "output.thinking.delta", "output.text.delta", "usage.token"])
        assert.isAbove(seen.filter((n) => n === "output.text.delta").length, 1, "several text increments")
        assert.strictEqual(textOf(stream), "You said: hello there, world of agents")
        const completed = stream.events[stream.events.length - 1]!.data
        assert.strictEqual(completed.type, "run.completed")
        const usage = stream.events.find((e) => e.event === "usage.token")!.data
        assert.strictEqual(usage.model, "builtin")
        assert.isAbove(usage.input_tokens, 0)
        assert.strictEqual(completed.credits_charged, usage.credits)
        assert.deepStrictEqual(completed.usage, { input_tokens: usage.input_tokens, output_tokens: usage.output_tokens })
        const after = yield* balanceOf(user.token)
        assert.closeTo(before - after, completed.credits_charged, 1e-9, "the run's credits left the wallet")
        assert.isAbove(completed.credits_charged, 0)
      }))

    it.effect("the stream is text/event-stream, uncached and unbuffered", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const server = yield* TestServer
        const response = yield* Effect.promise(() =>
          fetch(`${server.url}/v1/agents/run`, {
            method: "POST",
            headers: { authorization: `Bearer ${user.token}`, "content-type": "application/json" },
            body: JSON.stringify({ agent, message: "hi" })
          })
        )
        assert.strictEqual(response.status, 200)
        assert.match(response.headers.get("content-type") ?? "", /^text\/event-stream/)
        assert.match(response.headers.get("cache-control") ?? "", /no-cache/)
        assert.strictEqual(response.headers.get("x-accel-buffering"), "no")
        yield* Effect.promise(() => response.text())
      }))

    it.effect("an unknown agent is a JSON 404 before any stream", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const reply = yield* request("POST", "/v1/agents/run", { token: user.token, body: { agent: "no-such-agent", message: "hi" } })
        assertError(reply, 404, "not_found")
        const bad = yield* request("POST", "/v1/agents/run", { token: user.token, body: { agent: "x" } })
        assertError(bad, 400, "invalid_request")
        assert.include(bad.body.error.message, "message")
      }))

    it.effect("stream:false answers one JSON result", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const reply = yield* request("POST", "/v1/agents/run", { token: user.token, body: { agent, message: "one two", stream: false } })
        assert.strictEqual(reply.status, 200, reply.text)
        assert.strictEqual(reply.body.status, "completed")
        assert.strictEqual(reply.body.output, "You said: one two")
        assert.isAbove(reply.body.credits_charged, 0)
        assert.strictEqual(reply.body.events[0].type, "run.created")
      }))

    it.effect("/fail ends the stream with run.failed (code, message) and [DONE]", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const stream = yield* streamOf("/v1/agents/run", { token: user.token, body: { agent, message: "/fail the disk is on fire" } })
        const failed = stream.events[stream.events.length - 1]!.data
        assert.strictEqual(failed.type, "run.failed")
        assert.strictEqual(failed.code, "model_error")
        assert.include(failed.message, "the disk is on fire")
      }))
  })
})
