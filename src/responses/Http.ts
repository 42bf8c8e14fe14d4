import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Either, Layer, Stream } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { ownedBy } from "./Policy.js"
import { AppConfig } from "../platform/Config.js"
import { asJson, Attachments } from "../platform/http/Attach.js"
import * as Sse from "../platform/sse/Sse.js"
import { type ListedInputItem as ListedInputItemSchema, type ResponseId, type ResponseObject as ResponseSchema } from "./Api.js"
import type { Frame } from "./Builder.js"
import { Responses } from "./Responses.js"
import { Caller } from "../identity/Domain.js"

type ResponseObject = typeof ResponseSchema.Type
type ListedInputItem = typeof ListedInputItemSchema.Type

export const ResponsesHttp = HttpApiBuilder.group(AtriumApi, "responses", (handlers) =>
  Effect.gen(function*() {
    const responses = yield* Responses
    const attachments = yield* Attachments
    const { sseHeartbeat: heartbeat } = yield* AppConfig
    /** OpenAI's Responses stream: `event:` names the type, `data:` is the event; no `[DONE]`. */
    const sse = (frames: Stream.Stream<Frame>) =>
      Sse.response(Sse.encode(frames.pipe(Stream.map((frame): Sse.Frame => ({ event: frame.type, data: frame }))), { done: false, heartbeat }))
    return handlers
      .handle("create", ({ headers, payload }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const partition = ownedBy(caller)
          const key = headers["idempotency-key"]
          const scope = `responses\n${partition.accountId}\n${partition.endUserId}`
          if (payload.background === true) {
            // Answered at once with the response, queued; a retry with the same key answers the same response. Its
            // events, streamed or read again later, are its run's log folded on whichever runner reads them.
            const queued = yield* attachments.attach(
              key,
              scope,
              payload,
              Effect.map(responses.create(caller, payload), (created) => Stream.make(created._tag === "Queued" ? created.body : created.builder.snapshot())),
              asJson
            )
            if (Either.isLeft(queued)) return queued.left
            const body = (yield* Stream.runHead(queued.right)).pipe((head) => head._tag === "Some" ? head.value : undefined) as { id: ResponseId }
            if (payload.stream === true) return sse(yield* responses.events(caller, body.id, -1))
            return HttpServerResponse.unsafeJson(body, { status: 202 })
          }
          // A retry with the same Idempotency-Key reads the response the first request started (Attach.ts).
          const attached = yield* attachments.attach(
            key,
            scope,
            payload,
            Effect.flatMap(responses.create(caller, payload), (created) => created._tag === "Streaming" ? Effect.succeed(created.frames) : Effect.die("a foreground response was queued")),
            asJson
          )
          if (Either.isLeft(attached)) return attached.left
          const frames = attached.right
          if (payload.stream === true) return sse(frames)
          // The response as its last event tells it (`response.completed` or `.failed` carry the whole object).
          const last = yield* Stream.runFold(frames, undefined as Frame | undefined, (kept, frame) =>
            frame.type.startsWith("response.") && (frame as { response?: unknown }).response !== undefined ? frame : kept)
          return (last as unknown as { response: ResponseObject }).response
        }))
      .handle("retrieve", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          if (urlParams.stream === "true") return sse(yield* responses.events(caller, path.id, urlParams.starting_after ?? -1))
          return (yield* responses.read(caller, path.id)) as unknown as ResponseObject
        }))
      .handle("remove", ({ path }) => Effect.flatMap(Caller, (caller) => responses.remove(caller, path.id)))
      .handle("cancel", ({ path }) =>
        Effect.map(Effect.flatMap(Caller, (caller) => responses.cancel(caller, path.id)), (body) => body as ResponseObject))
      .handle("inputItems", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          let items = yield* responses.inputItems(caller, path.id)
          if (urlParams.order === "desc") items = [...items].reverse()
          if (urlParams.after !== undefined) {
            const at = items.findIndex((item) => item.id === urlParams.after)
            items = at < 0 ? [] : items.slice(at + 1)
          }
          const limit = urlParams.limit ?? 20
          const data = items.slice(0, limit)
          return {
            object: "list" as const,
            // Made by `storedItems` and `itemsOfTurn` in these shapes; the schema checks them on the way out.
            data: data as unknown as ReadonlyArray<ListedInputItem>,
            first_id: data[0]?.id ?? null,
            last_id: data[data.length - 1]?.id ?? null,
            has_more: items.length > limit
          }
        }))
  })).pipe(Layer.provide(AuthenticationLive))

export const ResponsesHttpLive = ResponsesHttp.pipe(Layer.provide([Responses.Default, Attachments.Default]))
