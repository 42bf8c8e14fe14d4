import { Ajv } from "ajv"
import { storableText } from "../platform/Storable.js"
import type { Grader } from "./Domain.js"

/**
 * The graders (docs/evals.md, "Graders"): pure functions of a row's expectations and what its run did. Each says
 * whether it applied (a grader whose expectation the row lacks, and that has no value of its own, skips the row),
 * passed, a score from 0 to 1, and why, in words a creator reads beside the row.
 */

/** A row's expectations as stored (credits as micro-credits in a string). */
export interface Expectations {
  readonly expected?: string | undefined
  readonly contains?: ReadonlyArray<string> | undefined
  readonly regex?: string | undefined
  readonly json_schema?: Record<string, unknown> | undefined
  readonly expected_tools?: ReadonlyArray<{ readonly name: string; readonly arguments?: Record<string, unknown> | undefined }> | undefined
  readonly max_credits?: string | undefined
  readonly max_latency_ms?: number | undefined
  readonly rubric?: string | undefined
}

export interface ToolCall {
  readonly name: string
  readonly arguments: unknown
}

/** What a row's run did. */
export interface Observation {
  readonly output: string
  /** The run's end: `completed`, or why it did not. */
  readonly status: string
  readonly failure: string | null
  readonly toolCalls: ReadonlyArray<ToolCall>
  readonly creditsMicros: bigint
  readonly latencyMs: number
}

export interface Grade {
  readonly grader: string
  readonly applicable: boolean
  readonly passed: boolean
  readonly score: number
  readonly explanation: string
}

const skipped = (grader: string, why: string): Grade => ({ grader, applicable: false, passed: true, score: 1, explanation: why })
const verdict = (grader: string, passed: boolean, explanation: string, score = passed ? 1 : 0): Grade =>
  ({ grader, applicable: true, passed, score, explanation })

// A cut between the halves of a pair would leave a lone surrogate, which the stored grade cannot hold.
const clip = (text: string, max = 120) => (text.length > max ? `${storableText(text.slice(0, max))}…` : text)

export const exact = (grader: Extract<Grader, { type: "exact" }>, row: Expectations, seen: Observation): Grade => {
  const wanted = row.expected ?? grader.value
  if (wanted === undefined) return skipped("exact", "no expected answer")
  const norm = (text: string) => {
    const trimmed = grader.trim === false ? text : text.trim()
    return grader.case_sensitive === false ? trimmed.toLowerCase() : trimmed
  }
  const passed = norm(seen.output) === norm(wanted)
  return verdict("exact", passed, passed ? "the answer is the expected one" : `expected "${clip(wanted)}", got "${clip(seen.output)}"`)
}

export const contains = (grader: Extract<Grader, { type: "contains" }>, row: Expectations, seen: Observation): Grade => {
  const own = grader.value === undefined ? undefined : typeof grader.value === "string" ? [grader.value] : grader.value
  const wanted = row.contains ?? own ?? (row.expected === undefined ? undefined : [row.expected])
  if (wanted === undefined || wanted.length === 0) return skipped("contains", "no text to look for")
  const fold = (text: string) => (grader.case_sensitive === true ? text : text.toLowerCase())
  const found = wanted.filter((text) => fold(seen.output).includes(fold(text)))
  const missing = wanted.filter((text) => !found.includes(text))
  const passed = grader.mode === "any" ? found.length > 0 : missing.length === 0
  return verdict(
    "contains",
    passed,
    passed ? `the answer contains ${found.map((t) => `"${clip(t, 40)}"`).join(", ")}` : `missing ${missing.map((t) => `"${clip(t, 40)}"`).join(", ")}`,
    found.length / wanted.length
  )
}

/**
 * A pattern whose matching may take exponential time: a quantified group that holds a quantifier (`(a+)+`, `(\w*)*`,
 * `(x+){2,}`). Grading runs on the cluster's one eval driver, so a pattern that backtracks for minutes would stall
 * every creator's eval runs: such patterns are refused (a heuristic, the usual star-height test).
 */
export const riskyPattern = (pattern: string): boolean => {
  const quantifier = /^(?:[+*]|\{\d+,\d*\})/
  // One entry per open group: whether something inside it is quantified.
  const open: Array<boolean> = []
  let inClass = false
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!
    if (c === "\\") {
      i++
      continue
    }
    if (inClass) {
      if (c === "]") inClass = false
      continue
    }
    if (c === "[") inClass = true
    else if (c === "(") open.push(false)
    else if (c === ")") {
      const inner = open.pop() ?? false
      const quantified = quantifier.test(pattern.slice(i + 1))
      if (inner && quantified) return true
      if (open.length > 0 && (inner || quantified)) open[open.length - 1] = true
    } else if (open.length > 0 && quantifier.test(pattern.slice(i))) open[open.length - 1] = true
  }
  return false
}

/** A pattern is the creator's own; a bad one fails its rows (said why) rather than the run. */
export const regex = (grader: Extract<Grader, { type: "regex" }>, row: Expectations, seen: Observation): Grade => {
  const pattern = row.regex ?? grader.pattern
  if (pattern === undefined) return skipped("regex", "no pattern")
  if (riskyPattern(pattern)) {
    return verdict("regex", false, "the pattern has a quantified group holding a quantifier, which may take exponential time: rewrite it")
  }
  let compiled: RegExp
  try {
    compiled = new RegExp(pattern, grader.flags ?? "")
  } catch (error) {
    return verdict("regex", false, `the pattern is not a valid regular expression: ${(error as Error).message}`)
  }
  // Bounded input: a pathological pattern on a long answer must not hold the grader for long.
  const passed = compiled.test(seen.output.slice(0, 100_000))
  return verdict("regex", passed, passed ? `the answer matches /${clip(pattern, 60)}/` : `the answer does not match /${clip(pattern, 60)}/`)
}

/** The answer read as JSON (a fenced ```json block too, as models often answer). */
export const parseJsonAnswer = (output: string): { ok: true; value: unknown } | { ok: false } => {
  const fenced = /```(?:json)?\s*([\s\S]*?)```/.exec(output)
  for (const text of [output, fenced?.[1]]) {
    if (text === undefined) continue
    try {
      return { ok: true, value: JSON.parse(text.trim()) }
    } catch {
      // try the next reading
    }
  }
  return { ok: false }
}

export const jsonSchema = (grader: Extract<Grader, { type: "json_schema" }>, row: Expectations, seen: Observation): Grade => {
  const schema = row.json_schema ?? grader.schema
  if (schema === undefined) return skipped("json_schema", "no schema")
  const parsed = parseJsonAnswer(seen.output)
  if (!parsed.ok) return verdict("json_schema", false, "the answer is not JSON")
  let validate
  try {
    // A compiler per grading: ajv caches every schema it compiles, and rows' schemas are new objects each time.
    validate = new Ajv({ allErrors: false, strict: false }).compile(schema)
  } catch (error) {
    return verdict("json_schema", false, `the schema is not valid: ${(error as Error).message}`)
  }
  const passed = validate(parsed.value) === true
  const first = validate.errors?.[0]
  return verdict(
    "json_schema",
    passed,
    passed ? "the answer satisfies the schema" : `the answer does not satisfy the schema: ${first?.instancePath || "/"} ${first?.message ?? ""}`.trim()
  )
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const same = (a: unknown, b: unknown): boolean => JSON.stringify(canonical(a)) === JSON.stringify(canonical(b))
const canonical = (u: unknown): unknown =>
  Array.isArray(u) ? u.map(canonical) : isRecord(u) ? Object.fromEntries(Object.keys(u).sort().map((k) => [k, canonical(u[k])])) : u

const argumentsMatch = (mode: "subset" | "exact" | "ignore", wanted: Record<string, unknown> | undefined, got: unknown) => {
  if (mode === "ignore" || wanted === undefined) return true
  if (!isRecord(got)) return false
  if (mode === "exact") return same(wanted, got)
  return Object.entries(wanted).every(([key, value]) => key in got && same(value, got[key]))
}

/**
 * The tool-call trajectory: which tools were called, in what order, with which arguments. The score is the share
 * of expected calls matched (in order for `strict` and `in_order`).
 */
export const toolTrajectory = (grader: Extract<Grader, { type: "tool_trajectory" }>, row: Expectations, seen: Observation): Grade => {
  const wanted = row.expected_tools
  if (wanted === undefined) return skipped("tool_trajectory", "no expected tool calls")
  const order = grader.order ?? "in_order"
  const mode = grader.arguments ?? "subset"
  const calls = seen.toolCalls
  const called = calls.map((call) => call.name).join(", ") || "none"
  const matches = (i: number, call: ToolCall) => call.name === wanted[i]!.name && argumentsMatch(mode, wanted[i]!.arguments, call.arguments)
  let matched = 0
  if (order === "strict") {
    while (matched < wanted.length && matched < calls.length && matches(matched, calls[matched]!)) matched++
    const passed = matched === wanted.length && calls.length === wanted.length
    return verdict("tool_trajectory", passed, passed ? `called ${called}, as expected` : `expected exactly ${wanted.map((t) => t.name).join(", ") || "no calls"}; called ${called}`, wanted.length === 0 ? (calls.length === 0 ? 1 : 0) : matched / wanted.length)
  }
  if (order === "in_order") {
    for (const call of calls) if (matched < wanted.length && matches(matched, call)) matched++
  } else {
    const used = new Set<number>()
    wanted.forEach((_, i) => {
      const at = calls.findIndex((call, j) => !used.has(j) && matches(i, call))
      if (at >= 0) {
        used.add(at)
        matched++
      }
    })
  }
  const passed = matched === wanted.length
  const missing = wanted.length - matched
  return verdict(
    "tool_trajectory",
    passed,
    passed ? `called ${called}, as expected` : `${missing} of ${wanted.length} expected calls (${wanted.map((t) => t.name).join(", ")}) not made ${order === "any" ? "" : "in order "}with matching arguments; called ${called}`.replace("  ", " "),
    wanted.length === 0 ? 1 : matched / wanted.length
  )
}

/** Micro-credits of a decimal amount; undefined when it is not one. */
export const microsOf = (credits: number | string): bigint | undefined => {
  const text = String(credits).trim()
  const match = /^(\d{1,12})(?:\.(\d{1,6}))?$/.exec(text)
  if (match === null) return undefined
  return BigInt(match[1]!) * 1_000_000n + BigInt((match[2] ?? "").padEnd(6, "0"))
}

const formatMicros = (micros: bigint) => {
  const whole = micros / 1_000_000n
  const fraction = (micros % 1_000_000n).toString().padStart(6, "0").replace(/0+$/, "")
  return fraction.length === 0 ? whole.toString() : `${whole}.${fraction}`
}

/** Cost and latency budgets: the row's own, else the grader's. */
export const budget = (grader: Extract<Grader, { type: "budget" }>, row: Expectations, seen: Observation): Grade => {
  const maxCredits = row.max_credits !== undefined ? BigInt(row.max_credits) : grader.max_credits === undefined ? undefined : microsOf(grader.max_credits)
  const maxLatency = row.max_latency_ms ?? grader.max_latency_ms
  if (maxCredits === undefined && maxLatency === undefined) return skipped("budget", "no budget")
  const over: Array<string> = []
  if (maxCredits !== undefined && seen.creditsMicros > maxCredits) over.push(`cost ${formatMicros(seen.creditsMicros)} > ${formatMicros(maxCredits)} credits`)
  if (maxLatency !== undefined && seen.latencyMs > maxLatency) over.push(`took ${seen.latencyMs} ms > ${maxLatency} ms`)
  const passed = over.length === 0
  return verdict("budget", passed, passed ? `within budget (${formatMicros(seen.creditsMicros)} credits, ${seen.latencyMs} ms)` : over.join("; "))
}

/** Every grader but the judge, which needs a model run (`judgePrompt`, `parseVerdict`). */
export const gradeDirect = (grader: Grader, row: Expectations, seen: Observation): Grade | undefined => {
  switch (grader.type) {
    case "exact":
      return exact(grader, row, seen)
    case "contains":
      return contains(grader, row, seen)
    case "regex":
      return regex(grader, row, seen)
    case "json_schema":
      return jsonSchema(grader, row, seen)
    case "tool_trajectory":
      return toolTrajectory(grader, row, seen)
    case "budget":
      return budget(grader, row, seen)
    case "llm_judge":
      return undefined
  }
}

/** The JSON the judge must answer with (asked as structured output, so models that support it cannot stray). */
export const VERDICT_SCHEMA = {
  type: "object",
  properties: {
    score: { type: "number", description: "How well the answer meets the rubric, from 0 (not at all) to 1 (fully)." },
    reason: { type: "string", description: "One or two sentences: why this score." }
  },
  required: ["score", "reason"],
  additionalProperties: false
} as const

/**
 * The judge's prompt: the rubric, the conversation's last message, the answer, and the expected answer when there is
 * one. Written here rather than taken from `autoevals`/`openevals` (docs/evals.md, "Why our own judge").
 */
export const judgePrompt = (rubric: string, input: string, output: string, expected: string | undefined) =>
  [
    "You are grading an AI assistant's answer against a rubric. Be strict and impartial.",
    "Answer only with JSON: {\"score\": <number from 0 to 1>, \"reason\": \"<one or two sentences>\"}.",
    "",
    "[Rubric]",
    rubric,
    "",
    "[Question]",
    input,
    "",
    "[Answer]",
    output,
    ...(expected === undefined ? [] : ["", "[Reference answer]", expected])
  ].join("\n")

export const DEFAULT_RUBRIC = "The answer responds to the question correctly, completely and without invented facts."

/** The judge's answer as a grade; an answer that is not the verdict JSON fails the row, saying so. */
export const parseVerdict = (text: string, threshold: number): Grade => {
  const parsed = parseJsonAnswer(text)
  if (!parsed.ok || !isRecord(parsed.value) || typeof parsed.value.score !== "number" || !Number.isFinite(parsed.value.score)) {
    return verdict("llm_judge", false, `the judge did not answer with a verdict: "${clip(text)}"`)
  }
  const score = Math.min(Math.max(parsed.value.score, 0), 1)
  const reason = typeof parsed.value.reason === "string" ? parsed.value.reason : ""
  return verdict("llm_judge", score >= threshold, `score ${score} (pass from ${threshold}): ${clip(reason, 500)}`, score)
}

/** A row's outcome from its grades: it passes when its run completed and every grader that applied passed. */
export const combine = (grades: ReadonlyArray<Grade>, seen: Pick<Observation, "status" | "failure">) => {
  const applied = grades.filter((grade) => grade.applicable)
  const ran = seen.status === "completed"
  const passed = ran && applied.every((grade) => grade.passed)
  const score = applied.length === 0 ? (ran ? 1 : 0) : applied.reduce((sum, grade) => sum + grade.score, 0) / applied.length
  const explanation = [
    ...(ran ? [] : [`the run ended ${seen.status}${seen.failure === null ? "" : `: ${seen.failure}`}`]),
    ...applied.map((grade) => `${grade.grader}: ${grade.explanation}`),
    ...(applied.length === 0 ? ["no grader applied to this row"] : [])
  ].join("; ")
  return { passed, score: ran ? score : 0, explanation }
}
