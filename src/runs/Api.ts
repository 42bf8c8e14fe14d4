import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { PlatformAuthentication } from "../identity/Domain.js"
import { InvalidRequest, NotFound, ServiceUnavailable } from "../platform/Errors.js"
import { ResumeHeaders, RunStartHeaders } from "../platform/http/Headers.js"
import { CreditAmount } from "../platform/Money.js"
import { ApprovalId, RunId } from "../runtime/Domain.js"

const MAX_MESSAGE = 100_000

/** The most a run (or a session's turn) may charge: decoded to micro-credits here, so no handler reads it again. */
export const Budget = CreditAmount.annotations({
  description: "The most this run may charge, in credits (up to 6 decimal places)."
})

export const RunPayload = Schema.Struct({
  agent: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
  message: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(MAX_MESSAGE)),
  budget: Schema.optionalWith(Budget, { exact: true }),
  stream: Schema.optional(Schema.Boolean),
  /** Answer at once (202, the run `queued`) and run on without the caller: docs/runs.md. */
  background: Schema.optional(Schema.Boolean)
})

/** A run as `GET /v1/runs/:id` tells it, foreground or background (docs/runs.md, "Lifecycle"). */
export const RunObject = Schema.Struct({
  id: RunId,
  object: Schema.Literal("run"),
  /** The agent's identifier (a bare model's id through chat completions). */
  agent: Schema.NullOr(Schema.String),
  status: Schema.Literal("queued", "in_progress", "completed", "failed", "cancelled", "incomplete"),
  background: Schema.Boolean,
  /** The answer's text so far (complete once the run has ended); null for a session's turn (in its events). */
  output: Schema.NullOr(Schema.String),
  usage: Schema.Struct({ input_tokens: Schema.Int, output_tokens: Schema.Int }),
  credits_charged: Schema.Number,
  error: Schema.NullOr(Schema.Struct({ code: Schema.String, message: Schema.String })),
  /** Why an `incomplete` run stopped: `max_duration` (its deadline passed). */
  incomplete_details: Schema.NullOr(Schema.Struct({ reason: Schema.String })),
  session_id: Schema.NullOr(Schema.String),
  parent_run_id: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  started_at: Schema.NullOr(Schema.String),
  completed_at: Schema.NullOr(Schema.String),
  /** A background run's deadline: past it the run ends `incomplete`. */
  expires_at: Schema.NullOr(Schema.String),
  cancel_requested: Schema.Boolean
}).annotations({ identifier: "Run" })

const RunPath = Schema.Struct({ id: RunId.unchecked.pipe(Schema.minLength(1), Schema.maxLength(100)) })

const RunStatusParam = Schema.Literal("queued", "in_progress", "completed", "failed", "cancelled", "incomplete")

/** The answer of `stream: false`: the run's result and the events it told, text increments folded into `output`. */
const RunView = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("run"),
  agent: Schema.String,
  status: Schema.Literal("completed", "failed"),
  output: Schema.String,
  usage: Schema.Struct({ input_tokens: Schema.Int, output_tokens: Schema.Int }),
  credits_charged: Schema.Number,
  error: Schema.NullOr(Schema.Struct({ code: Schema.String, message: Schema.String })),
  /** The run's public events in order (docs/events.md): each narrows on `type`. */
  events: Schema.Array(Schema.Struct({ type: Schema.String }, Schema.Record({ key: Schema.String, value: Schema.Unknown })))
})

const ContentPart = Schema.Struct({ type: Schema.String, text: Schema.optional(Schema.String) })

const ToolCall = Schema.Struct({
  id: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  type: Schema.optionalWith(Schema.Literal("function"), { default: () => "function" as const }),
  function: Schema.Struct({ name: Schema.String, arguments: Schema.String })
})

const ChatMessage = Schema.Struct({
  role: Schema.Literal("system", "developer", "user", "assistant", "tool"),
  content: Schema.optionalWith(Schema.NullOr(Schema.Union(Schema.String, Schema.Array(ContentPart))), { default: () => null }),
  name: Schema.optional(Schema.String),
  /** An assistant message's calls of the caller's tools, as this API returned them. */
  tool_calls: Schema.optional(Schema.NullOr(Schema.Array(ToolCall))),
  /** A `tool` message answers the call with this id. */
  tool_call_id: Schema.optional(Schema.String)
})

/** A function tool the caller defines and runs; `parameters` is a JSON Schema passed on to the model as-is. */
export const FunctionTool = Schema.Struct({
  type: Schema.Literal("function"),
  function: Schema.Struct({
    name: Schema.String.pipe(
      Schema.pattern(/^[a-zA-Z0-9_-]{1,64}$/, { message: () => "must be 1 to 64 letters, digits, '_' or '-'" })
    ),
    description: Schema.optional(Schema.String.pipe(Schema.maxLength(10_000))),
    parameters: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
    strict: Schema.optional(Schema.NullOr(Schema.Boolean))
  })
})

export const ChatToolChoice = Schema.Union(
  Schema.Literal("none", "auto", "required"),
  Schema.Struct({ type: Schema.Literal("function"), function: Schema.Struct({ name: Schema.String }) })
)

/** Sampling settings OpenAI clients send: accepted, and not applied (the agent's model keeps its own; docs/runs.md). */
const Advisory = {
  temperature: Schema.optional(Schema.NullOr(Schema.Number)),
  top_p: Schema.optional(Schema.NullOr(Schema.Number)),
  max_tokens: Schema.optional(Schema.NullOr(Schema.Int)),
  max_completion_tokens: Schema.optional(Schema.NullOr(Schema.Int)),
  stop: Schema.optional(Schema.NullOr(Schema.Union(Schema.String, Schema.Array(Schema.String)))),
  seed: Schema.optional(Schema.NullOr(Schema.Int)),
  presence_penalty: Schema.optional(Schema.NullOr(Schema.Number)),
  frequency_penalty: Schema.optional(Schema.NullOr(Schema.Number)),
  user: Schema.optional(Schema.String),
  parallel_tool_calls: Schema.optional(Schema.NullOr(Schema.Boolean)),
  store: Schema.optional(Schema.NullOr(Schema.Boolean)),
  metadata: Schema.optional(Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String })))
}

export const ChatPayload = Schema.Struct({
  model: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
  messages: Schema.Array(ChatMessage).pipe(Schema.minItems(1), Schema.maxItems(500)),
  stream: Schema.optional(Schema.NullOr(Schema.Boolean)),
  stream_options: Schema.optional(Schema.NullOr(Schema.Struct({ include_usage: Schema.optional(Schema.NullOr(Schema.Boolean)) }))),
  tools: Schema.optional(Schema.NullOr(Schema.Array(FunctionTool).pipe(Schema.maxItems(128)))),
  tool_choice: Schema.optional(Schema.NullOr(ChatToolChoice)),
  // Checked, and refused when they ask for what the platform cannot do (never ignored): only `n: 1`, text answers.
  n: Schema.optional(Schema.NullOr(Schema.Int)),
  /** Structured output (`json_object`, `json_schema` with `strict`): checked in OpenAi.ts, docs/models.md. */
  response_format: Schema.optional(Schema.NullOr(Schema.Struct({
    type: Schema.String,
    json_schema: Schema.optional(Schema.Unknown)
  }))),
  logprobs: Schema.optional(Schema.NullOr(Schema.Boolean)),
  modalities: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  audio: Schema.optional(Schema.NullOr(Schema.Unknown)),
  functions: Schema.optional(Schema.NullOr(Schema.Unknown)),
  function_call: Schema.optional(Schema.NullOr(Schema.Unknown)),
  ...Advisory
})
export type ChatPayload = typeof ChatPayload.Type

const Rest = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** The answer's message: text (null when it only calls tools), and the calls of the caller's tools. */
const ChatChoice = Schema.Struct({
  index: Schema.Int,
  message: Schema.Struct({
    role: Schema.Literal("assistant"),
    content: Schema.NullOr(Schema.String),
    tool_calls: Schema.optional(Schema.Array(Schema.Struct({
      id: Schema.String,
      type: Schema.Literal("function"),
      function: Schema.Struct({ name: Schema.String, arguments: Schema.String })
    }))),
    /** The model's reasoning, when it gave any (DeepSeek's field). */
    reasoning_content: Schema.optional(Schema.String)
  }, Rest),
  finish_reason: Schema.Literal("stop", "length", "tool_calls", "content_filter")
}, Rest).annotations({ identifier: "ChatCompletionChoice" })

const ChatCompletion = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("chat.completion"),
  created: Schema.Int,
  model: Schema.String,
  choices: Schema.Array(ChatChoice),
  usage: Schema.Struct({
    prompt_tokens: Schema.Int,
    completion_tokens: Schema.Int,
    total_tokens: Schema.Int,
    prompt_tokens_details: Schema.optional(Schema.Struct({ cached_tokens: Schema.Int }))
  }, Rest)
})

/** Spec 4.2 (runs), 6 (events), 7.2. */
export class RunsApi extends HttpApiGroup.make("runs")
  .add(
    HttpApiEndpoint.post("run", "/v1/agents/run")
      .setPayload(RunPayload)
      .setHeaders(RunStartHeaders)
      .addSuccess(RunView)
      // `background: true`: the run at once, `queued` (docs/runs.md).
      .addSuccess(RunObject, { status: 202 })
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "Run an agent once. By default (`stream` true) the answer is a `text/event-stream` of the events in " +
          "docs/events.md ending with `data: [DONE]`; `stream: false` answers one JSON result."
      )
  )
  .add(
    HttpApiEndpoint.post("chatCompletions", "/v1/chat/completions")
      .setPayload(ChatPayload)
      .setHeaders(RunStartHeaders)
      .addSuccess(ChatCompletion)
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "OpenAI-compatible chat completions; `model` is an agent identifier or a model id from GET /v1/models. " +
          "With `stream: true`, `chat.completion.chunk` data lines and `data: [DONE]`. `tools` (functions the " +
          "caller runs) are offered to the model; a call of one ends the answer with `tool_calls` and " +
          "`finish_reason: \"tool_calls\"`, and a `tool` message continues. `response_format` `json_object` or " +
          "`json_schema` (OpenAI's strict subset) makes the answer JSON, checked before the run completes. " +
          "Parameters the platform cannot honour (`n` > 1, image or audio parts, `logprobs`) are a 400 naming `param`."
      )
  )
  .add(
    HttpApiEndpoint.get("getRun", "/v1/runs/:id")
      .setPath(RunPath)
      .addSuccess(RunObject)
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "A run of this caller (the same account and `X-End-User-Id`), foreground or background, from the moment it " +
          "started: its status (`queued`, `in_progress`, `completed`, `failed`, `cancelled`, `incomplete`), output, " +
          "usage, credits and error. Another caller's run is a 404."
      )
  )
  .add(
    HttpApiEndpoint.get("listRuns", "/v1/runs")
      .setUrlParams(Schema.Struct({
        agent: Schema.optional(Schema.String.pipe(Schema.maxLength(100))),
        status: Schema.optional(RunStatusParam),
        created_after: Schema.optional(Schema.DateFromString),
        created_before: Schema.optional(Schema.DateFromString),
        limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 100))),
        after: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)))
      }))
      .addSuccess(Schema.Struct({ data: Schema.Array(RunObject), has_more: Schema.Boolean }))
      .annotate(
        OpenApi.Description,
        "This caller's runs, newest first: `agent`, `status` and `created_after`/`created_before` (ISO 8601) filter; " +
          "`limit` (1-100, 20 by default) and `after` (the last id of the previous page) page."
      )
  )
  .add(
    HttpApiEndpoint.post("cancelRun", "/v1/runs/:id/cancel")
      .setPath(RunPath)
      .addSuccess(RunObject)
      .addError(NotFound)
      .addError(ServiceUnavailable)
      .annotate(
        OpenApi.Description,
        "Stops a background run (idempotent): it stops within a second wherever it runs, billed only for the steps it " +
          "finished, and ends `cancelled`, also while it waits for an approval. A session's turn stops as " +
          "`POST /v1/sessions/:id/interrupt` stops it (a queued turn ends without running); the answer waits up to 2 s " +
          "for its end, and is 503 with `Retry-After` while the session moves between runners. A run that has ended is " +
          "answered as it is. A foreground run stops when its client closes its stream (400 here)."
      )
  )
  .add(
    HttpApiEndpoint.get("runEvents", "/v1/runs/:id/events")
      .setPath(RunPath)
      .setUrlParams(Schema.Struct({ after: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.nonNegative())) }))
      .setHeaders(ResumeHeaders)
      .addSuccess(Schema.String)
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "A background run's events as a `text/event-stream` (docs/events.md), from its start or from `after` / " +
          "`Last-Event-ID` (each event's `id:` is its place in the run's log), from any runner, while it runs and after " +
          "it ended; `data: [DONE]` after its last. A stopped run's last event is `run.failed` with code `cancelled` or `max_duration`."
      )
  )
  .add(
    HttpApiEndpoint.post("answerApproval", "/v1/approvals/:approval_id")
      .setPath(Schema.Struct({ approval_id: ApprovalId.unchecked }))
      .setPayload(Schema.Struct({
        decision: Schema.Literal("approve", "deny"),
        reason: Schema.optional(Schema.String.pipe(Schema.maxLength(1000)))
      }))
      .addSuccess(Schema.Struct({ approval_id: ApprovalId, decision: Schema.Literal("approve", "deny") }))
      .addError(NotFound)
      .annotate(OpenApi.Description, "Answer an `approval.required` event of one of your runs.")
  )
  .middleware(PlatformAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Runs")
  .annotate(OpenApi.Description, "Stateless runs of an expert, and OpenAI-compatible chat completions.")
{}
