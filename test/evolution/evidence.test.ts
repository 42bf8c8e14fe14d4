import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { approved, createAgent, ENV, LIVE, liveAgent, newUser, patchAgent, publish } from "../agents/agents-support.js"
import * as Mock from "../support/MockUpstream.js"
import { TestServer } from "../support/TestServer.js"
import { eventTypes, findSuggestion, runOnce, statsOf, suggestionsOf } from "./evolution-support.js"

/**
 * Suggestions from what a run's record names (migration 0009_run_evidence): the tools whose calls were denied, and
 * answers that had no text.
 */

const listOk = (token: string, identifier: string) =>
  Effect.gen(function*() {
    const reply = yield* suggestionsOf(token, identifier)
    assert.strictEqual(reply.status, 200, reply.text)
    return reply.body as { identifier: string; data: Array<any>; has_more: boolean }
  })

const kinds = (list: { data: ReadonlyArray<any> }) => list.data.map((s) => `${s.kind}/${s.subject}`).sort()

const WithUpstream = Mock.serverWithUpstream({ ...ENV, ...Mock.MOCK_MODEL_ENV })

describe("evolution from run evidence", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.scoped("denial suggestions name only the tools whose calls were denied", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const identifier = yield* liveAgent(owner.token, {
          name: "Two restricted",
          tools: [{ name: "calculator", permission: "deny" }, { name: "get_time", permission: "ask" }]
        })
        const user = yield* newUser
        // A run that denies nothing is no evidence about get_time, though get_time is set to ask.
        yield* runOnce(user.token, identifier, "hello")
        assert.deepStrictEqual(kinds(yield* listOk(owner.token, identifier)), [])

        for (const expression of ["1+1", "2+2"]) {
          const run = yield* runOnce(user.token, identifier, `/tool calculator {"expression":"${expression}"}`)
          assert.include(eventTypes(run), "tool_call.denied")
        }
        const list = yield* listOk(owner.token, identifier)
        assert.deepStrictEqual(kinds(list), ["allow_denied_tool/calculator", "remove_denied_tool/calculator"])
        const allow = findSuggestion(list, "allow_denied_tool", "calculator")
        assert.deepStrictEqual(allow.evidence, { runs_with_denials: 2, denied_calls: 2, runs: 3 })
        assert.include(allow.rationale, "2 tool calls were denied in 2 runs of 3; calculator is set to deny")

        const stats = yield* statsOf(owner.token, identifier)
        assert.strictEqual(stats.status, 200, stats.text)
        assert.deepInclude(stats.body.runs.all, { runs_with_denied_tools: 2, denied_tool_calls: 2, denied_tools: { calculator: 2 } })
      }))

    it.scoped("a tool denied by an earlier version is named as one the agent does not have", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const identifier = yield* liveAgent(owner.token, { name: "Changed", tools: [{ name: "calculator", permission: "deny" }] })
        const user = yield* newUser
        const run = yield* runOnce(user.token, identifier, '/tool calculator {"expression":"3*3"}')
        assert.include(eventTypes(run), "tool_call.denied")

        // The next version has no calculator: nothing to allow or remove, but the model reached for it.
        const patched = yield* patchAgent(owner.token, identifier, { tools: [{ name: "get_time", permission: "deny" }] })
        assert.strictEqual(patched.status, 200, patched.text)
        yield* approved((yield* publish(owner.token, identifier)).id)

        const list = yield* listOk(owner.token, identifier)
        assert.deepStrictEqual(kinds(list), ["unknown_tool_calls/"])
        const unknown = findSuggestion(list, "unknown_tool_calls", "")
        assert.include(unknown.rationale, "1 call to tools the agent does not have (calculator) was denied over 1 run")
        assert.deepStrictEqual(unknown.evidence, { denied_calls: 1, runs: 1 })
        assert.deepStrictEqual(unknown.change, {
          type: "append_instructions",
          text: "You have no tools: answer directly from what you know and never try to call a tool."
        })
      }))

    it.scoped("runs recorded before answer lengths were: no output tokens is an empty answer, output tokens are not", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const agent = yield* createAgent(owner.token, { name: "Old runs" })
        const silent = yield* runOnce(owner.token, agent.identifier, "one")
        const spoke = yield* runOnce(owner.token, agent.identifier, "two")
        assert.deepStrictEqual(kinds(yield* listOk(owner.token, agent.identifier)), [])

        // As the migration leaves the runs of the version before: no length. Only the first had no output.
        const server = yield* TestServer
        yield* server.query(`UPDATE runs SET answer_chars = NULL WHERE id IN ('${silent.id}', '${spoke.id}')`)
        yield* server.query(`UPDATE runs SET output_tokens = 0 WHERE id = '${silent.id}'`)
        const list = yield* listOk(owner.token, agent.identifier)
        const empty = findSuggestion(list, "unanswered_questions", "empty_answer")
        assert.deepStrictEqual(empty.evidence, { empty_answers: 1, runs: 2 })
      }))
  })

  layer(WithUpstream, LIVE)((it) => {
    it.scoped("a completed run whose answer had no text is an unanswered question, though the model reported output", () =>
      Effect.gen(function*() {
        const upstream = yield* Mock.Upstream
        const owner = yield* newUser
        const agent = yield* createAgent(owner.token, { name: "Quiet", model: "mock-model" })
        yield* upstream.script(Mock.stream([Mock.chatText(["A real answer."], [30, 12])]))
        const answered = yield* runOnce(owner.token, agent.identifier, "first")
        assert.strictEqual(answered.output, "A real answer.")
        assert.deepStrictEqual(kinds(yield* listOk(owner.token, agent.identifier)), [], "an answer with text is no evidence")

        yield* upstream.script(Mock.stream([Mock.chatText([" ", "\n"], [30, 12])]))
        const silent = yield* runOnce(owner.token, agent.identifier, "second")
        assert.strictEqual(silent.status, "completed")
        // The new suggestion's text is drafted by the agent's own model, once.
        yield* upstream.script(Mock.stream([Mock.chatText(["When unsure, say so in words."], [40, 8])]))
        const list = yield* listOk(owner.token, agent.identifier)
        assert.deepStrictEqual(kinds(list), ["unanswered_questions/empty_answer"])
        const empty = findSuggestion(list, "unanswered_questions", "empty_answer")
        assert.deepStrictEqual(empty.evidence, { empty_answers: 1, runs: 2 })
        assert.include(empty.rationale, "1 run of 2 ended without an answer")
        assert.deepStrictEqual(empty.change, { type: "append_instructions", text: "When unsure, say so in words." })
        assert.strictEqual(empty.drafted_by, "model:mock-model")

        const stats = yield* statsOf(owner.token, agent.identifier)
        assert.strictEqual(stats.body.runs.all.unanswered, 1)
      }))
  })
})
