import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import { textOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import {
  agentWith,
  answer,
  apiKeyOf,
  assertCompleted,
  balanceOf,
  ENV,
  last,
  liveAgent,
  LIVE,
  names,
  newUser,
  only,
  openRun,
  parseChatStream,
  runAgent,
  toolDirective
} from "./runs-support.js"
import { pollUntil, realWait } from "../support/Poll.js"

/**
 * The stream as a whole: every one of the 20 public events of spec 6.2 from a documented request (docs/events.md),
 * a client that disconnects cancelling its run, and heartbeats on a quiet stream.
 */

/** Spec 6.2, written out here rather than imported, so a change to the source cannot change the test. */
const SPEC_EVENTS = [
  "run.created",
  "run.in_progress",
  "run.completed",
  "run.failed",
  "output.text.delta",
  "output.thinking.delta",
  "output.thinking.status",
  "tool_call.created",
  "tool_call.in_progress",
  "tool_call.completed",
  "tool_call.failed",
  "tool_call.arguments.delta",
  "tool_call.result",
  "tool_call.denied",
  "approval.required",
  "delegation.started",
  "delegation.completed",
  "usage.token",
  "usage.budget_exhausted",
  "usage.trial_exhausted"
]

const runStatus = (runId: string) =>
  Effect.flatMap(TestServer, (server) =>
    Effect.map(
      server.query(`SELECT status, failure_code, credits_charged, finished_at FROM runs WHERE id = '${runId}'`),
      (rows) => rows[0]!
    ))

describe("streams", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("each of the 20 public events comes from a documented request (docs/events.md)", () =>
      Effect.gen(function*() {
        const creator = yield* newUser
        const user = yield* newUser
        const seen = new Set<string>()
        const record = (stream: Parameters<typeof names>[0]) => {
          for (const name of names(stream)) seen.add(name)
          return stream
        }
        const plain = yield* agentWith(user.token)
        const tools = yield* agentWith(user.token, { calculator: "allow", get_time: "deny", write_file: "ask" })
        const parent = yield* agentWith(user.token, {}, { subagents: [plain] })
        const locked = yield* liveAgent(creator.token, { name: "Locked", billing: { type: "UNLOCK", price: 1, allow_trial: false } })

        // run.created, run.in_progress, output.thinking.status, output.thinking.delta, output.text.delta, usage.token, run.completed
        record(yield* runAgent(user, plain, "hello"))
        // run.failed
        assert.strictEqual(last(record(yield* runAgent(user, plain, "/fail on purpose"))).event, "run.failed")
        // tool_call.created, tool_call.arguments.delta, tool_call.in_progress, tool_call.completed, tool_call.result
        record(yield* runAgent(user, tools, toolDirective("calculator", { expression: "1 + 2" })))
        // tool_call.failed
        record(yield* runAgent(user, tools, toolDirective("calculator", { expression: "1 +" })))
        // tool_call.denied (policy deny)
        record(yield* runAgent(user, tools, "/tool get_time {}"))
        // approval.required (policy ask), approved
        const live = yield* openRun(user, tools, toolDirective("write_file", { path: "a.txt", content: "a" }))
        const asked = yield* live.until("approval.required")
        yield* answer(user, only(asked, "approval.required").approval_id, { decision: "approve" })
        record(yield* live.rest)
        // delegation.started, delegation.completed
        record(yield* runAgent(user, parent, `/delegate ${plain} hi`))
        // usage.budget_exhausted
        record(yield* runAgent(user, plain, "hello", { budget: 0.000001 }))
        // usage.trial_exhausted
        record(yield* runAgent(user, locked, "hello"))

        assert.deepStrictEqual(SPEC_EVENTS.filter((name) => !seen.has(name)), [], "every public event was seen")
        assert.deepStrictEqual([...seen].filter((name) => !SPEC_EVENTS.includes(name)), [], "nothing outside the vocabulary")
      }))

    it.effect("a client that disconnects cancels the run: recorded as cancelled, nothing more charged, the server fine", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const before = yield* balanceOf(user.token)
        const live = yield* openRun(user, agent, "/slow 10")
        const partial = yield* live.until("output.text.delta")
        assert.strictEqual(textOf(partial), "chunk 1 ")
        const runId = only(partial, "run.created").run_id
        assert.strictEqual((yield* runStatus(runId)).status, "running")
        yield* live.cancel

        // Polled: the server records a cancelled run after the client left, and tells no one.
        const row = yield* pollUntil(runStatus(runId), (run) => run.status !== "running", "the run recorded as ended", { every: 20, within: 5_000 })
        assert.strictEqual(row.status, "cancelled")
        assert.strictEqual(row.failure_code, "interrupted")
        assert.isNotNull(row.finished_at)
        assert.strictEqual(Number(row.credits_charged), 0)
        // Had the run gone on, its one model call (10 increments, 100 ms apart) would have been charged by now.
        // Real wait (the server runs on the wall clock): past when the step would have been charged, nothing was.
        yield* realWait(1_500)
        assert.strictEqual(yield* balanceOf(user.token), before, "billing stopped with the run")
        assert.strictEqual((yield* runStatus(runId)).status, "cancelled")

        // The server goes on serving runs.
        const next = yield* runAgent(user, agent, "still there?")
        assert.strictEqual(textOf(next), "You said: still there?")
        assertCompleted(next)
      }))
  })

  layer(TestServer.layer({ ...ENV, SSE_HEARTBEAT: "200 millis" }), LIVE)((it) => {
    it.effect("a quiet stream carries : ping comments (SSE_HEARTBEAT)", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const stream = yield* runAgent(user, agent, "/slow 6")
        assert.isAbove(stream.pings, 0, stream.raw)
        assert.strictEqual(textOf(stream), "chunk 1 chunk 2 chunk 3 chunk 4 chunk 5 chunk 6 ")
        assertCompleted(stream)

        // Chat completions too, and the official client ignores the comments.
        const key = yield* apiKeyOf(user)
        const server = yield* TestServer
        const raw = yield* Effect.promise(() =>
          fetch(`${server.url}/v1/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${key}`, "x-end-user-id": "u1", "content-type": "application/json" },
            body: JSON.stringify({ model: agent, messages: [{ role: "user", content: "/slow 6" }], stream: true })
          }).then((r) => r.text())
        )
        assert.isAbove(parseChatStream(raw).pings, 0, raw)
        const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: key, maxRetries: 0, defaultHeaders: { "X-End-User-Id": "u1" } })
        const text = yield* Effect.promise(async () => {
          let joined = ""
          for await (const chunk of await client.chat.completions.create({ model: agent, messages: [{ role: "user", content: "/slow 6" }], stream: true })) {
            joined += chunk.choices[0]?.delta.content ?? ""
          }
          return joined
        })
        assert.strictEqual(text, "chunk 1 chunk 2 chunk 3 chunk 4 chunk 5 chunk 6 ")
      }))
  })
})
