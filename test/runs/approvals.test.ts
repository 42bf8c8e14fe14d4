import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { pollUntil } from "../support/Poll.js"
import { textOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import {
  agentWith,
  answer,
  apiKeyOf,
  assertCompleted,
  assertError,
  assertInOrder,
  ENV,
  LIVE,
  names,
  newUser,
  only,
  openRun,
  resultOf,
  runAgent,
  toolDirective
} from "./runs-support.js"

/**
 * Tool permissions (issue 5 item 7): `deny` never runs the tool; `ask` emits `approval.required` and waits for
 * `POST /v1/approvals/:id` from the same account and end user; an unanswered approval is denied with reason
 * `timeout` after APPROVAL_TIMEOUT (2 seconds on this test server).
 */

const CALC = toolDirective("calculator", { expression: "6 * 7" })

/** Nothing of a tool that ran: a denied call goes from created straight to denied. */
const assertNeverRan = (stream: Parameters<typeof names>[0]) => {
  for (const name of ["tool_call.in_progress", "tool_call.completed", "tool_call.failed", "tool_call.result"]) {
    assert.notInclude(names(stream), name)
  }
}

describe("approvals", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("deny: tool_call.denied, the tool never runs (no in_progress, no failed), the model goes on", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "deny" })
        const stream = yield* runAgent(user, agent, CALC)
        assertInOrder(stream, ["tool_call.created", "tool_call.arguments.delta", "usage.token", "tool_call.denied", "run.in_progress", "output.text.delta", "run.completed"])
        const denied = only(stream, "tool_call.denied")
        assert.deepStrictEqual(denied, {
          type: "tool_call.denied",
          event_id: denied.event_id,
          tool_call_id: only(stream, "tool_call.created").tool_call_id,
          name: "calculator",
          reason: "denied by the agent's tool policy"
        })
        assertNeverRan(stream)
        assert.notInclude(names(stream), "approval.required")
        assert.include(textOf(stream), "calculator did not run: The tool call was denied: denied by the agent's tool policy")
        assertCompleted(stream)
      }))

    it.effect("ask: approval.required, the run waits; approve -> the tool runs and the run completes", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "ask" })
        const live = yield* openRun(user, agent, CALC)
        const asked = yield* live.until("approval.required")
        const required = only(asked, "approval.required")
        const created = only(asked, "tool_call.created")
        assert.match(required.approval_id, /^apv_/)
        assert.strictEqual(required.tool_call_id, created.tool_call_id)
        assert.strictEqual(required.name, "calculator")
        assert.deepStrictEqual(required.arguments, { expression: "6 * 7" })
        const expiresIn = Date.parse(required.expires_at) - Date.now()
        assert.isAbove(expiresIn, 0)
        assert.isAtMost(expiresIn, 2_000, "APPROVAL_TIMEOUT is 2 seconds here")
        // The run waits: nothing of the tool has happened yet.
        assertNeverRan(asked)

        const reply = yield* answer(user, required.approval_id, { decision: "approve" })
        assert.strictEqual(reply.status, 200, reply.text)
        assert.deepStrictEqual(reply.body, { approval_id: required.approval_id, decision: "approve" })
        const stream = yield* live.rest
        assertInOrder(stream, ["tool_call.created", "approval.required", "tool_call.in_progress", "tool_call.completed", "tool_call.result", "run.in_progress", "run.completed"])
        assert.deepStrictEqual(resultOf(stream), { expression: "6 * 7", result: 42 })
        assert.notInclude(names(stream), "tool_call.denied")
        assertCompleted(stream)
        // An approval is answered once.
        assertError(yield* answer(user, required.approval_id, { decision: "deny" }), 404, "not_found")
      }))

    it.effect("ask, deny with a reason: tool_call.denied with that reason, and the model goes on", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "ask", get_time: "allow" })
        const live = yield* openRun(user, agent, CALC)
        const required = only(yield* live.until("approval.required"), "approval.required")
        const reply = yield* answer(user, required.approval_id, { decision: "deny", reason: "not with my numbers" })
        assert.deepStrictEqual(reply.body, { approval_id: required.approval_id, decision: "deny" })
        const stream = yield* live.rest
        assertInOrder(stream, ["approval.required", "tool_call.denied", "run.in_progress", "output.text.delta", "run.completed"])
        const denied = only(stream, "tool_call.denied")
        assert.strictEqual(denied.reason, "not with my numbers")
        assert.strictEqual(denied.tool_call_id, required.tool_call_id)
        assert.strictEqual(denied.name, "calculator")
        assertNeverRan(stream)
        assert.include(textOf(stream), "The tool call was denied: not with my numbers")
        assertCompleted(stream)

        // Without a reason the denial says who denied it.
        const again = yield* openRun(user, agent, CALC)
        const second = only(yield* again.until("approval.required"), "approval.required")
        yield* answer(user, second.approval_id, { decision: "deny" })
        assert.strictEqual(only(yield* again.rest, "tool_call.denied").reason, "denied by the user")
      }))

    it.effect("an unanswered approval is denied with reason timeout after APPROVAL_TIMEOUT, and the run completes", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "ask" })
        const started = Date.now()
        const stream = yield* runAgent(user, agent, CALC)
        const waited = Date.now() - started
        assert.isAtLeast(waited, 1_900, "the run waited for the approval")
        assertInOrder(stream, ["approval.required", "tool_call.denied", "run.in_progress", "output.text.delta", "run.completed"])
        const denied = only(stream, "tool_call.denied")
        assert.strictEqual(denied.reason, "timeout")
        assert.strictEqual(denied.tool_call_id, only(stream, "approval.required").tool_call_id)
        assertNeverRan(stream)
        assertCompleted(stream)
        // Too late now.
        assertError(yield* answer(user, only(stream, "approval.required").approval_id, { decision: "approve" }), 404, "not_found")
      }))

    it.effect("someone else's approval is 404 (another user, or the same key's other end user); the owner's answer still works", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const agent = yield* agentWith(user.token, { calculator: "ask" })
        const alice = { token: key, endUser: "alice" }
        const live = yield* openRun(alice, agent, CALC)
        const required = only(yield* live.until("approval.required"), "approval.required")
        const id = required.approval_id

        const stranger = yield* newUser
        assertError(yield* answer(stranger, id, { decision: "deny", reason: "mine now" }), 404, "not_found")
        const strangerKey = yield* apiKeyOf(stranger)
        assertError(yield* answer({ token: strangerKey, endUser: "alice" }, id, { decision: "deny" }), 404, "not_found")
        assertError(yield* answer({ token: key, endUser: "bob" }, id, { decision: "deny" }), 404, "not_found")
        // The account's own login acts for no end user, so it is not alice either.
        assertError(yield* answer(user, id, { decision: "deny" }), 404, "not_found")
        // The key without X-End-User-Id acts for no end user either.
        assertError(yield* request("POST", `/v1/approvals/${id}`, { token: key, body: { decision: "deny" } }), 404, "not_found")
        assertError(yield* request("POST", `/v1/approvals/${id}`, { body: { decision: "deny" } }), 401, "unauthorized")
        assertError(yield* answer(alice, "apv_doesnotexist", { decision: "approve" }), 404, "not_found")
        assertError(yield* answer(alice, id, { decision: "maybe" as any }), 400, "invalid_request")

        // None of that touched the approval: alice approves and the tool runs.
        const reply = yield* answer(alice, id, { decision: "approve" })
        assert.strictEqual(reply.status, 200, reply.text)
        const stream = yield* live.rest
        assert.deepStrictEqual(resultOf(stream), { expression: "6 * 7", result: 42 })
        assert.notInclude(names(stream), "tool_call.denied")
        assertCompleted(stream)
      }))

    it.effect("a client that leaves while an approval waits cancels the run and the approval", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "ask" })
        const live = yield* openRun(user, agent, CALC)
        const asked = yield* live.until("approval.required")
        const runId = only(asked, "run.created").run_id
        const required = only(asked, "approval.required")
        yield* live.cancel
        // Polled: the server records a cancelled run after the client left, and tells no one.
        const status = yield* pollUntil(
          Effect.map(server.query(`SELECT status FROM runs WHERE id = '${runId}'`), (rows) => rows[0]?.status),
          (status) => status !== "running",
          "the run recorded as ended",
          { every: 20, within: 5_000 }
        )
        assert.strictEqual(status, "cancelled")
        assertError(yield* answer(user, required.approval_id, { decision: "approve" }), 404, "not_found")
      }))
  })
})
