import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { PlatformAuthentication } from "../identity/Domain.js"
import { InvalidRequest, NotFound, ServiceUnavailable } from "../platform/Errors.js"
import { IdempotencyConflict } from "../billing/Domain.js"
import { EnvironmentId } from "../environments/Domain.js"
import { ApprovalId } from "../runtime/Domain.js"
import { SessionBusy, SessionId } from "./Domain.js"
import { ListParams } from "../platform/http/Lists.js"

export const SessionView = Schema.Struct({
  id: SessionId,
  agent: Schema.String,
  status: Schema.Literal("idle", "running", "waiting_approval"),
  end_user_id: Schema.NullOr(Schema.String),
  environment_id: Schema.NullOr(Schema.String),
  title: Schema.NullOr(Schema.String),
  metadata: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  created_at: Schema.String,
  updated_at: Schema.String
})

/** A session in the list: its view and a preview of its last message (the web app's conversation list). */
export const SessionListItem = SessionView.pipe(Schema.extend(Schema.Struct({ last_message: Schema.NullOr(Schema.String) })))

const Path = Schema.Struct({ id: SessionId })

export const MessageEvent = Schema.Struct({
  type: Schema.Literal("message"),
  message: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100_000)),
  budget: Schema.optional(Schema.Union(Schema.Number, Schema.String))
})

export const ApprovalEvent = Schema.Struct({
  type: Schema.Literal("approval"),
  approval_id: ApprovalId,
  decision: Schema.Literal("approve", "deny"),
  reason: Schema.optional(Schema.String.pipe(Schema.maxLength(1000)))
})

const streamed = "The answer is a `text/event-stream` (docs/events.md); every event carries the session-wide `seq`."

/** Spec 4.2 (sessions), 5.1 rules 4-5. */
export class SessionsApi extends HttpApiGroup.make("sessions")
  .add(
    HttpApiEndpoint.post("create", "/v1/sessions")
      .setPayload(Schema.Struct({
        agent: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
        environment_id: Schema.optional(EnvironmentId),
        title: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
        metadata: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
      }))
      .addSuccess(SessionView, { status: 201 })
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/sessions")
      .setUrlParams(Schema.Struct({
        limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 100))),
        after: Schema.optional(Schema.String)
      }))
      .addSuccess(Schema.Struct({ data: Schema.Array(SessionListItem), has_more: Schema.Boolean }))
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "The caller's sessions (for its end user), newest first; `after` is a session id. Each carries `last_message`, " +
          "the start of the conversation's last message with text (up to 140 characters), or null before the first turn."
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/v1/sessions/:id")
      .setPath(Path)
      .addSuccess(SessionView.pipe(Schema.extend(Schema.Struct({ messages: Schema.Array(Schema.Unknown) }))))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.patch("update", "/v1/sessions/:id")
      .setPath(Path)
      .setPayload(Schema.Struct({ title: Schema.String.pipe(Schema.maxLength(200)) }))
      .addSuccess(SessionView)
      .addError(NotFound)
      .annotate(OpenApi.Description, "Renames a session; an empty title clears it.")
  )
  .add(
    HttpApiEndpoint.del("remove", "/v1/sessions/:id")
      .setPath(Path)
      .addSuccess(Schema.Struct({ id: Schema.String, deleted: Schema.Boolean }))
      .addError(NotFound)
      .annotate(OpenApi.Description, "Stops a running turn and removes the history, the workspace files and the log.")
  )
  .add(
    HttpApiEndpoint.post("send", "/v1/sessions/:id/events")
      .setPath(Path)
      .setPayload(Schema.Union(MessageEvent, ApprovalEvent))
      .addSuccess(Schema.String)
      .addError(NotFound)
      .addError(IdempotencyConflict)
      .annotate(
        OpenApi.Description,
        `Send a message (one turn) or answer an approval (the rest of the turn). ${streamed} A message's retry with the ` +
          "same `Idempotency-Key` streams the turn the first request sent, from its start (docs/sessions.md)."
      )
  )
  .add(
    HttpApiEndpoint.get("subscribe", "/v1/sessions/:id/events")
      .setPath(Path)
      .setUrlParams(Schema.Struct({ after: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.nonNegative())) }))
      .addSuccess(Schema.String)
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        `Follow the session live, across turns. \`?after=<seq>\` or \`Last-Event-ID\` replays what came after first. ${streamed}`
      )
  )
  .add(
    HttpApiEndpoint.post("interrupt", "/v1/sessions/:id/interrupt")
      .setPath(Path)
      .addSuccess(Schema.Struct({ interrupted: Schema.Boolean }))
      .addError(NotFound)
      // The turn in flight could not be reached (its session is between runners): not delivered, try again.
      .addError(ServiceUnavailable)
  )
  .add(
    HttpApiEndpoint.post("adopt", "/v1/sessions/:id/adopt")
      .setPath(Path)
      .addSuccess(SessionView)
      .addError(NotFound)
      .addError(SessionBusy)
      .annotate(OpenApi.Description, "Bind a session of your account to the calling end user (docs/sessions.md).")
  )
  .add(
    HttpApiEndpoint.get("files", "/v1/sessions/:id/files")
      .setPath(Path)
      .setUrlParams(ListParams)
      .addSuccess(Schema.Struct({
        data: Schema.Array(Schema.Struct({ path: Schema.String, size: Schema.Number, updated_at: Schema.String })),
        has_more: Schema.Boolean
      }))
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "The session's workspace: the files its turns wrote (`write_file`, and what `run_code` wrote), by path; `after` is a path."
      )
  )
  .add(
    HttpApiEndpoint.get("fileContent", "/v1/sessions/:id/files/content")
      .setPath(Path)
      .setUrlParams(Schema.Struct({ path: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(500)) }))
      .addSuccess(Schema.String)
      .addError(NotFound)
      .annotate(OpenApi.Description, "One workspace file's content (`text/plain`, as an attachment named after its path).")
  )
  .middleware(PlatformAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Sessions")
  .annotate(OpenApi.Description, "Long-lived multi-turn conversations with an expert, streamed as server-sent events.")
{}
