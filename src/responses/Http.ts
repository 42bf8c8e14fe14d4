import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect, Either, Layer, Stream } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive, Caller } from "../identity/Authentication.js"
import { partitionOf } from "../identity/Partition.js"
import { AppConfig } from "../platform/Config.js"
import { asJson, Attachments } from "../platform/http/Attach.js"
import * as Sse from "../platform/sse/Sse.js"
import { type ListedInputItem as ListedInputItemSchema, type ResponseObject as ResponseSchema } from "./Api.js"
import type { Frame } from "./Builder.js"
import { Responses } from "./Responses.js"

type ResponseObject = typeof ResponseSchema.Type
type ListedInputItem = typeof ListedInputItemSchema.Type

export const ResponsesHttp = HttpApiBuilder.group(AtriumApi, "responses", (handlers) =>
  Effect.gen(function*() {
    const responses = yield* Responses
    const attachments = yield* Attachments
    const { sseHeartbeat: heartbeat } = yield* AppConfig
    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const partition = partitionOf(caller)
          // A retry with the same Idempotency-Key reads the response the first request started (Attach.ts).
          const attached = yield* attachments.attach(
            yield* HttpServerRequest.HttpServerRequest,
            `responses\n${partition.accountId}\n${partition.endUserId}`,
            payload,
            Effect.map(responses.create(caller, payload), (created) => created.frames),
            asJson
          )
          if (Either.isLeft(attached)) return attached.left
          const frames = attached.right
          if (payload.stream === true) {
            // OpenAI's Responses stream: `event:` names the type, `data:` is the event; no `[DONE]`.
            return Sse.response(Sse.encode(frames.pipe(Stream.map((frame): Sse.Frame => ({ event: frame.type, data: frame }))), { done: false, heartbeat }))
          }
          // The response as its last event tells it (`response.completed` or `.failed` carry the whole object).
          const last = yield* Stream.runFold(frames, undefined as Frame | undefined, (kept, frame) =>
            frame.type.startsWith("response.") && (frame as { response?: unknown }).response !== undefined ? frame : kept)
          return (last as unknown as { response: ResponseObject }).response
        }))
      .handle("retrieve", ({ path }) =>
        Effect.map(Effect.flatMap(Caller, (caller) => responses.retrieve(caller, path.id)), (row) => row.body as ResponseObject))
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
