import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { createServer, type IncomingHttpHeaders } from "node:http"
import type { AddressInfo } from "node:net"
import { request } from "../support/Client.js"
import { pollUntil } from "../support/Poll.js"
import {
  agentWith,
  apiKeyOf,
  assertCompleted,
  ENV,
  fullLedger,
  LIVE,
  micros,
  newUser,
  payloads,
  runAgent,
  toolDirective
} from "../runs/runs-support.js"
import { approved, publish } from "../agents/agents-support.js"
import { TestServer } from "../support/TestServer.js"

/**
 * Issue 46 item 1-2 (traces half), docs/traces.md: a run with a tool and a model fallback is a span tree named by
 * the OTel GenAI conventions, its span credits add up to the ledger's charges with 0 drift over a few hundred runs,
 * a trace is readable within 2 s of its run's end, content is kept only when the creator turns it on, and the
 * creator and the caller read it while nobody else does.
 */

/** A provider that is never there: each call fails to connect (retryable), so a step falls back to `builtin`. */
const PROVIDERS = {
  providers: [{
    id: "down",
    kind: "openai-chat",
    base_url: "http://127.0.0.1:1/v1",
    api_key: "sk-never-used-0123456789",
    models: [{ id: "gone", input_per_1k: "1", output_per_1k: "2" }]
  }]
}

// A collector on 127.0.0.1 stands for the creator's OTLP endpoint: allowed by TOOL_ALLOWED_HOSTS, as tool tests allow theirs.
const TRACE_ENV = {
  ...ENV,
  MODEL_PROVIDERS: JSON.stringify(PROVIDERS),
  TOOL_ALLOWED_HOSTS: "127.0.0.1",
  SECRETS_KEY: "traces-test-secrets-key-0123456789"
}

const CALCULATE = toolDirective("calculator", { expression: "6 * 7" })

/**
 * The trace of `runId` as `token` reads it, polled: a trace is written by the writer after its run, within 2 s
 * (docs/traces.md). Polling is the contract, not a timer: it fails when 2 s pass without it.
 */
const traceOf = (token: string, runId: string, headers: Record<string, string> = {}) =>
  Effect.map(
    pollUntil(request("GET", `/v1/runs/${runId}/trace`, { token, headers }), (reply) => reply.status !== 404, `the trace of ${runId} 2 s after its run ended`, {
      every: 25,
      within: 2_000
    }),
    (reply) => {
      assert.strictEqual(reply.status, 200, reply.text)
      return reply.body as Trace
    }
  )

interface Span {
  readonly span_id: string
  readonly parent_span_id: string | null
  readonly name: string
  readonly status: "ok" | "error"
  readonly attributes: Record<string, any>
  readonly credits: string
  readonly start_time: string
  readonly end_time: string
}
interface Trace {
  readonly trace_id: string
  readonly run_id: string
  readonly spans: ReadonlyArray<Span>
}

const creditsOf = (trace: Trace) => trace.spans.reduce((sum, span) => sum + micros(Number(span.credits)), 0)

/** The micro-credits of the ledger's run charges (one line per charged step) among `lines`, as a positive sum. */
const runCharges = (lines: ReadonlyArray<{ amount: number; description: string | null }>, agent: string) =>
  lines.filter((line) => (line.description ?? "").startsWith(`Run of ${agent} `))
    .reduce((sum, line) => sum + Math.abs(micros(line.amount)), 0)

describe("traces", () => {
  layer(TestServer.layer(TRACE_ENV), LIVE)((it) => {
    it.effect("a run with a tool and a fallback is a GenAI span tree whose credits are what the ledger charged", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "allow" }, { model: "down/gone", fallback_models: ["builtin"] })
        const stream = yield* runAgent(user, agent, CALCULATE)
        const completed = assertCompleted(stream)
        assert.strictEqual(payloads(stream, "run.model_fallback")[0]?.to, "builtin")
        const runId = stream.events[0]!.data.run_id as string
        const trace = yield* traceOf(user.token, runId)
        assert.strictEqual(trace.run_id, runId)
        assert.match(trace.trace_id, /^[0-9a-f]{32}$/)

        const root = trace.spans.filter((span) => span.parent_span_id === null)
        assert.deepStrictEqual(root.map((span) => span.name), [`invoke_agent ${agent}`])
        assert.deepInclude(root[0]!.attributes, { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent })
        const names = trace.spans.map((span) => span.name)
        // Each step tries the first model (its provider refuses the connection) while its breaker is closed, then
        // the fallback answers: twice, around the tool call.
        const chats = names.filter((name) => name.startsWith("chat "))
        assert.strictEqual(chats[0], "chat down/gone")
        assert.deepStrictEqual(chats.filter((name) => name === "chat builtin").length, 2)
        assert.deepStrictEqual(new Set(chats), new Set(["chat down/gone", "chat builtin"]))
        assert.deepStrictEqual(names.filter((name) => name.startsWith("execute_tool ")), ["execute_tool calculator"])
        for (const span of trace.spans) if (span !== root[0]) assert.strictEqual(span.parent_span_id, root[0]!.span_id, span.name)

        for (const failed of trace.spans.filter((span) => span.name === "chat down/gone")) {
          assert.strictEqual(failed.status, "error")
          assert.deepInclude(failed.attributes, { "gen_ai.provider.name": "down", "gen_ai.request.model": "gone" })
          assert.isString(failed.attributes["error.type"])
          assert.strictEqual(failed.credits, "0")
        }
        const answered = trace.spans.filter((span) => span.name === "chat builtin")
        for (const chat of answered) {
          assert.strictEqual(chat.status, "ok")
          assert.deepInclude(chat.attributes, { "gen_ai.operation.name": "chat", "gen_ai.provider.name": "builtin", "gen_ai.response.model": "builtin" })
          assert.isAbove(chat.attributes["gen_ai.usage.input_tokens"], 0)
          assert.isAbove(chat.attributes["gen_ai.usage.output_tokens"], 0)
          assert.isArray(chat.attributes["gen_ai.response.finish_reasons"])
          assert.isAbove(Number(chat.credits), 0)
          assert.isAtLeast(Date.parse(chat.end_time), Date.parse(chat.start_time))
        }
        assert.deepStrictEqual(answered[0]!.attributes["gen_ai.response.finish_reasons"], ["tool-calls"])
        const tool = trace.spans.find((span) => span.name === "execute_tool calculator")!
        assert.deepInclude(tool.attributes, { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "calculator", "gen_ai.tool.type": "function" })
        // Content capture is off by default: no messages, arguments or results.
        for (const span of trace.spans) {
          for (const key of ["gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"]) {
            assert.notProperty(span.attributes, key, span.name)
          }
        }
        assert.notInclude(JSON.stringify(trace), "6 * 7")

        // The spans' credits are the run's charges: what it said it charged, and what the ledger took.
        assert.strictEqual(creditsOf(trace), micros(completed.credits_charged))
        assert.strictEqual(creditsOf(trace), runCharges(yield* fullLedger(user.token), agent))
        const usage = payloads(stream, "usage.token").map((u) => micros(u.credits))
        assert.deepStrictEqual(answered.map((chat) => micros(Number(chat.credits))), usage)
      }))

    it.effect("a few hundred runs with tools and fallbacks: every trace's credits equal the ledger's charges, 0 drift", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "allow", get_time: "allow" }, { model: "down/gone", fallback_models: ["builtin"] })
        const messages = [CALCULATE, toolDirective("get_time"), "hello", "/fail on purpose"]
        const RUNS = 240
        const started = Date.now()
        const runs = yield* Effect.forEach(Array.from({ length: RUNS }, (_, i) => i), (i) =>
          Effect.map(runAgent(user, agent, messages[i % messages.length]!), (stream) => {
            const end = stream.events[stream.events.length - 1]!
            return {
              runId: stream.events[0]!.data.run_id as string,
              charged: end.event === "run.completed" ? micros(end.data.credits_charged) : payloads(stream, "usage.token").reduce((s, u) => s + micros(u.credits), 0)
            }
          }), { concurrency: 8 })
        const ran = Date.now()
        let drift = 0
        let total = 0
        let toolSpans = 0
        const traces = yield* Effect.forEach(runs, (run) => traceOf(user.token, run.runId), { concurrency: 8 })
        for (const [i, trace] of traces.entries()) {
          drift += Math.abs(creditsOf(trace) - runs[i]!.charged)
          total += creditsOf(trace)
          toolSpans += trace.spans.filter((span) => span.name.startsWith("execute_tool ")).length
        }
        console.log(`traces: ${RUNS} runs in ${ran - started} ms, their traces read in ${Date.now() - ran} ms`)
        assert.strictEqual(drift, 0)
        assert.strictEqual(toolSpans, RUNS / 2)
        assert.strictEqual(total, runCharges(yield* fullLedger(user.token), agent), "the traces' credits are the ledger's")

        // Search: the caller's traces, filtered by tool, status and cost, paged.
        const byTool = yield* request("GET", `/v1/traces?agent=${agent}&tool=calculator&limit=100`, { token: user.token })
        assert.strictEqual(byTool.status, 200, byTool.text)
        assert.strictEqual(byTool.body.data.length, RUNS / 4)
        for (const row of byTool.body.data) {
          assert.deepInclude(row, { agent, access: "own", status: "ok" })
          assert.include(row.tools, "calculator")
          assert.isString(row.credits)
          assert.isAtLeast(row.duration_ms, 0)
        }
        const failures = yield* request("GET", `/v1/traces?agent=${agent}&status=error&limit=100`, { token: user.token })
        assert.strictEqual(failures.body.data.length, RUNS / 4, failures.text)
        const pages: Array<string> = []
        let after: string | undefined
        for (let page = 0; page < 10; page++) {
          const reply = yield* request("GET", `/v1/traces?agent=${agent}&limit=100${after === undefined ? "" : `&after=${after}`}`, { token: user.token })
          pages.push(...reply.body.data.map((row: any) => row.trace_id))
          if (!reply.body.has_more) break
          after = reply.body.data[reply.body.data.length - 1].trace_id
        }
        assert.strictEqual(new Set(pages).size, RUNS)
        const costly = yield* request("GET", `/v1/traces?agent=${agent}&min_credits=1000`, { token: user.token })
        assert.deepStrictEqual(costly.body.data, [])
        const future = yield* request("GET", `/v1/traces?agent=${agent}&after=2999-01-01T00:00:00Z`, { token: user.token })
        assert.deepStrictEqual(future.body.data, [])
      }), { timeout: 120_000 })

    it.effect("trace_content: off by default, kept once the creator turns it on", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "allow" })
        const view = yield* request("GET", `/v1/agents/${agent}`, { token: user.token })
        assert.strictEqual(view.body.trace_content, false)
        const patched = yield* request("PATCH", `/v1/agents/${agent}`, { token: user.token, body: { trace_content: true } })
        assert.strictEqual(patched.status, 200, patched.text)
        assert.strictEqual(patched.body.trace_content, true)
        const stream = yield* runAgent(user, agent, CALCULATE)
        assertCompleted(stream)
        const trace = yield* traceOf(user.token, stream.events[0]!.data.run_id)
        const chat = trace.spans.find((span) => span.name === "chat builtin")!
        assert.include(chat.attributes["gen_ai.input.messages"], "6 * 7")
        assert.isString(chat.attributes["gen_ai.output.messages"])
        const tool = trace.spans.find((span) => span.name === "execute_tool calculator")!
        assert.include(tool.attributes["gen_ai.tool.call.arguments"], "6 * 7")
        assert.include(tool.attributes["gen_ai.tool.call.result"], "42")
      }))

    it.scoped("otlp_export: the expert's spans also go to the creator's OTLP/HTTP endpoint, with its headers", () =>
      Effect.gen(function*() {
        const received: Array<{ path: string; headers: IncomingHttpHeaders; body: any }> = []
        const collector = createServer((req, res) => {
          let body = ""
          req.on("data", (chunk) => (body += chunk))
          req.on("end", () => {
            received.push({ path: req.url ?? "", headers: req.headers, body: JSON.parse(body) })
            res.writeHead(200, { "content-type": "application/json" }).end("{}")
          })
        })
        yield* Effect.acquireRelease(
          Effect.async<void>((resume) => void collector.listen(0, "127.0.0.1", () => resume(Effect.void))),
          () => Effect.sync(() => (collector.closeAllConnections(), collector.close()))
        )
        const endpoint = `http://127.0.0.1:${(collector.address() as AddressInfo).port}/v1/traces`
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "allow" })
        // The outbound rule at the door: a private address nobody allowed is refused.
        const refused = yield* request("PATCH", `/v1/agents/${agent}`, { token: user.token, body: { otlp_export: { endpoint: "http://10.1.2.3/v1/traces" } } })
        assert.strictEqual(refused.status, 400, refused.text)
        assert.include(refused.body.error.message, "private address")
        const secret = "Basic c2VjcmV0LWNvbGxlY3Rvci1rZXk="
        const set = yield* request("PATCH", `/v1/agents/${agent}`, {
          token: user.token,
          body: { otlp_export: { endpoint, headers: { authorization: secret, "x-project": "p1" } } }
        })
        assert.strictEqual(set.status, 200, set.text)
        assert.deepStrictEqual(set.body.otlp_export, { endpoint, headers: { authorization: "[redacted]", "x-project": "[redacted]" } })
        assert.notInclude(set.text, "c2VjcmV0")
        const stream = yield* runAgent(user, agent, CALCULATE)
        assertCompleted(stream)
        const runId = stream.events[0]!.data.run_id as string
        const trace = yield* traceOf(user.token, runId)
        // Polled: the export follows the stored batch, from a fiber of its own.
        const names = () => received.flatMap((r) => r.body.resourceSpans[0].scopeSpans[0].spans.map((span: any) => span.name))
        yield* pollUntil(Effect.sync(names), (seen) => seen.includes(`invoke_agent ${agent}`), "the run's spans at the collector", { every: 50, within: 10_000 })
        assert.includeMembers(names(), [`invoke_agent ${agent}`, "chat builtin", "execute_tool calculator"])
        for (const delivery of received) {
          assert.strictEqual(delivery.path, "/v1/traces")
          assert.strictEqual(delivery.headers.authorization, secret)
          assert.strictEqual(delivery.headers["x-project"], "p1")
          assert.strictEqual(delivery.headers["content-type"], "application/json")
        }
        const spans = received.flatMap((r) => r.body.resourceSpans[0].scopeSpans[0].spans)
        const root = spans.find((span: any) => span.name === `invoke_agent ${agent}`)
        assert.strictEqual(root.traceId, trace.trace_id)
        assert.match(root.startTimeUnixNano, /^\d+$/)
        const chat = spans.find((span: any) => span.name === "chat builtin")
        assert.strictEqual(chat.kind, 3)
        assert.deepInclude(chat.attributes, { key: "gen_ai.provider.name", value: { stringValue: "builtin" } })
        assert.isDefined(chat.attributes.find((a: any) => a.key === "atrium.credits"))
        // Turned off: nothing more is sent (after the setting's cache of a few seconds).
        const off = yield* request("PATCH", `/v1/agents/${agent}`, { token: user.token, body: { otlp_export: null } })
        assert.strictEqual(off.body.otlp_export, null)
      }), { timeout: 30_000 })

    it.effect("a delegated run is a subtree of its parent's trace, under the delegating tool call", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const helper = yield* agentWith(user.token, { calculator: "allow" })
        const lead = yield* agentWith(user.token, {}, { subagents: [helper] })
        const stream = yield* runAgent(user, lead, `/delegate ${helper} ${CALCULATE}`)
        const completed = assertCompleted(stream)
        const runId = stream.events[0]!.data.run_id as string
        const trace = yield* traceOf(user.token, runId)
        const delegation = trace.spans.find((span) => span.name === "execute_tool delegate")!
        const child = trace.spans.find((span) => span.name === `invoke_agent ${helper}`)!
        assert.strictEqual(child.parent_span_id, delegation.span_id)
        const childRun = (child as any).run_id as string
        assert.notStrictEqual(childRun, runId)
        assert.isTrue(trace.spans.some((span) => span.name === "execute_tool calculator" && span.parent_span_id === child.span_id))
        // One trace per root run: the child's id finds the same tree, and its credits are in the sum.
        assert.deepStrictEqual(yield* traceOf(user.token, childRun), trace)
        assert.strictEqual(creditsOf(trace), micros(completed.credits_charged))
      }))

    it.effect("an approval wait is a span of its tool call", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "ask" })
        // Nobody answers: the approval expires (APPROVAL_TIMEOUT) and the call is denied.
        const stream = yield* runAgent(user, agent, CALCULATE)
        assertCompleted(stream)
        const trace = yield* traceOf(user.token, stream.events[0]!.data.run_id)
        const tool = trace.spans.find((span) => span.name === "execute_tool calculator")!
        const wait = trace.spans.find((span) => span.name === "await_approval calculator")!
        assert.strictEqual(wait.parent_span_id, tool.span_id)
        assert.deepInclude(wait.attributes, { "gen_ai.operation.name": "await_approval", "atrium.approval.decision": "denied" })
        assert.strictEqual(tool.status, "error")
        assert.strictEqual(tool.attributes["error.type"], "denied")
      }), { timeout: 30_000 })

    it.effect("who reads a trace: the caller and the expert's creator; another end user or account, nothing", () =>
      Effect.gen(function*() {
        const creator = yield* newUser
        const buyer = yield* newUser
        const stranger = yield* newUser
        const agent = yield* agentWith(creator.token, { calculator: "allow" })
        const submission = yield* publish(creator.token, agent)
        yield* approved(submission.id)
        const key = yield* apiKeyOf(buyer)
        const alice = { token: key, endUser: "alice" }
        const stream = yield* runAgent(alice, agent, CALCULATE)
        assertCompleted(stream)
        const runId = stream.events[0]!.data.run_id as string
        const own = yield* traceOf(key, runId, { "x-end-user-id": "alice" })
        const seenByCreator = yield* traceOf(creator.token, runId)
        assert.deepStrictEqual(seenByCreator, own)
        assert.notInclude(JSON.stringify(seenByCreator), "alice")
        const creatorList = yield* request("GET", `/v1/traces?agent=${agent}`, { token: creator.token })
        assert.deepStrictEqual(creatorList.body.data.map((row: any) => [row.run_id, row.access]), [[runId, "creator"]])
        assert.notInclude(creatorList.text, "alice")
        // The creator cannot reach the buyer's end users by naming them.
        const named = yield* request("GET", `/v1/traces?end_user=alice`, { token: creator.token })
        assert.deepStrictEqual(named.body.data, [])
        const ownList = yield* request("GET", "/v1/traces", { token: key, headers: { "x-end-user-id": "alice" } })
        assert.deepStrictEqual(ownList.body.data.map((row: any) => [row.run_id, row.access]), [[runId, "own"]])
        const byEndUser = yield* request("GET", "/v1/traces?end_user=alice", { token: key })
        assert.deepStrictEqual(byEndUser.body.data.map((row: any) => row.run_id), [runId])

        // 0 cross reads: another account, another end user of the same account, the account without the end user, and
        // an end user of the creator's own account (the creator's view is the account's, not its end users').
        let crossReads = 0
        const creatorKey = yield* apiKeyOf(creator)
        const attempts: Array<[string, Record<string, string>]> = [
          [stranger.token, {}],
          [key, { "x-end-user-id": "bob" }],
          [buyer.token, {}],
          [creatorKey, { "x-end-user-id": "carol" }]
        ]
        for (const [token, headers] of attempts) {
          const one = yield* request("GET", `/v1/runs/${runId}/trace`, { token, headers })
          if (one.status !== 404) crossReads++
          assert.notInclude(one.text, own.trace_id)
          const list = yield* request("GET", "/v1/traces", { token, headers })
          assert.strictEqual(list.status, 200, list.text)
          crossReads += list.body.data.length
          const filtered = yield* request("GET", `/v1/traces?agent=${agent}&after=${own.trace_id}`, { token, headers })
          crossReads += (filtered.body.data ?? []).length
        }
        assert.strictEqual(crossReads, 0)
        const anonymous = yield* request("GET", `/v1/runs/${runId}/trace`)
        assert.strictEqual(anonymous.status, 401, anonymous.text)
      }))
  })
})
