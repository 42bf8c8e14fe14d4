import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Cause, type Duration, Effect, FiberRef, Layer, Option } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { AppConfig } from "../platform/Config.js"
import { ErrorHeaders } from "../platform/Errors.js"
import * as Sse from "../platform/sse/Sse.js"
import { publicFrame } from "../runtime/Events.js"
import type { SessionSink } from "./Follow.js"
import { Sessions } from "./Sessions.js"
import { TurnFeedback } from "./Feedback.js"
import { pageOf } from "../platform/http/Lists.js"
import { runObject } from "../runs/Views.js"
import { Caller } from "../identity/Domain.js"

type Wire = { readonly type: string; readonly [key: string]: unknown }

/**
 * A session's events as a stream written by pushes (`Sse.written`): a turn's ends with `[DONE]`, a subscription's
 * never does. Session streams carry `seq` as the SSE `id:` too, so a browser's EventSource resumes with
 * `Last-Event-ID`; they start with a greeting, since a turn may wait behind another.
 */
const sessionStream = <E, R>(
  follow: (sink: SessionSink) => Effect.Effect<void, E, R>,
  options: { readonly heartbeat: Duration.Duration; readonly done: boolean }
) => {
  let eventId = 0
  const open = (outlet: Sse.Outlet) =>
    follow({
      event: (event) => outlet.send(publicFrame(event as Wire, ++eventId, event.seq)),
      end: outlet.end
    })
  // A turn is over in seconds and its fiber is what a client leaving interrupts; a subscription is held for hours.
  return options.done ? Sse.written(open, { heartbeat: options.heartbeat, greet: true }) : Sse.held(open, options)
}

export const SessionsHttp = HttpApiBuilder.group(AtriumApi, "sessions", (handlers) =>
  Effect.gen(function*() {
    const sessions = yield* Sessions
    const feedback = yield* TurnFeedback
    const { sseHeartbeat: heartbeat } = yield* AppConfig
    return handlers
      .handle("create", ({ payload }) => Effect.flatMap(Caller, (caller) => sessions.create(caller, payload)))
      .handle("rate", ({ path, payload }) => Effect.flatMap(Caller, (caller) => feedback.rate(caller, path.id, path.turn, payload)))
      .handle("unrate", ({ path }) => Effect.flatMap(Caller, (caller) => feedback.clear(caller, path.id, path.turn)))
      .handle("feedback", ({ path, urlParams }) => Effect.flatMap(Caller, (caller) => feedback.list(caller, path.id, urlParams)))
      .handle("list", ({ urlParams }) =>
        Effect.flatMap(Caller, (caller) => sessions.list(caller, urlParams.limit ?? 20, Option.fromNullable(urlParams.after), Option.fromNullable(urlParams.q))))
      .handle("get", ({ path }) => Effect.flatMap(Caller, (caller) => sessions.get(caller, path.id)))
      .handle("update", ({ path, payload }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          if (payload.title === undefined && payload.leaf === undefined) {
            return yield* sessions.invalid("Invalid request: give title, leaf or both")
          }
          if (payload.leaf !== undefined) {
            // A switch refused while a turn runs is final for this request: retrying at once cannot help.
            const switched = yield* sessions.switchLeaf(caller, path.id, payload.leaf).pipe(
              Effect.tapErrorTag("SessionBusy", () => FiberRef.update(ErrorHeaders, (headers) => ({ ...headers, "x-should-retry": "false" })))
            )
            if (payload.title === undefined) return switched
          }
          return yield* sessions.rename(caller, path.id, payload.title!)
        }))
      .handle("tree", ({ path }) => Effect.flatMap(Caller, (caller) => sessions.tree(caller, path.id)))
      .handle("fork", ({ path, payload }) => Effect.flatMap(Caller, (caller) => sessions.fork(caller, path.id, payload.turn)))
      .handle("remove", ({ path }) => Effect.flatMap(Caller, (caller) => sessions.remove(caller, path.id)))
      .handle("send", ({ headers, path, payload }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          if (payload.type === "approval") {
            const approved = payload.decision === "approve"
            const reason = payload.reason ?? (approved ? "" : "denied by the user")
            return yield* sessionStream(
              (sink) => sessions.answerApproval(caller, path.id, payload.approval_id, approved, reason, sink),
              { heartbeat, done: true }
            )
          }
          // A regenerated turn is its message again, under the same parent (a sibling).
          const turn = payload.type === "regenerate"
            ? yield* sessions.regeneration(caller, path.id, payload.turn)
            : { message: payload.message, parent: payload.parent_turn }
          const how = { budget: Option.fromNullable(payload.budget), parent: turn.parent, strategy: payload.multitask_strategy }
          const message = turn.message
          // `reject` while busy: a 409 `session_busy` the client should not retry as it is (OpenAI's SDKs read the header).
          const final = <A, E, R>(answer: Effect.Effect<A, E, R>) =>
            Effect.tapErrorCause(answer, (cause) =>
              Cause.failureOption(cause).pipe(Option.exists((error) => (error as { _tag?: string })._tag === "SessionBusy"))
                ? FiberRef.update(ErrorHeaders, (headers) => ({ ...headers, "x-should-retry": "false" }))
                : Effect.void)
          const key = headers["idempotency-key"]
          if (payload.background === true) {
            // Answered once the session has the turn, with its run; the turn runs in the session whoever is connected.
            const sent = yield* final(sessions.sendInBackground(caller, path.id, message, how, key))
            return HttpServerResponse.unsafeJson({ ...runObject(sent.run), turn: sent.turn }, {
              status: 202,
              headers: sent.first ? {} : { "idempotent-replayed": "true" }
            })
          }
          if (key === undefined) {
            return yield* final(sessionStream((sink) => sessions.send(caller, path.id, message, how, sink), { heartbeat, done: true }))
          }
          // A retry with the key reads the turn the first request sent, on whichever runner (Sessions.sendOnce).
          let first = true
          const response = yield* final(sessionStream(
            (sink) => Effect.map(sessions.sendOnce(caller, path.id, key, message, how, sink), (was) => void (first = was.first)),
            { heartbeat, done: true }
          ))
          return first ? response : HttpServerResponse.setHeader(response, "idempotent-replayed", "true")
        }))
      .handle("subscribe", ({ headers, path, urlParams }) =>
        Effect.flatMap(Caller, (caller) => {
          const after = Option.fromNullable(urlParams.after ?? headers["last-event-id"])
          return sessionStream((sink) => sessions.subscribe(caller, path.id, after, sink), { heartbeat, done: false })
        }))
      .handle("interrupt", ({ path }) => Effect.flatMap(Caller, (caller) => sessions.interrupt(caller, path.id)))
      .handle("adopt", ({ path }) => Effect.flatMap(Caller, (caller) => sessions.adopt(caller, path.id)))
      .handle("files", ({ path, urlParams }) =>
        Effect.flatMap(Effect.flatMap(Caller, (caller) => sessions.files(caller, path.id)), (all) =>
          pageOf(all.data, urlParams, (file) => file.path)))
      .handle("attach", ({ path, payload }) =>
        Effect.flatMap(Caller, (caller) => sessions.attach(caller, path.id, payload.name, payload.content)))
      .handle("fileContent", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const content = yield* sessions.fileContent(yield* Caller, path.id, urlParams.path)
          const name = (urlParams.path.split("/").pop() ?? "file").replace(/[^A-Za-z0-9._-]/g, "_")
          return HttpServerResponse.text(content, {
            contentType: "text/plain; charset=utf-8",
            headers: { "content-disposition": `attachment; filename="${name}"`, "x-content-type-options": "nosniff" }
          })
        }))
  })).pipe(Layer.provide(AuthenticationLive))

export const SessionsHttpLive = SessionsHttp.pipe(Layer.provide([Sessions.Default, TurnFeedback.Default]))
