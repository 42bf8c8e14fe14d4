import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { balanceOf, getAgent, liveAgent, newUser } from "../agents/agents-support.js"
import { micros } from "../billing/billing-support.js"
import { request } from "../support/Client.js"
import * as Mock from "../support/MockUpstream.js"
import { ENV, LIVE } from "../mcp/mcp-support.js"
import { acceptSuggestion, findSuggestion, runOnce, suggestionsOf } from "./evolution-support.js"

/**
 * With a real model (a mock OpenAI-compatible upstream over real HTTP): the agent's own model drafts the text of a
 * new evolution suggestion, billed to the owner; the distiller runs on `DISTILLATION_MODEL` and its reply is the
 * answer, while the draft stays the platform's.
 */

const Servers = Mock.serverWithUpstream({
  ...ENV,
  OPENAI_MODELS: "mock-model",
  OPENAI_MODEL_RATES: "mock-model=1:2",
  DISTILLATION_MODEL: "mock-model"
})

const text = (deltas: ReadonlyArray<string>, usage: readonly [number, number] = [100, 10]) =>
  Mock.stream([Mock.chatText(deltas, usage)])

describe("evolution and distillation with a real model", () => {
  layer(Servers, LIVE)((it) => {
    it.effect("the agent's model drafts a new suggestion's text once, paid by the owner; the template is the fallback", () =>
      Effect.gen(function*() {
        const upstream = yield* Mock.Upstream
        const owner = yield* newUser
        const identifier = yield* liveAgent(owner.token, { name: "Upstreamed", model: "mock-model", instructions: "Help with taxes." })
        const user = yield* newUser
        yield* upstream.script(Mock.status(500, { error: { message: "down" } }))
        const failed = yield* runOnce(user.token, identifier, "what is VAT?")
        assert.strictEqual(failed.error?.code, "upstream_error")

        const before = yield* balanceOf(owner.token)
        const seen = (yield* upstream.requests).length
        yield* upstream.script(text(["When a source is unreachable, ", "say so and give the rule you know."]))
        const list = (yield* suggestionsOf(owner.token, identifier)).body
        const suggestion = findSuggestion(list, "failed_runs", "upstream_error")
        assert.strictEqual(suggestion.drafted_by, "model:mock-model")
        assert.deepStrictEqual(suggestion.change, {
          type: "append_instructions",
          text: "When a source is unreachable, say so and give the rule you know."
        })
        // The model saw the agent's instructions and the evidence.
        const asked = (yield* upstream.requests)[seen]!
        const prompt = JSON.stringify(asked.body.messages)
        assert.include(prompt, "Help with taxes.")
        assert.include(prompt, "1 run of 1 failed with upstream_error")
        // Billed to the owner as a run of its own (100 input tokens at 1 + 10 output at 2 per 1000 = 0.12).
        assert.strictEqual(micros(before) - micros(yield* balanceOf(owner.token)), micros(0.12))

        // Listing again keeps the text and asks the model nothing.
        const again = (yield* suggestionsOf(owner.token, identifier)).body
        assert.deepStrictEqual(findSuggestion(again, "failed_runs", "upstream_error").change, suggestion.change)
        assert.strictEqual((yield* upstream.requests).length, seen + 1)

        const accepted = yield* acceptSuggestion(owner.token, suggestion.id)
        assert.strictEqual(accepted.status, 200, accepted.text)
        assert.strictEqual(
          (yield* getAgent(owner.token, identifier)).body.instructions,
          "Help with taxes.\n\nWhen a source is unreachable, say so and give the rule you know."
        )

        // A model that fails leaves the template's text.
        const broke = yield* runOnce(user.token, identifier, "anything", { budget: 0.000001 })
        assert.strictEqual(broke.error?.code, "budget_exhausted")
        yield* upstream.script(Mock.status(500, { error: { message: "still down" } }))
        const fallback = findSuggestion((yield* suggestionsOf(owner.token, identifier)).body, "failed_runs", "budget_exhausted")
        assert.strictEqual(fallback.drafted_by, "template")
        assert.strictEqual(fallback.title, "Answer more economically")
      }))

    it.effect("the distiller on a real model: its reply is the answer, the draft stays grounded and the platform's", () =>
      Effect.gen(function*() {
        const upstream = yield* Mock.Upstream
        const me = yield* newUser
        const seen = (yield* upstream.requests).length
        yield* upstream.script(text(["I read tea.md. ", "Shall I name it Tea Master?"]))
        const started = yield* request("POST", "/v1/distillations", {
          token: me.token,
          body: { topic: "tea", materials: [{ filename: "tea.md", content: "# Tea\n\nGreen tea likes cooler water than black tea." }] }
        })
        assert.strictEqual(started.status, 201, started.text)
        assert.strictEqual(started.body.answer, "I read tea.md. Shall I name it Tea Master?")
        assert.include(started.body.draft.instructions, "Green tea likes cooler water than black tea. (tea.md)")
        const sent = (yield* upstream.requests)[seen]!
        assert.strictEqual(sent.body.model, "mock-model")
        const system = sent.body.messages[0]
        assert.strictEqual(system.role, "system")
        assert.include(JSON.stringify(system), "Green tea likes cooler water")
        assert.include(JSON.stringify(system), "Current draft")

        yield* upstream.script(text(["Done, it is created."]))
        const created = yield* request("POST", `/v1/distillations/${started.body.sessionId}/messages`, {
          token: me.token,
          body: { message: "name: Tea Master\ncreate" }
        })
        assert.strictEqual(created.status, 200, created.text)
        const identifier = created.body.agent.identifier
        assert.strictEqual(created.body.answer, `Done, it is created.\n\nI created the agent draft ${identifier}. It is private until you publish it: try it with test_expert, then submit it with publish_expert.`)
        assert.strictEqual((yield* getAgent(me.token, identifier)).body.name, "Tea Master")
        // The conversation so far went to the model as history.
        const second = (yield* upstream.requests)[seen + 1]!
        assert.include(JSON.stringify(second.body.messages), "Shall I name it Tea Master?")
      }))
  })
})
