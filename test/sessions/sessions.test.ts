import { assert, describe, layer } from "@effect/vitest"
import { Effect, Metric } from "effect"
import * as Heartbeat from "../../src/platform/sse/Heartbeat.js"
import * as Sse from "../../src/platform/sse/Sse.js"
import { openSubscriptions } from "../../src/platform/telemetry/Metrics.js"
import { createApiKey, request } from "../support/Client.js"
import { pollUntil } from "../support/Poll.js"
import { names, openStream, streamOf, textOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, assertError, ENV, LIVE, newUser, toolDirective } from "../runs/runs-support.js"

/** Sessions (issue 6): multi-turn conversations in a Session entity, with a durable, resumable event log. */

const createSession = (token: string, agent: string, headers?: Record<string, string>) =>
  Effect.gen(function*() {
    const reply = yield* request("POST", "/v1/sessions", { token, body: { agent, title: "t" }, ...(headers ? { headers } : {}) })
    assert.strictEqual(reply.status, 201, reply.text)
    return reply.body as { id: string; status: string }
  })

/**
 * Waits for what the server does on its own after a client left (its listener, ping and gauge let go): no event
 * reaches the test for it, so the state is polled, 50 ms apart, for at most 5 s.
 */
const until = (check: () => boolean) => pollUntil(Effect.sync(check), (held) => held, "the server let go", { every: 50, within: 5_000 })

const say = (token: string, session: string, message: string, headers?: Record<string, string>) =>
  streamOf(`/v1/sessions/${session}/events`, { token, body: { type: "message", message }, ...(headers ? { headers } : {}) })

describe("sessions", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("a three-turn conversation: the third turn sees the first two", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* createSession(user.token, agent)
        assert.strictEqual(session.status, "idle")
        const first = yield* say(user.token, session.id, "hello")
        assert.strictEqual(textOf(first), "You said: hello")
        assert.strictEqual(names(first)[0], "run.created")
        assert.strictEqual(first.events[0]!.data.session_id, session.id)
        // The turn's message rides on its run.created: a page reloaded mid-turn shows who said what from the log.
        assert.strictEqual(first.events[0]!.data.input, "hello")
        yield* say(user.token, session.id, "second")
        const third = yield* say(user.token, session.id, "/history")
        assert.strictEqual(textOf(third), "I see 4 earlier messages.")
        const seqs = [...first.events, ...third.events].map((e) => e.data.seq)
        assert.deepStrictEqual(seqs, [...seqs].sort((a, b) => a - b))
        const detail = yield* request("GET", `/v1/sessions/${session.id}`, { token: user.token })
        assert.strictEqual(detail.status, 200, detail.text)
        assert.strictEqual(detail.body.messages.length, 6)
        assert.strictEqual(detail.body.messages[1].content, "You said: hello")
        assert.strictEqual(detail.body.status, "idle")
        // The list carries the start of the last message (the web app's conversation list shows it).
        const fresh = yield* createSession(user.token, agent)
        const list = yield* request("GET", "/v1/sessions", { token: user.token })
        assert.strictEqual(list.status, 200, list.text)
        const previews = new Map(list.body.data.map((s: { id: string; last_message: string | null }) => [s.id, s.last_message]))
        assert.strictEqual(previews.get(session.id), "I see 4 earlier messages.")
        assert.strictEqual(previews.get(fresh.id), null)
      }))

    it.effect("two messages sent at once are answered in order", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* createSession(user.token, agent)
        // The second is sent once the first is under way (its first text arrived), not after a guessed pause.
        const slow = yield* openStream(`/v1/sessions/${session.id}/events`, { token: user.token, body: { type: "message", message: "/slow 5" } })
        yield* slow.until("output.text.delta")
        const quick = yield* say(user.token, session.id, "after")
        const slowStream = yield* slow.rest
        const lastSlow = slowStream.events[slowStream.events.length - 1]!.data.seq
        assert.isAbove(quick.events[0]!.data.seq, lastSlow, "the second turn starts after the first ends")
        assert.strictEqual(textOf(quick), "You said: after")
      }))

    it.effect("interrupt ends a /slow 50 turn before its end; the partial answer stays; the next message works", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* createSession(user.token, agent)
        const live = yield* openStream(`/v1/sessions/${session.id}/events`, { token: user.token, body: { type: "message", message: "/slow 50" } })
        yield* live.until("output.text.delta")
        const reply = yield* request("POST", `/v1/sessions/${session.id}/interrupt`, { token: user.token })
        assert.deepStrictEqual(reply.body, { interrupted: true })
        const rest = yield* live.rest
        // Cut, not run to its end: the 50th increment never came.
        assert.notInclude(textOf(rest), "chunk 50 ")
        const last = rest.events[rest.events.length - 1]!.data
        assert.strictEqual(last.type, "run.failed")
        assert.strictEqual(last.code, "interrupted")
        const detail = yield* request("GET", `/v1/sessions/${session.id}`, { token: user.token })
        assert.match(detail.body.messages[1].content, /^chunk 1 /)
        assert.notInclude(detail.body.messages[1].content, "chunk 50 ")
        const again = yield* request("POST", `/v1/sessions/${session.id}/interrupt`, { token: user.token })
        assert.deepStrictEqual(again.body, { interrupted: false })
        const next = yield* say(user.token, session.id, "/history")
        assert.strictEqual(textOf(next), "I see 2 earlier messages.")
      }))

    it.effect("an interrupt that finds no running turn while the log has one in flight is 503 with Retry-After, not false", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* createSession(user.token, agent)
        // What a hand-over looks like from the runner that answers: the turn's run.created is logged (the old owner
        // runs it, finishing within its grace) and this session's entity runs nothing (issue 42 item 8).
        // A turn first, so the entity is active (a session starting up closes a turn it finds in flight).
        yield* say(user.token, session.id, "hello")
        const server = yield* TestServer
        const logged = (payload: string) =>
          server.query(
            `INSERT INTO session_events (session_id, seq, turn, payload)
             SELECT session_id, max(seq) + 1, max(turn) + ${payload.includes("preparing") ? 1 : 0}, '${payload}'::jsonb
             FROM session_events WHERE session_id = '${session.id}' GROUP BY session_id`
          )
        yield* logged(`{"type":"preparing"}`)
        const reply = yield* request("POST", `/v1/sessions/${session.id}/interrupt`, { token: user.token })
        assert.strictEqual(reply.status, 503, JSON.stringify(reply.body))
        assert.isNotNull(reply.headers.get("retry-after"))
        assert.strictEqual(reply.body.error.type, "service_unavailable")
        // Once the turn is ended in the log, nothing runs and nothing is in flight: false.
        yield* logged(`{"type":"error","code":"interrupted","message":"ended elsewhere"}`)
        const after = yield* request("POST", `/v1/sessions/${session.id}/interrupt`, { token: user.token })
        assert.deepStrictEqual(after.body, { interrupted: false })
      }))

    it.effect("an interrupt sent while a turn was in flight, answered after that turn ended elsewhere, is 503, not false", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* createSession(user.token, agent)
        // A hand-over back (issue 42 item 7): the interrupt's message waits for the new owner, which takes the session
        // only once the old owner's turn is over. Here the turn is in flight in the log when the interrupt leaves, and
        // the entity, started by that message, closes it (a turn it finds in flight on start) before it answers: by
        // the answer nothing runs and nothing is in flight, yet the interrupt reached no turn.
        const server = yield* TestServer
        yield* server.query(
          `INSERT INTO session_events (session_id, seq, turn, payload) VALUES ('${session.id}', 1, 1, '{"type":"preparing"}'::jsonb)`
        )
        const reply = yield* request("POST", `/v1/sessions/${session.id}/interrupt`, { token: user.token })
        assert.strictEqual(reply.status, 503, JSON.stringify(reply.body))
        assert.isNotNull(reply.headers.get("retry-after"))
        // The next try finds the turn ended before it was sent: false.
        const after = yield* request("POST", `/v1/sessions/${session.id}/interrupt`, { token: user.token })
        assert.deepStrictEqual(after.body, { interrupted: false })
      }))

    it.effect("a subscriber that reconnects with after sees every event exactly once", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* createSession(user.token, agent)
        const first = yield* say(user.token, session.id, "one two three four five six")
        const cut = first.events[3]!.data.seq
        const resumed = yield* openStream(`/v1/sessions/${session.id}/events?after=${cut}`, { token: user.token, method: "GET" })
        const replayed = yield* resumed.until("run.completed")
        yield* resumed.cancel
        assert.deepStrictEqual(replayed.events.map((e) => e.data.seq), first.events.slice(4).map((e) => e.data.seq))
        // Live across turns, resumed with Last-Event-ID.
        const last = first.events[first.events.length - 1]!.data.seq
        const follower = yield* openStream(`/v1/sessions/${session.id}/events`, {
          token: user.token,
          method: "GET",
          headers: { "last-event-id": String(last) }
        })
        const second = yield* say(user.token, session.id, "again")
        const followed = yield* follower.until("run.completed")
        yield* follower.cancel
        assert.deepStrictEqual(followed.events.map((e) => e.data.seq), second.events.map((e) => e.data.seq))
        assert.isFalse(followed.done)
      }))

    it.effect("another end user gets 404 on every session route; adopt moves a session", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const key = (yield* createApiKey(user.token)).key
        const alice = { "x-end-user-id": "alice" }
        const bob = { "x-end-user-id": "bob" }
        const session = yield* createSession(key, agent, alice)
        yield* say(key, session.id, "hi", alice)
        for (const [method, path, body] of [
          ["GET", `/v1/sessions/${session.id}`, undefined],
          ["DELETE", `/v1/sessions/${session.id}`, undefined],
          ["POST", `/v1/sessions/${session.id}/events`, { type: "message", message: "x" }],
          ["GET", `/v1/sessions/${session.id}/events`, undefined],
          ["POST", `/v1/sessions/${session.id}/interrupt`, undefined]
        ] as const) {
          const reply = yield* request(method, path, { token: key, headers: bob, ...(body ? { body } : {}) })
          assertError(reply, 404, "not_found")
        }
        const bobs = yield* request("GET", "/v1/sessions", { token: key, headers: bob })
        assert.deepStrictEqual(bobs.body.data, [])
        const alices = yield* request("GET", "/v1/sessions", { token: key, headers: alice })
        assert.deepStrictEqual(alices.body.data.map((s: any) => s.id), [session.id])
        // Another account cannot adopt it.
        const stranger = yield* newUser
        assertError(yield* request("POST", `/v1/sessions/${session.id}/adopt`, { token: stranger.token }), 404, "not_found")
        const adopted = yield* request("POST", `/v1/sessions/${session.id}/adopt`, { token: key, headers: bob })
        assert.strictEqual(adopted.status, 200, adopted.text)
        assert.strictEqual(adopted.body.end_user_id, "bob")
        assertError(yield* request("GET", `/v1/sessions/${session.id}`, { token: key, headers: alice }), 404, "not_found")
        const detail = yield* request("GET", `/v1/sessions/${session.id}`, { token: key, headers: bob })
        assert.strictEqual(detail.body.messages.length, 2)
      }))

    it.effect("an approval is answered through the session's events; the rest of the turn streams there", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { get_time: "ask" })
        const session = yield* createSession(user.token, agent)
        const live = yield* openStream(`/v1/sessions/${session.id}/events`, { token: user.token, body: { type: "message", message: "/tool get_time {}" } })
        const asked = yield* live.until("approval.required")
        const approval = asked.events.find((e) => e.event === "approval.required")!.data
        const waiting = yield* request("GET", `/v1/sessions/${session.id}`, { token: user.token })
        assert.strictEqual(waiting.body.status, "waiting_approval")
        const rest = yield* streamOf(`/v1/sessions/${session.id}/events`, {
          token: user.token,
          body: { type: "approval", approval_id: approval.approval_id, decision: "approve" }
        })
        assert.includeMembers(names(rest), ["tool_call.in_progress", "tool_call.completed", "tool_call.result", "run.completed"])
        const original = yield* live.rest
        assert.strictEqual(original.events[original.events.length - 1]!.event, "run.completed")
        assert.deepStrictEqual(rest.events.map((e) => e.data.seq), original.events.slice(asked.events.length).map((e) => e.data.seq))
        const unknown = yield* request("POST", `/v1/sessions/${session.id}/events`, {
          token: user.token,
          body: { type: "approval", approval_id: approval.approval_id, decision: "approve" }
        })
        assertError(unknown, 404, "not_found")
      }))

    it.effect("DELETE during a turn stops it and removes the session", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* createSession(user.token, agent)
        const live = yield* openStream(`/v1/sessions/${session.id}/events`, { token: user.token, body: { type: "message", message: "/slow 50" } })
        yield* live.until("output.text.delta")
        const deleted = yield* request("DELETE", `/v1/sessions/${session.id}`, { token: user.token })
        assert.strictEqual(deleted.status, 200, deleted.text)
        const rest = yield* live.rest
        assert.strictEqual(rest.events[rest.events.length - 1]!.data.type, "run.failed")
        assertError(yield* request("GET", `/v1/sessions/${session.id}`, { token: user.token }), 404, "not_found")
        const server = yield* TestServer
        const rows = yield* server.query(`SELECT count(*)::int AS n FROM session_events WHERE session_id = '${session.id}'`)
        assert.strictEqual(rows[0]!.n, 0)
      }))

    it.effect("the files a session's turns write are listed and downloaded through the session; nobody else sees them", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { write_file: "allow" })
        const session = yield* createSession(user.token, agent)
        const wrote = yield* say(user.token, session.id, toolDirective("write_file", { path: "notes/plan.md", content: "# Plan\nship it" }))
        assert.include(names(wrote), "run.completed", JSON.stringify(names(wrote)))
        const listed = yield* request("GET", `/v1/sessions/${session.id}/files`, { token: user.token })
        assert.strictEqual(listed.status, 200, listed.text)
        assert.deepStrictEqual(listed.body.data.map((f: { path: string; size: number }) => [f.path, f.size]), [["notes/plan.md", 14]])
        const file = yield* request("GET", `/v1/sessions/${session.id}/files/content?path=notes%2Fplan.md`, { token: user.token })
        assert.strictEqual(file.status, 200, file.text)
        assert.strictEqual(file.text, "# Plan\nship it")
        assert.match(file.headers.get("content-disposition") ?? "", /attachment; filename="plan.md"/)
        const missing = yield* request("GET", `/v1/sessions/${session.id}/files/content?path=nope.md`, { token: user.token })
        assertError(missing, 404, "not_found")
        const other = yield* newUser
        const foreign = yield* request("GET", `/v1/sessions/${session.id}/files`, { token: other.token })
        assertError(foreign, 404, "not_found")
        const noPath = yield* request("GET", `/v1/sessions/${session.id}/files/content`, { token: user.token })
        assertError(noPath, 400, "invalid_request")
      }))
  })

  // A subscription is held for hours: it is written by pushes (src/platform/sse/Sse.ts `held`), and what it holds is
  // let go when the client leaves or the session goes.
  layer(TestServer.layer({ ...ENV, SSE_HEARTBEAT: "200 millis" }), LIVE)((it) => {
    it.effect("a held subscription: greeted at once, pinged while quiet, live across turns; released when either side ends it", () =>
      Effect.gen(function*() {
        const open = () => Effect.map(Metric.value(openSubscriptions), (state) => state.value)
        const before = yield* open()
        const pingsBefore = Heartbeat.subscribers("200 millis")
        const heldBefore = Sse.heldCount()
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* createSession(user.token, agent)
        const first = yield* say(user.token, session.id, "one")

        const follower = yield* openStream(`/v1/sessions/${session.id}/events`, { token: user.token, method: "GET" })
        assert.strictEqual(follower.status, 200)
        assert.strictEqual(follower.headers.get("content-type"), "text/event-stream")
        assert.strictEqual(yield* open(), before + 1)
        assert.strictEqual(Heartbeat.subscribers("200 millis"), pingsBefore + 1)
        assert.strictEqual(Sse.heldCount(), heldBefore + 1, "held by the process, not by a request fiber")
        // A quiet subscription is kept alive by pings (SSE_HEARTBEAT is 200 ms here): two of them, then the turns.
        const quiet = yield* follower.untilPings(2)
        assert.isAtLeast(quiet.pings, 2, quiet.raw)
        assert.strictEqual(quiet.events.length, 0)
        const second = yield* say(user.token, session.id, "two")
        const third = yield* say(user.token, session.id, "three")
        yield* follower.until("run.completed")
        const deleted = yield* request("DELETE", `/v1/sessions/${session.id}`, { token: user.token })
        assert.strictEqual(deleted.status, 200, deleted.text)
        // Read to the end: both turns, each event once and in order, numbered in this stream from 1.
        const all = yield* follower.until("no.such.event")
        assert.isFalse(all.done, "a subscription has no [DONE]")
        const seqs = all.events.map((e) => e.data.seq)
        assert.deepStrictEqual(seqs, [...second.events, ...third.events].map((e) => e.data.seq))
        assert.isAbove(seqs[0]!, first.events[first.events.length - 1]!.data.seq)
        assert.deepStrictEqual(all.events.map((e) => e.data.event_id), seqs.map((_, i) => i + 1))
        for (const seq of seqs) assert.include(all.raw, `id: ${seq}\ndata: `)
        assert.strictEqual(textOf(all), "You said: twoYou said: three")
        // The session's end closed the stream, and with it the subscription's listener, ping and gauge.
        yield* until(() => Heartbeat.subscribers("200 millis") === pingsBefore)
        assert.strictEqual(yield* open(), before)
        assert.strictEqual(Sse.heldCount(), heldBefore)

        // A client that leaves lets go of it too.
        const again = yield* createSession(user.token, agent)
        const leaving = yield* openStream(`/v1/sessions/${again.id}/events`, { token: user.token, method: "GET" })
        assert.strictEqual(yield* open(), before + 1)
        yield* leaving.cancel
        yield* until(() => Heartbeat.subscribers("200 millis") === pingsBefore)
        yield* until(() => Effect.runSync(open()) === before)
        assert.strictEqual(yield* open(), before)
        assert.strictEqual(Sse.heldCount(), heldBefore)
      }))
  })
})
