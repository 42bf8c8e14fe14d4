import { Schema } from "effect"
import { prefixedId } from "../platform/Ids.js"

/**
 * The run events' contract (docs/events.md): the payloads of the 20 public events a run, a session turn and a
 * session subscription stream, as `atrium/client` decodes them. Each is `{type, event_id, ...}`; a session's also
 * carry their `seq`. Fields a consumer does not need stay on the object undecoded (`Schema.Struct` keeps the type
 * honest about what is known, not about everything sent).
 */

/** A run's id (`run_…`, DESIGN.md §6). */
export const RunId = prefixedId("run", "RunId")
export type RunId = typeof RunId.Type

/** An approval request's id (`apv_…`, DESIGN.md §6). */
export const ApprovalId = prefixedId("apv", "ApprovalId")
export type ApprovalId = typeof ApprovalId.Type

/**
 * A memory fact's id (`fact_…`): random, or derived from the tool call that wrote it (docs/memory.md). Here because
 * the engine's memory tools name facts as well as the memory domain that keeps them.
 */
export const FactId = prefixedId("fact", "FactId")
export type FactId = typeof FactId.Type

const event = <Type extends string, Fields extends Schema.Struct.Fields>(type: Type, fields: Fields) =>
  Schema.Struct({
    type: Schema.Literal(type),
    event_id: Schema.Int,
    /** A session's events: their place in the session's log (the SSE `id:`, what `Last-Event-ID` resumes from). */
    seq: Schema.optional(Schema.Int),
    ...fields
  })

const Usage = Schema.Struct({ input_tokens: Schema.Int, output_tokens: Schema.Int })
const ToolCall = { tool_call_id: Schema.String, name: Schema.String, status: Schema.String }

export const RunCreated = event("run.created", {
  run_id: Schema.String,
  agent: Schema.String,
  session_id: Schema.optional(Schema.String),
  session_turn: Schema.optional(Schema.Int),
  /** A session turn's message (sessions only). */
  input: Schema.optional(Schema.String)
})
export const RunInProgress = event("run.in_progress", { turn: Schema.Int })
export const RunCompleted = event("run.completed", { usage: Usage, credits_charged: Schema.Number })
export const RunFailedEvent = event("run.failed", { code: Schema.String, message: Schema.String })
export const OutputTextDelta = event("output.text.delta", { delta: Schema.String })
export const OutputThinkingDelta = event("output.thinking.delta", { delta: Schema.String })
export const OutputThinkingStatus = event("output.thinking.status", { status: Schema.Literal("started", "finished") })
export const ToolCallCreated = event("tool_call.created", { ...ToolCall, arguments: Schema.optional(Schema.Unknown) })
export const ToolCallInProgress = event("tool_call.in_progress", ToolCall)
export const ToolCallCompleted = event("tool_call.completed", ToolCall)
export const ToolCallFailed = event("tool_call.failed", { ...ToolCall, error: Schema.optional(Schema.Unknown), code: Schema.optional(Schema.String) })
export const ToolCallArgumentsDelta = event("tool_call.arguments.delta", { tool_call_id: Schema.String, delta: Schema.String })
export const ToolCallResult = event("tool_call.result", { tool_call_id: Schema.String, output: Schema.Unknown })
export const ToolCallDenied = event("tool_call.denied", { tool_call_id: Schema.String, name: Schema.String, reason: Schema.String })
export const ApprovalRequired = event("approval.required", {
  approval_id: Schema.String,
  tool_call_id: Schema.String,
  name: Schema.String,
  arguments: Schema.Unknown,
  expires_at: Schema.String
})
export const DelegationStarted = event("delegation.started", { delegation_id: Schema.String, agent: Schema.String })
export const DelegationCompleted = event("delegation.completed", {
  delegation_id: Schema.String,
  agent: Schema.String,
  output: Schema.Unknown,
  status: Schema.String
})
export const UsageToken = event("usage.token", { model: Schema.String, input_tokens: Schema.Int, output_tokens: Schema.Int, credits: Schema.Number })
export const UsageBudgetExhausted = event("usage.budget_exhausted", { budget: Schema.Number, spent: Schema.Number, reason: Schema.String })
export const UsageTrialExhausted = event("usage.trial_exhausted", { agent: Schema.String, trials_used: Schema.Int, price: Schema.Number })

/** One public event of a run (docs/events.md, "The 20 public events"). */
export const PublicEvent = Schema.Union(
  RunCreated,
  RunInProgress,
  RunCompleted,
  RunFailedEvent,
  OutputTextDelta,
  OutputThinkingDelta,
  OutputThinkingStatus,
  ToolCallCreated,
  ToolCallInProgress,
  ToolCallCompleted,
  ToolCallFailed,
  ToolCallArgumentsDelta,
  ToolCallResult,
  ToolCallDenied,
  ApprovalRequired,
  DelegationStarted,
  DelegationCompleted,
  UsageToken,
  UsageBudgetExhausted,
  UsageTrialExhausted
)
export type PublicEvent = typeof PublicEvent.Type

/**
 * A run that ended in `run.failed` (or, on the OpenAI-compatible routes, an error answer for a failed run): `code` is
 * the run's (docs/events.md, "run.failed codes"). The typed client fails a run's stream with it.
 */
export class RunFailed extends Schema.TaggedError<RunFailed>()("RunFailed", {
  code: Schema.String,
  message: Schema.String
}) {}
