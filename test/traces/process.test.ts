import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { requestAt } from "../support/Client.js"
import { pollUntil } from "../support/Poll.js"
import { launchPlatform } from "../support/Process.js"
import { JWT_SECRET, makeMigratedStorage } from "../support/TestServer.js"

/**
 * The trace routes on the compiled build (issue 46, docs/traces.md): `dist/main.js` as a process runs an expert with
 * a tool; `GET /v1/runs/:id/trace` answers its span tree (polled: visible within 2 s of the run's end) and
 * `GET /v1/traces` finds it, for its caller only.
 */

const ALICE = "+15550004601"
const BOB = "+15550004602"
const CODE = "123456"

describe("traces on the compiled build", () => {
  it.scopedLive("GET /v1/runs/:id/trace and GET /v1/traces answer the run's caller, and only them", () =>
    Effect.gen(function*() {
      const storage = yield* makeMigratedStorage
      const platform = yield* launchPlatform({ ...storage.env, JWT_SECRET, SMS_TEST_OTP: `${ALICE}=${CODE},${BOB}=${CODE}` })
      const call = (token: string | undefined, method: string, path: string, body?: unknown) =>
        requestAt(platform.url, method, path, { ...(token === undefined ? {} : { token }), ...(body === undefined ? {} : { body }) })
      const login = (phone: string) =>
        Effect.map(call(undefined, "POST", "/api/auth/login", { phone, code: CODE }), (reply) => reply.body.token as string)
      const alice = yield* login(ALICE)
      const bob = yield* login(BOB)

      const agent = yield* call(alice, "POST", "/v1/agents", {
        name: "Traced",
        instructions: "Answer briefly.",
        tools: [{ name: "calculator", permission: "allow" }]
      })
      assert.strictEqual(agent.status, 201, agent.text)
      const run = yield* call(alice, "POST", "/v1/agents/run", {
        agent: agent.body.identifier,
        message: "/tool calculator {\"expression\": \"2 + 3\"}"
      })
      assert.strictEqual(run.status, 200, run.text)
      const runId = /"run_id":"(run_[^"]+)"/.exec(run.text)?.[1]
      assert.isString(runId, run.text)

      // Polled, not timed: the writer writes the trace after the run; it must be there within 2 s.
      const reply = yield* pollUntil(call(alice, "GET", `/v1/runs/${runId}/trace`), (r) => r.status !== 404, "the trace 2 s after the run ended", {
        every: 25,
        within: 2_000
      })
      assert.strictEqual(reply.status, 200, reply.text)
      const trace: any = reply.body
      assert.deepStrictEqual(Object.keys(trace).sort(), ["run_id", "spans", "trace_id"])
      assert.strictEqual(trace.run_id, runId)
      const names = trace.spans.map((span: any) => span.name)
      assert.includeMembers(names, [`invoke_agent ${agent.body.identifier}`, "chat builtin", "execute_tool calculator"])
      for (const span of trace.spans) {
        assert.includeMembers(Object.keys(span), ["span_id", "parent_span_id", "name", "start_time", "end_time", "status", "attributes", "credits"])
        assert.match(span.credits, /^\d+(\.\d{1,6})?$/)
      }

      const list = yield* call(alice, "GET", `/v1/traces?agent=${agent.body.identifier}&tool=calculator`)
      assert.strictEqual(list.status, 200, list.text)
      assert.strictEqual(list.body.has_more, false)
      assert.strictEqual(list.body.data.length, 1)
      assert.includeMembers(Object.keys(list.body.data[0]), ["trace_id", "run_id", "agent", "status", "credits", "duration_ms", "started_at"])
      assert.deepInclude(list.body.data[0], { trace_id: trace.trace_id, run_id: runId, agent: agent.body.identifier, status: "ok" })

      const other = yield* call(bob, "GET", `/v1/runs/${runId}/trace`)
      assert.strictEqual(other.status, 404, other.text)
      assert.deepStrictEqual(other.body.error.type, "not_found")
      const otherList = yield* call(bob, "GET", "/v1/traces")
      assert.deepStrictEqual(otherList.body.data, [])
      const documented = yield* call(undefined, "GET", "/openapi.json")
      assert.property(documented.body.paths, "/v1/runs/{id}/trace")
      assert.property(documented.body.paths, "/v1/traces")
    }), { timeout: 240_000 })
})
