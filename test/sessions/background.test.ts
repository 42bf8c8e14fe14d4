import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, ENV, LIVE, newUser } from "../runs/runs-support.js"

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

const poll = (token: string, id: string, until: (run: Record<string, any>) => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 150; i++) {
      const reply = yield* request("GET", `/v1/runs/${id}`, { token })
      assert.strictEqual(reply.status, 200, reply.text)
      if (until(reply.body)) return reply.body as Record<string, any>
      yield* Effect.sleep("100 millis")
    }
    return assert.fail(`run ${id} never reached the state asked for`)
  })

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

        // Its events and its cancel are the session's.
        const runEvents = yield* request("GET", `/v1/runs/${slow.body.id}/events`, { token: user.token })
        assert.strictEqual(runEvents.status, 400, runEvents.text)
        assert.include(runEvents.body.error.message, `/v1/sessions/${session}/events`)
        const cancel = yield* request("POST", `/v1/runs/${slow.body.id}/cancel`, { token: user.token })
        assert.strictEqual(cancel.status, 400, cancel.text)
        assert.include(cancel.body.error.message, `/v1/sessions/${session}/interrupt`)
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
