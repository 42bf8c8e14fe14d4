import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { names, openStream, streamOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, assertError, ENV, LIVE, newUser } from "../runs/runs-support.js"

/**
 * Issue 15 item 6, replayed: an approval answered through another session of the same end user ran the tool in the
 * first session while the second session's stream hung on `: connected`. An approval is answered only through its
 * own session (or `/v1/approvals/:id` by its owner): anything else is 404 at once, and the approval stays pending.
 */

const createSession = (token: string, agent: string) =>
  Effect.gen(function*() {
    const reply = yield* request("POST", "/v1/sessions", { token, body: { agent } })
    assert.strictEqual(reply.status, 201, reply.text)
    return reply.body as { id: string }
  })

describe("security: approvals", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("an approval answered through another session of the same user is 404; its own session still answers it", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { get_time: "ask" })
        const first = yield* createSession(user.token, agent)
        const second = yield* createSession(user.token, agent)
        const live = yield* openStream(`/v1/sessions/${first.id}/events`, {
          token: user.token,
          body: { type: "message", message: "/tool get_time {}" }
        })
        const asked = yield* live.until("approval.required")
        const approval = asked.events.find((e) => e.event === "approval.required")!.data

        const crossed = yield* request("POST", `/v1/sessions/${second.id}/events`, {
          token: user.token,
          body: { type: "approval", approval_id: approval.approval_id, decision: "approve" }
        })
        assertError(crossed, 404, "not_found")
        const waiting = yield* request("GET", `/v1/sessions/${first.id}`, { token: user.token })
        assert.strictEqual(waiting.body.status, "waiting_approval")

        const rest = yield* streamOf(`/v1/sessions/${first.id}/events`, {
          token: user.token,
          body: { type: "approval", approval_id: approval.approval_id, decision: "deny" }
        })
        assert.include(names(rest), "run.completed")
        const original = yield* live.rest
        assert.strictEqual(original.events[original.events.length - 1]!.event, "run.completed")
      }))
  })
})
