import type * as Prompt from "@effect/ai/Prompt"
import type { Option } from "effect"
import type { Micros } from "../platform/Money.js"
import type { RunRequest, RunResult } from "./Run.js"

type Failure = Option.Option<{ readonly code: string; readonly message: string }>

/** What a model call added to a run: its text, thinking and tokens. */
export interface StepCall {
  readonly text: string
  readonly reasoning: string
  readonly inputTokens: number
  readonly outputTokens: number
}

/**
 * Everything a run has accumulated so far, in one place: what it spent, its tokens and answer, the messages it
 * added to the conversation, the tools it was denied and the calls it hands back. The engine changes it only
 * through these methods; the record and the result are both read from it.
 */
export class RunState {
  spent: Micros = 0n
  inputTokens = 0
  outputTokens = 0
  /** The last step's output tokens: the next step's estimate assumes as many. */
  lastOutputTokens = 0
  output = ""
  reasoning = ""
  /** Which tools were denied, for self-evolution: a name a model made up is kept, but not at any length. */
  readonly deniedTools: Array<string> = []
  readonly added: Array<Prompt.MessageEncoded>
  readonly clientToolCalls: Array<{ id: string; name: string; params: unknown }> = []

  constructor(request: RunRequest) {
    this.added = request.resume === true ? [] : [{ role: "user", content: [{ type: "text", text: request.message }] }]
  }

  called(call: StepCall) {
    this.inputTokens += call.inputTokens
    this.outputTokens += call.outputTokens
    this.lastOutputTokens = call.outputTokens
    this.output += call.text
    this.reasoning += call.reasoning
  }

  charged(credits: Micros) {
    this.spent += credits
  }

  denied(tool: string) {
    this.deniedTools.push(tool.slice(0, 200))
  }

  /** The run's row as it ends (`RunLedger.finish`). */
  record(status: "completed" | "failed" | "cancelled", failure: Failure) {
    return {
      status,
      failureCode: failure._tag === "Some" ? failure.value.code : null,
      failureMessage: failure._tag === "Some" ? failure.value.message.slice(0, 1000) : null,
      inputTokens: this.inputTokens,
      outputTokens: this.outputTokens,
      creditsCharged: this.spent,
      answerChars: this.output.trim().length,
      deniedTools: this.deniedTools,
      output: this.output
    }
  }

  result(status: "completed" | "failed", failure: Failure): RunResult {
    return {
      status,
      output: this.output,
      reasoning: this.reasoning,
      creditsCharged: this.spent,
      inputTokens: this.inputTokens,
      outputTokens: this.outputTokens,
      failure,
      messages: this.added,
      clientToolCalls: this.clientToolCalls
    }
  }
}
