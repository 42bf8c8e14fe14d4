import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, ENV, LIVE, newUser, pollRun } from "../runs/runs-support.js"

/**
 * Issue 43 item 1, `background: true` on `POST /v1/sessions/:id/events` (docs/sessions.md): a message answered at
 * once (202) with its turn's run, `queued` while it waits behind a running turn, then told by `GET /v1/runs/:id` and
 * the session's events (its `run.created` names the same run); a retry with the same `Idempotency-Key` answers the
 * same run; a deleted session's queued turn ends its run `cancelled`; the run routes point at the session for events
 * and cancels.
 */

const sessionOf = (token: string, agent: string) =>
  Effect.map(request("POST", "/v1/sessions", { token, body: { agent } }), (reply) => {
    assert.strictEqual(reply.status, 201, reply.text)
    return reply.body.id as string
  })

const poll = (token: string, id: string, until: (run: Record<string, any>) => boolean) => pollRun(token, id, until, { headers: {} })

const send = (token: string, session: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  request("POST", `/v1/sessions/${session}/events`, { token, headers, body: { type: "message", ...body } })

describe("sessions: background messages", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("202 with the turn's run at once, queued behind a running turn, then completed; the session's events name it", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* sessionOf(user.token, agent)
        const slow = yield* send(user.token, session, { message: "/slow 15", background: true })
        assert.strictEqual(slow.status, 202, slow.text)
        assert.match(slow.body.id, /^run_/)
        assert.include(["queued", "in_progress"], slow.body.status)
        assert.isString(slow.body.created_at)
        assert.strictEqual(slow.body.session_id, session)
        assert.strictEqual(slow.body.turn, 1)
        // Sent while the first runs: it waits its turn, and says so.
        const next = yield* send(user.token, session, { message: "after you", background: true })
        assert.strictEqual(next.status, 202, next.text)
        assert.strictEqual(next.body.status, "queued")
        assert.strictEqual(next.body.turn, 2)
        const first = yield* poll(user.token, slow.body.id, (run) => run.status === "completed")
        assert.isTrue(first.background)
        assert.isAbove(first.credits_charged, 0)
        const second = yield* poll(user.token, next.body.id, (run) => run.status === "completed")
        assert.strictEqual(second.session_id, session)
        assert.isNotNull(second.started_at)

        // The session's events tell both turns, each under its run's id.
        const got = yield* request("GET", `/v1/sessions/${session}`, { token: user.token })
        assert.deepStrictEqual(got.body.messages.map((m: any) => m.role), ["user", "assistant", "user", "assistant"])
        const server = yield* TestServer
        // Read until both turns ended (a subscription never ends by itself).
        const events = yield* Effect.promise(async () => {
          const controller = new AbortController()
          const reply = await fetch(`${server.url}/v1/sessions/${session}/events?after=0`, { headers: { authorization: `Bearer ${user.token}` }, signal: controller.signal })
          const reader = reply.body!.getReader()
          let text = ""
          const deadline = Date.now() + 5_000
          while (Date.now() < deadline && (text.match(/event: run\.completed/g) ?? []).length < 2) {
            const { done, value } = await reader.read()
            if (done) break
            text += new TextDecoder().decode(value)
          }
          controller.abort()
          return text
        })
        const created = [...events.matchAll(/event: run\.created\n(?:id: \d+\n)?data: (.*)\n/g)].map((m) => JSON.parse(m[1]!).run_id)
        assert.deepStrictEqual(created, [slow.body.id, next.body.id])

        // Its events are the session's; a cancel of a turn that ended answers it as it is.
        const runEvents = yield* request("GET", `/v1/runs/${slow.body.id}/events`, { token: user.token })
        assert.strictEqual(runEvents.status, 400, runEvents.text)
        assert.include(runEvents.body.error.message, `/v1/sessions/${session}/events`)
        const cancel = yield* request("POST", `/v1/runs/${slow.body.id}/cancel`, { token: user.token })
        assert.strictEqual(cancel.status, 200, cancel.text)
        assert.strictEqual(cancel.body.status, "completed")
        assert.strictEqual(cancel.body.completed_at, first.completed_at)
      }))

    it.effect("POST /v1/runs/:id/cancel stops a running turn as interrupt does, and a queued one ends without running; idempotent", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* sessionOf(user.token, agent)
        const running = yield* send(user.token, session, { message: "/slow 300", background: true })
        assert.strictEqual(running.status, 202, running.text)
        const waiting = yield* send(user.token, session, { message: "never runs", background: true })
        assert.strictEqual(waiting.body.status, "queued")
        yield* poll(user.token, running.body.id, (run) => run.status === "in_progress")

        // The queued turn first: its cancel is taken (the run says so), and it ends when its place comes.
        const queuedCancel = yield* request("POST", `/v1/runs/${waiting.body.id}/cancel`, { token: user.token })
        assert.strictEqual(queuedCancel.status, 200, queuedCancel.text)
        assert.strictEqual(queuedCancel.body.status, "queued")
        assert.isTrue(queuedCancel.body.cancel_requested)
        // Then the running one: stopped at once, its cut step not billed; the answer waited for its end.
        const asked = Date.now()
        const stopped = yield* request("POST", `/v1/runs/${running.body.id}/cancel`, { token: user.token })
        assert.strictEqual(stopped.status, 200, stopped.text)
        assert.strictEqual(stopped.body.status, "cancelled", stopped.text)
        assert.isBelow(Date.now() - asked, 2_500)
        assert.strictEqual(stopped.body.credits_charged, 0)
        const again = yield* request("POST", `/v1/runs/${running.body.id}/cancel`, { token: user.token })
        assert.strictEqual(again.status, 200, again.text)
        assert.strictEqual(again.body.status, "cancelled")
        assert.strictEqual(again.body.completed_at, stopped.body.completed_at)
        const dropped = yield* poll(user.token, waiting.body.id, (run) => run.status !== "queued")
        assert.strictEqual(dropped.status, "cancelled")
        assert.strictEqual(dropped.credits_charged, 0)
        assert.strictEqual(dropped.usage.output_tokens, 0)

        // The session goes on: the next message runs; what the cancelled turns said is in the log as interrupted.
        const next = yield* send(user.token, session, { message: "still here", background: true })
        const ran = yield* poll(user.token, next.body.id, (run) => run.status === "completed")
        assert.isAbove(ran.credits_charged, 0)
        const server = yield* TestServer
        const ledger = yield* server.query(
          `SELECT idempotency_key FROM ledger_entries WHERE scope = 'run' AND idempotency_key LIKE 'session:${session}:%' ORDER BY idempotency_key`
        )
        assert.deepStrictEqual(ledger.map((row) => row.idempotency_key), [`session:${session}:3:1`])
        // Someone else cannot cancel it, nor learn it exists.
        const stranger = yield* newUser
        const foreign = yield* request("POST", `/v1/runs/${next.body.id}/cancel`, { token: stranger.token })
        assert.strictEqual(foreign.status, 404, foreign.text)
      }))

    it.effect("a retry with the same Idempotency-Key answers the same run; a deleted session's queued turn ends cancelled", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* sessionOf(user.token, agent)
        const key = { "idempotency-key": `bg-${Math.random()}` }
        const sent = yield* send(user.token, session, { message: "/slow 100", background: true }, key)
        assert.strictEqual(sent.status, 202, sent.text)
        const again = yield* send(user.token, session, { message: "/slow 100", background: true }, key)
        assert.strictEqual(again.status, 202, again.text)
        assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
        assert.strictEqual(again.body.id, sent.body.id)
        const queued = yield* send(user.token, session, { message: "never", background: true })
        assert.strictEqual(queued.body.status, "queued")
        yield* poll(user.token, sent.body.id, (run) => run.status === "in_progress")
        const removed = yield* request("DELETE", `/v1/sessions/${session}`, { token: user.token })
        assert.strictEqual(removed.status, 200, removed.text)
        const dropped = yield* poll(user.token, queued.body.id, (run) => run.status !== "queued")
        assert.strictEqual(dropped.status, "cancelled")
        const cut = yield* poll(user.token, sent.body.id, (run) => run.status !== "in_progress")
        assert.strictEqual(cut.status, "cancelled")
      }))
  })
})
