import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import { calibrated, estimateRow } from "../../src/evals/Estimate.js"
import { combine, gradeDirect, type Observation, parseVerdict, riskyPattern } from "../../src/evals/Graders.js"
import { parseCsv, parseJsonl, parseOpenAiEvals, parsePromptfoo } from "../../src/evals/Rows.js"

/** Issue 46 item 3: the graders are pure functions of a row's expectations and what its run did. */

const seen = (fields: Partial<Observation> = {}): Observation => ({
  output: "The capital of France is Paris.",
  status: "completed",
  failure: null,
  toolCalls: [],
  creditsMicros: 1_000n,
  latencyMs: 200,
  ...fields
})

describe("graders", () => {
  it("exact compares trimmed text, case-sensitive unless told; the row's expectation wins over the grader's", () => {
    assert.isTrue(gradeDirect({ type: "exact" }, { expected: " The capital of France is Paris. " }, seen())!.passed)
    assert.isFalse(gradeDirect({ type: "exact" }, { expected: "the capital of france is paris." }, seen())!.passed)
    assert.isTrue(gradeDirect({ type: "exact", case_sensitive: false }, { expected: "the capital of france is paris." }, seen())!.passed)
    assert.isTrue(gradeDirect({ type: "exact", value: "nope" }, { expected: "The capital of France is Paris." }, seen())!.passed)
    const skipped = gradeDirect({ type: "exact" }, {}, seen())!
    assert.isFalse(skipped.applicable)
    const failed = gradeDirect({ type: "exact" }, { expected: "Lyon" }, seen())!
    assert.deepInclude(failed, { applicable: true, passed: false, score: 0 })
    assert.include(failed.explanation, "Lyon")
  })

  it("contains: all texts by default, any on request, scored by the share found", () => {
    const both = gradeDirect({ type: "contains" }, { contains: ["paris", "france"] }, seen())!
    assert.deepInclude(both, { passed: true, score: 1 })
    const half = gradeDirect({ type: "contains" }, { contains: ["Paris", "Berlin"] }, seen())!
    assert.deepInclude(half, { passed: false, score: 0.5 })
    assert.include(half.explanation, "Berlin")
    assert.isTrue(gradeDirect({ type: "contains", mode: "any" }, { contains: ["Paris", "Berlin"] }, seen())!.passed)
    assert.isFalse(gradeDirect({ type: "contains", case_sensitive: true }, { contains: ["paris"] }, seen())!.passed)
    assert.isTrue(gradeDirect({ type: "contains", value: "Paris" }, {}, seen())!.passed)
  })

  it("regex matches; a bad pattern fails its row and says why", () => {
    assert.isTrue(gradeDirect({ type: "regex" }, { regex: "Paris\\.$" }, seen())!.passed)
    assert.isFalse(gradeDirect({ type: "regex" }, { regex: "^Paris" }, seen())!.passed)
    assert.isTrue(gradeDirect({ type: "regex", flags: "i" }, { regex: "^the" }, seen())!.passed)
    const bad = gradeDirect({ type: "regex", pattern: "(" }, {}, seen())!
    assert.deepInclude(bad, { applicable: true, passed: false })
    assert.include(bad.explanation, "not a valid regular expression")
    // Patterns that may backtrack for ever are refused before they run (the driver is one for the whole cluster).
    for (const pattern of ["(a+)+$", "(\\w*)*x", "(x+){2,}", "((ab)*)+"]) {
      const risky = gradeDirect({ type: "regex", pattern }, {}, seen({ output: "a".repeat(40) + "!" }))!
      assert.deepInclude(risky, { passed: false }, pattern)
      assert.include(risky.explanation, "exponential", pattern)
    }
    for (const pattern of ["^a+$", "(ab)+", "\\d{2,}", "(a|b)c+", "\\(a+\\)+"]) assert.isFalse(riskyPattern(pattern), pattern)
  })

  it("json_schema reads the answer as JSON (a fenced block too) and validates it", () => {
    const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
    assert.isTrue(gradeDirect({ type: "json_schema" }, { json_schema: schema }, seen({ output: "{\"city\": \"Paris\"}" }))!.passed)
    assert.isTrue(gradeDirect({ type: "json_schema" }, { json_schema: schema }, seen({ output: "Here:\n```json\n{\"city\": \"Paris\"}\n```" }))!.passed)
    const missing = gradeDirect({ type: "json_schema" }, { json_schema: schema }, seen({ output: "{\"town\": 1}" }))!
    assert.isFalse(missing.passed)
    assert.include(missing.explanation, "city")
    assert.include(gradeDirect({ type: "json_schema", schema }, {}, seen())!.explanation, "not JSON")
  })

  it("tool_trajectory: which tools, in what order, with which arguments", () => {
    const calls = [
      { name: "get_time", arguments: {} },
      { name: "calculator", arguments: { expression: "6 * 7" } }
    ]
    const row = { expected_tools: [{ name: "get_time" }, { name: "calculator", arguments: { expression: "6 * 7" } }] }
    assert.isTrue(gradeDirect({ type: "tool_trajectory" }, row, seen({ toolCalls: calls }))!.passed)
    assert.isTrue(gradeDirect({ type: "tool_trajectory", order: "strict" }, row, seen({ toolCalls: calls }))!.passed)
    const reversed = [calls[1]!, calls[0]!]
    const wrongOrder = gradeDirect({ type: "tool_trajectory" }, row, seen({ toolCalls: reversed }))!
    assert.deepInclude(wrongOrder, { passed: false, score: 0.5 })
    assert.isTrue(gradeDirect({ type: "tool_trajectory", order: "any" }, row, seen({ toolCalls: reversed }))!.passed)
    const otherArgs = [calls[0]!, { name: "calculator", arguments: { expression: "1 + 1" } }]
    assert.isFalse(gradeDirect({ type: "tool_trajectory" }, row, seen({ toolCalls: otherArgs }))!.passed)
    assert.isTrue(gradeDirect({ type: "tool_trajectory", arguments: "ignore" }, row, seen({ toolCalls: otherArgs }))!.passed)
    const extra = [...calls, { name: "get_time", arguments: {} }]
    assert.isTrue(gradeDirect({ type: "tool_trajectory" }, row, seen({ toolCalls: extra }))!.passed)
    assert.isFalse(gradeDirect({ type: "tool_trajectory", order: "strict" }, row, seen({ toolCalls: extra }))!.passed)
    const exactArgs = { expected_tools: [{ name: "calculator", arguments: { expression: "6 * 7" } }] }
    const more = [{ name: "calculator", arguments: { expression: "6 * 7", precision: 2 } }]
    assert.isTrue(gradeDirect({ type: "tool_trajectory" }, exactArgs, seen({ toolCalls: more }))!.passed)
    assert.isFalse(gradeDirect({ type: "tool_trajectory", arguments: "exact" }, exactArgs, seen({ toolCalls: more }))!.passed)
    // No calls expected, none made.
    assert.isTrue(gradeDirect({ type: "tool_trajectory", order: "strict" }, { expected_tools: [] }, seen())!.passed)
    assert.isFalse(gradeDirect({ type: "tool_trajectory", order: "strict" }, { expected_tools: [] }, seen({ toolCalls: calls }))!.passed)
  })

  it("budget: cost and latency, the row's own limits before the grader's", () => {
    assert.isTrue(gradeDirect({ type: "budget", max_credits: "0.001" }, {}, seen())!.passed)
    const over = gradeDirect({ type: "budget", max_credits: "0.000999" }, {}, seen())!
    assert.isFalse(over.passed)
    assert.include(over.explanation, "0.001 > 0.000999")
    assert.isFalse(gradeDirect({ type: "budget" }, { max_latency_ms: 100 }, seen())!.passed)
    assert.isTrue(gradeDirect({ type: "budget", max_latency_ms: 100 }, { max_latency_ms: 300 }, seen())!.passed)
    assert.isFalse(gradeDirect({ type: "budget" }, {}, seen())!.applicable)
  })

  it("the judge's verdict: a score against the threshold, anything else fails saying so", () => {
    assert.deepInclude(parseVerdict("{\"score\": 0.8, \"reason\": \"good\"}", 0.5), { passed: true, score: 0.8 })
    assert.deepInclude(parseVerdict("{\"score\": 0.4, \"reason\": \"meh\"}", 0.5), { passed: false, score: 0.4 })
    assert.deepInclude(parseVerdict("{\"score\": 7, \"reason\": \"\"}", 0.5), { passed: true, score: 1 })
    const junk = parseVerdict("I think it is fine", 0.5)
    assert.isFalse(junk.passed)
    assert.include(junk.explanation, "did not answer with a verdict")
  })

  it("a row passes when its run completed and every grader that applied passed", () => {
    const pass = gradeDirect({ type: "contains" }, { contains: ["Paris"] }, seen())!
    const fail = gradeDirect({ type: "regex" }, { regex: "^x" }, seen())!
    const skip = gradeDirect({ type: "exact" }, {}, seen())!
    assert.deepInclude(combine([pass, skip], seen()), { passed: true, score: 1 })
    const mixed = combine([pass, fail], seen())
    assert.deepInclude(mixed, { passed: false, score: 0.5 })
    assert.include(mixed.explanation, "regex:")
    const failedRun = combine([pass], seen({ status: "failed", failure: "model_error" }))
    assert.deepInclude(failedRun, { passed: false, score: 0 })
    assert.include(failedRun.explanation, "the run ended failed: model_error")
  })
})

describe("rows", () => {
  it("CSV: a header names the fields; quotes, commas and line breaks in cells; JSON columns", () => {
    const csv = "input,expected,contains,expected_tools,max_credits\n" +
      "\"Hello, world\",\"Hi\"\"there\",a|b,\"[{\"\"name\"\":\"\"get_time\"\"}]\",0.5\n" +
      "\"two\nlines\",,,,\n"
    const rows = Either.getOrThrow(parseCsv(csv))
    assert.strictEqual(rows.length, 2)
    assert.deepStrictEqual(rows[0]!.input, { message: "Hello, world", history: [] })
    assert.deepStrictEqual(rows[0]!.expected, { expected: "Hi\"there", contains: ["a", "b"], expected_tools: [{ name: "get_time" }], max_credits: "500000" })
    assert.strictEqual(rows[1]!.input.message, "two\nlines")
    assert.deepStrictEqual(rows[1]!.expected, {})
    assert.include(Either.getLeft(parseCsv("question\n\"open")).pipe((l) => l._tag === "Some" ? l.value : ""), "quoted")
    assert.include(Either.getLeft(parseCsv("foo,bar\n1,2")).pipe((l) => l._tag === "Some" ? l.value : ""), "input column")
  })

  it("JSONL: one row a line; a conversation ends with the user's message; errors name their line", () => {
    const rows = Either.getOrThrow(parseJsonl("{\"input\": \"a\", \"expected\": \"b\"}\n\n{\"input\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": \"y\"}, {\"role\": \"user\", \"content\": \"z\"}]}\n"))
    assert.deepStrictEqual(rows[1]!.input, { message: "z", history: [{ role: "user", content: "x" }, { role: "assistant", content: "y" }] })
    const bad = parseJsonl("{\"input\": \"a\"}\n{\"input\": [{\"role\": \"assistant\", \"content\": \"y\"}]}")
    assert.include(Either.isLeft(bad) ? bad.left : "", "line 2")
    assert.include(Either.isLeft(parseJsonl("nope")) ? "not JSON" : "", "not JSON")
  })

  it("promptfoo YAML: tests with vars rendered into the prompt and supported assertions; others reported", () => {
    const yaml = `
prompts:
  - "Answer: {{question}}"
defaultTest:
  assert:
    - type: latency
      threshold: 5000
tests:
  - vars:
      question: What is 2+2?
    assert:
      - type: equals
        value: "4"
      - type: icontains
        value: four
      - type: javascript
        value: output.length < 10
  - vars:
      question: Give JSON
    assert:
      - type: is-json
        value: { type: object }
      - type: llm-rubric
        value: Is valid JSON about {{question}}
      - type: regex
        value: "^\\\\{"
`
    const { rows, skipped } = Either.getOrThrow(parsePromptfoo(yaml))
    assert.strictEqual(rows.length, 2)
    assert.deepStrictEqual(rows[0]!.input.message, "Answer: What is 2+2?")
    assert.deepStrictEqual(rows[0]!.expected, { expected: "4", contains: ["four"], max_latency_ms: 5000 })
    assert.deepStrictEqual(rows[1]!.expected.json_schema, { type: "object" })
    assert.strictEqual(rows[1]!.expected.rubric, "Is valid JSON about Give JSON")
    assert.strictEqual(rows[1]!.expected.regex, "^\\{")
    assert.deepStrictEqual(skipped, ["assert type javascript (1 row)"])
    assert.isTrue(Either.isLeft(parsePromptfoo("tests: 3")))
  })

  it("OpenAI Evals JSONL: items with string_check and score_model criteria", () => {
    const criteria = [
      { type: "string_check", name: "eq", input: "{{sample.output_text}}", reference: "{{item.answer}}", operation: "eq" },
      { type: "string_check", name: "like", input: "{{sample.output_text}}", reference: "{{item.keyword}}", operation: "ilike" },
      { type: "score_model", name: "judge", input: [{ role: "system", content: "Grade whether the answer about {{item.question}} is polite." }], pass_threshold: 0.7 },
      { type: "python", name: "py" }
    ]
    const jsonl = "{\"item\": {\"question\": \"Capital of France?\", \"answer\": \"Paris\", \"keyword\": \"paris\"}}\n" +
      "{\"item\": {\"input\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"answer\": \"Hello\", \"keyword\": \"hel\"}}"
    const { rows, skipped } = Either.getOrThrow(parseOpenAiEvals(jsonl, criteria))
    assert.strictEqual(rows[0]!.input.message, "Capital of France?")
    assert.deepInclude(rows[0]!.expected, { expected: "Paris", contains: ["paris"], rubric: "Grade whether the answer about Capital of France? is polite." })
    assert.strictEqual(rows[1]!.input.message, "Hi")
    assert.deepStrictEqual(skipped, ["criterion python (2 rows)"])
  })
})

describe("estimate", () => {
  const rates = { inputPer1k: 10_000n, outputPer1k: 20_000n, reasoning: "" }
  it("is the model call's tokens at the model's rates, a step more per expected tool call, and the judge's call", () => {
    const base = estimateRow({ instructions: "Answer briefly.", input: { message: "hello there", history: [] }, expected: { expected: "You said: hello there" }, rates, judges: [] })
    // ceil(27/4) = 7 input tokens, ceil(21/4) = 6 output: (7 * 10000 + 6 * 20000) / 1000 = 190 micro-credits.
    assert.strictEqual(base, 190n)
    const tools = estimateRow({ instructions: "Answer briefly.", input: { message: "hello there", history: [] }, expected: { expected: "You said: hello there", expected_tools: [{ name: "get_time" }] }, rates, judges: [] })
    assert.isAbove(Number(tools), Number(base) * 2)
    const judged = estimateRow({ instructions: "Answer briefly.", input: { message: "hello there", history: [] }, expected: {}, rates, judges: [{ rates, rubric: "polite" }] })
    assert.isAbove(Number(judged), Number(base))
  })

  it("is scaled by the expert's record, within 0.5 to 2", () => {
    assert.strictEqual(calibrated(1000n, undefined), 1000n)
    assert.strictEqual(calibrated(1000n, { estimate: 100n, actual: 120n }), 1200n)
    assert.strictEqual(calibrated(1000n, { estimate: 100n, actual: 1000n }), 2000n)
    assert.strictEqual(calibrated(1000n, { estimate: 100n, actual: 1n }), 500n)
  })
})
