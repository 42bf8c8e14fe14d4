import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { textOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import {
  agentWith,
  answer,
  assertCompleted,
  assertInOrder,
  balanceOf,
  ENV,
  last,
  LIVE,
  micros,
  names,
  newUser,
  only,
  openRun,
  payloads,
  resultOf,
  runAgent,
  tokenMicros
} from "./runs-support.js"

/**
 * Delegation (issue 5 item 8): an agent hands a task to one of its listed subagents through the `delegate` tool
 * (builtin directive `/delegate IDENTIFIER message`): `delegation.started`, a child run paid by the same payer with
 * half of what is left of the budget, at most 3 levels deep, then `delegation.completed` with the child's output.
 */

const runsOf = (rootRunId: string) =>
  Effect.flatMap(TestServer, (server) =>
    server.query(`
      WITH RECURSIVE tree AS (
        SELECT id, parent_run_id, agent_id, status, credits_charged, 0 AS depth FROM runs WHERE id = '${rootRunId}'
        UNION ALL
        SELECT r.id, r.parent_run_id, r.agent_id, r.status, r.credits_charged, t.depth + 1
        FROM runs r JOIN tree t ON r.parent_run_id = t.id
      )
      SELECT t.*, a.identifier FROM tree t LEFT JOIN agents a ON a.id = t.agent_id ORDER BY depth`))

describe("delegation", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("/delegate child: delegation.started, delegation.completed with the child's output; same payer", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const child = yield* agentWith(user.token)
        const parent = yield* agentWith(user.token, {}, { subagents: [child] })
        const before = yield* balanceOf(user.token)
        const stream = yield* runAgent(user, parent, `/delegate ${child} summarise the quarterly report`)
        assertInOrder(stream, [
          "run.created",
          "tool_call.created",
          "tool_call.arguments.delta",
          "usage.token",
          "tool_call.in_progress",
          "delegation.started",
          "delegation.completed",
          "tool_call.completed",
          "tool_call.result",
          "run.in_progress",
          "output.text.delta",
          "run.completed"
        ])
        const call = only(stream, "tool_call.created")
        assert.strictEqual(call.name, "delegate")
        const started = only(stream, "delegation.started")
        assert.deepStrictEqual(started, { type: "delegation.started", event_id: started.event_id, delegation_id: call.tool_call_id, agent: child })
        const completed = only(stream, "delegation.completed")
        assert.strictEqual(completed.delegation_id, call.tool_call_id)
        assert.strictEqual(completed.agent, child)
        assert.strictEqual(completed.output, "You said: summarise the quarterly report")
        assert.strictEqual(completed.status, "completed")
        assert.deepStrictEqual(resultOf(stream), { agent: child, output: "You said: summarise the quarterly report" })
        assert.include(textOf(stream), "delegate returned:")
        // The child's own events stay in the child: one tool call, the parent's two model calls.
        assert.strictEqual(payloads(stream, "tool_call.created").length, 1)
        assert.strictEqual(payloads(stream, "usage.token").length, 2)
        assert.deepStrictEqual(payloads(stream, "run.in_progress").map((p) => p.turn), [1, 2])
        const end = assertCompleted(stream)

        // The child run is recorded under the parent, paid by the same user, and its credits are in the parent's.
        const tree = yield* runsOf(only(stream, "run.created").run_id)
        assert.deepStrictEqual(tree.map((r) => [r.identifier, r.status, Number(r.depth)]), [[parent, "completed", 0], [child, "completed", 1]])
        const childMicros = Number(tree[1]!.credits_charged)
        assert.isAbove(childMicros, 0)
        assert.strictEqual(micros(end.credits_charged), tokenMicros(stream) + childMicros)
        assert.strictEqual(micros(before) - micros(yield* balanceOf(user.token)), micros(end.credits_charged))
      }))

    it.effect("a subagent the agent does not list: the delegate tool fails, nothing is delegated, the run completes", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const child = yield* agentWith(user.token)
        const other = yield* agentWith(user.token)
        const parent = yield* agentWith(user.token, {}, { subagents: [child] })
        const stream = yield* runAgent(user, parent, `/delegate ${other} do something`)
        const failed = only(stream, "tool_call.failed")
        assert.strictEqual(failed.name, "delegate")
        assert.strictEqual(failed.error, `${other} is not one of this agent's subagents.`)
        assert.notInclude(names(stream), "delegation.started")
        assert.notInclude(names(stream), "delegation.completed")
        assert.include(textOf(stream), "delegate did not run")
        assertCompleted(stream)
        assert.strictEqual((yield* runsOf(only(stream, "run.created").run_id)).length, 1)

        // An agent without subagents has no delegate tool at all.
        const alone = yield* agentWith(user.token)
        const plain = yield* runAgent(user, alone, `/delegate ${child} hi`)
        assert.strictEqual(textOf(plain), "This agent has no subagents to delegate to.")
        assert.isFalse(names(plain).some((name) => name.startsWith("tool_call.") || name.startsWith("delegation.")))
        assertCompleted(plain)
      }))

    it.effect("delegation is at most 3 levels deep: the agent at depth 3 has no delegate tool", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        // a0 -> a1 -> a2 -> a3 -> a4, each listing the next.
        const chain: Array<string> = [yield* agentWith(user.token)]
        for (let i = 0; i < 4; i++) chain.unshift(yield* agentWith(user.token, {}, { subagents: [chain[0]!] }))
        const message = chain.slice(1).map((identifier) => `/delegate ${identifier}`).join(" ") + " the deepest task"
        const stream = yield* runAgent(user, chain[0]!, message)
        const end = assertCompleted(stream)
        // The root sees one delegation; what came back is a3's answer: it could not delegate further.
        const completed = only(stream, "delegation.completed")
        assert.strictEqual(completed.agent, chain[1])
        assert.strictEqual(completed.status, "completed")
        assert.include(completed.output, "This agent has no subagents to delegate to.")
        assert.notInclude(completed.output, "You said: the deepest task")

        const tree = yield* runsOf(only(stream, "run.created").run_id)
        assert.deepStrictEqual(tree.map((r) => [r.identifier, Number(r.depth), r.status]), [
          [chain[0], 0, "completed"],
          [chain[1], 1, "completed"],
          [chain[2], 2, "completed"],
          [chain[3], 3, "completed"]
        ], "a4 never ran")
        // A run's recorded credits include its children's: each level paid something of its own.
        assert.strictEqual(micros(end.credits_charged), Number(tree[0]!.credits_charged))
        for (let depth = 0; depth < 3; depth++) {
          assert.isAbove(Number(tree[depth]!.credits_charged), Number(tree[depth + 1]!.credits_charged))
        }
        assert.isAbove(Number(tree[3]!.credits_charged), 0)
      }))

    it.effect("a child's approval.required reaches the parent's stream and is answered there", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const child = yield* agentWith(user.token, { calculator: "ask" })
        const parent = yield* agentWith(user.token, {}, { subagents: [child] })
        const live = yield* openRun(user, parent, `/delegate ${child} /tool calculator {"expression":"2^5"}`)
        const asked = yield* live.until("approval.required")
        const required = only(asked, "approval.required")
        assert.strictEqual(required.name, "calculator")
        assert.deepStrictEqual(required.arguments, { expression: "2^5" })
        assert.strictEqual((yield* answer(user, required.approval_id, { decision: "approve" })).status, 200)
        const stream = yield* live.rest
        assertInOrder(stream, ["delegation.started", "approval.required", "delegation.completed", "tool_call.result", "run.completed"])
        assert.include(only(stream, "delegation.completed").output, `calculator returned: {"expression":"2^5","result":32}`)
        // Only the approval surfaces: the parent shows its own delegate call and nothing of the child's calculator.
        assert.deepStrictEqual(payloads(stream, "tool_call.created").map((p) => p.name), ["delegate"])
        assertCompleted(stream)
      }))

    it.effect("a failed child: delegation.completed with status failed, tool_call.failed, and the parent goes on", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const child = yield* agentWith(user.token)
        const parent = yield* agentWith(user.token, {}, { subagents: [child] })
        const stream = yield* runAgent(user, parent, `/delegate ${child} /fail the child broke`)
        assertInOrder(stream, ["delegation.started", "delegation.completed", "tool_call.failed", "run.in_progress", "run.completed"])
        assert.strictEqual(only(stream, "delegation.completed").status, "failed")
        const failed = only(stream, "tool_call.failed")
        assert.strictEqual(failed.name, "delegate")
        assert.include(failed.error, `The subagent ${child} failed:`)
        assert.include(failed.error, "the child broke")
        assert.notInclude(names(stream), "run.failed")
        assertCompleted(stream)
      }))

    it.effect("with a budget, the whole tree never charges more than the budget (the child gets half of what is left)", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const child = yield* agentWith(user.token)
        const parent = yield* agentWith(user.token, {}, { subagents: [child] })
        // A long task makes both the parent's call (whose arguments carry it) and the child's echo expensive;
        // padding on the second line makes the parent's first step cost most of the budget.
        const message = `/delegate ${child} ${"task ".repeat(400)}\n${"context ".repeat(125)}`
        const budget = 0.02
        const before = yield* balanceOf(user.token)
        const stream = yield* runAgent(user, parent, message, { budget })
        const spent = micros(before) - micros(yield* balanceOf(user.token))
        assert.isAtMost(spent, micros(budget), `spent ${spent} µcredits of a ${micros(budget)} budget`)
        const tree = yield* runsOf(only(stream, "run.created").run_id)
        assert.strictEqual(Number(tree[0]!.credits_charged), spent, "the root's record includes the child's credits")
        // Its first step took most of the budget; the child had too little left for its first step.
        const completed = only(stream, "delegation.completed")
        assert.strictEqual(completed.status, "failed")
        assert.strictEqual(tree[1]!.status, "failed")
        // And the parent, too, has nothing left for its next step.
        assertInOrder(stream, ["delegation.completed", "tool_call.failed", "run.in_progress", "usage.budget_exhausted", "run.failed"])
        assert.strictEqual(last(stream).data.code, "budget_exhausted")
      }))
  })
})
