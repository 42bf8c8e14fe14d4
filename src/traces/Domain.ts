import { Schema } from "effect"

/** The wire shapes of traces (issue 46 item 4, docs/traces.md). Credits are decimal strings, as the wallet's. */

export const SpanView = Schema.Struct({
  span_id: Schema.String,
  /** The span above it in the tree; null for the root (`invoke_agent` of the run). */
  parent_span_id: Schema.NullOr(Schema.String),
  /** The run that made the span: the trace's run, or a run it delegated to. */
  run_id: Schema.String,
  /** `invoke_agent {expert}`, `chat {model}`, `execute_tool {tool}`, `retrieval`, `await_approval {tool}`. */
  name: Schema.String,
  kind: Schema.String,
  start_time: Schema.String,
  end_time: Schema.String,
  duration_ms: Schema.Number,
  status: Schema.Literal("ok", "error"),
  /** OpenTelemetry GenAI attributes (`gen_ai.*`, `error.type`); message content only when the expert captures it. */
  attributes: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  /** What this span was charged: a model call's step, a tool's own charge; "0" for the others. */
  credits: Schema.String
}).annotations({ identifier: "TraceSpan" })

export const TraceView = Schema.Struct({
  trace_id: Schema.String,
  run_id: Schema.String,
  spans: Schema.Array(SpanView)
}).annotations({ identifier: "Trace" })

export const TraceSummary = Schema.Struct({
  trace_id: Schema.String,
  run_id: Schema.String,
  agent: Schema.String,
  version: Schema.NullOr(Schema.Number),
  session_id: Schema.NullOr(Schema.String),
  status: Schema.Literal("ok", "error"),
  error_type: Schema.NullOr(Schema.String),
  /** The sum of the trace's span credits. */
  credits: Schema.String,
  duration_ms: Schema.Number,
  tools: Schema.Array(Schema.String),
  span_count: Schema.Number,
  started_at: Schema.String,
  /** Whose run: `own` (the caller paid), `creator` (a run of the caller's expert by someone else). */
  access: Schema.Literal("own", "creator")
}).annotations({ identifier: "TraceSummary" })

const Credits = Schema.String.pipe(Schema.pattern(/^\d{1,12}(\.\d{1,6})?$/)).annotations({
  description: "Credits as a decimal (up to 6 places)."
})

export const TraceSearchParams = Schema.Struct({
  agent: Schema.optional(Schema.String.pipe(Schema.maxLength(100))),
  version: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.positive())),
  end_user: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(128))),
  session: Schema.optional(Schema.String.pipe(Schema.maxLength(100))),
  tool: Schema.optional(Schema.String.pipe(Schema.maxLength(100))),
  status: Schema.optional(Schema.Literal("ok", "error")),
  min_credits: Schema.optional(Credits),
  max_credits: Schema.optional(Credits),
  /** An ISO 8601 time (traces that started at or after it), or the `trace_id` of the last item of the previous page. */
  after: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100))),
  before: Schema.optional(Schema.DateFromString),
  limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 100)))
})
