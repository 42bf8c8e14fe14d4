import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { PlatformAuthentication } from "../identity/Domain.js"
import { InvalidRequest, NotFound, ServiceUnavailable } from "../platform/Errors.js"
import { IdempotencyConflict } from "../billing/Domain.js"
import { EnvironmentId } from "../platform/Ids.js"
import { ApprovalId } from "../runtime/Domain.js"
import { ATTACHMENT_BYTES, ATTACHMENT_NAME, MAX_ATTACHMENTS_PER_SESSION, MultitaskStrategy, SessionBusy } from "./Domain.js"
import { SessionId } from "../platform/Ids.js"
import { ListParams } from "../platform/http/Lists.js"
import { ResumeHeaders, RunStartHeaders } from "../platform/http/Headers.js"
import { Budget, RunObject } from "../runs/Api.js"

/** A message sent with `background: true`: its turn's run, answered at once (docs/runs.md), and the turn's number. */
const TurnRun = Schema.Struct({ ...RunObject.fields, turn: Schema.Number }).annotations({ identifier: "SessionTurnRun" })

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

/** A message of the history as `GET /v1/sessions/:id` lists it (sessions/Views.ts `messageView`). */
export const HistoryMessage = Schema.Struct({
  turn: Schema.Number,
  role: Schema.Literal("system", "user", "assistant", "tool"),
  content: Schema.String,
  /** The tools the expert called in this message; `arguments` as the model gave them (any JSON). */
  tool_calls: Schema.optional(Schema.Array(Schema.Struct({ id: Schema.String, name: Schema.String, arguments: Schema.optional(Schema.Unknown) }))),
  /** Their results; `output` as the tool returned it (any JSON). */
  tool_results: Schema.optional(Schema.Array(Schema.Struct({
    id: Schema.String,
    name: Schema.String,
    is_error: Schema.Boolean,
    output: Schema.optional(Schema.Unknown)
  })))
}).annotations({ identifier: "SessionMessage" })

const Path = Schema.Struct({ id: SessionId.unchecked })

const TurnNumber = Schema.Number.pipe(Schema.int(), Schema.positive())

const strategy = Schema.optional(MultitaskStrategy).annotations({
  description: "What this message does if a turn is running or waiting: `enqueue` (the default) waits its turn; `reject` " +
    "is a 409 `session_busy` (`x-should-retry: false`); `interrupt` stops the running turn (it keeps what it said) and " +
    "runs next; `rollback` cancels the running turn (off the leaf's path, billed for what it used) and runs next."
})

export const MessageEvent = Schema.Struct({
  type: Schema.Literal("message"),
  message: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100_000)),
  budget: Schema.optionalWith(Budget, { exact: true }),
  parent_turn: Schema.optional(Schema.NullOr(TurnNumber)).annotations({
    description: "The turn this message follows (an edit: the parent of the message it replaces, so it is that " +
      "message's sibling); null: a new first message. Absent: the session's current leaf."
  }),
  multitask_strategy: strategy,
  background: Schema.optional(Schema.Boolean).annotations({
    description: "Run the turn in the background: answered at once (202) with its run (`queued` until the turn " +
      "starts); the turn then runs whoever is connected, told by GET /v1/runs/{id} and the session's events."
  })
})

/** Answers a turn's message again, as a sibling of that turn (docs/sessions.md "Branches"). */
export const RegenerateEvent = Schema.Struct({
  type: Schema.Literal("regenerate"),
  turn: TurnNumber,
  budget: Schema.optionalWith(Budget, { exact: true }),
  multitask_strategy: strategy,
  background: Schema.optional(Schema.Boolean)
})

/** A turn of the session's tree. */
export const TreeTurnView = Schema.Struct({
  turn: Schema.Number,
  parent_turn: Schema.NullOr(Schema.Number),
  status: Schema.String,
  message_preview: Schema.String,
  answer_preview: Schema.NullOr(Schema.String),
  children: Schema.Array(Schema.Number)
})

export const ApprovalEvent = Schema.Struct({
  type: Schema.Literal("approval"),
  approval_id: ApprovalId.unchecked,
  decision: Schema.Literal("approve", "deny"),
  reason: Schema.optional(Schema.String.pipe(Schema.maxLength(1000)))
})

const TurnPath = Schema.Struct({ id: SessionId.unchecked, turn: Schema.NumberFromString.pipe(Schema.int(), Schema.positive()) })

/** A thumbs up or down on one answer (docs/sessions.md "Feedback"). */
export const FeedbackView = Schema.Struct({
  session_id: Schema.String,
  turn: Schema.Number,
  rating: Schema.Literal("up", "down"),
  reason: Schema.NullOr(Schema.String),
  shared: Schema.Boolean,
  updated_at: Schema.String
})

const streamed = "The answer is a `text/event-stream` (docs/events.md); every event carries the session-wide `seq`."

/** Spec 4.2 (sessions), 5.1 rules 4-5. */
export class SessionsApi extends HttpApiGroup.make("sessions")
  .add(
    HttpApiEndpoint.post("create", "/v1/sessions")
      .setPayload(Schema.Struct({
        agent: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
        environment_id: Schema.optional(EnvironmentId.unchecked),
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
        after: Schema.optional(SessionId.unchecked),
        q: Schema.optional(Schema.Trim.pipe(Schema.minLength(1), Schema.maxLength(200))).annotations({
          description: "Only the conversations whose title or messages contain these words (case-insensitive)."
        })
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
      .addSuccess(SessionView.pipe(Schema.extend(Schema.Struct({
        leaf: Schema.NullOr(Schema.Number),
        messages: Schema.Array(HistoryMessage)
      }))))
      .addError(NotFound)
      .annotate(OpenApi.Description, "The session and its messages on the current branch: the path from the first turn to `leaf`.")
  )
  .add(
    HttpApiEndpoint.get("tree", "/v1/sessions/:id/tree")
      .setPath(Path)
      .addSuccess(Schema.Struct({ leaf: Schema.NullOr(Schema.Number), turns: Schema.Array(TreeTurnView) }))
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "Every turn of the session with its parent and children (regenerated and edited turns are siblings), oldest " +
          "first, and the current leaf. A fork lists the turns it shares with its origin too."
      )
  )
  .add(
    HttpApiEndpoint.post("fork", "/v1/sessions/:id/fork")
      .setPath(Path)
      .setPayload(Schema.Struct({ turn: TurnNumber }))
      .addSuccess(SessionView, { status: 201 })
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "A new session sharing this one's history up to `turn` (nothing is copied), answered as `POST /v1/sessions` answers."
      )
  )
  .add(
    HttpApiEndpoint.patch("update", "/v1/sessions/:id")
      .setPath(Path)
      .setPayload(Schema.Struct({
        title: Schema.optional(Schema.String.pipe(Schema.maxLength(200))),
        leaf: Schema.optional(Schema.NullOr(TurnNumber))
      }))
      .addSuccess(SessionView)
      .addError(NotFound)
      .addError(SessionBusy)
      .annotate(
        OpenApi.Description,
        "Renames a session (an empty title clears it) and/or switches its branch: `leaf` becomes the current leaf (409 " +
          "`session_busy` while a turn runs or waits)."
      )
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
      .setPayload(Schema.Union(MessageEvent, RegenerateEvent, ApprovalEvent))
      .setHeaders(RunStartHeaders)
      .addSuccess(Schema.String)
      .addSuccess(TurnRun, { status: 202 })
      .addError(NotFound)
      .addError(IdempotencyConflict)
      .addError(SessionBusy)
      .annotate(
        OpenApi.Description,
        `Send a message (one turn), regenerate a turn's answer (a sibling turn), or answer an approval (the rest of the ` +
          `turn). ${streamed} A message's retry with the same \`Idempotency-Key\` streams the turn the first request ` +
          "sent, from its start (docs/sessions.md). With `background: true`, a message or a regenerate answers 202 at once " +
          "with its turn's run (`queued` until the turn starts) and the turn runs without the caller."
      )
  )
  .add(
    HttpApiEndpoint.get("subscribe", "/v1/sessions/:id/events")
      .setPath(Path)
      .setUrlParams(Schema.Struct({ after: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.nonNegative())) }))
      .setHeaders(ResumeHeaders)
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
    HttpApiEndpoint.post("attach", "/v1/sessions/:id/files")
      .setPath(Path)
      .setPayload(Schema.Struct({
        name: Schema.String.pipe(Schema.pattern(ATTACHMENT_NAME, {
          message: () => "name: 1-100 characters of letters, digits, '.', '_' and '-', starting with a letter or digit"
        })),
        content: Schema.String.pipe(Schema.filter((text) =>
          new TextEncoder().encode(text).length <= ATTACHMENT_BYTES || `content: at most ${ATTACHMENT_BYTES} bytes (UTF-8)`
        )).annotations({ description: "The file's text (UTF-8)." })
      }))
      .addSuccess(Schema.Struct({ path: Schema.String, size: Schema.Number, updated_at: Schema.String }), { status: 201 })
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "Attaches a text file to the session: written to its workspace at `attachments/{name}` (the same name replaces " +
          "it), where the expert's `read_file` and `list_files` find it. At most 100,000 bytes a file and " +
          `${MAX_ATTACHMENTS_PER_SESSION} attachments a session. The web chat also quotes the file in the message that ` +
          "carries it (docs/sessions.md \"Attachments\")."
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
  .add(
    HttpApiEndpoint.put("rate", "/v1/sessions/:id/turns/:turn/feedback")
      .setPath(TurnPath)
      .setPayload(Schema.Struct({
        rating: Schema.Literal("up", "down"),
        reason: Schema.optional(Schema.String.pipe(Schema.maxLength(2000))),
        share: Schema.optional(Schema.Boolean).annotations({
          description: "The end user agrees that this turn's messages may go to the expert's creator (an evaluation " +
            "dataset's row). Without it the creator sees counts only."
        })
      }))
      .addSuccess(FeedbackView)
      .addError(NotFound)
      .annotate(OpenApi.Description, "Rates one answer of the session (thumbs up or down, with a reason); a second rating replaces the first.")
  )
  .add(
    HttpApiEndpoint.del("unrate", "/v1/sessions/:id/turns/:turn/feedback")
      .setPath(TurnPath)
      .addSuccess(Schema.Struct({ session_id: Schema.String, turn: Schema.Number, deleted: Schema.Boolean }))
      .addError(NotFound)
      .annotate(OpenApi.Description, "Takes a rating back; `deleted` is false when the answer had none.")
  )
  .add(
    HttpApiEndpoint.get("feedback", "/v1/sessions/:id/feedback")
      .setPath(Path)
      .setUrlParams(ListParams)
      .addSuccess(Schema.Struct({ data: Schema.Array(FeedbackView), has_more: Schema.Boolean }))
      .addError(NotFound)
      .annotate(OpenApi.Description, "The caller's ratings of this session's answers, by turn; `after` is a turn number.")
  )
  .middleware(PlatformAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Sessions")
  .annotate(OpenApi.Description, "Long-lived multi-turn conversations with an expert, streamed as server-sent events.")
{}
