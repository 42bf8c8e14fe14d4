import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { streamOf, textOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, assertError, ENV, LIVE, newUser } from "../runs/runs-support.js"

/** The chat's search and thumbs (issue 48): `GET /v1/sessions?q=` and a rating per answer. */

const createSession = (token: string, agent: string, title: string) =>
  Effect.gen(function*() {
    const reply = yield* request("POST", "/v1/sessions", { token, body: { agent, title } })
    assert.strictEqual(reply.status, 201, reply.text)
    return reply.body.id as string
  })

const say = (token: string, session: string, message: string) =>
  Effect.map(streamOf(`/v1/sessions/${session}/events`, { token, body: { type: "message", message } }), textOf)

const search = (token: string, q: string) =>
  Effect.gen(function*() {
    const reply = yield* request("GET", `/v1/sessions?q=${encodeURIComponent(q)}`, { token })
    assert.strictEqual(reply.status, 200, reply.text)
    return (reply.body.data as Array<{ id: string }>).map((s) => s.id)
  })

describe("sessions: search and feedback", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("search finds a conversation by its title or by words said in it, never another person's, and takes % and _ as letters", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const other = yield* newUser
        const agent = yield* agentWith(user.token)
        const trip = yield* createSession(user.token, agent, "Trip to Lisbon")
        const budget = yield* createSession(user.token, agent, "Numbers")
        yield* say(user.token, budget, "my budget is 50% of the salary")
        const quiet = yield* createSession(user.token, agent, "Nothing here")
        // The other person's conversation says the same words: it is not theirs to find, nor the first's.
        const otherAgent = yield* agentWith(other.token)
        const theirs = yield* createSession(other.token, otherAgent, "Trip to Lisbon")
        yield* say(other.token, theirs, "my budget is 50% of the salary")

        assert.deepStrictEqual(yield* search(user.token, "lisbon"), [trip])
        // The user's words and the expert's answer ("You said: ...") are both searched.
        assert.deepStrictEqual(yield* search(user.token, "SALARY"), [budget])
        assert.deepStrictEqual(yield* search(user.token, "you said"), [budget])
        assert.deepStrictEqual(yield* search(user.token, "50%"), [budget])
        // `%` and `_` are letters: "5_%" matches nothing, where as wildcards it would match "50%".
        assert.deepStrictEqual(yield* search(user.token, "5_%"), [])
        assert.deepStrictEqual(yield* search(user.token, "nowhere at all"), [])
        assert.deepStrictEqual(yield* search(other.token, "lisbon"), [theirs])
        // Without q: all three, newest first.
        const all = yield* request("GET", "/v1/sessions", { token: user.token })
        assert.deepStrictEqual(all.body.data.map((s: { id: string }) => s.id), [quiet, budget, trip])
        assertError(yield* request("GET", "/v1/sessions?q=%20%20", { token: user.token }), 400, "invalid_request")
        assertError(yield* request("GET", `/v1/sessions?q=${"x".repeat(201)}`, { token: user.token }), 400, "invalid_request")
      }))

    it.effect("a thumbs up or down per answer, with a reason: replaced, listed, taken back; no one else reads or writes it", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const other = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* createSession(user.token, agent, "t")
        yield* say(user.token, session, "hello")
        yield* say(user.token, session, "again")
        const path = (turn: number | string) => `/v1/sessions/${session}/turns/${turn}/feedback`

        const down = yield* request("PUT", path(2), { token: user.token, body: { rating: "down", reason: "  too short  " } })
        assert.strictEqual(down.status, 200, down.text)
        assert.deepInclude(down.body, { session_id: session, turn: 2, rating: "down", reason: "too short", shared: false })
        const up = yield* request("PUT", path(1), { token: user.token, body: { rating: "up", share: true } })
        assert.deepInclude(up.body, { turn: 1, rating: "up", reason: null, shared: true })
        // A second rating replaces the first.
        const changed = yield* request("PUT", path(2), { token: user.token, body: { rating: "up" } })
        assert.deepInclude(changed.body, { turn: 2, rating: "up", reason: null })
        const listed = yield* request("GET", `/v1/sessions/${session}/feedback`, { token: user.token })
        assert.deepStrictEqual(listed.body.data.map((f: { turn: number; rating: string }) => [f.turn, f.rating]), [[1, "up"], [2, "up"]])
        const paged = yield* request("GET", `/v1/sessions/${session}/feedback?limit=1&after=1`, { token: user.token })
        assert.deepStrictEqual([paged.body.data.map((f: { turn: number }) => f.turn), paged.body.has_more], [[2], false])

        // Someone else: the same 404 as for the session, and nothing of the ratings in the answer or changed.
        for (const reply of [
          yield* request("GET", `/v1/sessions/${session}/feedback`, { token: other.token }),
          yield* request("PUT", path(1), { token: other.token, body: { rating: "down", reason: "sabotage" } }),
          yield* request("DELETE", path(1), { token: other.token })
        ]) {
          assertError(reply, 404, "not_found")
          assert.notInclude(reply.text, "too short")
          assert.notInclude(reply.text, "\"rating\"")
        }
        // Bad input: named, and nothing changed.
        assertError(yield* request("PUT", path(1), { token: user.token, body: { rating: "meh" } }), 400, "invalid_request")
        assertError(yield* request("PUT", path(0), { token: user.token, body: { rating: "up" } }), 400, "invalid_request")
        assertError(yield* request("PUT", path("x"), { token: user.token, body: { rating: "up" } }), 400, "invalid_request")
        assertError(yield* request("PUT", path(1), { token: user.token, body: { rating: "up", reason: "r".repeat(2001) } }), 400, "invalid_request")
        assertError(yield* request("PUT", path(9), { token: user.token, body: { rating: "up" } }), 404, "not_found")
        const after = yield* request("GET", `/v1/sessions/${session}/feedback`, { token: user.token })
        assert.deepStrictEqual(after.body, listed.body)

        const removed = yield* request("DELETE", path(1), { token: user.token })
        assert.deepStrictEqual(removed.body, { session_id: session, turn: 1, deleted: true })
        const again = yield* request("DELETE", path(1), { token: user.token })
        assert.deepStrictEqual(again.body, { session_id: session, turn: 1, deleted: false })
        const left = yield* request("GET", `/v1/sessions/${session}/feedback`, { token: user.token })
        assert.deepStrictEqual(left.body.data.map((f: { turn: number }) => f.turn), [2])
        // Deleting the session takes its ratings with it.
        assert.strictEqual((yield* request("DELETE", `/v1/sessions/${session}`, { token: user.token })).status, 200)
        assertError(yield* request("GET", `/v1/sessions/${session}/feedback`, { token: user.token }), 404, "not_found")
      }))
  })
})
