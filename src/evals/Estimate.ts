import { DEFAULT_RUBRIC, type Expectations, judgePrompt } from "./Graders.js"
import type { StoredInput } from "./Rows.js"

/**
 * The cost estimate of an eval run (docs/evals.md, "Estimate"), shown before it starts. Per row: the model call's
 * tokens at the expert's model's rates, as the run engine counts and charges them (`costOf`: per-1k rates, rounded up
 * to the micro-credit), with
 *  - input: the expert's instructions, the conversation and the message (about 4 characters a token);
 *  - output: the model's reasoning where it is known, and the row's expected answer (else its `contains` texts, else
 *    as long as the message);
 *  - one more model step per expected tool call (the input again, with the call and its result);
 *  - each LLM judge's call: its prompt (rubric, question, answer, reference) and a short verdict, at its model's rates.
 * The sum is then scaled by how far the expert's last finished eval run was from its own estimate (clamped to
 * 0.5-2), so an expert whose answers run longer or shorter than their expectations is estimated by its record.
 */

export interface Rates {
  /** Micro-credits per 1,000 tokens. */
  readonly inputPer1k: bigint
  readonly outputPer1k: bigint
  /**
   * What the model reasons before each answer, when that is known (the builtin model's fixed text; "" for a provider's
   * model, whose reasoning the expert's record accounts for): output tokens, charged as such.
   */
  readonly reasoning: string
}

export const tokensOf = (text: string) => Math.ceil(text.length / 4)

const cost = (rates: Rates, input: number, output: number) =>
  (BigInt(Math.max(input, 1)) * rates.inputPer1k + BigInt(Math.max(output, 1)) * rates.outputPer1k + 999n) / 1000n

/** Tokens of a tool call and its result, roughly: the arguments, the name, a short result. */
const TOOL_ROUND_TOKENS = 40
/** A verdict `{"score": …, "reason": "…"}`: a sentence. */
const VERDICT_TOKENS = 40

export const estimateRow = (row: {
  readonly instructions: string
  readonly input: StoredInput
  readonly expected: Expectations
  readonly rates: Rates
  readonly judges: ReadonlyArray<{ readonly rates: Rates; readonly rubric: string | undefined }>
}): bigint => {
  const conversation = [row.instructions, ...row.input.history.map((m) => m.content), row.input.message].join("\n")
  const answer = row.expected.expected ?? row.expected.contains?.join(" ") ?? row.input.message
  const input = tokensOf(conversation)
  const tools = row.expected.expected_tools?.length ?? 0
  let total = 0n
  for (let step = 0; step <= tools; step++) {
    // Each step after a tool call reads the conversation so far (the call and its result included).
    const said = step === tools ? tokensOf(row.rates.reasoning + answer) : tokensOf(row.rates.reasoning) + Math.ceil(TOOL_ROUND_TOKENS / 2)
    total += cost(row.rates, input + step * TOOL_ROUND_TOKENS, said)
  }
  for (const judge of row.judges) {
    const prompt = judgePrompt(row.expected.rubric ?? judge.rubric ?? DEFAULT_RUBRIC, row.input.message, answer, row.expected.expected)
    total += cost(judge.rates, tokensOf(prompt), tokensOf(judge.rates.reasoning) + VERDICT_TOKENS)
  }
  return total
}

/** The estimate scaled by the expert's record (actual over estimate of its last finished eval run, 0.5-2). */
export const calibrated = (estimate: bigint, record: { readonly estimate: bigint; readonly actual: bigint } | undefined): bigint => {
  if (record === undefined || record.estimate <= 0n || record.actual <= 0n) return estimate
  const ratio = Math.min(Math.max(Number(record.actual) / Number(record.estimate), 0.5), 2)
  return BigInt(Math.round(Number(estimate) * ratio))
}

