import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer, Option } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { NotFound } from "../platform/Errors.js"
import { DeliveryWorkerLive } from "./Deliveries.js"
import { Webhooks } from "./Webhooks.js"
import { Caller } from "../identity/Domain.js"
import { ownedBy } from "./Policy.js"

export const WebhooksHttp = HttpApiBuilder.group(AtriumApi, "webhooks", (handlers) =>
  Effect.gen(function*() {
    const webhooks = yield* Webhooks
    const account = Effect.map(Caller, ownedBy)
    return handlers
      .handle("create", ({ headers, payload }) =>
        Effect.flatMap(account, (a) => webhooks.create(a, payload, Option.fromNullable(headers["idempotency-key"]))))
      .handle("list", ({ urlParams }) => Effect.flatMap(account, (a) => webhooks.list(a, urlParams)))
      .handle("get", ({ path }) => Effect.flatMap(account, (a) => webhooks.get(a, path.id)))
      .handle("update", ({ path, payload }) => Effect.flatMap(account, (a) => webhooks.update(a, path.id, payload)))
      .handle("delete", ({ path }) =>
        Effect.as(Effect.flatMap(account, (a) => webhooks.remove(a, path.id)), {
          id: path.id,
          object: "webhook_endpoint" as const,
          deleted: true as const
        }))
      .handle("rotateSecret", ({ path }) => Effect.flatMap(account, (a) => webhooks.rotateSecret(a, path.id)))
      .handle("deliveries", ({ path, urlParams }) => Effect.flatMap(account, (a) => webhooks.deliveries(a, path.id, urlParams)))
      .handle("redeliver", ({ path }) => Effect.flatMap(account, (a) => webhooks.redeliver(a, path.id, path.delivery_id)))
  })).pipe(Layer.provide(AuthenticationLive))

/** `/internal/webhooks/emit`: the edge admits the operator's bearer from the private network only. */
export const InternalWebhooksHttp = HttpApiBuilder.group(AtriumApi, "internalWebhooks", (handlers) =>
  Effect.gen(function*() {
    const webhooks = yield* Webhooks
    return handlers.handle("emit", ({ payload }) =>
      Effect.flatMap(
        webhooks.emit({ account: payload.account, type: payload.type, data: payload.data, idempotencyKey: payload.idempotency_key }),
        Option.match({
          onNone: () => Effect.fail(new NotFound({ message: `No user ${payload.account}.` })),
          onSome: Effect.succeed
        })
      ))
  }))

/** The routes and this process's delivery worker, over one `Webhooks` (so an emit wakes the worker beside it). */
export const WebhooksHttpLive = Layer.mergeAll(WebhooksHttp, InternalWebhooksHttp, DeliveryWorkerLive).pipe(Layer.provide(Webhooks.Default))
