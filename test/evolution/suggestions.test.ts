import { assert, describe, it } from "@effect/vitest"
import type { AgentConfig } from "../../src/agents/Agent.js"
import {
  applies,
  applyChange,
  derive,
  emptyOutcomes,
  INTERRUPTED_TEXT,
  type Outcomes,
  unknownToolsText
} from "../../src/evolution/Suggestions.js"

/** The derivation of suggestions and the application of changes, as pure functions. */

const config = (fields: Partial<AgentConfig> = {}): AgentConfig => ({
  name: "A",
  description: "",
  category: "other",
  instructions: "Be brief.",
  model: "builtin",
  tools: [],
  subagents: [],
  opening_message: "",
  case_demos: [],
  billing: { type: "FREE", price: "0", free_trial_per_user: 3, allow_trial: true },
  ...fields
})

const outcomes = (fields: Partial<Outcomes>): Outcomes => ({ ...emptyOutcomes, ...fields })

describe("evolution suggestions", () => {
  it("nothing to suggest from clean runs", () => {
    const clean = outcomes({ total: 5, completed: 5 })
    assert.deepStrictEqual(derive(config({ tools: [{ name: "calculator", permission: "deny" }] }), clean, () => clean, ["builtin"]), [])
  })

  it("one suggestion per failure code, each with its counts; an unavailable model suggests an available one", () => {
    const runs = outcomes({ total: 10, completed: 6, failed: 4, failures: { max_steps: 1, model_unavailable: 1, upstream_error: 2 } })
    const found = derive(config({ model: "gone" }), runs, () => runs, ["builtin"])
    assert.deepStrictEqual(found.map((c) => [c.kind, c.subject, c.change.type]), [
      ["failed_runs", "max_steps", "append_instructions"],
      ["failed_runs", "model_unavailable", "set_model"],
      ["failed_runs", "upstream_error", "append_instructions"]
    ])
    assert.deepStrictEqual(found[1]!.change, { type: "set_model", model: "builtin" })
    assert.deepStrictEqual(found[2]!.evidence, { failed_runs: 2, runs: 10 })
    assert.include(found[2]!.rationale, "2 runs of 10 failed with upstream_error")
  })

  it("denials: allow or remove each restricted tool that was denied, by name; unknown tools are named", () => {
    const runs = outcomes({
      total: 3,
      completed: 3,
      deniedRuns: 2,
      deniedCalls: 4,
      deniedTools: { calculator: { runs: 2, calls: 3 }, web_search: { runs: 1, calls: 1 } }
    })
    const tools = [
      { name: "get_time", permission: "allow" },
      { name: "calculator", permission: "ask" },
      { name: "memory_save", permission: "deny" }
    ] as const
    const found = derive(config({ tools: [...tools] }), runs, () => runs, [])
    // memory_save is restricted but was never denied: no suggestion about it.
    assert.deepStrictEqual(found.map((c) => [c.kind, c.subject]), [
      ["allow_denied_tool", "calculator"],
      ["remove_denied_tool", "calculator"],
      ["unknown_tool_calls", ""]
    ])
    assert.include(found[0]!.rationale, "3 tool calls were denied in 2 runs of 3; calculator is set to ask")
    assert.deepStrictEqual(found[0]!.evidence, { runs_with_denials: 2, denied_calls: 3, runs: 3 })
    assert.include(found[2]!.rationale, "1 call to tools the agent does not have (web_search) was denied over 3 runs")
    assert.deepStrictEqual(found[2]!.evidence, { denied_calls: 1, runs: 3 })
    assert.deepStrictEqual(found[2]!.change, { type: "append_instructions", text: unknownToolsText(config({ tools: [...tools] })) })
    assert.include(unknownToolsText(config()), "You have no tools")
  })

  it("denials named by no tool (runs recorded before names were) suggest nothing", () => {
    const runs = outcomes({ total: 3, completed: 3, deniedRuns: 2, deniedCalls: 3 })
    assert.deepStrictEqual(derive(config({ tools: [{ name: "calculator", permission: "deny" }] }), runs, () => runs, []), [])
    assert.deepStrictEqual(derive(config(), runs, () => runs, []), [])
  })

  it("a tool's denials dealt with (asked with its name) are no unknown-tool evidence", () => {
    const all = outcomes({ total: 2, completed: 2, deniedRuns: 1, deniedCalls: 1, deniedTools: { calculator: { runs: 1, calls: 1 } } })
    const since = outcomes({ total: 1, completed: 1 })
    // calculator was removed after its denials: the same runs do not make it an unknown tool.
    assert.deepStrictEqual(derive(config(), all, (kind, subject) => kind === "unknown_tool_calls" && subject === "calculator" ? since : all, []), [])
    assert.deepStrictEqual(derive(config(), all, () => all, []).map((c) => c.kind), ["unknown_tool_calls"])
  })

  it("interrupted runs and unanswered questions; the trial notice only for UNLOCK agents", () => {
    const runs = outcomes({ total: 4, completed: 3, cancelled: 1, trialExhausted: 2, emptyAnswers: 1 })
    const free = derive(config(), runs, () => runs, [])
    assert.deepStrictEqual(free.map((c) => [c.kind, c.subject]), [["interrupted_runs", ""], ["unanswered_questions", "empty_answer"]])
    assert.deepStrictEqual(free[0]!.change, { type: "append_instructions", text: INTERRUPTED_TEXT })
    const paid = derive(config({ billing: { type: "UNLOCK", price: "2.5", free_trial_per_user: 3, allow_trial: true } }), runs, () => runs, [])
    const trial = paid.find((c) => c.subject === "trial_exhausted")!
    assert.deepStrictEqual(trial.change, {
      type: "append_opening_message",
      text: "Note: the first 3 questions are free; unlock this expert for 2.5 credits to ask as many as you like."
    })
    assert.deepStrictEqual(trial.evidence, { trial_exhausted: 2, runs: 4 })
  })

  it("evidence is counted per kind since its last decision", () => {
    const all = outcomes({ total: 6, failed: 2, cancelled: 2, failures: { model_error: 2 } })
    const since = outcomes({ total: 1, completed: 1 })
    const found = derive(config(), all, (kind) => kind === "failed_runs" ? since : all, [])
    assert.deepStrictEqual(found.map((c) => c.kind), ["interrupted_runs"])
  })

  it("changes apply once, to the field they name; a change that does nothing is recognised", () => {
    const base = config({ tools: [{ name: "calculator", permission: "deny" }, { name: "get_time", permission: "allow" }] })
    const appended = applyChange(base, { type: "append_instructions", text: "Say less." })
    assert.strictEqual(appended.instructions, "Be brief.\n\nSay less.")
    assert.strictEqual(applyChange(appended, { type: "append_instructions", text: "Say less." }), appended)
    assert.strictEqual(applyChange(config({ instructions: "" }), { type: "append_instructions", text: "Hi." }).instructions, "Hi.")
    const allowed = applyChange(base, { type: "set_tool_permission", tool: "calculator", permission: "allow" })
    assert.deepStrictEqual(allowed.tools, [{ name: "calculator", permission: "allow" }, { name: "get_time", permission: "allow" }])
    assert.isFalse(applies(allowed, { type: "set_tool_permission", tool: "calculator", permission: "allow" }))
    assert.isFalse(applies(base, { type: "set_tool_permission", tool: "memory_save", permission: "allow" }))
    assert.deepStrictEqual(applyChange(base, { type: "remove_tool", tool: "calculator" }).tools, [{ name: "get_time", permission: "allow" }])
    assert.strictEqual(applyChange(base, { type: "set_model", model: "other" }).model, "other")
    assert.strictEqual(applyChange(base, { type: "append_opening_message", text: "Hello" }).opening_message, "Hello")
    assert.strictEqual(base.instructions, "Be brief.", "the input is not changed")
  })
})
