import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { call, connect, ok } from "../mcp/mcp-support.js"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, ENV, LIVE, newUser } from "./runs-support.js"
import { pollUntil } from "../support/Poll.js"

/**
 * Issue 43 item 5: runs and schedules from an IDE through the official MCP client. A creator lists, reads and
 * cancels their background runs and schedules an expert; another account sees none of it and cancels nothing.
 */
describe("runs and schedules: MCP tools", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.scoped("list, get and cancel runs; create and list schedules; a stranger reaches none of it", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const started = yield* request("POST", "/v1/agents/run", { token: user.token, body: { agent, message: "via the IDE", background: true } })
        assert.strictEqual(started.status, 202, started.text)
        const client = yield* connect({ bearer: user.token })
        // Polled: the run goes on in the background.
        const run: any = yield* pollUntil(Effect.map(call(client, "get_run", { runId: started.body.id }), ok), (run: any) => run.status === "completed", "the run completed")
        assert.strictEqual(run.output, "You said: via the IDE")
        const listed = ok(yield* call(client, "list_runs", { identifier: agent, status: "completed" }))
        assert.deepStrictEqual(listed.runs.map((r: any) => r.id), [run.id])
        const cancelled = ok(yield* call(client, "cancel_run", { runId: run.id }))
        assert.strictEqual(cancelled.status, "completed", "a cancel of an ended run answers it as it is")

        const schedule = ok(yield* call(client, "create_schedule", { identifier: agent, cron: "0 8 * * 1-5", timezone: "Europe/Paris", input: "Morning." }))
        assert.match(schedule.id, /^sched_/)
        assert.strictEqual(schedule.timezone, "Europe/Paris")
        const bad = yield* call(client, "create_schedule", { identifier: agent, cron: "every morning", input: "x" })
        assert.isTrue(bad.isError)
        assert.match((bad.content[0] as any).text, /cron/)
        assert.deepStrictEqual(ok(yield* call(client, "list_schedules")).schedules.map((s: any) => s.id), [schedule.id])

        const other = yield* newUser
        const stranger = yield* connect({ bearer: other.token })
        for (const [tool, args] of [["get_run", { runId: run.id }], ["cancel_run", { runId: run.id }]] as const) {
          const refused = yield* call(stranger, tool, args)
          assert.isTrue(refused.isError, tool)
          assert.strictEqual((refused._meta as any)["atrium/error"].type, "not_found", tool)
        }
        assert.deepStrictEqual(ok(yield* call(stranger, "list_runs")).runs, [])
        assert.deepStrictEqual(ok(yield* call(stranger, "list_schedules")).schedules, [])
        const refusedSchedule = yield* call(stranger, "create_schedule", { identifier: agent, cron: "0 8 * * *", input: "x" })
        assert.isTrue(refusedSchedule.isError, "someone's unpublished draft cannot be scheduled by another account")
      }))

    it.scoped("cancel_run stops a conversation turn's run as POST /v1/runs/{id}/cancel does; a stranger stops nothing", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* request("POST", "/v1/sessions", { token: user.token, body: { agent } })
        assert.strictEqual(session.status, 201, session.text)
        const sent = yield* request("POST", `/v1/sessions/${session.body.id}/events`, {
          token: user.token,
          body: { type: "message", message: "/slow 300", background: true }
        })
        assert.strictEqual(sent.status, 202, sent.text)
        const client = yield* connect({ bearer: user.token })
        yield* pollUntil(Effect.map(call(client, "get_run", { runId: sent.body.id }), ok), (run: any) => run.status === "in_progress", "the turn in progress")
        const stranger = yield* connect({ bearer: (yield* newUser).token })
        const refused = yield* call(stranger, "cancel_run", { runId: sent.body.id })
        assert.strictEqual((refused._meta as any)["atrium/error"].type, "not_found")
        const cancelled = ok(yield* call(client, "cancel_run", { runId: sent.body.id }))
        assert.strictEqual(cancelled.status, "cancelled", JSON.stringify(cancelled))
        assert.strictEqual(ok(yield* call(client, "cancel_run", { runId: sent.body.id })).status, "cancelled", "idempotent")
      }))
  })
})
