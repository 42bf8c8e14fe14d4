import { assert, describe, layer } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import { makeAtriumFetchClient } from "../../src/client.js"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, LIVE, newUser, pollRun } from "../runs/runs-support.js"

/**
 * Issue 43 item 1, `background: true` on `POST /v1/responses` (docs/runs.md), at the HTTP level: answered at once
 * (202, `queued`), then `in_progress` and its end as `GET /v1/responses/:id` reads it; its events again with
 * `stream=true` from the start or after `starting_after`, the same sequence numbers each time; cancel idempotent and
 * a finished one answered as it is; the bad inputs (background with `store: false`, a foreground response's stream,
 * a continuation of one still running) refused with a 400 naming the field. The `openai` SDK's side is
 * test/openai/responses-background-sdk.test.ts, on the compiled build.
 */

const as = (key: string) => ({ token: key, headers: { "x-end-user-id": "u1" } })

const poll = (key: string, id: string, until: (body: Record<string, any>) => boolean) => pollRun(key, id, until, { path: "/v1/responses" })

/** A response's events, as `GET /v1/responses/:id?stream=true` gives them. */
const streamed = (key: string, id: string, startingAfter?: number) =>
  Effect.flatMap(TestServer, (server) =>
    Effect.promise(() =>
      fetch(`${server.url}/v1/responses/${id}?stream=true${startingAfter === undefined ? "" : `&starting_after=${startingAfter}`}`, {
        headers: { authorization: `Bearer ${key}`, "x-end-user-id": "u1" }
      }).then(async (r) => ({
        status: r.status,
        type: r.headers.get("content-type") ?? "",
        events: (await r.text()).split("\n").filter((line) => line.startsWith("data: ")).map((line) => JSON.parse(line.slice(6)) as Record<string, any>)
      }))
    ))

describe("responses: background", () => {
  layer(TestServer.layer({ ...ENV, BACKGROUND_CANCEL_POLL: "100 millis" }), LIVE)((it) => {
    it.effect("queued at once, then completed; retrieved and streamed again from the start and after N", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const key = yield* apiKeyOf(user)
        const created = yield* request("POST", "/v1/responses", { ...as(key), body: { model: agent, input: "hello later", background: true } })
        assert.strictEqual(created.status, 202, created.text)
        assert.strictEqual(created.body.object, "response")
        assert.strictEqual(created.body.status, "queued")
        assert.strictEqual(created.body.background, true)
        assert.deepStrictEqual(created.body.output, [])
        const id = created.body.id as string
        const done = yield* poll(key, id, (body) => body.status === "completed")
        assert.strictEqual(done.output_text, "You said: hello later")
        assert.isAbove(done.usage.output_tokens, 0)
        // The run behind it is a background run like any other (GET /v1/runs/:id), `run_` and the response's own part.
        const run = yield* request("GET", `/v1/runs/run_${id.slice(5)}`, as(key))
        assert.strictEqual(run.status, 200, run.text)
        assert.strictEqual(run.body.status, "completed")
        assert.isTrue(run.body.background)

        const all = yield* streamed(key, id)
        assert.strictEqual(all.status, 200)
        assert.match(all.type, /text\/event-stream/)
        const types = all.events.map((event) => event.type)
        assert.strictEqual(types[0], "response.created")
        assert.strictEqual(all.events[0]!.response.status, "queued")
        assert.strictEqual(types[1], "response.in_progress")
        assert.strictEqual(types[types.length - 1], "response.completed")
        assert.deepStrictEqual(all.events.map((event) => event.sequence_number), all.events.map((_, i) => i))
        assert.strictEqual(all.events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join(""), "You said: hello later")
        // The final object of the stream is the one retrieved: the same item ids on every fold.
        assert.deepStrictEqual(all.events[all.events.length - 1]!.response.output, done.output)
        const again = yield* streamed(key, id)
        assert.deepStrictEqual(again.events, all.events)
        const rest = yield* streamed(key, id, 3)
        assert.deepStrictEqual(rest.events, all.events.slice(4))
        // The typed client reads the same events (`responses.events`).
        const typed = yield* makeAtriumFetchClient({ baseUrl: (yield* TestServer).url, token: key, endUserId: "u1" })
        const read = yield* Stream.runCollect(typed.responses.events({ path: { id }, startingAfter: 3 }))
        assert.deepStrictEqual(Chunk.toArray(read), rest.events)

        // Continued with previous_response_id, its conversation kept with it (OpenAI's chain).
        const next = yield* request("POST", "/v1/responses", { ...as(key), body: { model: agent, input: "/history", previous_response_id: id } })
        assert.strictEqual(next.status, 200, next.text)
        assert.strictEqual(next.body.output_text, "I see 2 earlier messages.")

        // A cancel of a response that ended answers it as it is.
        const late = yield* request("POST", `/v1/responses/${id}/cancel`, as(key))
        assert.strictEqual(late.status, 200, late.text)
        assert.strictEqual(late.body.status, "completed")
        assert.deepStrictEqual(late.body.output, done.output)
        // Another end user of the same key finds nothing.
        const other = yield* request("GET", `/v1/responses/${id}`, { token: key, headers: { "x-end-user-id": "u2" } })
        assert.strictEqual(other.status, 404, other.text)
      }))

    it.effect("in_progress with its output so far, cancelled within a second and idempotently, billed only what it used", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const key = yield* apiKeyOf(user)
        const created = yield* request("POST", "/v1/responses", { ...as(key), body: { model: agent, input: "/slow 300", background: true } })
        assert.strictEqual(created.status, 202, created.text)
        const id = created.body.id as string
        const running = yield* poll(key, id, (body) => body.status === "in_progress" && body.output_text.length > 0)
        assert.match(running.output_text, /^chunk 1 /)
        const asked = Date.now()
        const first = yield* request("POST", `/v1/responses/${id}/cancel`, as(key))
        assert.strictEqual(first.status, 200, first.text)
        assert.strictEqual(first.body.status, "cancelled")
        assert.isBelow(Date.now() - asked, 1_500)
        const second = yield* request("POST", `/v1/responses/${id}/cancel`, as(key))
        assert.strictEqual(second.status, 200, second.text)
        assert.deepStrictEqual(second.body, first.body)
        const run = yield* request("GET", `/v1/runs/run_${id.slice(5)}`, as(key))
        assert.strictEqual(run.body.status, "cancelled")
        // Its one model call was cut: not charged.
        assert.strictEqual(run.body.credits_charged, 0)
        const told = yield* streamed(key, id)
        const end = told.events[told.events.length - 1]!
        assert.strictEqual(end.type, "response.failed")
        assert.strictEqual(end.response.status, "cancelled")
        assert.isFalse(told.events.some((event) => event.type === "error"), "a cancel is no error of the run")
      }))

    it.effect("a bare model in the background; background with stream: true streams from the start and goes on", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const created = yield* request("POST", "/v1/responses", { ...as(key), body: { model: "builtin", input: "hi model", background: true } })
        assert.strictEqual(created.status, 202, created.text)
        const done = yield* poll(key, created.body.id, (body) => body.status === "completed")
        assert.strictEqual(done.output_text, "You said: hi model")

        const server = yield* TestServer
        const text = yield* Effect.promise(() =>
          fetch(`${server.url}/v1/responses`, {
            method: "POST",
            headers: { authorization: `Bearer ${key}`, "x-end-user-id": "u1", "content-type": "application/json" },
            body: JSON.stringify({ model: "builtin", input: "streamed later", background: true, stream: true })
          }).then((r) => r.text())
        )
        const events = text.split("\n").filter((line) => line.startsWith("data: ")).map((line) => JSON.parse(line.slice(6)))
        assert.strictEqual(events[0].type, "response.created")
        assert.strictEqual(events[0].response.background, true)
        assert.strictEqual(events[events.length - 1].type, "response.completed")
        assert.strictEqual(events[events.length - 1].response.output_text, "You said: streamed later")
      }))

    it.effect("bad input: background with store: false, a foreground response's stream, a chain from one still running", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const key = yield* apiKeyOf(user)
        const unstored = yield* request("POST", "/v1/responses", { ...as(key), body: { model: agent, input: "x", background: true, store: false } })
        assert.strictEqual(unstored.status, 400, unstored.text)
        assert.strictEqual(unstored.body.error.param, "background")

        const foreground = yield* request("POST", "/v1/responses", { ...as(key), body: { model: agent, input: "now" } })
        assert.strictEqual(foreground.status, 200, foreground.text)
        const noStream = yield* streamed(key, foreground.body.id)
        assert.strictEqual(noStream.status, 400)

        const slow = yield* request("POST", "/v1/responses", { ...as(key), body: { model: agent, input: "/slow 300", background: true } })
        assert.strictEqual(slow.status, 202, slow.text)
        const chained = yield* request("POST", "/v1/responses", { ...as(key), body: { model: agent, input: "next", previous_response_id: slow.body.id } })
        assert.strictEqual(chained.status, 400, chained.text)
        assert.strictEqual(chained.body.error.param, "previous_response_id")
        const cancelled = yield* request("POST", `/v1/responses/${slow.body.id}/cancel`, as(key))
        assert.strictEqual(cancelled.body.status, "cancelled")
        const badAfter = yield* request("GET", `/v1/responses/${slow.body.id}?stream=true&starting_after=-3`, as(key))
        assert.strictEqual(badAfter.status, 400, badAfter.text)
      }))
  })
})
