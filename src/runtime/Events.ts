import { Stream } from "effect"
import type { Frame } from "../platform/sse/Sse.js"

/**
 * The run engine's internal events and the one mapping from internal to public names (spec 6.2). Internal names may
 * change freely; the public names are a contract, so this table is the only place that knows them.
 */

/** Token usage of a run or a model call. */
export interface Usage {
  readonly input_tokens: number
  readonly output_tokens: number
}

/** An internal event as the engine emits it: a `type` and its payload fields (credits as decimal strings). */
export type InternalEvent =
  | {
    readonly type: "preparing"
    readonly run_id: string
    readonly agent: string
    readonly session_id?: string
    /** A session turn's message, as the user sent it: a client shows who said what from the log alone. */
    readonly input?: string
  }
  | { readonly type: "turn_start"; readonly turn: number }
  | { readonly type: "text"; readonly delta: string }
  | { readonly type: "reasoning"; readonly delta: string }
  | { readonly type: "thinking_status"; readonly status: "started" | "finished" }
  | {
    readonly type: "tool_call"
    readonly tool_call_id: string
    readonly name: string
    readonly status: string
    readonly arguments?: unknown
    readonly error?: string
    /** Why a tool call failed, machine-readable, when the tool says (`credential_required`, `time_limit`, ...). */
    readonly code?: string
  }
  | { readonly type: "tool_call_chunk"; readonly tool_call_id: string; readonly delta: string }
  | { readonly type: "tool_call_result"; readonly tool_call_id: string; readonly output: unknown }
  | { readonly type: "tool_denied"; readonly tool_call_id: string; readonly name: string; readonly reason: string }
  | {
    readonly type: "Ask"
    readonly approval_id: string
    readonly tool_call_id: string
    readonly name: string
    readonly arguments: unknown
    readonly expires_at: string
  }
  | { readonly type: "delegation_started"; readonly delegation_id: string; readonly agent: string }
  | {
    readonly type: "delegation_completed"
    readonly delegation_id: string
    readonly agent: string
    readonly output: string
    readonly status: "completed" | "failed"
  }
  | {
    readonly type: "token_usage"
    readonly model: string
    readonly input_tokens: number
    readonly output_tokens: number
    /** Of `input_tokens`, those read from the provider's prompt cache (priced at the cached rate). */
    readonly cached_input_tokens?: number
    readonly credits: number
  }
  | {
    /**
     * The step moves past a model to the next one (docs/models.md): its call failed retryably (`failed`), or its
     * provider was skipped unasked, its breaker open (`breaker_open`) or resting after a `Retry-After` (`resting`).
     */
    readonly type: "model_fallback"
    readonly from: string
    readonly to: string
    readonly reason: "failed" | "breaker_open" | "resting"
    readonly code: string
    readonly message: string
    readonly retry_after_ms?: number
  }
  | { readonly type: "budget_exhausted"; readonly budget: number; readonly spent: number; readonly reason: string }
  | { readonly type: "trial_exhausted"; readonly agent: string; readonly trials_used: number; readonly price: number }
  | { readonly type: "complete"; readonly usage: Usage; readonly credits_charged: number }
  | { readonly type: "error"; readonly code: string; readonly message: string }

/** Internal name -> public name, for every name that does not depend on a status. */
const PUBLIC_NAMES: Readonly<Record<string, string>> = {
  preparing: "run.created",
  turn_start: "run.in_progress",
  complete: "run.completed",
  error: "run.failed",
  text: "output.text.delta",
  reasoning: "output.thinking.delta",
  thinking_status: "output.thinking.status",
  tool_call_chunk: "tool_call.arguments.delta",
  tool_call_result: "tool_call.result",
  tool_denied: "tool_call.denied",
  Ask: "approval.required",
  delegation_started: "delegation.started",
  delegation_completed: "delegation.completed",
  token_usage: "usage.token",
  // Not one of the spec's 20 names: consumers ignore it (spec 6.1); docs/models.md describes it.
  model_fallback: "run.model_fallback",
  budget_exhausted: "usage.budget_exhausted",
  trial_exhausted: "usage.trial_exhausted"
}

/** Spec 3.1: the four statuses with a name of their own; any other status is `tool_call.<status>` (spec 2.5). */
const TOOL_CALL_STATUS: Readonly<Record<string, string>> = {
  pending: "tool_call.created",
  running: "tool_call.in_progress",
  completed: "tool_call.completed",
  failed: "tool_call.failed"
}

/** The 20 public names of spec 6.2, in the spec's order. */
export const PUBLIC_EVENTS = [
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
] as const

/**
 * The public name of an internal event. A tool call is named by its status; an internal event outside the table
 * passes through under its own name (spec 6.1: consumers ignore names they do not know).
 */
export const publicName = (event: { readonly type: string; readonly status?: unknown }): string => {
  if (event.type === "tool_call") {
    const status = typeof event.status === "string" && event.status.length > 0 ? event.status : "unknown"
    return TOOL_CALL_STATUS[status] ?? `tool_call.${status}`
  }
  return Object.hasOwn(PUBLIC_NAMES, event.type) ? PUBLIC_NAMES[event.type]! : event.type
}

/**
 * The public payload of an internal event: `type` is the public name, `event_id` its place in the stream, and a
 * text or thinking increment carries both `delta` and its older name `content` (spec 2.4).
 */
export const publicPayload = (
  event: { readonly type: string; readonly [key: string]: unknown },
  eventId: number
): Record<string, unknown> => {
  const { type: _type, ...fields } = event
  const payload: Record<string, unknown> = { type: publicName(event), event_id: eventId, ...fields }
  if ((event.type === "text" || event.type === "reasoning") && typeof event.delta === "string") {
    payload.content = event.delta
  }
  return payload
}

/** True for the events that end a run's stream (after them comes `[DONE]`). */
export const isTerminal = (event: { readonly type: string }) => event.type === "complete" || event.type === "error"

/**
 * A run's or a session's internal events as the frames of its SSE stream: the public name as `event:`, the public
 * payload as `data:` (its `event_id` counted from 1 in each stream), and `id:` when `idOf` gives one (a session's
 * `seq`, so a browser's EventSource resumes with `Last-Event-ID`).
 */
export const publicFrames = <E, R>(
  events: Stream.Stream<{ readonly type: string; readonly [key: string]: unknown }, E, R>,
  idOf?: (event: { readonly type: string; readonly [key: string]: unknown }) => string | number | undefined
): Stream.Stream<Frame, E, R> =>
  Stream.mapAccum(events, 0, (eventId, event) => [eventId + 1, publicFrame(event, eventId + 1, idOf?.(event))] as const)

/** One event as its frame: `eventId` is its place in the stream, counted from 1; `id` the frame's `id:` line. */
export const publicFrame = (
  event: { readonly type: string; readonly [key: string]: unknown },
  eventId: number,
  id?: string | number
): Frame => {
  const payload = publicPayload(event, eventId)
  return { event: payload.type as string, id, data: payload }
}
