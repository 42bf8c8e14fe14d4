import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { prefixedId, SessionId } from "../platform/Ids.js"
import { PlatformAuthentication } from "../identity/Domain.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import { RunStartHeaders } from "../platform/http/Headers.js"

/** A response's id (`resp_…`, as OpenAI's). */
export const ResponseId = prefixedId("resp", "ResponseId")
export type ResponseId = typeof ResponseId.Type

/**
 * An output item's id within a response, as OpenAI's: its prefix is the item's type (`msg_`, `fc_`, `fs_`), so no one
 * prefix is checked; what an `item_reference` names, found among the caller's own responses or not at all.
 */
export const ResponseItemId = Schema.String.pipe(Schema.brand("ResponseItemId"))
export type ResponseItemId = typeof ResponseItemId.Type

const ContentPart = Schema.Struct({ type: Schema.String, text: Schema.optional(Schema.String) })

/** One input item: a message (by `role`) or the output of the caller's function call; other types are refused. */
export const InputItem = Schema.Struct({
  type: Schema.optional(Schema.String),
  id: Schema.optional(Schema.NullOr(Schema.String)),
  role: Schema.optional(Schema.Literal("user", "assistant", "system", "developer")),
  content: Schema.optional(Schema.Union(Schema.String, Schema.Array(ContentPart))),
  call_id: Schema.optional(Schema.String),
  name: Schema.optional(Schema.String),
  arguments: Schema.optional(Schema.String),
  output: Schema.optional(Schema.Union(Schema.String, Schema.Array(ContentPart))),
  status: Schema.optional(Schema.NullOr(Schema.String))
})
export type InputItem = typeof InputItem.Type

export const ResponsesTool = Schema.Struct({
  type: Schema.String,
  name: Schema.optional(Schema.String.pipe(
    Schema.pattern(/^[a-zA-Z0-9_-]{1,64}$/, { message: () => "must be 1 to 64 letters, digits, '_' or '-'" })
  )),
  description: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(10_000)))),
  parameters: Schema.optional(Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown }))),
  strict: Schema.optional(Schema.NullOr(Schema.Boolean)),
  /** `file_search` tools (docs/knowledge.md): the caller's vector stores, and how many passages a search returns. */
  vector_store_ids: Schema.optional(Schema.Array(Schema.String.pipe(Schema.maxLength(64))).pipe(Schema.maxItems(10))),
  max_num_results: Schema.optional(Schema.Int.pipe(Schema.between(1, 50))),
  filters: Schema.optional(Schema.NullOr(Schema.Unknown)),
  ranking_options: Schema.optional(Schema.NullOr(Schema.Unknown))
})

export const ResponsePayload = Schema.Struct({
  model: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
  input: Schema.Union(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100_000)), Schema.Array(InputItem).pipe(Schema.minItems(1), Schema.maxItems(500))),
  instructions: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(100_000)))),
  previous_response_id: Schema.optional(Schema.NullOr(ResponseId.unchecked)),
  conversation: Schema.optional(Schema.NullOr(Schema.Union(SessionId.unchecked, Schema.Struct({ id: SessionId.unchecked })))),
  stream: Schema.optional(Schema.NullOr(Schema.Boolean)),
  store: Schema.optional(Schema.NullOr(Schema.Boolean)),
  tools: Schema.optional(Schema.NullOr(Schema.Array(ResponsesTool).pipe(Schema.maxItems(128)))),
  tool_choice: Schema.optional(Schema.NullOr(Schema.Union(
    Schema.Literal("none", "auto", "required"),
    Schema.Struct({ type: Schema.Literal("function"), name: Schema.String })
  ))),
  /** Run in the background (docs/runs.md): answered at once, `queued`; read, streamed and cancelled by its id. */
  background: Schema.optional(Schema.NullOr(Schema.Boolean)),
  /** Structured output (`json_object`, `json_schema` with `name`, `schema`, `strict`): docs/models.md. */
  text: Schema.optional(Schema.NullOr(Schema.Struct({
    format: Schema.optional(Schema.NullOr(Schema.Struct({
      type: Schema.String,
      name: Schema.optional(Schema.Unknown),
      description: Schema.optional(Schema.Unknown),
      schema: Schema.optional(Schema.Unknown),
      strict: Schema.optional(Schema.Unknown)
    }))),
    verbosity: Schema.optional(Schema.NullOr(Schema.String))
  }))),
  // Accepted and not applied: the agent's model keeps its own settings (docs/runs.md).
  temperature: Schema.optional(Schema.NullOr(Schema.Number)),
  top_p: Schema.optional(Schema.NullOr(Schema.Number)),
  max_output_tokens: Schema.optional(Schema.NullOr(Schema.Int)),
  parallel_tool_calls: Schema.optional(Schema.NullOr(Schema.Boolean)),
  metadata: Schema.optional(Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String }))),
  user: Schema.optional(Schema.NullOr(Schema.String)),
  include: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  reasoning: Schema.optional(Schema.NullOr(Schema.Unknown)),
  truncation: Schema.optional(Schema.NullOr(Schema.String))
})
export type ResponsePayload = typeof ResponsePayload.Type

/** Fields beside the typed ones are kept as they are (the schema types what a client reads, it never drops). */
const Rest = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** A message's text: `output_text` with its citations (`file_citation` annotations for `file_search`). */
const OutputText = Schema.Struct({
  type: Schema.Literal("output_text"),
  text: Schema.String,
  annotations: Schema.Array(Schema.Struct({ type: Schema.String }, Rest))
}, Rest).annotations({ identifier: "ResponseOutputText" })

const OutputMessage = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("message"),
  role: Schema.Literal("assistant"),
  status: Schema.String,
  content: Schema.Array(OutputText)
}, Rest).annotations({ identifier: "ResponseOutputMessage" })

/** A call of the caller's function tool: answer it with a `function_call_output` input item. */
const FunctionCallItem = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("function_call"),
  call_id: Schema.String,
  name: Schema.String,
  arguments: Schema.String,
  status: Schema.String
}, Rest).annotations({ identifier: "ResponseFunctionCall" })

const FileSearchCallItem = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("file_search_call"),
  status: Schema.String,
  queries: Schema.Array(Schema.String),
  /** With `include: ["file_search_call.results"]`: the passages found, best first (docs/knowledge.md). */
  results: Schema.NullOr(Schema.Array(Schema.Struct({
    file_id: Schema.String,
    filename: Schema.String,
    score: Schema.Number,
    text: Schema.String
  }, Rest).annotations({ identifier: "ResponseFileSearchResult" })))
}, Rest).annotations({ identifier: "ResponseFileSearchCall" })

/** The output items this API makes (narrow on `type`). */
export const OutputItem = Schema.Union(OutputMessage, FunctionCallItem, FileSearchCallItem)

/** An input item as `input_items` lists it: the message, with its text as typed content parts. */
const InputMessageItem = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("message"),
  role: Schema.Literal("user", "assistant", "system", "developer"),
  status: Schema.String,
  content: Schema.Array(Schema.Struct({ type: Schema.Literal("input_text", "output_text"), text: Schema.String }, Rest))
}, Rest).annotations({ identifier: "ResponseInputMessageItem" })

/** A function call of the conversation as `input_items` lists it (the caller's, or an expert's tool in a session). */
const InputFunctionCallItem = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("function_call"),
  call_id: Schema.optional(Schema.String),
  name: Schema.optional(Schema.String),
  arguments: Schema.optional(Schema.String),
  status: Schema.String
}, Rest).annotations({ identifier: "ResponseInputFunctionCallItem" })

const InputFunctionCallOutputItem = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("function_call_output"),
  call_id: Schema.optional(Schema.String),
  output: Schema.optional(Schema.Union(Schema.String, Schema.Array(Schema.Struct({ type: Schema.String }, Rest)))),
  status: Schema.String
}, Rest).annotations({ identifier: "ResponseInputFunctionCallOutputItem" })

/** The items `GET /v1/responses/:id/input_items` lists (narrow on `type`). */
export const ListedInputItem = Schema.Union(InputMessageItem, InputFunctionCallItem, InputFunctionCallOutputItem)

const ResponseUsage = Schema.Struct({
  input_tokens: Schema.Int,
  output_tokens: Schema.Int,
  total_tokens: Schema.Int
}, Rest).annotations({ identifier: "ResponseUsage" })

/** OpenAI's response object (docs: https://platform.openai.com/docs/api-reference/responses/object). */
export const ResponseObject = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("response"),
  created_at: Schema.Number,
  status: Schema.Literal("queued", "in_progress", "completed", "failed", "cancelled", "incomplete"),
  model: Schema.String,
  output: Schema.Array(OutputItem),
  output_text: Schema.String,
  usage: Schema.NullOr(ResponseUsage),
  error: Schema.NullOr(Schema.Struct({
    type: Schema.optional(Schema.String),
    code: Schema.String,
    message: Schema.String,
    param: Schema.optional(Schema.NullOr(Schema.String))
  })),
  previous_response_id: Schema.NullOr(Schema.String),
  conversation: Schema.NullOr(Schema.Struct({ id: Schema.String })),
  // What the response was created with, echoed as OpenAI does (the SDKs' `.parse()` reads `text.format`).
  incomplete_details: Schema.optional(Schema.NullOr(Schema.Struct({ reason: Schema.String }, Rest))),
  instructions: Schema.optional(Schema.NullOr(Schema.String)),
  tools: Schema.optional(Schema.Array(Schema.Struct({ type: Schema.String }, Rest))),
  tool_choice: Schema.optional(Schema.Union(Schema.Literal("none", "auto", "required"), Schema.Struct({ type: Schema.String }, Rest))),
  parallel_tool_calls: Schema.optional(Schema.Boolean),
  metadata: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  temperature: Schema.optional(Schema.NullOr(Schema.Number)),
  top_p: Schema.optional(Schema.NullOr(Schema.Number)),
  max_output_tokens: Schema.optional(Schema.NullOr(Schema.Number)),
  store: Schema.optional(Schema.Boolean),
  text: Schema.optional(Schema.Struct({ format: Schema.Struct({ type: Schema.String }, Rest) }, Rest)),
  truncation: Schema.optional(Schema.NullOr(Schema.String)),
  /** Created with `background: true`. */
  background: Schema.optional(Schema.Boolean)
}).annotations({ identifier: "Response" })

const ResponsePath = Schema.Struct({ id: ResponseId.unchecked })

/** The Responses API of OpenAI's clients, mapped onto runs and sessions (docs/runs.md). */
export class ResponsesApi extends HttpApiGroup.make("responses")
  .add(
    HttpApiEndpoint.post("create", "/v1/responses")
      .setPayload(ResponsePayload)
      .setHeaders(RunStartHeaders)
      .addSuccess(ResponseObject)
      // `background: true`: the response at once, `queued` (docs/runs.md).
      .addSuccess(ResponseObject, { status: 202 })
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Create a response")
      .annotate(
        OpenApi.Description,
        "OpenAI-compatible Responses. `model` is an agent identifier or a model id. An agent's conversation lives " +
          "in a session (`conversation` names one, `previous_response_id` continues it); a bare model's, or one with " +
          "the caller's function `tools`, is kept with the response. With `stream: true`, a `text/event-stream` of " +
          "OpenAI's `response.*` events (`response.created`, `response.output_text.delta`, `response.completed`, " +
          "`response.failed`, ...). With `background: true`, answered at once (202) with the response, `queued`; it " +
          "then runs without its caller (`queued` -> `in_progress` -> `completed`, `failed`, `cancelled` or " +
          "`incomplete`), read by `GET /v1/responses/{id}` (with `stream=true`, its events again) and stopped by " +
          "`POST /v1/responses/{id}/cancel`; with `stream: true` too, its events follow at once. `background` with " +
          "`store: false` is a 400."
      )
  )
  .add(
    HttpApiEndpoint.get("retrieve", "/v1/responses/:id")
      .setPath(ResponsePath)
      .setUrlParams(Schema.Struct({
        stream: Schema.optional(Schema.Literal("true", "false")),
        starting_after: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.nonNegative())),
        include: Schema.optional(Schema.Union(Schema.String, Schema.Array(Schema.String))),
        include_obfuscation: Schema.optional(Schema.String)
      }))
      .addSuccess(ResponseObject)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Retrieve a response")
      .annotate(
        OpenApi.Description,
        "A response created by this caller (account and end user); a background one as it is now (its output so far " +
          "while it runs). With `stream=true`, a background response's events (as `POST /v1/responses` streams them, " +
          "each with its `sequence_number`) from the start or after `starting_after`, from any runner, live while it " +
          "runs and after it ended; a foreground response's events are not kept (400)."
      )
  )
  .add(
    HttpApiEndpoint.del("remove", "/v1/responses/:id")
      .setPath(ResponsePath)
      .addSuccess(Schema.Struct({ id: Schema.String, object: Schema.Literal("response"), deleted: Schema.Literal(true) }))
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Delete a response")
      .annotate(
        OpenApi.Description,
        "Deletes a response of this caller (one in progress in a session is stopped first); it is then a 404. A " +
          "session it ran in keeps its turns."
      )
  )
  .add(
    HttpApiEndpoint.post("cancel", "/v1/responses/:id/cancel")
      .setPath(ResponsePath)
      .addSuccess(ResponseObject)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Cancel a response")
      .annotate(
        OpenApi.Description,
        "Stops a background response (idempotent: it stops within a second, billed only for what it used, and is " +
          "answered `cancelled`; one that has ended is answered as it is), or a response in progress in an agent's " +
          "session (its turn is interrupted); a finished response is answered as it is."
      )
  )
  .add(
    HttpApiEndpoint.get("inputItems", "/v1/responses/:id/input_items")
      .setPath(ResponsePath)
      .setUrlParams(Schema.Struct({
        limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 100))),
        after: Schema.optional(Schema.String),
        order: Schema.optional(Schema.Literal("asc", "desc"))
      }))
      .addSuccess(Schema.Struct({
        object: Schema.Literal("list"),
        data: Schema.Array(ListedInputItem),
        first_id: Schema.NullOr(Schema.String),
        last_id: Schema.NullOr(Schema.String),
        has_more: Schema.Boolean
      }))
      .addError(NotFound)
      .annotate(OpenApi.Summary, "List a response's input items")
      .annotate(OpenApi.Description, "The items the response was created with, as message and function-call items.")
  )
  .middleware(PlatformAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Responses")
  .annotate(OpenApi.Description, "The OpenAI Responses API, kept on the server as sessions.")
{}
